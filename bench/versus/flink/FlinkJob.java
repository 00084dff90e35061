// The Flink side of bench/versus-flink: Kafka -> Kafka or Kafka -> PostgreSQL with Flink's
// DataStream API in a local MiniCluster. Bounded (stops at the input's latest offsets at
// start), as the rivus pipeline, or unbounded for the latency runs (stopped by a signal).
//
//   java -cp JARS FlinkJob BOOTSTRAP IN OUT GROUP PARALLELISM INTERVAL_MS exactly|atleast \
//        json|pass bounded|unbounded [JDBC_URL]
//
// With JDBC_URL, OUT is a table (id, account, amount, status, ts, pad) written by Flink's JDBC
// sink (XA transactions for exactly-once, one per connection as PostgreSQL needs).
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.jdbc.JdbcConnectionOptions;
import org.apache.flink.connector.jdbc.JdbcExactlyOnceOptions;
import org.apache.flink.connector.jdbc.JdbcExecutionOptions;
import org.apache.flink.connector.jdbc.JdbcStatementBuilder;
import org.apache.flink.connector.jdbc.core.datastream.sink.JdbcSink;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.KafkaSinkBuilder;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.postgresql.xa.PGXADataSource;

public class FlinkJob {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    /** Parses each value as JSON and writes it back (what rivus pipeline files do). */
    static final class JsonRoundTrip implements MapFunction<String, String> {
        @Override
        public String map(String value) throws Exception {
            JsonNode node = MAPPER.readTree(value);
            return MAPPER.writeValueAsString(node);
        }
    }

    /** One row from one JSON record, its fields bound by name. */
    static final class Row implements JdbcStatementBuilder<String> {
        @Override
        public void accept(java.sql.PreparedStatement ps, String value) throws java.sql.SQLException {
            JsonNode n;
            try {
                n = MAPPER.readTree(value);
            } catch (Exception e) {
                throw new java.sql.SQLException("not JSON: " + e.getMessage());
            }
            ps.setLong(1, n.get("id").asLong());
            ps.setString(2, n.get("account").asText());
            ps.setDouble(3, n.get("amount").asDouble());
            ps.setString(4, n.get("status").asText());
            ps.setLong(5, n.get("ts").asLong());
            ps.setString(6, n.get("pad").asText());
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3];
        int parallelism = Integer.parseInt(args[4]);
        long interval = Long.parseLong(args[5]);
        boolean exactly = args[6].equals("exactly");
        boolean json = args[7].equals("json");
        boolean bounded = args[8].equals("bounded");
        String jdbc = args.length > 9 ? args[9] : null;

        // `-Dversus.tuned=true`: as Flink's documentation advises for throughput — records
        // handed between chained operators without copies (object reuse), and the Kafka
        // producers lingering 5 ms over 256 KiB batches.
        boolean tuned = Boolean.getBoolean("versus.tuned");

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
        if (tuned) {
            env.getConfig().enableObjectReuse();
        }
        env.enableCheckpointing(
                interval, exactly ? CheckpointingMode.EXACTLY_ONCE : CheckpointingMode.AT_LEAST_ONCE);

        KafkaSourceBuilder<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(in)
                .setGroupId(group)
                // A bounded run reads the topic whole; an unbounded one resumes from the group's
                // offsets (committed at completed checkpoints) after a restart, like the others.
                .setStartingOffsets(bounded ? OffsetsInitializer.earliest()
                        : OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST))
                .setValueOnlyDeserializer(new SimpleStringSchema());
        if (bounded) {
            source.setBounded(OffsetsInitializer.latest());
        }
        DataStream<String> stream =
                env.fromSource(source.build(), WatermarkStrategy.noWatermarks(), "kafka-source");
        if (jdbc != null) {
            String sql = "INSERT INTO " + out
                    + " (id, account, amount, status, ts, pad) VALUES (?, ?, ?, ?, ?, ?)";
            JdbcSink<String> sink;
            if (exactly) {
                // Documented requirements of the exactly-once JDBC sink: no retries, and one
                // transaction per connection on PostgreSQL.
                sink = JdbcSink.<String>builder()
                        .withQueryStatement(sql, new Row())
                        .withExecutionOptions(JdbcExecutionOptions.builder().withMaxRetries(0).build())
                        .buildExactlyOnce(
                                JdbcExactlyOnceOptions.builder().withTransactionPerConnection(true).build(),
                                () -> {
                                    PGXADataSource ds = new PGXADataSource();
                                    ds.setUrl(jdbc);
                                    return ds;
                                });
            } else {
                sink = JdbcSink.<String>builder()
                        .withQueryStatement(sql, new Row())
                        .buildAtLeastOnce(new JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
                                .withUrl(jdbc)
                                .withDriverName("org.postgresql.Driver")
                                .build());
            }
            stream.sinkTo(sink).name("jdbc-sink");
        } else {
            if (json) {
                stream = stream.map(new JsonRoundTrip()).name("json");
            }
            KafkaSinkBuilder<String> builder = KafkaSink.<String>builder()
                    .setBootstrapServers(bootstrap)
                    .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                            .setTopic(out)
                            .setValueSerializationSchema(new SimpleStringSchema())
                            .build())
                    .setDeliveryGuarantee(
                            exactly ? DeliveryGuarantee.EXACTLY_ONCE : DeliveryGuarantee.AT_LEAST_ONCE)
                    .setTransactionalIdPrefix(group)
                    .setProperty("transaction.timeout.ms", "60000");
            if (tuned) {
                builder.setProperty("linger.ms", "5").setProperty("batch.size", "262144");
            }
            stream.sinkTo(builder.build()).name("kafka-sink");
        }
        env.execute("versus-flink " + in);
    }
}
