package shufflelab.ucxfetch;

import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Shuffle-fetch microbenchmark: N reducers fetch blocks from M mappers with at most R requests in
 * flight, over UCX (JUCX, UCX's TCP transport) or Netty (plain TCP).
 *
 * <pre>
 *   serve --transport netty|ucx --bind ADDR --port P --blocks K --block-bytes B [--progress poll|wakeup]
 *   fetch --transport netty|ucx --mappers A:P,A:P --blocks K --block-bytes B --in-flight R
 *         --total-bytes T [--warmup N] [--progress poll|wakeup] [--timeout-s S]
 * </pre>
 *
 * A mapper holds K blocks of B bytes in memory (the first 8 bytes of block i hold i, so a reducer
 * checks every block it receives) and answers "block i" with the bytes. A reducer fetches
 * ceil(T / B) blocks round-robin over the mappers, after N unmeasured warm-up fetches, and prints
 * one JSON line. A mapper prints a "ready" JSON line once it listens and its totals as one JSON
 * line when it gets SIGTERM. Progress {@code poll} busy-polls (UCX: worker.progress() in a loop;
 * Netty: epoll busy-wait), {@code wakeup} sleeps in the kernel when idle (UCX: waitForEvents, which
 * arms the worker; Netty: epoll_wait). Errors are printed as a JSON line with an "error" field.
 */
public final class UcxFetch {
    private UcxFetch() {}

    /** Parsed command line: a mode and --key value options. */
    static final class Args {
        final String mode;
        final Map<String, String> opts = new HashMap<>();

        Args(String[] argv) {
            if (argv.length == 0) {
                throw new IllegalArgumentException("usage: serve|fetch --key value ...");
            }
            mode = argv[0];
            for (int i = 1; i < argv.length; i++) {
                if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                    throw new IllegalArgumentException("bad argument: " + argv[i]);
                }
                opts.put(argv[i].substring(2), argv[++i]);
            }
        }

        String str(String k, String dflt) {
            String v = opts.get(k);
            if (v == null && dflt == null) {
                throw new IllegalArgumentException("missing --" + k);
            }
            return v == null ? dflt : v;
        }

        long num(String k, Long dflt) {
            return Long.parseLong(str(k, dflt == null ? null : Long.toString(dflt)));
        }
    }

    /** Common settings of both roles. */
    static final class Config {
        String transport;
        String progress;
        String nettyIo;
        int blocks;
        int blockBytes;
        // serve
        String bind;
        int port;
        // fetch
        List<InetSocketAddress> mappers = new ArrayList<>();
        int inFlight;
        long totalBytes;
        int warmup;
        double timeoutS;

        static Config of(Args a) {
            Config c = new Config();
            c.transport = a.str("transport", null);
            c.progress = a.str("progress", "wakeup");
            c.nettyIo = a.str("netty-io", "epoll");
            c.blocks = (int) a.num("blocks", 16L);
            c.blockBytes = (int) a.num("block-bytes", 1L << 20);
            if (!c.transport.equals("netty") && !c.transport.equals("ucx")) {
                throw new IllegalArgumentException("--transport must be netty or ucx");
            }
            if (!c.progress.equals("poll") && !c.progress.equals("wakeup")) {
                throw new IllegalArgumentException("--progress must be poll or wakeup");
            }
            if (c.blockBytes < 16 || c.blocks < 1) {
                throw new IllegalArgumentException("--block-bytes must be >= 16 and --blocks >= 1");
            }
            if (a.mode.equals("serve")) {
                c.bind = a.str("bind", null);
                c.port = (int) a.num("port", null);
            } else {
                for (String hp : a.str("mappers", null).split(",")) {
                    int colon = hp.lastIndexOf(':');
                    c.mappers.add(new InetSocketAddress(hp.substring(0, colon), Integer.parseInt(hp.substring(colon + 1))));
                }
                c.inFlight = (int) a.num("in-flight", 8L);
                c.totalBytes = a.num("total-bytes", 64L << 20);
                c.warmup = (int) a.num("warmup", (long) (2 * c.mappers.size()));
                c.timeoutS = Double.parseDouble(a.str("timeout-s", "60"));
            }
            return c;
        }

        long requests() {
            return (Math.max(totalBytes, 1) + blockBytes - 1) / blockBytes;
        }
    }

    /** Process CPU time (user + system, all threads) in nanoseconds. */
    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    /** The blocks a mapper serves: direct buffers whose first 8 bytes hold the block index. */
    static ByteBuffer[] makeBlocks(int blocks, int blockBytes) {
        ByteBuffer[] out = new ByteBuffer[blocks];
        byte[] fill = new byte[Math.min(blockBytes, 1 << 16)];
        ThreadLocalRandom.current().nextBytes(fill);
        for (int i = 0; i < blocks; i++) {
            ByteBuffer b = ByteBuffer.allocateDirect(blockBytes);
            while (b.hasRemaining()) {
                b.put(fill, 0, Math.min(fill.length, b.remaining()));
            }
            b.putLong(0, i);
            b.clear();
            out[i] = b;
        }
        return out;
    }

    /** Mapper-side totals, written by the serving thread and read by the exit hook. */
    static final class ServeStats {
        volatile long requests;
        volatile long bytes;
        volatile long firstCpuNs = -1;
        volatile long lastCpuNs = -1;
        volatile long firstNs = -1;
        volatile long lastNs = -1;
        volatile String error;

        /** Records one answered request (called by the single serving thread). */
        void served(long n) {
            long cpu = cpuNanos();
            long now = System.nanoTime();
            if (firstCpuNs < 0) {
                firstCpuNs = cpu;
                firstNs = now;
            }
            lastCpuNs = cpu;
            lastNs = now;
            requests = requests + 1;
            bytes = bytes + n;
        }
    }

    /** Reducer-side measurement: per-request latencies and the measured window. */
    static final class FetchStats {
        final long[] latNs;
        int n;
        long bytes;

        FetchStats(long requests) {
            latNs = new long[(int) requests];
        }

        void add(long lat, long b) {
            latNs[n++] = lat;
            bytes += b;
        }

        double percentileUs(double p) {
            if (n == 0) {
                return Double.NaN;
            }
            long[] s = Arrays.copyOf(latNs, n);
            Arrays.sort(s);
            int idx = (int) Math.min(n - 1, Math.max(0, Math.ceil(p / 100.0 * n) - 1));
            return s[idx] / 1000.0;
        }
    }

    // ---- JSON output --------------------------------------------------------------------------

    static String json(Map<String, Object> m) {
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, Object> e : m.entrySet()) {
            if (!first) {
                sb.append(", ");
            }
            first = false;
            sb.append('"').append(e.getKey()).append("\": ");
            Object v = e.getValue();
            if (v == null) {
                sb.append("null");
            } else if (v instanceof Number || v instanceof Boolean) {
                if (v instanceof Double d && (d.isNaN() || d.isInfinite())) {
                    sb.append("null");
                } else {
                    sb.append(v);
                }
            } else {
                sb.append('"');
                for (char ch : v.toString().toCharArray()) {
                    switch (ch) {
                        case '"' -> sb.append("\\\"");
                        case '\\' -> sb.append("\\\\");
                        case '\n' -> sb.append("\\n");
                        case '\r' -> sb.append("\\r");
                        case '\t' -> sb.append("\\t");
                        default -> {
                            if (ch < 0x20) {
                                sb.append(String.format(Locale.ROOT, "\\u%04x", (int) ch));
                            } else {
                                sb.append(ch);
                            }
                        }
                    }
                }
                sb.append('"');
            }
        }
        return sb.append('}').toString();
    }

    static double round(double v, int digits) {
        double f = Math.pow(10, digits);
        return Math.round(v * f) / f;
    }

    static synchronized void emit(Map<String, Object> m) {
        System.out.println(json(m));
        System.out.flush();
    }

    static Map<String, Object> base(String role, Config c) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("role", role);
        m.put("transport", c.transport);
        m.put("progress", c.progress);
        if (c.transport.equals("netty")) {
            m.put("netty_io", c.nettyIo);
        }
        return m;
    }

    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder(t.toString());
        for (Throwable c = t.getCause(); c != null; c = c.getCause()) {
            sb.append(" <- caused by ").append(c);
        }
        return sb.toString();
    }

    // ---- roles --------------------------------------------------------------------------------

    /** A transport's mapper: listens, then serves until the process is terminated. */
    interface Server {
        void serve(Config c, ByteBuffer[] blocks, ServeStats stats, Runnable ready) throws Exception;
    }

    /** A transport's reducer: runs the fetch loop and returns the measured window. */
    interface Client {
        /** Returns {measureStartNs, measureEndNs, cpuStartNs, cpuEndNs}. */
        long[] fetch(Config c, FetchStats stats) throws Exception;
    }

    static void serve(Config c) {
        ServeStats stats = new ServeStats();
        long startCpu = cpuNanos();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            Map<String, Object> m = base("serve", c);
            m.put("requests", stats.requests);
            m.put("bytes", stats.bytes);
            double activeCpu = stats.firstCpuNs < 0 ? 0 : (stats.lastCpuNs - stats.firstCpuNs) / 1e9;
            double activeS = stats.firstNs < 0 ? 0 : (stats.lastNs - stats.firstNs) / 1e9;
            m.put("active_seconds", round(activeS, 4));
            m.put("cpu_seconds_active", round(activeCpu, 4));
            m.put("cpu_seconds_per_gb", stats.bytes > 0 ? round(activeCpu / (stats.bytes / 1e9), 4) : null);
            m.put("cpu_seconds_total", round((cpuNanos() - startCpu) / 1e9, 4));
            if (stats.error != null) {
                m.put("error", stats.error);
            }
            emit(m);
        }, "exit-report"));
        ByteBuffer[] blocks = makeBlocks(c.blocks, c.blockBytes);
        Server server = c.transport.equals("ucx") ? new UcxTransport.UcxServer() : new NettyTransport.NettyServer();
        Runnable ready = () -> {
            Map<String, Object> m = base("serve", c);
            m.put("event", "ready");
            m.put("bind", c.bind + ":" + c.port);
            emit(m);
        };
        try {
            server.serve(c, blocks, stats, ready);
        } catch (Throwable t) {
            stats.error = describe(t);
            t.printStackTrace();
            System.exit(1);
        }
    }

    static int fetch(Config c) {
        long requests = c.requests();
        FetchStats stats = new FetchStats(requests);
        // a hard deadline that holds even while a thread sits in native code
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep((long) (c.timeoutS * 1000));
            } catch (InterruptedException e) {
                return;
            }
            Map<String, Object> m = base("fetch", c);
            m.put("error", "timeout after " + c.timeoutS + " s with " + stats.n + " of " + requests + " requests done");
            emit(m);
            Runtime.getRuntime().halt(3);
        }, "deadline");
        watchdog.setDaemon(true);
        watchdog.start();
        Client client = c.transport.equals("ucx") ? new UcxTransport.UcxClient() : new NettyTransport.NettyClient();
        // wall-clock anchor, so a driver can line up the measured windows of several reducers
        java.time.Instant wall0 = java.time.Instant.now();
        long nano0 = System.nanoTime();
        double epoch0 = wall0.getEpochSecond() + wall0.getNano() / 1e9;
        try {
            long[] w = client.fetch(c, stats);
            double seconds = (w[1] - w[0]) / 1e9;
            double cpu = (w[3] - w[2]) / 1e9;
            Map<String, Object> m = base("fetch", c);
            m.put("mappers", c.mappers.size());
            m.put("in_flight", c.inFlight);
            m.put("block_bytes", c.blockBytes);
            m.put("requests", stats.n);
            m.put("bytes", stats.bytes);
            m.put("seconds", round(seconds, 4));
            m.put("start_epoch_s", round(epoch0 + (w[0] - nano0) / 1e9, 6));
            m.put("end_epoch_s", round(epoch0 + (w[1] - nano0) / 1e9, 6));
            m.put("throughput_gbps", round(stats.bytes * 8 / seconds / 1e9, 4));
            m.put("latency_us_p50", round(stats.percentileUs(50), 1));
            m.put("latency_us_p99", round(stats.percentileUs(99), 1));
            m.put("cpu_seconds", round(cpu, 4));
            m.put("cpu_seconds_per_gb", round(cpu / (stats.bytes / 1e9), 4));
            m.put("cpu_seconds_total", round(w[3] / 1e9, 4));
            emit(m);
            return 0;
        } catch (Throwable t) {
            t.printStackTrace();
            Map<String, Object> m = base("fetch", c);
            m.put("error", describe(t));
            emit(m);
            return 1;
        }
    }

    public static void main(String[] argv) {
        Args a;
        Config c;
        try {
            a = new Args(argv);
            c = Config.of(a);
        } catch (RuntimeException e) {
            System.err.println(e.getMessage());
            System.exit(2);
            return;
        }
        switch (a.mode) {
            case "serve" -> serve(c);
            case "fetch" -> {
                int rc = fetch(c);
                // no lingering transport threads or native teardown: the result is printed
                Runtime.getRuntime().halt(rc);
            }
            default -> {
                System.err.println("mode must be serve or fetch");
                System.exit(2);
            }
        }
    }
}
