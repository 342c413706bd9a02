"""One-way delay probe between two namespaces of one host (same clock on both ends).

``python -m shufflelab.switch.owd recv PORT COUNT`` (in the receiver's namespace) prints one line
per datagram: the kernel's receive timestamp (SO_TIMESTAMPNS, taken when the packet arrived, so the
receiver's scheduling does not count) minus the sender's timestamp carried in the payload, in ns.
``python -m shufflelab.switch.owd send HOST PORT COUNT INTERVAL_S`` sends the datagrams, each
stamped with CLOCK_REALTIME just before ``sendto``. Both ends read the same clock, so the
difference is the one-way delay through the path (plus the sender's stamp-to-wire time, which a
no-delay baseline measures and the benchmark subtracts).
"""

from __future__ import annotations

import socket
import struct
import sys
import time

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def recv(port: int, count: int, timeout_s: float = 30.0) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind(("0.0.0.0", port))
    s.settimeout(timeout_s)
    print("ready", flush=True)
    out = []
    try:
        for _ in range(count):
            data, anc, _flags, _addr = s.recvmsg(64, 64)
            sent = struct.unpack("!q", data[:8])[0]
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("@qq", cdata[:16])
                    out.append(sec * 1_000_000_000 + nsec - sent)
    except TimeoutError:
        pass
    print("\n".join(str(x) for x in out), flush=True)


def send(host: str, port: int, count: int, interval_s: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    nxt = time.monotonic()
    for _ in range(count):
        s.sendto(struct.pack("!q", time.time_ns()) + bytes(56), (host, port))
        nxt += interval_s
        time.sleep(max(0.0, nxt - time.monotonic()))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "recv":
        recv(int(a[1]), int(a[2]))
    elif a and a[0] == "send":
        send(a[1], int(a[2]), int(a[3]), float(a[4]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
