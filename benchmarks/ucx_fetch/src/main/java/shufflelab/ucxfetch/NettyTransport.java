package shufflelab.ucxfetch;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SelectStrategy;
import io.netty.channel.SelectStrategyFactory;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.FixedLengthFrameDecoder;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import shufflelab.ucxfetch.UcxFetch.Config;

/**
 * The fetch protocol over plain TCP with Netty, each side on one event-loop thread.
 *
 * <p>Request: 16 bytes (slot, block index, padding). Response: 12-byte header (slot, length) and
 * the block, written from the mapper's direct buffer without a copy. The reducer collects a
 * block's pieces as they arrive into a composite buffer (no copy, as Spark's frame decoder does),
 * checks its index and releases it. With epoll, {@code poll} uses Netty's busy-wait select
 * strategy (epoll_wait with a zero timeout in a loop) and {@code wakeup} the default; NIO has no
 * busy-wait and is {@code wakeup} only.
 */
final class NettyTransport {
    private NettyTransport() {}

    static final int REQ_BYTES = 16;
    static final int HDR_BYTES = 12;

    static boolean epoll(Config c) {
        if (c.nettyIo.equals("epoll")) {
            if (!Epoll.isAvailable()) {
                throw new IllegalStateException("netty epoll unavailable", Epoll.unavailabilityCause());
            }
            return true;
        }
        if (c.progress.equals("poll")) {
            throw new IllegalArgumentException("--progress poll needs --netty-io epoll");
        }
        return false;
    }

    static EventLoopGroup group(Config c) {
        IoHandlerFactory f;
        if (epoll(c)) {
            SelectStrategyFactory strategy = c.progress.equals("poll")
                    ? () -> (supplier, hasTasks) -> hasTasks ? supplier.get() : SelectStrategy.BUSY_WAIT
                    : io.netty.channel.DefaultSelectStrategyFactory.INSTANCE;
            f = EpollIoHandler.newFactory(0, strategy);
        } else {
            f = NioIoHandler.newFactory();
        }
        return new MultiThreadIoEventLoopGroup(1, f);
    }

    static final class NettyServer implements UcxFetch.Server {
        @Override
        public void serve(Config c, ByteBuffer[] blocks, UcxFetch.ServeStats stats, Runnable ready) throws Exception {
            ByteBuf[] blockBufs = new ByteBuf[blocks.length];
            for (int i = 0; i < blocks.length; i++) {
                blockBufs[i] = Unpooled.wrappedBuffer(blocks[i]);
            }
            EventLoopGroup group = group(c);
            Class<? extends ServerChannel> cls = epoll(c) ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
            ServerBootstrap b = new ServerBootstrap()
                    .group(group)
                    .channel(cls)
                    .childOption(ChannelOption.TCP_NODELAY, true)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(new FixedLengthFrameDecoder(REQ_BYTES), new ChannelInboundHandlerAdapter() {
                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    ByteBuf req = (ByteBuf) msg;
                                    long slot = req.getLong(0);
                                    int block = req.getInt(8);
                                    req.release();
                                    ByteBuf hdr = ctx.alloc().directBuffer(HDR_BYTES).writeLong(slot).writeInt(c.blockBytes);
                                    ctx.write(hdr, ctx.voidPromise());
                                    ctx.write(blockBufs[block % blockBufs.length].retainedDuplicate())
                                            .addListener(f -> {
                                                if (f.isSuccess()) {
                                                    stats.served(c.blockBytes);
                                                }
                                            });
                                }

                                @Override
                                public void channelReadComplete(ChannelHandlerContext ctx) {
                                    ctx.flush();
                                }

                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                    ctx.close(); // a reducer that went away
                                }
                            });
                        }
                    });
            Channel server = b.bind(c.bind, c.port).sync().channel();
            ready.run();
            server.closeFuture().sync();
        }
    }

    /** Reducer state, touched only by the event-loop thread until {@code result} completes. */
    static final class FetchState {
        final Config c;
        final UcxFetch.FetchStats stats;
        final CompletableFuture<long[]> result = new CompletableFuture<>();
        Channel[] chans;
        final long[] startNs;
        final int[] block;
        final ArrayDeque<Integer> free = new ArrayDeque<>();
        final long total;
        final int offset;
        long issued;
        long done;
        boolean measuring;
        long t0;
        long cpu0;

        FetchState(Config c, UcxFetch.FetchStats stats) {
            this.c = c;
            this.stats = stats;
            startNs = new long[c.inFlight];
            block = new int[c.inFlight];
            for (int i = 0; i < c.inFlight; i++) {
                free.add(i);
            }
            total = c.warmup + stats.latNs.length;
            offset = ThreadLocalRandom.current().nextInt(c.blocks);
            measuring = c.warmup == 0;
            t0 = System.nanoTime();
            cpu0 = UcxFetch.cpuNanos();
        }

        void issue() {
            boolean[] touched = new boolean[chans.length];
            while (!free.isEmpty() && issued < total) {
                int slot = free.poll();
                long seq = issued++;
                int mapper = (int) (seq % chans.length);
                block[slot] = (int) ((seq / chans.length + offset) % c.blocks);
                Channel ch = chans[mapper];
                ByteBuf req = ch.alloc().directBuffer(REQ_BYTES).writeLong(slot).writeInt(block[slot]).writeInt(0);
                startNs[slot] = System.nanoTime();
                ch.write(req, ch.voidPromise());
                touched[mapper] = true;
            }
            for (int i = 0; i < chans.length; i++) {
                if (touched[i]) {
                    chans[i].flush();
                }
            }
        }

        void completed(int slot, ByteBuf data) {
            long now = System.nanoTime();
            try {
                long idx = data.getLong(0);
                if (data.readableBytes() != c.blockBytes || idx != block[slot]) {
                    fail(new IllegalStateException("block " + block[slot] + " arrived wrong: " + data.readableBytes()
                            + " bytes, index " + idx));
                    return;
                }
            } finally {
                data.release();
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
            if (done == total) {
                result.complete(new long[] {t0, System.nanoTime(), cpu0, UcxFetch.cpuNanos()});
            } else {
                issue();
            }
        }

        void fail(Throwable t) {
            result.completeExceptionally(t);
        }
    }

    /** Splits one connection's byte stream into responses without copying the payload. */
    static final class FetchHandler extends ChannelInboundHandlerAdapter {
        final FetchState st;
        final ByteBuf hdr = Unpooled.buffer(HDR_BYTES);
        CompositeByteBuf body;
        int slot;
        int remaining;

        FetchHandler(FetchState st) {
            this.st = st;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            try {
                while (in.isReadable() && !st.result.isDone()) {
                    if (body == null) {
                        in.readBytes(hdr, Math.min(in.readableBytes(), hdr.writableBytes()));
                        if (hdr.isWritable()) {
                            return;
                        }
                        slot = (int) hdr.getLong(0);
                        remaining = hdr.getInt(8);
                        hdr.clear();
                        body = ctx.alloc().compositeDirectBuffer(Integer.MAX_VALUE);
                    }
                    int n = Math.min(remaining, in.readableBytes());
                    body.addComponent(true, in.readRetainedSlice(n));
                    remaining -= n;
                    if (remaining == 0) {
                        CompositeByteBuf done = body;
                        body = null;
                        st.completed(slot, done);
                    }
                }
            } finally {
                in.release();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (body != null) {
                body.release();
                body = null;
            }
            st.fail(new IllegalStateException("connection to " + ctx.channel().remoteAddress() + " closed"));
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            st.fail(cause);
            ctx.close();
        }
    }

    static final class NettyClient implements UcxFetch.Client {
        @Override
        public long[] fetch(Config c, UcxFetch.FetchStats stats) throws Exception {
            EventLoopGroup group = group(c);
            FetchState st = new FetchState(c, stats);
            try {
                Bootstrap b = new Bootstrap()
                        .group(group)
                        .channel(epoll(c) ? EpollSocketChannel.class : NioSocketChannel.class)
                        .option(ChannelOption.TCP_NODELAY, true)
                        .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 10_000)
                        .handler(new ChannelInitializer<SocketChannel>() {
                            @Override
                            protected void initChannel(SocketChannel ch) {
                                ch.pipeline().addLast(new FetchHandler(st));
                            }
                        });
                Channel[] chans = new Channel[c.mappers.size()];
                for (int i = 0; i < chans.length; i++) {
                    chans[i] = b.connect(c.mappers.get(i)).sync().channel();
                }
                st.chans = chans;
                group.next().execute(() -> {
                    st.t0 = System.nanoTime();
                    st.cpu0 = UcxFetch.cpuNanos();
                    st.issue();
                });
                long[] w = st.result.get();
                for (Channel ch : chans) {
                    ch.close().await(2, TimeUnit.SECONDS);
                }
                return w;
            } finally {
                group.shutdownGracefully(0, 1, TimeUnit.SECONDS).await(3, TimeUnit.SECONDS);
            }
        }
    }
}
