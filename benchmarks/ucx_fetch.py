"""Benchmark: a shuffle-fetch microbenchmark over UCX (JUCX on UCX's TCP transport) against the same
pattern over Netty/TCP, through the emulated fabric.

    .venv/bin/python benchmarks/ucx_fetch.py [--quick] [--reps 1] [--out docs/benchmarks-ucx.json]

The Java side is ``benchmarks/ucx_fetch`` (a Maven project, built here: offline first, then
online). Shared topology, hosts m1 m2 (mappers) and r1 r2 (reducers), one shaped bottleneck
(default 1000 Mbit/s, offloads off). Each mapper holds ``--blocks`` blocks of ``--block-kb`` KiB in
memory and answers "block i" with the bytes; each reducer fetches ``--total-mb`` MB round-robin
from both mappers with at most ``--in-flight`` requests outstanding, after a few unmeasured
warm-up fetches. Every combination of transport (netty, ucx) and progress mode runs with the
reducers at once:

- ``poll``: busy-polling (UCX: ``worker.progress()`` in a loop; Netty: epoll busy-wait);
- ``wakeup``: sleeping in the kernel when idle (UCX: ``waitForEvents``, which arms the worker;
  Netty: the default epoll_wait).

Per case: aggregate goodput (all reducers' bytes over the union of their measured windows),
request latency p50/p99 (median over reducers of each reducer's percentile), CPU seconds per GB on
the reducers (their measured window) and on the mappers (first to last answered request), from each
JVM's process CPU time (10 ms ticks: give short runs little weight), and the bytes that left the
shaped bottleneck per payload byte (about 1.06 when every fetch crossed the fabric). With 2 cores,
a busy-polling JVM takes a core from everything else on the box: the poll cases show that cost.

UCX runs with ``UCX_TLS=tcp`` and ``UCX_NET_DEVICES=eth0`` (Debian's libucx0; JUCX from Maven
Central, the release nearest below the Debian UCX, see ``ucx_fetch/pom.xml``). Should UCX fail
here, the Netty cases still run and the JSON records the failure's text under ``ucx.error``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "benchmarks" / "ucx_fetch"
JAR = PROJECT / "target" / "ucx-fetch.jar"
MAPPERS = ("m1", "m2")
REDUCERS = ("r1", "r2")
BASE_PORT = 17100
UCX_ENV = {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "eth0", "UCX_WARN_UNUSED_ENV_VARS": "n"}
JVM_OPTS = ["-Xms256m", "-Xmx1g", "-XX:+UseSerialGC"]
CASES = (("netty", "wakeup"), ("netty", "poll"), ("ucx", "wakeup"), ("ucx", "poll"))


def _spec(rate_mbps: float, offloads: bool) -> S.ExperimentSpec:
    # the "mapreduce" role marks plain hosts: no Spark is started by this benchmark
    return S.parse(
        {
            "experiment": {"name": "ucx-fetch", "repetitions": 1, "run_timeout_s": 600},
            "topology": {"kind": "shared", "bottleneck": {"rate_mbps": rate_mbps}, "offloads": offloads},
            "hosts": {h: {"roles": ["mapreduce"]} for h in (*MAPPERS, *REDUCERS)},
            "workload": {"name": "mapreduce", "params": {}},
        }
    )


def build_jar() -> Path:
    """Build the shaded jar unless it is newer than every source; offline first, then online."""
    sources = [PROJECT / "pom.xml", *PROJECT.glob("src/**/*.java")]
    if JAR.exists() and all(JAR.stat().st_mtime >= p.stat().st_mtime for p in sources):
        return JAR
    errors = []
    for argv in (["mvn", "-q", "-o", "package"], ["mvn", "-q", "package"]):
        proc = subprocess.run(argv, cwd=PROJECT, capture_output=True, text=True, timeout=900)
        if proc.returncode == 0 and JAR.exists():
            return JAR
        errors.append(f"`{' '.join(argv)}` failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}")
    raise RuntimeError("\n".join(errors))


def _pom_property(name: str) -> str | None:
    m = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", (PROJECT / "pom.xml").read_text())
    return m.group(1) if m else None


def versions() -> dict[str, Any]:
    def out(argv: list[str]) -> str | None:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        except (FileNotFoundError, subprocess.TimeoutExpired):
            return None
        return p.stdout.strip() if p.returncode == 0 else None

    ucx_info = out(["ucx_info", "-v"])
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20).stderr.splitlines()
    return {
        "debian_libucx0": out(["dpkg-query", "-W", "-f=${Version}", "libucx0"]),
        "ucx_info": ucx_info.splitlines()[0].lstrip("# ") if ucx_info else None,
        "jucx": _pom_property("jucx.version"),
        "netty": _pom_property("netty.version"),
        "java": java[0] if java else None,
    }


def _json_lines(log: Path) -> list[dict[str, Any]]:
    rows = []
    text = log.read_text(errors="replace") if log.exists() else ""
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                rows.append(json.loads(line))
    return rows


def _native_errors(log: Path, limit: int = 12) -> list[str]:
    """The lines of a log that carry UCX's or the JVM's own error text."""
    text = log.read_text(errors="replace") if log.exists() else ""
    keep = [
        ln.strip()
        for ln in text.splitlines()
        if not ln.startswith("{") and re.search(r"ERROR|WARN|Exception|Error|error|UCX|ucp|uct|ucs", ln)
    ]
    return keep[:limit]


class CaseFailure(RuntimeError):
    pass


def _wait_ready(proc: netns.NamespaceProcess, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(r.get("event") == "ready" for r in _json_lines(log)):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    state = "exited" if proc.poll() is not None else f"not ready after {timeout_s:.0f} s"
    detail = [r["error"] for r in _json_lines(log) if "error" in r] + _native_errors(log)
    raise CaseFailure(f"mapper {proc.ns} {state}: " + " | ".join(detail or ["(empty log)"]))


def run_case(
    fab: NamespaceFabric,
    net: T.Network,
    scratch: Path,
    transport: str,
    progress: str,
    port: int,
    a: argparse.Namespace,
) -> dict[str, Any]:
    # JUCX and Netty unpack their native libraries into java.io.tmpdir: keep that in the lease's scratch
    tmp = fab.lease.scratch / "jvm-tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    java = ["java", *JVM_OPTS, f"-Djava.io.tmpdir={tmp}", "-jar", str(JAR)]
    common = ["--transport", transport, "--progress", progress, "--blocks", str(a.blocks)]
    common += ["--block-bytes", str(a.block_kb * 1024)]
    env = dict(UCX_ENV) if transport == "ucx" else {}
    tag = f"{transport}-{progress}-{port}"
    servers: dict[str, tuple[netns.NamespaceProcess, Path]] = {}
    clients: dict[str, tuple[netns.NamespaceProcess, Path]] = {}
    try:
        for h in MAPPERS:
            log = scratch / f"{tag}-{h}.log"
            argv = [*java, "serve", *common, "--bind", net.host_addresses[h], "--port", str(port)]
            servers[h] = (netns.NamespaceProcess(fab.ns[h], argv, log, env=env), log)
        for _h, (proc, log) in servers.items():
            _wait_ready(proc, log, timeout_s=30)
        mappers = ",".join(f"{net.host_addresses[h]}:{port}" for h in MAPPERS)
        before = [fab.counters(p) for p in net.bottlenecks]
        total = int(a.total_mb * 1e6)
        for h in REDUCERS:
            log = scratch / f"{tag}-{h}.log"
            argv = [*java, "fetch", *common, "--mappers", mappers, "--in-flight", str(a.in_flight)]
            argv += ["--total-bytes", str(total), "--warmup", str(a.warmup), "--timeout-s", str(a.timeout_s)]
            clients[h] = (netns.NamespaceProcess(fab.ns[h], argv, log, env=env), log)
        fetched: dict[str, dict[str, Any]] = {}
        errors: list[str] = []
        deadline = time.monotonic() + a.timeout_s + 30
        for h, (proc, log) in clients.items():
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.stop(grace_s=2.0)
                errors.append(f"reducer {h}: no result within {a.timeout_s + 30:.0f} s")
                continue
            rows = [r for r in _json_lines(log) if r.get("role") == "fetch"]
            if not rows or "error" in rows[-1]:
                msg = rows[-1]["error"] if rows else f"exit {proc.poll()} without a result"
                errors.append(f"reducer {h}: {msg} | " + " | ".join(_native_errors(log)))
            else:
                fetched[h] = rows[-1]
        after = [fab.counters(p) for p in net.bottlenecks]
    finally:
        for proc, _log in clients.values():
            proc.stop(grace_s=2.0)
        for proc, _log in servers.values():
            proc.stop(grace_s=5.0)  # SIGTERM: the mapper prints its totals on the way out
    served = {}
    for h, (_proc, log) in servers.items():
        rows = [r for r in _json_lines(log) if r.get("role") == "serve" and "requests" in r]
        if rows:
            served[h] = rows[-1]
    if errors:
        raise CaseFailure("; ".join(errors))
    row = summarize(transport, progress, fetched, served)
    wire = sum(y.tx_bytes - x.tx_bytes for x, y in zip(before, after, strict=True))
    payload = sum((r["requests"] + a.warmup) * r["block_bytes"] for r in fetched.values())  # with the warm-up
    # every byte between two hosts leaves through the shaped bottleneck: proof the traffic took the fabric
    row["bottleneck_bytes"] = wire
    row["bottleneck_over_payload"] = round(wire / payload, 3) if payload else None
    row["bottleneck_drops"] = sum(y.drops - x.drops for x, y in zip(before, after, strict=True))
    return row


def summarize(
    transport: str, progress: str, fetched: dict[str, dict[str, Any]], served: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    cb = sum(r["bytes"] for r in fetched.values())
    ccpu = sum(r["cpu_seconds"] for r in fetched.values())
    sb = sum(r["bytes"] for r in served.values())
    scpu = sum(r["cpu_seconds_active"] for r in served.values())
    span = max(r["end_epoch_s"] for r in fetched.values()) - min(r["start_epoch_s"] for r in fetched.values())
    return {
        "transport": transport,
        "progress": progress,
        # all reducers' bytes over the union of their measured windows (wall clock, same kernel)
        "aggregate_gbps": round(cb * 8 / 1e9 / span, 4) if span > 0 else None,
        "sum_of_reducer_gbps": round(sum(r["throughput_gbps"] for r in fetched.values()), 4),
        "latency_us_p50": round(statistics.median(r["latency_us_p50"] for r in fetched.values()), 1),
        "latency_us_p99": round(statistics.median(r["latency_us_p99"] for r in fetched.values()), 1),
        "reducer_cpu_s_per_gb": round(ccpu / (cb / 1e9), 3) if cb else None,
        "mapper_cpu_s_per_gb": round(scpu / (sb / 1e9), 3) if sb else None,
        "reducers": fetched,
        "mappers": served,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = f"{'transport':9} {'progress':8} {'rep':>3} {'Gbit/s':>7} {'p50 us':>9} {'p99 us':>9}"
    head += f" {'red s/GB':>9} {'map s/GB':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['transport']:9} {r['progress']:8} {r['rep']:>3} failed: {r['error'][:160]}")
            continue
        lines.append(
            f"{r['transport']:9} {r['progress']:8} {r['rep']:>3} {r['aggregate_gbps']:>7.3f}"
            f" {r['latency_us_p50']:>9.0f} {r['latency_us_p99']:>9.0f}"
            f" {r['reducer_cpu_s_per_gb']:>9.3f} {r['mapper_cpu_s_per_gb'] or 0:>9.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a short functional run: 64 MB per reducer, 1 repetition")
    ap.add_argument("--rate-mbps", type=float, default=1000)
    ap.add_argument("--offloads", action="store_true")
    ap.add_argument("--blocks", type=int, default=16, help="blocks per mapper")
    ap.add_argument("--block-kb", type=int, default=1024)
    ap.add_argument("--in-flight", type=int, default=8, help="requests in flight per reducer")
    ap.add_argument("--total-mb", type=float, default=512, help="MB (10^6 B) each reducer fetches")
    ap.add_argument("--warmup", type=int, default=8, help="unmeasured fetches per reducer first")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--timeout-s", type=float, default=120, help="per reducer run")
    ap.add_argument("--cases", default=",".join(f"{t}-{p}" for t, p in CASES), help="e.g. netty-wakeup,ucx-poll")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks-ucx.json")
    ap.add_argument("--logs", type=Path, help="keep the JVMs' logs here (default: the lease's scratch, removed)")
    a = ap.parse_args(argv)
    if a.quick:
        a.total_mb = min(a.total_mb, 64)
        a.reps = 1
        a.timeout_s = min(a.timeout_s, 60)
    wanted = [tuple(c.split("-", 1)) for c in a.cases.split(",") if c]
    for c in wanted:
        if c not in CASES:
            ap.error(f"unknown case {'-'.join(c)}")

    build_jar()
    ver = versions()
    ucx: dict[str, Any] = {"ok": None, "error": None}
    if not ver["debian_libucx0"]:
        ucx.update(ok=False, error="Debian package libucx0 is not installed (scripts/setup.sh installs it)")
    print(json.dumps(ver), flush=True)

    sp = _spec(a.rate_mbps, a.offloads)
    net = T.build(sp)
    rows: list[dict[str, Any]] = []
    port = BASE_PORT
    with netns.lease() as lz, NamespaceFabric(lz, net, offloads=a.offloads) as fab:
        fab.configure(netplan.of(sp, fab.network))
        logs = a.logs.resolve() if a.logs else lz.scratch
        logs.mkdir(parents=True, exist_ok=True)
        for rep in range(a.reps):
            for transport, progress in wanted:
                port += 1  # a fresh port per case: no lingering connection state
                if transport == "ucx" and ucx["ok"] is False:
                    rows.append({"transport": transport, "progress": progress, "rep": rep, "error": ucx["error"]})
                    continue
                try:
                    row = run_case(fab, net, logs, transport, progress, port, a)
                    if transport == "ucx":
                        ucx["ok"] = True
                except CaseFailure as exc:
                    row = {"transport": transport, "progress": progress, "error": str(exc)}
                    if transport == "ucx" and ucx["error"] is None:
                        ucx.update(ok=False, error=str(exc))
                row = {"rep": rep, **row}
                rows.append(row)
                print(table([row]).splitlines()[-1], flush=True)
    result = {
        "benchmark": "ucx_fetch",
        "config": {
            "topology": "shared",
            "rate_mbps": a.rate_mbps,
            "offloads": a.offloads,
            "mappers": list(MAPPERS),
            "reducers": list(REDUCERS),
            "blocks_per_mapper": a.blocks,
            "block_bytes": a.block_kb * 1024,
            "in_flight_per_reducer": a.in_flight,
            "total_bytes_per_reducer": int(a.total_mb * 1e6),
            "warmup_fetches": a.warmup,
            "reps": a.reps,
            "ucx_env": UCX_ENV,
            "jvm_opts": JVM_OPTS,
            "cpus": os.cpu_count(),
        },
        "versions": ver,
        "ucx": ucx,
        "rows": rows,
        "command": " ".join(["benchmarks/ucx_fetch.py", *(argv if argv is not None else sys.argv[1:])]),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print()
    print(table(rows))
    if ucx["ok"] is False:
        print(f"\nUCX failed: {ucx['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
