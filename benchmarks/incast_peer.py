"""The two ends of benchmarks/incast_linux.py's incast, each run inside its namespace.

    python incast_peer.py serve PORT FLOWS BYTES      # prints one JSON line: each flow's last byte
    python incast_peer.py send ADDR PORT FLOWS BYTES CC

``serve`` accepts FLOWS connections, reads each to its end and prints
``{"ends": [...]}`` (CLOCK_MONOTONIC of each flow's last byte, in the order accepted) once all are
done. ``send`` opens FLOWS connections with congestion control CC, prints ``ready``, waits for a
line on stdin, notes the instant (``{"start": t}``) and writes BYTES on every connection at once
(one thread each, released together), closing each when written. CLOCK_MONOTONIC is the machine's, shared by the
namespaces, so the parent subtracts the two.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time

TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)


def serve(port: int, flows: int, nbytes: int) -> None:
    lst = socket.create_server(("0.0.0.0", port), backlog=flows)
    print("listening", flush=True)
    ends: list[float] = [0.0] * flows
    got: list[int] = [0] * flows

    def read(i: int, conn: socket.socket) -> None:
        with conn:
            while True:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                got[i] += len(chunk)
                ends[i] = time.monotonic()

    threads = []
    for i in range(flows):
        conn, _ = lst.accept()
        t = threading.Thread(target=read, args=(i, conn))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    if any(g != nbytes for g in got):
        print(json.dumps({"error": f"bytes received {got}, expected {nbytes} each"}), flush=True)
        sys.exit(1)
    print(json.dumps({"ends": ends}), flush=True)


def send(addr: str, port: int, flows: int, nbytes: int, cc: str) -> None:
    socks = []
    for _ in range(flows):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
        s.connect((addr, port))
        socks.append(s)
    payload = b"\0" * nbytes
    print("ready", flush=True)
    sys.stdin.readline()

    go = threading.Barrier(flows + 1)

    def write(s: socket.socket) -> None:
        with s:
            go.wait()
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            s.recv(1)  # the receiver's close: the data is acknowledged

    threads = [threading.Thread(target=write, args=(s,)) for s in socks]
    for t in threads:
        t.start()
    start = time.monotonic()
    go.wait()  # every writer is waiting: release them together
    print(json.dumps({"start": start}), flush=True)
    for t in threads:
        t.join()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
