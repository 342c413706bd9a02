"""Bottleneck queue over time: cubic on a drop-tail port vs DCTCP-in-the-switch and VCC on a marking port.

One TCP flow (iperf3) from h1 to h2 through ``shufflelab-switch`` on a 2-host star; the h2 port
runs at 50 Mbit/s with a 400 kB buffer. Cases, back to back in one run:

- ``cubic``: h1 runs cubic without ECN, the port is drop-tail (the buffer is the only limit);
- ``dctcp``: h1 runs cubic with tcp_ecn = 1 and the switch enforces DCTCP for its flows; the port
  marks at K = 30 kB (step);
- ``vcc``: h1 is a legacy host (tcp_ecn = 0) that the switch virtualizes into DCTCP; same port.

The switch samples the port every millisecond. Output: a figure (backlog over time, K marked) and
a JSON summary (mean / p50 / p99 backlog, goodput, marks) for docs/benchmarks-switch.md.

    sudo .venv/bin/python benchmarks/switch_queue.py --out docs/figures/switch_queue.png
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

RATE_MBPS = 50.0
QUEUE = 400_000
K = 30_000


def _case(star: Any, name: str, seconds: float) -> dict[str, Any]:
    from switchlab import iperf3, received_mbps

    from shufflelab.emulate.fabric import namespace_switch
    from shufflelab.switch import Red, Switch, SwitchConfig, SwitchPort

    ecn = {"cubic": 0, "dctcp": 1, "vcc": 0}[name]
    modes = {"cubic": {}, "dctcp": {"h1": "dctcp"}, "vcc": {"h1": "vcc"}}[name]
    red = None if name == "cubic" else Red(K, K, 1.0)
    star.host_sysctl("h1", {"net.ipv4.tcp_ecn": str(ecn), "net.ipv4.tcp_congestion_control": "cubic"})
    cfg = SwitchConfig(
        ports=[SwitchPort("h1", rate_mbps=RATE_MBPS, queue_bytes=QUEUE),
               SwitchPort("h2", rate_mbps=RATE_MBPS, queue_bytes=QUEUE, red=red)],
        hosts=star.switch_hosts(modes),
        telemetry_period_ms=1,
    )  # fmt: skip
    sw = namespace_switch(star.lease, "r", cfg, switches=Switch)
    sw.start()
    try:
        res = iperf3(star, "h1", "h2", seconds)
    finally:
        summary = sw.stop() or {}
    rows = [r for r in sw.telemetry() if r["dev"] == "h2"]
    t0 = float(rows[0]["t"])
    t = [float(r["t"]) - t0 for r in rows]
    q = [float(r["backlog_bytes"]) for r in rows]
    steady = sorted(b for tt, b in zip(t, q, strict=True) if tt >= 1.0)
    return {
        "case": name,
        "t": t,
        "backlog": q,
        "mean_kb": statistics.fmean(steady) / 1e3,
        "p50_kb": steady[len(steady) // 2] / 1e3,
        "p99_kb": steady[int(0.99 * (len(steady) - 1))] / 1e3,
        "goodput_mbps": received_mbps(res),
        "marks": summary.get("ports", {}).get("h2", {}).get("marks"),
        "drops": summary.get("ports", {}).get("h2", {}).get("drops"),
        "window_rewrites": summary.get("flows", {}).get("window_rewrites"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--out", type=Path, default=Path("docs/figures/switch_queue.png"))
    args = ap.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from switchlab import build_star

    from shufflelab.emulate import netns

    results = []
    with netns.lease() as lz:
        star = build_star(lz, 2)
        for name in ("cubic", "dctcp", "vcc"):
            results.append(_case(star, name, args.seconds))
            time.sleep(0.5)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = {"cubic": "cubic, drop-tail 400 kB", "dctcp": "DCTCP in the switch, marking at K",
              "vcc": "legacy host + VCC, marking at K"}  # fmt: skip
    for r in results:
        ax.plot(
            r["t"], [b / 1e3 for b in r["backlog"]], lw=0.7, label=f"{labels[r['case']]} (mean {r['mean_kb']:.0f} kB)"
        )
    ax.axhline(K / 1e3, color="k", ls="--", lw=0.8, label="K = 30 kB")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("backlog of the 50 Mbit/s port (kB), 1 ms samples")
    ax.set_title("One TCP flow through shufflelab-switch: where each congestion control holds the queue")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    summary = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rate_mbps": RATE_MBPS,
        "queue_bytes": QUEUE,
        "k_bytes": K,
        "cases": [{k: v for k, v in r.items() if k not in ("t", "backlog")} for r in results],
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
