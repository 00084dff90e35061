// The Flink side of bench/versus-flink: Kafka -> Kafka with Flink's DataStream API in a local
// MiniCluster. Bounded (stops at the input's latest offsets at start), as the rivus pipeline.
//
//   java -cp JARS FlinkJob BOOTSTRAP IN OUT GROUP PARALLELISM INTERVAL_MS exactly|atleast json|pass
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public class FlinkJob {
    /** Parses each value as JSON and writes it back (what rivus pipeline files do). */
    static final class JsonRoundTrip implements MapFunction<String, String> {
        private static final ObjectMapper MAPPER = new ObjectMapper();

        @Override
        public String map(String value) throws Exception {
            JsonNode node = MAPPER.readTree(value);
            return MAPPER.writeValueAsString(node);
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3];
        int parallelism = Integer.parseInt(args[4]);
        long interval = Long.parseLong(args[5]);
        boolean exactly = args[6].equals("exactly");
        boolean json = args[7].equals("json");

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
        env.enableCheckpointing(
                interval, exactly ? CheckpointingMode.EXACTLY_ONCE : CheckpointingMode.AT_LEAST_ONCE);

        KafkaSource<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(in)
                .setGroupId(group)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setBounded(OffsetsInitializer.latest())
                .setValueOnlyDeserializer(new SimpleStringSchema())
                .build();
        DataStream<String> stream =
                env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-source");
        if (json) {
            stream = stream.map(new JsonRoundTrip()).name("json");
        }
        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic(out)
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(
                        exactly ? DeliveryGuarantee.EXACTLY_ONCE : DeliveryGuarantee.AT_LEAST_ONCE)
                .setTransactionalIdPrefix(group)
                .setProperty("transaction.timeout.ms", "60000")
                .build();
        stream.sinkTo(sink).name("kafka-sink");
        env.execute("versus-flink " + in);
    }
}
