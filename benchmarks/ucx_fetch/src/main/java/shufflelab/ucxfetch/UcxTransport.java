package shufflelab.ucxfetch;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import org.openucx.jucx.NativeLibs;
import org.openucx.jucx.UcxCallback;
import org.openucx.jucx.UcxUtils;
import org.openucx.jucx.ucp.UcpConnectionRequest;
import org.openucx.jucx.ucp.UcpContext;
import org.openucx.jucx.ucp.UcpEndpoint;
import org.openucx.jucx.ucp.UcpEndpointParams;
import org.openucx.jucx.ucp.UcpListener;
import org.openucx.jucx.ucp.UcpListenerParams;
import org.openucx.jucx.ucp.UcpParams;
import org.openucx.jucx.ucp.UcpRequest;
import org.openucx.jucx.ucp.UcpWorker;
import org.openucx.jucx.ucp.UcpWorkerParams;
import shufflelab.ucxfetch.UcxFetch.Config;

/**
 * The fetch protocol over UCX's tagged API, one worker per process driven by one thread.
 *
 * <p>A reducer connects to each mapper by socket address (UCX's client-server connection
 * establishment) and sends its worker's client id with the connection request, so the mapper knows
 * which endpoint a request came from. A request is a tagged message with tag {@link #REQ_TAG} and
 * 24 bytes: client id, block index, response tag. Before sending it the reducer posts a receive of
 * the block into its own buffer under the response tag (unique per reducer), so the block lands
 * there directly (eager or rendezvous, as UCX chooses for the size). Callbacks run inside
 * {@code progress()} and only record completions; the loop acts on them after progress returns.
 */
final class UcxTransport {
    private UcxTransport() {}

    static final long REQ_TAG = 1L << 63;
    static final int REQ_BYTES = 24;
    /** Receives a mapper keeps posted for requests. */
    static final int SERVER_RECV_SLOTS = 256;

    static UcpContext context(Config c) {
        NativeLibs.load(); // libjucx.so from the jar, linked against the system's libucp.so.0
        UcpParams p = new UcpParams().requestTagFeature();
        if (c.progress.equals("wakeup")) {
            p.requestWakeupFeature();
        }
        return new UcpContext(p);
    }

    /** Called when a progress round found nothing to do: busy-poll returns, wakeup sleeps. */
    static void idle(Config c, UcpWorker worker) {
        if (c.progress.equals("wakeup")) {
            worker.waitForEvents(); // arms the worker; returns at once if events are pending
        }
    }

    static final class UcxServer implements UcxFetch.Server {
        /** Held for the process's life: the mapper serves until it is terminated. */
        private UcpListener listener;

        @Override
        public void serve(Config c, ByteBuffer[] blocks, UcxFetch.ServeStats stats, Runnable ready) throws Exception {
            UcpContext ctx = context(c);
            long[] blockAddr = new long[blocks.length];
            for (int i = 0; i < blocks.length; i++) {
                blockAddr[i] = UcxUtils.getAddress(blocks[i]);
            }
            UcpWorker worker = ctx.newWorker(new UcpWorkerParams());
            ArrayDeque<UcpConnectionRequest> conns = new ArrayDeque<>();
            ArrayDeque<UcpEndpoint> broken = new ArrayDeque<>();
            Map<Long, UcpEndpoint> eps = new HashMap<>();
            listener = worker.newListener(new UcpListenerParams()
                    .setSockAddr(new InetSocketAddress(c.bind, c.port))
                    .setConnectionHandler(conns::add));
            ready.run();

            ByteBuffer[] recvBuf = new ByteBuffer[SERVER_RECV_SLOTS];
            long[] recvAddr = new long[SERVER_RECV_SLOTS];
            UcxCallback[] recvCb = new UcxCallback[SERVER_RECV_SLOTS];
            ArrayDeque<Integer> arrived = new ArrayDeque<>();
            String[] failure = new String[1];
            for (int i = 0; i < SERVER_RECV_SLOTS; i++) {
                final int slot = i;
                recvBuf[i] = ByteBuffer.allocateDirect(REQ_BYTES);
                recvAddr[i] = UcxUtils.getAddress(recvBuf[i]);
                recvCb[i] = new UcxCallback() {
                    @Override
                    public void onSuccess(UcpRequest r) {
                        arrived.add(slot);
                    }

                    @Override
                    public void onError(int status, String msg) {
                        failure[0] = "request receive failed: " + status + " " + msg;
                    }
                };
                worker.recvTaggedNonBlocking(recvAddr[i], REQ_BYTES, REQ_TAG, REQ_TAG, recvCb[i]);
            }
            long[] sendErrors = new long[1];
            UcxCallback sendCb = new UcxCallback() {
                @Override
                public void onSuccess(UcpRequest r) {
                    stats.served(c.blockBytes);
                }

                @Override
                public void onError(int status, String msg) {
                    sendErrors[0]++; // a reducer that went away; its endpoint is closed below
                }
            };
            List<Integer> waiting = new ArrayList<>(); // requests that arrived before their endpoint
            while (true) {
                int events = worker.progress();
                boolean acted = false;
                if (failure[0] != null) {
                    throw new IllegalStateException(failure[0]);
                }
                while (!conns.isEmpty()) {
                    UcpConnectionRequest req = conns.poll();
                    long clientId = req.getClientId();
                    UcpEndpoint ep = worker.newEndpoint(new UcpEndpointParams()
                            .setConnectionRequest(req)
                            .setPeerErrorHandlingMode()
                            .setErrorHandler((e, status, msg) -> broken.add(e)));
                    eps.put(clientId, ep);
                    acted = true;
                }
                if (!waiting.isEmpty()) {
                    arrived.addAll(waiting);
                    waiting.clear();
                }
                int n = arrived.size();
                for (int k = 0; k < n; k++) {
                    int slot = arrived.poll();
                    ByteBuffer b = recvBuf[slot];
                    long clientId = b.getLong(0);
                    int block = (int) b.getLong(8);
                    long respTag = b.getLong(16);
                    UcpEndpoint ep = eps.get(clientId);
                    if (ep == null) {
                        waiting.add(slot);
                        continue;
                    }
                    ep.sendTaggedNonBlocking(blockAddr[block % blockAddr.length], c.blockBytes, respTag, sendCb);
                    worker.recvTaggedNonBlocking(recvAddr[slot], REQ_BYTES, REQ_TAG, REQ_TAG, recvCb[slot]);
                    acted = true;
                }
                while (!broken.isEmpty()) {
                    UcpEndpoint ep = broken.poll();
                    eps.values().removeIf(v -> v == ep);
                    ep.closeNonBlockingForce();
                    acted = true;
                }
                if (events == 0 && !acted && waiting.isEmpty()) {
                    idle(c, worker);
                }
            }
        }
    }

    static final class UcxClient implements UcxFetch.Client {
        @Override
        public long[] fetch(Config c, UcxFetch.FetchStats stats) throws Exception {
            long clientId = ThreadLocalRandom.current().nextLong() & Long.MAX_VALUE;
            UcpContext ctx = context(c);
            UcpWorker worker = ctx.newWorker(new UcpWorkerParams().setClientId(clientId));
            String[] failure = new String[1];
            int nm = c.mappers.size();
            UcpEndpoint[] eps = new UcpEndpoint[nm];
            for (int i = 0; i < nm; i++) {
                InetSocketAddress addr = c.mappers.get(i);
                eps[i] = worker.newEndpoint(new UcpEndpointParams()
                        .setSocketAddress(addr)
                        .setPeerErrorHandlingMode()
                        .sendClientId()
                        .setName("mapper-" + i)
                        .setErrorHandler((e, status, msg) ->
                                failure[0] = "endpoint to " + addr + " failed: status " + status + ": " + msg));
            }
            int r = c.inFlight;
            ByteBuffer[] reqBuf = new ByteBuffer[r];
            long[] reqAddr = new long[r];
            ByteBuffer[] recvBuf = new ByteBuffer[r];
            long[] recvAddr = new long[r];
            long[] startNs = new long[r];
            int[] block = new int[r];
            boolean[] sent = new boolean[r];
            long[] recvSize = new long[r];
            UcxCallback[] sendCb = new UcxCallback[r];
            UcxCallback[] recvCb = new UcxCallback[r];
            ArrayDeque<Integer> received = new ArrayDeque<>();
            ArrayDeque<Integer> free = new ArrayDeque<>();
            for (int i = 0; i < r; i++) {
                final int slot = i;
                reqBuf[i] = ByteBuffer.allocateDirect(REQ_BYTES);
                reqAddr[i] = UcxUtils.getAddress(reqBuf[i]);
                recvBuf[i] = ByteBuffer.allocateDirect(c.blockBytes);
                recvAddr[i] = UcxUtils.getAddress(recvBuf[i]);
                sendCb[i] = new UcxCallback() {
                    @Override
                    public void onSuccess(UcpRequest req) {
                        sent[slot] = true;
                    }

                    @Override
                    public void onError(int status, String msg) {
                        failure[0] = "request send failed: status " + status + ": " + msg;
                    }
                };
                recvCb[i] = new UcxCallback() {
                    @Override
                    public void onSuccess(UcpRequest req) {
                        recvSize[slot] = req.getRecvSize();
                        received.add(slot);
                    }

                    @Override
                    public void onError(int status, String msg) {
                        failure[0] = "block receive failed: status " + status + ": " + msg;
                    }
                };
                free.add(i);
            }
            long total = c.warmup + stats.latNs.length;
            long issued = 0;
            long done = 0;
            int offset = ThreadLocalRandom.current().nextInt(c.blocks);
            long t0 = System.nanoTime();
            long cpu0 = UcxFetch.cpuNanos();
            boolean measuring = c.warmup == 0;
            ArrayDeque<Integer> pendingSend = new ArrayDeque<>(); // answered before the send callback
            while (done < total) {
                while (!free.isEmpty() && issued < total) {
                    int slot = free.poll();
                    long seq = issued++;
                    int mapper = (int) (seq % nm);
                    block[slot] = (int) ((seq / nm + offset) % c.blocks);
                    long respTag = seq + 1;
                    sent[slot] = false;
                    ByteBuffer q = reqBuf[slot];
                    q.putLong(0, clientId);
                    q.putLong(8, block[slot]);
                    q.putLong(16, respTag);
                    startNs[slot] = System.nanoTime();
                    worker.recvTaggedNonBlocking(recvAddr[slot], c.blockBytes, respTag, -1L, recvCb[slot]);
                    eps[mapper].sendTaggedNonBlocking(reqAddr[slot], REQ_BYTES, UcxTransport.REQ_TAG, sendCb[slot]);
                }
                int events = worker.progress();
                if (failure[0] != null) {
                    throw new IllegalStateException(failure[0]);
                }
                boolean acted = !received.isEmpty() || !pendingSend.isEmpty();
                received.addAll(pendingSend);
                pendingSend.clear();
                while (!received.isEmpty()) {
                    int slot = received.poll();
                    if (!sent[slot]) {
                        pendingSend.add(slot);
                        continue;
                    }
                    long now = System.nanoTime();
                    if (recvSize[slot] != c.blockBytes || recvBuf[slot].getLong(0) != block[slot]) {
                        throw new IllegalStateException("block " + block[slot] + " arrived wrong: " + recvSize[slot]
                                + " bytes, index " + recvBuf[slot].getLong(0));
                    }
                    if (measuring) {
                        stats.add(now - startNs[slot], c.blockBytes);
                    }
                    done++;
                    if (!measuring && done == c.warmup) {
                        measuring = true;
                        t0 = System.nanoTime();
                        cpu0 = UcxFetch.cpuNanos();
                    }
                    free.add(slot);
                }
                if (events == 0 && !acted) {
                    idle(c, worker);
                }
            }
            long t1 = System.nanoTime();
            long cpu1 = UcxFetch.cpuNanos();
            // orderly goodbye, bounded: the mappers see the endpoints close rather than a reset
            List<UcpRequest> closing = new ArrayList<>();
            for (UcpEndpoint ep : eps) {
                closing.add(ep.closeNonBlockingFlush());
            }
            long until = System.nanoTime() + 2_000_000_000L;
            while (System.nanoTime() < until && closing.stream().anyMatch(q -> q != null && !q.isCompleted())) {
                worker.progress();
            }
            return new long[] {t0, t1, cpu0, cpu1};
        }
    }
}
