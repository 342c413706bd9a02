"""Benchmark: how faithfully the fabric delivers configured rates, and what a run costs in overhead.

    .venv/bin/python benchmarks/link_fidelity.py [--seconds 5] [--out docs/benchmarks-link.json]

Part 1 (fidelity): iperf3 TCP goodput between two hosts through the shared topology's shaped
bottleneck at 10 Mbit/s, 100 Mbit/s, 1 Gbit/s and 5 Gbit/s, with offloads off (the default: the
queue sees real packets) and on (GSO/TSO super-packets: cheaper, coarser queues). Goodput counts
TCP payload only, so the ideal ratio is 1448/1514 = 0.956 of the configured (L2) rate.
Part 2 (overhead): fabric up, Spark cluster up, fabric + cluster teardown, and the per-run
overhead with cluster reuse (run wall time minus Spark job time) from a tiny 3-run experiment.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric
from shufflelab.emulate.runner import EmulateRunner
from shufflelab.emulate.spark import ClusterSpec, SparkCluster
from shufflelab.results import Store

PAYLOAD_SHARE = 1448 / 1514  # TCP payload per Ethernet frame with timestamps, MTU 1500


def _spec(rate: float, offloads: bool, extra: dict[str, Any] | None = None) -> S.ExperimentSpec:
    d: dict[str, Any] = {
        "experiment": {"name": "bench", "repetitions": 3, "run_timeout_s": 300},
        "topology": {"kind": "shared", "bottleneck": {"rate_mbps": rate}, "offloads": offloads},
        "hosts": {
            "master": {"roles": ["spark-master"]},
            "w1": {"roles": ["spark-worker"]},
            "w2": {"roles": ["spark-worker"]},
            "w3": {"roles": ["spark-worker"]},
        },
        "workload": {"name": "sort-aggregate", "params": {"rows": 100_000, "partitions": 6}},
    }
    d.update(extra or {})
    return S.parse(d)


def fidelity(seconds: int) -> list[dict[str, Any]]:
    rows = []
    for offloads in (False, True):
        for rate in (10, 100, 1000, 5000):
            sp = _spec(rate, offloads)
            net = T.build(sp)
            with netns.lease() as lz, NamespaceFabric(lz, net, offloads=offloads) as fab:
                fab.configure(netplan.of(sp, fab.network))
                dst = net.host_addresses["w2"]
                srv = netns.NamespaceProcess(fab.ns["w2"], ["iperf3", "-s", "-1", "-B", dst], lz.scratch / "s.log")
                time.sleep(0.5)
                out = netns.run(
                    ["iperf3", "-c", dst, "-t", str(seconds), "-O", "1", "-J"],
                    ns=fab.ns["w1"],
                    timeout=seconds + 30,
                )
                srv.stop()
                bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
                row = {
                    "rate_mbps": rate,
                    "offloads": offloads,
                    "goodput_mbps": round(bps / 1e6, 2),
                    "goodput_over_rate": round(bps / (rate * 1e6), 3),
                    "wire_over_rate": round(bps / PAYLOAD_SHARE / (rate * 1e6), 3),
                }
                rows.append(row)
                print(row, flush=True)
    return rows


def overhead() -> dict[str, Any]:
    sp = _spec(1000, False)
    net = T.build(sp)
    res: dict[str, Any] = {}
    with netns.lease() as lz:
        t0 = time.monotonic()
        fab = NamespaceFabric(lz, net)
        fab.up()
        fab.configure(netplan.of(sp, fab.network))
        res["fabric_up_s"] = round(time.monotonic() - t0, 2)
        cl = SparkCluster(
            ClusterSpec.of(sp),
            fab.ns,
            net.host_addresses,
            lz.scratch / "spark",
            lz.scratch / "logs",
        )
        t1 = time.monotonic()
        cl.start()
        res["cluster_up_s"] = round(time.monotonic() - t1, 2)
        t2 = time.monotonic()
        cl.stop()
        fab.down()
        res["teardown_s"] = round(time.monotonic() - t2, 2)
    with tempfile.TemporaryDirectory() as tmp:
        runner = EmulateRunner(sp, "bench", Path(tmp))
        t3 = time.monotonic()
        runner.run()
        total = time.monotonic() - t3
        runs = Store(Path(tmp) / "bench.duckdb").query("SELECT * FROM runs ORDER BY started_at")
    reuse = runs.iloc[1:]
    per_run = (reuse["wall_s"] - reuse["job_time_s"]).tolist()
    res.update(
        experiment_total_s=round(total, 1),
        runs=len(runs),
        job_time_s=[round(x, 1) for x in runs["job_time_s"]],
        session_start_s=[round(x, 1) for x in runs["session_s"]],
        per_run_overhead_with_reuse_s=[round(x, 1) for x in per_run],
        per_run_overhead_mean_s=round(statistics.mean(per_run), 1) if per_run else None,
    )
    print(res, flush=True)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks-link.json"))
    a = ap.parse_args()
    result = {"fidelity": fidelity(a.seconds)}
    if not a.skip_overhead:
        result["overhead"] = overhead()
    result["command"] = " ".join(["benchmarks/link_fidelity.py", *sys.argv[1:]])
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
