// The side of bench/versus that belongs to no contestant: creates and deletes topics, fills
// the input, watches the output and counts what arrived.
//
//   Watch BOOTSTRAP TOPIC create PARTITIONS      a topic
//   Watch BOOTSTRAP TOPIC delete                 a topic
//   Watch BOOTSTRAP TOPIC fill N SIZE RATE       N JSON records of about SIZE bytes, RATE a
//                                                second (0: as fast as it goes); each holds its
//                                                send time in "ts" (epoch ms)
//   Watch BOOTSTRAP TOPIC fill-envelope N SIZE RATE   the same records inside Kafka Connect's
//                                                JsonConverter envelope (schema + payload)
//   Watch BOOTSTRAP TOPIC ids N FIELD TIMEOUT_S WAIT   reads the topic (read_committed) to its
//                                                end offsets — with WAIT 1, until the ids 0..N-1
//                                                all arrived or the timeout — and prints
//                                                `TOTAL DISTINCT MISSING` of the ids 0..N-1 in
//                                                FIELD (`-`: the whole value is the id)
//   Watch BOOTSTRAP TOPIC watch N TIMEOUT_S      end offsets (read_committed) every 20 ms until
//                                                N records: prints `FIRST_MS LAST_MS`
//   Watch BOOTSTRAP TOPIC latency N TIMEOUT_S    reads N records (read_committed): prints
//                                                `P50_MS P99_MS MEASURED` of arrival - ts, for
//                                                records sent 3 s after the first arrived
//   Watch JDBC_URL TABLE rows N TIMEOUT_S        counts the rows every 100 ms until N: prints
//                                                `FIRST_MS LAST_MS`
//   Watch ES_URL INDEX docs N TIMEOUT_S          counts the index's documents (_count) every
//                                                100 ms until N: prints `FIRST_MS LAST_MS`
//
// The watching modes print `ready` first, once they watch.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Watch {
    static final String[] STATUS = {"new", "paid", "shipped"};

    public static void main(String[] args) throws Exception {
        String target = args[0], topic = args[1], mode = args[2];
        switch (mode) {
            case "create": admin(target, a -> a.createTopics(List.of(
                    new NewTopic(topic, Integer.parseInt(args[3]), (short) 1))).all().get()); break;
            case "delete": admin(target, a -> a.deleteTopics(List.of(topic)).all().get()); break;
            case "fill": fill(target, topic, Long.parseLong(args[3]), Integer.parseInt(args[4]),
                    Long.parseLong(args[5]), false); break;
            case "fill-envelope": fill(target, topic, Long.parseLong(args[3]),
                    Integer.parseInt(args[4]), Long.parseLong(args[5]), true); break;
            case "ids": ids(target, topic, Integer.parseInt(args[3]), args[4], deadline(args[5]),
                    args[6].equals("1")); break;
            case "watch": watch(target, topic, Long.parseLong(args[3]), deadline(args[4])); break;
            case "latency": latency(target, topic, Integer.parseInt(args[3]), deadline(args[4])); break;
            case "rows": rows(target, topic, Long.parseLong(args[3]), deadline(args[4])); break;
            case "docs": docs(target, topic, Long.parseLong(args[3]), deadline(args[4])); break;
            default: throw new IllegalArgumentException("unknown mode " + mode);
        }
    }

    interface AdminCall { void run(Admin a) throws Exception; }

    static void admin(String bootstrap, AdminCall call) throws Exception {
        Properties a = new Properties();
        a.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(a)) {
            call.run(admin);
        }
    }

    static long deadline(String seconds) {
        return System.currentTimeMillis() + Long.parseLong(seconds) * 1000;
    }

    static void ready() {
        System.out.println("ready");
        System.out.flush();
    }

    /** Record i, padded to about size bytes, sent at ts. */
    static byte[] record(long i, int size, long ts) {
        String base = "{\"id\":" + i + ",\"account\":\"user-" + (i % 50) + "\",\"amount\":"
                + ((i * 7919) % 100_000) / 100.0 + ",\"status\":\"" + STATUS[(int) (i % 3)]
                + "\",\"ts\":" + ts + ",\"pad\":\"";
        int pad = Math.max(0, size - base.length() - 2);
        StringBuilder b = new StringBuilder(size + 8).append(base);
        for (int k = 0; k < pad; k++) b.append((char) ('a' + (k % 26)));
        return b.append("\"}").toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    static final String ENVELOPE = "{\"schema\":{\"type\":\"struct\",\"optional\":false,"
            + "\"name\":\"order\",\"fields\":[{\"field\":\"id\",\"type\":\"int64\"},"
            + "{\"field\":\"account\",\"type\":\"string\"},{\"field\":\"amount\",\"type\":\"double\"},"
            + "{\"field\":\"status\",\"type\":\"string\"},{\"field\":\"ts\",\"type\":\"int64\"},"
            + "{\"field\":\"pad\",\"type\":\"string\"}]},\"payload\":";

    static void fill(String bootstrap, String topic, long n, int size, long rate, boolean envelope)
            throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.LINGER_MS_CONFIG, rate > 0 ? "0" : "5");
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            long start = System.nanoTime();
            for (long i = 0; i < n; i++) {
                if (rate > 0) {
                    long due = start + i * 1_000_000_000L / rate;
                    long wait = due - System.nanoTime();
                    if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                byte[] value = record(i, size, System.currentTimeMillis());
                if (envelope) {
                    value = (ENVELOPE + new String(value, java.nio.charset.StandardCharsets.UTF_8)
                            + "}").getBytes(java.nio.charset.StandardCharsets.UTF_8);
                }
                producer.send(new ProducerRecord<>(topic, value));
            }
            producer.flush();
        }
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static List<TopicPartition> partitions(KafkaConsumer<?, ?> c, String topic) {
        return c.partitionsFor(topic, Duration.ofSeconds(30)).stream()
                .map(i -> new TopicPartition(topic, i.partition()))
                .collect(Collectors.toList());
    }

    interface Count { long get() throws Exception; }

    /** Calls `count` every `everyMs` until it reaches n: prints `FIRST_MS LAST_MS`, the times
     *  it was first above 0 and first at n (exits 1 at the deadline). */
    static void until(String what, Count count, long n, long deadline, long everyMs) throws Exception {
        ready();
        long first = 0;
        while (System.currentTimeMillis() < deadline) {
            long total = count.get();
            long now = System.currentTimeMillis();
            if (total > 0 && first == 0) first = now;
            if (total >= n) {
                System.out.println(first + " " + now);
                return;
            }
            Thread.sleep(everyMs);
        }
        System.err.println(what + " did not reach " + n);
        System.exit(1);
    }

    static void watch(String bootstrap, String topic, long n, long deadline) throws Exception {
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            List<TopicPartition> parts = partitions(c, topic);
            // The job starts once the watcher watches (a JVM takes a second to get here).
            c.endOffsets(parts);
            until("topic " + topic, () -> c.endOffsets(parts).values().stream()
                    .mapToLong(Long::longValue).sum(), n, deadline, 20);
        }
    }

    /** The "ts" field of a record written by fill (and passed on by either job, which may
     *  reorder the fields: rivus writes a JSON object's keys sorted). */
    static long ts(byte[] v) {
        String s = new String(v, java.nio.charset.StandardCharsets.UTF_8);
        int at = s.indexOf("\"ts\":") + 5;
        int end = at;
        while (end < s.length() && Character.isDigit(s.charAt(end))) end++;
        return Long.parseLong(s.substring(at, end));
    }

    static void latency(String bootstrap, String topic, int n, long deadline) throws Exception {
        long[] lat = new long[n];
        int seen = 0, measured = 0;
        long first = 0;
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            List<TopicPartition> parts = partitions(c, topic);
            c.assign(parts);
            c.seekToBeginning(parts);
            ready();
            while (seen < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    long now = System.currentTimeMillis();
                    if (first == 0) first = now;
                    long sent = ts(r.value());
                    // Records sent while the job started up wait for it: not counted.
                    if (sent >= first + 3000 && measured < n) lat[measured++] = now - sent;
                    seen++;
                }
            }
        }
        if (seen < n || measured == 0) {
            System.err.println("latency: " + topic + " got " + seen + " of " + n + " records");
            System.exit(1);
        }
        long[] m = Arrays.copyOf(lat, measured);
        Arrays.sort(m);
        System.out.println(m[measured / 2] + " " + m[Math.min(measured - 1, (int) (measured * 0.99))]
                + " " + measured);
    }

    /** The integer after `"field":` in v (a whole-number value when field is `-`), or -1. */
    static long id(byte[] v, String field) {
        String s = new String(v, java.nio.charset.StandardCharsets.UTF_8).trim();
        int at = 0;
        if (!field.equals("-")) {
            at = s.indexOf("\"" + field + "\":");
            if (at < 0) return -1;
            at += field.length() + 3;
        }
        while (at < s.length() && s.charAt(at) == ' ') at++;
        int end = at;
        while (end < s.length() && Character.isDigit(s.charAt(end))) end++;
        return end > at ? Long.parseLong(s.substring(at, end)) : -1;
    }

    static void ids(String bootstrap, String topic, int n, String field, long deadline, boolean wait)
            throws Exception {
        java.util.BitSet seen = new java.util.BitSet(n);
        long total = 0;
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            List<TopicPartition> parts = partitions(c, topic);
            c.assign(parts);
            c.seekToBeginning(parts);
            java.util.Map<TopicPartition, Long> end = c.endOffsets(parts);
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    long id = id(r.value(), field);
                    // A generator that runs on past n writes ids beyond it: not counted.
                    if (id >= 0 && id < n) {
                        total++;
                        seen.set((int) id);
                    }
                }
                if (wait) {
                    if (seen.cardinality() >= n) break;
                } else if (parts.stream().allMatch(p -> c.position(p) >= end.get(p))) {
                    break;
                }
            }
        }
        int distinct = seen.cardinality();
        System.out.println(total + " " + distinct + " " + (n - distinct));
    }

    static void rows(String url, String table, long n, long deadline) throws Exception {
        try (Connection c = DriverManager.getConnection(url); Statement s = c.createStatement()) {
            until("table " + table, () -> {
                try (ResultSet r = s.executeQuery("SELECT count(*) FROM " + table)) {
                    r.next();
                    return r.getLong(1);
                }
            }, n, deadline, 100);
        }
    }

    static void docs(String url, String index, long n, long deadline) throws Exception {
        java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();
        java.net.http.HttpRequest count = java.net.http.HttpRequest.newBuilder(
                java.net.URI.create(url + "/" + index + "/_count")).build();
        java.util.regex.Pattern field = java.util.regex.Pattern.compile("\"count\"\\s*:\\s*(\\d+)");
        until("index " + index, () -> {
            String body = http.send(count, java.net.http.HttpResponse.BodyHandlers.ofString()).body();
            java.util.regex.Matcher m = field.matcher(body);
            if (!m.find()) throw new IllegalStateException("no count in " + body);
            return Long.parseLong(m.group(1));
        }, n, deadline, 100);
    }
}
