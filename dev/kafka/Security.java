// Users and ACLs of the dev Kafka broker's secured listeners, set through the plaintext
// listener (whose anonymous principal is a super user). Idempotent: run after every start.
//
//   rivus        SCRAM-SHA-512 and SCRAM-SHA-256; every right on every topic, group and
//                transactional id, and the cluster rights of an idempotent producer.
//   rivus-client the client certificate's principal on the mutual-TLS listener; the same rights.
//   guest        SCRAM; rights only on topics and groups named `public-*`, so a job reading
//                any other topic as guest is refused by the authorizer.
//
// Usage: java -cp <kafka jars>:<dir of this class> Security <bootstrap> <user> <password>
//        <guest user> <guest password>
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public class Security {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], user = args[1], password = args[2], guest = args[3], guestPassword = args[4];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "10000");
        p.put("default.api.timeout.ms", "30000");
        try (Admin admin = Admin.create(p)) {
            // One request per mechanism: a request may alter a user's credential only once.
            for (ScramMechanism m : new ScramMechanism[] {ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256}) {
                List<UserScramCredentialAlteration> creds = new ArrayList<>();
                creds.add(new UserScramCredentialUpsertion(user, new ScramCredentialInfo(m, 4096), password));
                creds.add(new UserScramCredentialUpsertion(guest, new ScramCredentialInfo(m, 4096), guestPassword));
                admin.alterUserScramCredentials(creds).all().get();
            }

            List<AclBinding> acls = new ArrayList<>();
            for (String principal : new String[] {"User:" + user, "User:rivus-client"}) {
                allow(acls, principal, ResourceType.TOPIC, "*", PatternType.LITERAL, AclOperation.ALL);
                allow(acls, principal, ResourceType.GROUP, "*", PatternType.LITERAL, AclOperation.ALL);
                allow(acls, principal, ResourceType.TRANSACTIONAL_ID, "*", PatternType.LITERAL, AclOperation.ALL);
                allow(acls, principal, ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, AclOperation.IDEMPOTENT_WRITE);
                allow(acls, principal, ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, AclOperation.DESCRIBE);
                allow(acls, principal, ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, AclOperation.CREATE);
            }
            String g = "User:" + guest;
            allow(acls, g, ResourceType.TOPIC, "public-", PatternType.PREFIXED, AclOperation.ALL);
            allow(acls, g, ResourceType.GROUP, "public-", PatternType.PREFIXED, AclOperation.ALL);
            admin.createAcls(acls).all().get();
            System.out.println("kafka security: users " + user + ", " + guest + "; " + acls.size() + " ACLs");
        }
    }

    static void allow(List<AclBinding> acls, String principal, ResourceType type, String name, PatternType pattern,
            AclOperation op) {
        acls.add(new AclBinding(new ResourcePattern(type, name, pattern),
            new AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)));
    }
}
