// The Flink side of bench/versus-flink's Kafka -> Elasticsearch case. Flink 2.x has no
// Elasticsearch connector (flink-connector-elasticsearch7 ends at 3.0.1-1.17), so this job
// runs on Flink 1.17.2, the newest Flink that connector is built for, with the Kafka
// connector of that line (3.1.0-1.17); the class path comes from pom-es.xml. Same shape as
// FlinkJob: bounded (to the input's latest offsets at start) or unbounded.
//
//   java -cp JARS FlinkEsJob BOOTSTRAP IN INDEX GROUP PARALLELISM INTERVAL_MS atleast json \
//        bounded|unbounded ES_URL
//
// Each value is parsed as JSON (its "id" becomes the document id, as rivus's `id_field`) and
// indexed by Flink's Elasticsearch 7 sink at its defaults (1 000 actions or 5 MB a bulk,
// flushed at every checkpoint: at-least-once).
import java.net.URI;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.elasticsearch.sink.Elasticsearch7SinkBuilder;
import org.apache.flink.connector.elasticsearch.sink.ElasticsearchEmitter;
import org.apache.flink.connector.elasticsearch.sink.RequestIndexer;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.http.HttpHost;
import org.elasticsearch.action.index.IndexRequest;
import org.elasticsearch.common.xcontent.XContentType;

public class FlinkEsJob {
    /** One index request per record: the document id from its "id" field. */
    static final class Emitter implements ElasticsearchEmitter<String> {
        private final String index;
        private transient ObjectMapper mapper;

        Emitter(String index) {
            this.index = index;
        }

        @Override
        public void emit(String value, SinkWriter.Context context, RequestIndexer indexer) {
            if (mapper == null) mapper = new ObjectMapper();
            JsonNode n;
            try {
                n = mapper.readTree(value);
            } catch (Exception e) {
                throw new IllegalArgumentException("not JSON: " + e.getMessage(), e);
            }
            indexer.add(new IndexRequest(index).id(n.get("id").asText()).source(value, XContentType.JSON));
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1], index = args[2], group = args[3];
        int parallelism = Integer.parseInt(args[4]);
        long interval = Long.parseLong(args[5]);
        if (!args[6].equals("atleast") || !args[7].equals("json")) {
            throw new IllegalArgumentException("Kafka -> Elasticsearch is at-least-once with JSON");
        }
        boolean bounded = args[8].equals("bounded");
        URI es = URI.create(args[9]);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
        env.enableCheckpointing(interval, CheckpointingMode.AT_LEAST_ONCE);
        KafkaSourceBuilder<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(in)
                .setGroupId(group)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setValueOnlyDeserializer(new SimpleStringSchema());
        if (bounded) {
            source.setBounded(OffsetsInitializer.latest());
        }
        env.fromSource(source.build(), WatermarkStrategy.noWatermarks(), "kafka-source")
                .sinkTo(new Elasticsearch7SinkBuilder<String>()
                        .setHosts(new HttpHost(es.getHost(), es.getPort(), es.getScheme()))
                        .setEmitter(new Emitter(index))
                        .setDeliveryGuarantee(DeliveryGuarantee.AT_LEAST_ONCE)
                        .build())
                .name("elasticsearch-sink");
        env.execute("versus-flink " + in);
    }
}
