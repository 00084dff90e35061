// Debezium's side of the benchmark: the embedded engine (Debezium 3.6.1, PostgreSQL connector
// on pgoutput) with its JSON converter, every change event produced to a Kafka topic keyed by
// the row's key — what a Debezium Server or Kafka Connect deployment does, in one process.
// At-least-once: a batch's offsets are committed after the producer flushed it.
//
//   java -cp ... DebeziumJob BOOTSTRAP TOPIC PG_HOST PG_PORT USER PASSWORD DB TABLE SLOT
//                            PUBLICATION SNAPSHOT_MODE OFFSETS_FILE [KEY=VALUE]...
//
// Each KEY=VALUE after them sets a property of the engine (`producer.KEY=VALUE`: of the Kafka
// producer) over the defaults below: the tuned runs.
// SNAPSHOT_MODE is Debezium's: `initial` (snapshot, then stream) or `no_data` (stream only).
// Runs until killed (SIGTERM closes the engine).

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class DebeziumJob {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1];
        Properties p = new Properties();
        p.setProperty("name", "versus-" + a[8]);
        p.setProperty("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
        p.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
        p.setProperty("offset.storage.file.filename", a[11]);
        // The same interval as rivus's checkpoints.
        p.setProperty("offset.flush.interval.ms", "1000");
        p.setProperty("database.hostname", a[2]);
        p.setProperty("database.port", a[3]);
        p.setProperty("database.user", a[4]);
        p.setProperty("database.password", a[5]);
        p.setProperty("database.dbname", a[6]);
        p.setProperty("topic.prefix", "versus");
        p.setProperty("plugin.name", "pgoutput");
        p.setProperty("slot.name", a[8]);
        p.setProperty("publication.name", a[9]);
        p.setProperty("publication.autocreate.mode", "disabled");
        p.setProperty("table.include.list", a[7]);
        p.setProperty("snapshot.mode", a[10]);
        // rivus writes numerics as exact text too.
        p.setProperty("decimal.handling.mode", "string");
        p.setProperty("key.converter.schemas.enable", "false");
        p.setProperty("value.converter.schemas.enable", "false");
        Properties producerOverrides = new Properties();
        for (int i = 12; i < a.length; i++) {
            String[] kv = a[i].split("=", 2);
            if (kv[0].startsWith("producer.")) {
                producerOverrides.setProperty(kv[0].substring("producer.".length()), kv[1]);
            } else {
                p.setProperty(kv[0], kv[1]);
            }
        }

        Properties kp = new Properties();
        kp.setProperty("bootstrap.servers", bootstrap);
        kp.setProperty("acks", "all");
        kp.setProperty("linger.ms", "5");
        kp.setProperty("compression.type", "none");
        kp.putAll(producerOverrides);
        KafkaProducer<String, String> producer =
                new KafkaProducer<>(kp, new StringSerializer(), new StringSerializer());

        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
                .using(p)
                .notifying((records, committer) -> {
                    for (ChangeEvent<String, String> r : records) {
                        if (r.value() != null) {
                            producer.send(new ProducerRecord<>(topic, r.key(), r.value()));
                        }
                        committer.markProcessed(r);
                    }
                    producer.flush();
                    committer.markBatchFinished();
                })
                .build();
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                engine.close();
                producer.close();
                done.await();
            } catch (Exception e) {
                // stopping anyway
            }
        }));
        ExecutorService runner = Executors.newSingleThreadExecutor();
        runner.execute(() -> {
            engine.run();
            done.countDown();
        });
        done.await();
        runner.shutdown();
    }
}
