// Kafka's own Java producer, for tests that read what another client wrote: `count` values
// `<prefix>-<i>` (i zero-padded to 4 digits) to partition 0 of `topic`, compressed with `codec`
// (none, gzip, snappy, lz4, zstd), batched as the Java client batches.
// Usage: java -cp <kafka jars>:<dir of this class> Produce <bootstrap> <topic> <codec> <count> <prefix>
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class Produce {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("compression.type", args[2]);
        p.put("linger.ms", "20");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        int count = Integer.parseInt(args[3]);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(args[1], 0, null, String.format("%s-%04d", args[4], i)));
            }
            producer.flush();
        }
        System.out.println("produced " + count + " " + args[2] + " records to " + args[1]);
    }
}
