"""Queue sampler: reads a namespace's qdisc and link counters over netlink on a fixed period.

Runs as its own process inside the namespace (``python -m shufflelab.emulate.sampler``), so the
runner's work never delays a sample. One netlink socket is kept open (no process per sample:
spawning ``tc`` each time cannot hold 100 ms under load). Samples follow an absolute schedule
(no drift) and carry the wall-clock time (epoch seconds, the clock Spark's event log uses).

Output: CSV with header ``t,dev,backlog_bytes,backlog_packets,drops,sent_bytes,sent_packets,``
``overlimits,tx_bytes,rx_bytes`` -- qdisc counters of the root qdisc plus interface counters. A
``--dev DEV/HANDLE`` (e.g. ``data0/11:``) samples the qdisc of that handle on ``DEV`` instead of its
root -- one queue (an HTB class's leaf) of several on one interface -- its rows' ``dev`` as given.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

HEADER = "t,dev,backlog_bytes,backlog_packets,drops,sent_bytes,sent_packets,overlimits,tx_bytes,rx_bytes"


def _root_stats(msgs: Any, handle: int | None = None) -> dict[str, int]:
    """The counters of the root qdisc among ``msgs`` (or, ``handle`` given, of the qdisc with it)."""
    for q in msgs:
        if (q.get("parent") == 0xFFFFFFFF) if handle is None else (q.get("handle") == handle):
            return dict(q.get_attr("TCA_STATS") or {})
    return {}


def parse_dev(dev: str) -> tuple[str, int | None]:
    """``DEV`` or ``DEV/HANDLE`` (``tc``'s hexadecimal major, ``11:``) as (interface, netlink handle;
    None: the root qdisc)."""
    name, _, handle = dev.partition("/")
    return name, (int(handle.rstrip(":"), 16) << 16) if handle else None


def sample_forever(devs: list[str], period_s: float, out: Any, max_s: float) -> int:
    from pyroute2 import IPRoute

    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    n = 0
    with IPRoute() as ipr:
        index = {d: ipr.link_lookup(ifname=parse_dev(d)[0])[0] for d in devs}
        handles = {d: parse_dev(d)[1] for d in devs}
        out.write(HEADER + "\n")
        start = time.monotonic()
        deadline = start + max_s
        k = 0
        while not stop and time.monotonic() < deadline:
            for dev, idx in index.items():
                t = time.time()
                st = _root_stats(ipr.get_qdiscs(index=idx), handles[dev])
                link = ipr.get_links(idx)[0]
                ls = link.get_attr("IFLA_STATS64") or {}
                out.write(
                    f"{t:.6f},{dev},{st.get('backlog', 0)},{st.get('qlen', 0)},{st.get('drop', 0)},"
                    f"{st.get('bytes', 0)},{st.get('packets', 0)},{st.get('overlimits', 0)},"
                    f"{ls.get('tx_bytes', 0)},{ls.get('rx_bytes', 0)}\n"
                )
            out.flush()
            n += 1
            k += 1
            next_at = start + k * period_s
            now = time.monotonic()
            if next_at > now:
                time.sleep(next_at - now)
            else:  # fell behind (machine overloaded): skip missed slots rather than burst
                k = int((now - start) / period_s) + 1
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--dev", action="append", required=True, help="interface to sample, or DEV/HANDLE: one qdisc (repeatable)"
    )
    ap.add_argument("--period-ms", type=float, default=100.0)
    ap.add_argument("--max-s", type=float, default=7200.0, help="stop after this long in any case")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    with open(args.out, "w", buffering=1) as out:
        sample_forever(args.dev, args.period_ms / 1000.0, out, args.max_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
