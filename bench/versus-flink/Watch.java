// Watches a topic's end offsets (read_committed: what a reader of committed data sees) every
// 20 ms until it holds N records; prints the epoch milliseconds of the first and the last
// output: `FIRST_MS LAST_MS` (after a line `ready` once it watches). Or creates a topic.
//
//   java -cp JARS Watch BOOTSTRAP TOPIC N TIMEOUT_S
//   java -cp JARS Watch BOOTSTRAP TOPIC create PARTITIONS
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Watch {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        if (args[2].equals("create")) {
            Properties a = new Properties();
            a.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Admin admin = Admin.create(a)) {
                admin.createTopics(List.of(new NewTopic(topic, Integer.parseInt(args[3]), (short) 1)))
                        .all().get();
            }
            return;
        }
        long n = Long.parseLong(args[2]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[3]) * 1000;
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (KafkaConsumer<byte[], byte[]> c =
                new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> parts = c.partitionsFor(topic, Duration.ofSeconds(30)).stream()
                    .map(i -> new TopicPartition(topic, i.partition()))
                    .collect(Collectors.toList());
            c.endOffsets(parts);
            // The job starts once the watcher watches (a JVM takes a second to get here).
            System.out.println("ready");
            System.out.flush();
            long first = 0;
            while (System.currentTimeMillis() < deadline) {
                long total = 0;
                for (Map.Entry<TopicPartition, Long> e : c.endOffsets(parts).entrySet()) {
                    total += e.getValue();
                }
                long now = System.currentTimeMillis();
                if (total > 0 && first == 0) first = now;
                if (total >= n) {
                    System.out.println(first + " " + now);
                    return;
                }
                Thread.sleep(20);
            }
            System.err.println("watch: " + topic + " did not reach " + n + " records");
            System.exit(1);
        }
    }
}
