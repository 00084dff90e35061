// Runs a single-node OpenSearch 2.19 inside this JVM, serving HTTP on loopback.
// Usage: java -cp <opensearch jars>:<dir of this class> OsNode <home> <http-port> <transport-port>
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.plugins.Plugin;
import org.opensearch.transport.Netty4Plugin;

public class OsNode {
    static class EmbeddedNode extends Node {
        EmbeddedNode(Environment env, Collection<Class<? extends Plugin>> plugins) {
            super(env, plugins, true);
        }
    }

    public static void main(String[] args) throws Exception {
        Path home = Paths.get(args[0]).toAbsolutePath();
        Settings settings = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", "rivus-dev")
            .put("node.name", "rivus-opensearch")
            .put("discovery.type", "single-node")
            .put("network.host", "127.0.0.1")
            .put("http.port", args[1])
            .put("transport.port", args[2])
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("action.auto_create_index", true)
            .put("http.max_content_length", "200mb")
            // A tiny write queue, so that bulk rejections (429) really happen in tests.
            .put("thread_pool.write.queue_size", 2)
            .build();
        Environment env = InternalSettingsPreparer.prepareEnvironment(
            settings, Collections.emptyMap(), null, () -> "rivus-opensearch");
        List<Class<? extends Plugin>> plugins = List.of(Netty4Plugin.class);
        Node node = new EmbeddedNode(env, plugins);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
            } catch (Exception e) {
                e.printStackTrace();
            }
            stopped.countDown();
        }));
        node.start();
        System.out.println("rivus-opensearch started");
        stopped.await();
    }
}
