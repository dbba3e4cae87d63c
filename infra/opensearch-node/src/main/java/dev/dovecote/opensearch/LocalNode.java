package dev.dovecote.opensearch;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.logging.log4j.LogManager;
import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.core.common.transport.TransportAddress;
import org.opensearch.env.Environment;
import org.opensearch.http.HttpServerTransport;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.painless.PainlessPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.transport.Netty4Plugin;

/**
 * One real OpenSearch node in this JVM, for tests and the local runtime.
 *
 * <p>The distribution's modules are loaded as classpath plugins (the way OpenSearch's own test
 * framework runs a node), so the Maven dependency tree is the whole install: no tarball, no
 * plugin directories. Only what Dovecote relies on is present: HTTP (netty4), the analyzers
 * (analysis-common: english stemming, ngram tokenizers), painless scripts, and the k-NN plugin.
 *
 * <p>Bootstrap checks (heap, mmap count, file descriptors, seccomp) belong to
 * {@code org.opensearch.bootstrap.Bootstrap}, which this launcher does not use: the node binds
 * only to loopback, so production checks do not apply. JNA is on the classpath but unused.
 *
 * <p>Usage: {@code LocalNode --home DIR --data DIR [--port N] [--owner-pid PID]}. With port 0
 * the node binds a free port; with an owner pid it exits when that process does. Once the HTTP
 * transport is bound, one line {@code DOVECOTE_OPENSEARCH_URL=http://127.0.0.1:PORT} is printed
 * on stdout; logs (warnings and above) go to stderr. SIGTERM/SIGINT close the node cleanly; a
 * failure to start exits with status 1 and the stack trace on stderr.
 */
public final class LocalNode {

    private static final String URL_PREFIX = "DOVECOTE_OPENSEARCH_URL=";
    private static final String NODE_NAME = "dovecote-node";

    private static final Collection<Class<? extends Plugin>> MODULES = List.of(
        Netty4Plugin.class,
        CommonAnalysisPlugin.class,
        PainlessPlugin.class
    );
    /**
     * The k-NN plugin (recall's semantic tier: knn_vector fields, the Lucene HNSW engine, which
     * needs no native library). Its jars come unpacked from its Maven Central zip (pom.xml), so
     * it is loaded by name rather than compiled against.
     */
    private static final String KNN_PLUGIN = "org.opensearch.knn.plugin.KNNPlugin";

    /** Node's constructor that takes classpath plugins is protected: this subclass opens it. */
    private static final class ClasspathNode extends Node {
        ClasspathNode(Environment environment, Collection<Class<? extends Plugin>> plugins) {
            super(environment, plugins, true);
        }
    }

    private static Collection<Class<? extends Plugin>> plugins() throws ClassNotFoundException {
        List<Class<? extends Plugin>> all = new ArrayList<>(MODULES);
        all.add(Class.forName(KNN_PLUGIN).asSubclass(Plugin.class));
        return all;
    }

    private LocalNode() {}

    public static void main(String[] args) throws Exception {
        // What the distribution's jvm.options sets; these must precede the first Netty/Log4j use.
        defaultProperty("log4j.shutdownHookEnabled", "false"); // the node logs while it closes
        defaultProperty("log4j2.disable.jmx", "true");
        defaultProperty("io.netty.noUnsafe", "true");
        defaultProperty("io.netty.noKeySetOptimization", "true");
        defaultProperty("io.netty.recycler.maxCapacityPerThread", "0");
        defaultProperty("io.netty.allocator.numDirectArenas", "0");
        defaultProperty("opensearch.networkaddress.cache.ttl", "60");

        Options options = Options.parse(args);
        // LogConfigurator redirects System.out and System.err to loggers: keep the real streams
        // for the URL line and for a failure before the node is up.
        PrintStream stdout = System.out;
        PrintStream stderr = System.err;
        try {
            run(options, stdout);
        } catch (Throwable failure) {
            // The node's thread pools are not daemons: without an explicit exit a node that failed
            // to start would keep the JVM alive with nothing listening.
            failure.printStackTrace(stderr);
            stderr.flush();
            System.exit(1);
        }
    }

    private static void run(Options options, PrintStream stdout) throws Exception {
        LogConfigurator.registerErrorListener();
        Path home = options.home.toAbsolutePath();
        prepareHome(home);
        Settings settings = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", options.data.toAbsolutePath().toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", "dovecote-local")
            .put("node.name", NODE_NAME)
            .put("discovery.type", "single-node")
            .put("network.host", "127.0.0.1")
            .put("http.port", Integer.toString(options.port))
            .put("transport.port", "0")
            // A node on a shared disk must not turn indices read-only when the disk fills up.
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .build();
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
            settings, Map.of(), home.resolve("config"), () -> NODE_NAME);
        // The %node_name pattern needs the name before the configuration is parsed.
        LogConfigurator.setNodeName(NODE_NAME);
        LogConfigurator.configure(environment);

        Node node = new ClasspathNode(environment, plugins());
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
                node.awaitClose(20, TimeUnit.SECONDS);
            } catch (IOException | InterruptedException e) {
                LogManager.getLogger(LocalNode.class).warn("closing the node failed", e);
            } finally {
                closed.countDown();
            }
        }, "dovecote-node-close"));
        if (options.ownerPid > 0) {
            // Tie the node to the process that owns it: however the owner ends (even SIGKILL), no
            // JVM is left behind holding memory and a port. ProcessHandle compares start times,
            // so a recycled pid does not keep the node alive.
            ProcessHandle.of(options.ownerPid).ifPresentOrElse(
                owner -> owner.onExit().thenRun(() -> System.exit(0)),
                () -> System.exit(0));
        }
        node.start();
        // One node holds no replicas, so new indices default to 0 of them (green, not yellow).
        // Index creation reads this default from the cluster state, not from the node settings,
        // hence a persistent cluster setting, applied before anyone learns the URL.
        node.client().admin().cluster().prepareUpdateSettings()
            .setPersistentSettings(Settings.builder().put("cluster.default_number_of_replicas", 0))
            .get();

        TransportAddress bound = node.injector().getInstance(HttpServerTransport.class).boundAddress().publishAddress();
        stdout.println(URL_PREFIX + "http://" + bound.getAddress() + ":" + bound.getPort());
        stdout.flush();
        closed.await();
    }

    /** path.home needs config/ (log4j2.properties), and plugins/ and modules/ may not be missing. */
    private static void prepareHome(Path home) throws IOException {
        Path config = home.resolve("config");
        Files.createDirectories(config);
        Files.createDirectories(home.resolve("plugins"));
        Files.createDirectories(home.resolve("modules"));
        Files.createDirectories(home.resolve("logs"));
        // Written on every start: it is ours, not the user's. Warnings and errors to stderr only.
        String log4j = String.join("\n",
            "status = error",
            "appender.console.type = Console",
            "appender.console.name = console",
            "appender.console.target = SYSTEM_ERR",
            "appender.console.direct = true",
            "appender.console.layout.type = PatternLayout",
            "appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n",
            "rootLogger.level = warn",
            "rootLogger.appenderRef.console.ref = console",
            // Single-node dev settings trip deprecation warnings that say nothing useful here.
            "logger.deprecation.name = org.opensearch.deprecation",
            "logger.deprecation.level = error",
            // Says on every start that dangling indices are not auto-imported (the default).
            "logger.dangling.name = org.opensearch.gateway.DanglingIndicesState",
            "logger.dangling.level = error",
            "");
        Files.writeString(config.resolve("log4j2.properties"), log4j, StandardCharsets.UTF_8);
        Path yml = config.resolve("opensearch.yml");
        if (!Files.exists(yml)) {
            Files.writeString(yml, "# settings are passed by dev.dovecote.opensearch.LocalNode\n", StandardCharsets.UTF_8);
        }
    }

    private static void defaultProperty(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    private static final class Options {
        Path home;
        Path data;
        int port;
        long ownerPid;

        static Options parse(String[] args) {
            Options options = new Options();
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--home" -> options.home = Path.of(value(args, ++i, "--home"));
                    case "--data" -> options.data = Path.of(value(args, ++i, "--data"));
                    case "--port" -> options.port = Integer.parseInt(value(args, ++i, "--port"));
                    case "--owner-pid" -> options.ownerPid = Long.parseLong(value(args, ++i, "--owner-pid"));
                    default -> usage("unknown argument: " + args[i]);
                }
            }
            if (options.home == null || options.data == null) {
                usage("--home and --data are required");
            }
            if (options.port < 0 || options.port > 65535) {
                usage("--port must be 0 (a free port) or 1-65535");
            }
            return options;
        }

        private static String value(String[] args, int i, String flag) {
            if (i >= args.length) {
                usage(flag + " needs a value");
            }
            return args[i];
        }

        private static void usage(String problem) {
            System.err.println(problem);
            System.err.println("usage: LocalNode --home DIR --data DIR [--port N (0: a free port)] [--owner-pid PID]");
            System.exit(2);
        }
    }
}
