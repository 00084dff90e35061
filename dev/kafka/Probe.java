// Health probe for the dev Kafka broker: a real round trip (describe the cluster).
// Usage: java -cp <kafka jars>:<dir of this class> Probe <bootstrap>
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.common.utils.AppInfoParser;

public class Probe {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("request.timeout.ms", "5000");
        p.put("default.api.timeout.ms", "5000");
        try (Admin admin = Admin.create(p)) {
            DescribeClusterResult d = admin.describeCluster();
            System.out.println("kafka " + AppInfoParser.getVersion() + " cluster " + d.clusterId().get()
                + " nodes " + d.nodes().get().size());
        }
    }
}
