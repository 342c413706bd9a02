"""Benchmark: the simulator's flow model vs ns-3 on a micro-scenario.

    .venv/bin/pip install ns3          # the PyPI wheel ships ns-3's C++ headers and libraries
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3.py [--repeat 3] [--out /tmp/sim-vs-ns3.md]

Scenario: 4 TCP flows x 100 MB (cubic, ECN) through a 1 Gbit/s RED/ECN bottleneck, with and
without constant-rate UDP at 50 % of the bottleneck. ns-3 side: ``benchmarks/ns3/bottleneck.cc``,
compiled here with g++ against the wheel's headers and libraries (cached by source hash under
``~/.cache/shufflelab/ns3-bench``). Simulator side: the calibration model's network
(``run_spark``, Rust core when built): one stage of 4 tasks, each one flow of 100 MB plus TCP/IP/PPP
headers, sharing the link max-min; UDP as a capacity reduction (loss-based TCP gets ``C − U``).
Reported: each side's mean flow completion time (FCT), the simulator's FCT error relative to
ns-3, and the wall-time ratio (ns-3 wall / simulator wall, per scenario run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from shufflelab.artifacts import cache_root

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "ns3" / "bottleneck.cc"
CACHE = cache_root() / "ns3-bench"
FLOWS, MEGABYTES, RATE_GBPS = 4, 100.0, 1.0
MSS, WIRE_PER_SEGMENT = 1448, 1448 + 32 + 20 + 2  # TCP payload; + TCP (timestamps) + IPv4 + PPP headers


def find_ns3() -> tuple[Path, Path, list[str]]:
    """(include dir, lib dir, library names) of the installed ``ns3`` wheel."""
    roots = {Path(sysconfig.get_paths()["purelib"]), Path(sysconfig.get_paths()["platlib"])}
    header = None
    for root in roots:
        for p in root.rglob("core-module.h"):
            if p.parent.name == "ns3":
                header = p
                break
        if header:
            break
    if header is None:
        raise SystemExit("ns-3 headers not found: install the wheel with `.venv/bin/pip install ns3`")
    include = header.parent.parent
    libs: list[Path] = []
    for root in roots:
        libs += [p for p in root.rglob("libns3*.so") if p.is_file() or p.is_symlink()]
    if not libs:
        raise SystemExit("ns-3 libraries (libns3*.so) not found next to the wheel's headers")
    libdir = sorted({p.parent for p in libs}, key=lambda d: -sum(1 for q in libs if q.parent == d))[0]
    names = sorted({p.name[3:-3] for p in libs if p.parent == libdir})
    return include, libdir, names


def compile_ns3() -> Path:
    include, libdir, names = find_ns3()
    key = hashlib.sha256(SOURCE.read_bytes() + str(libdir).encode() + " ".join(names).encode()).hexdigest()[:16]
    binary = CACHE / f"bottleneck-{key}"
    if binary.exists():
        return binary
    CACHE.mkdir(parents=True, exist_ok=True)
    gxx = shutil.which("g++") or "g++"
    cmd = [gxx, "-std=c++20", "-O2", str(SOURCE), "-I", str(include), "-L", str(libdir), f"-Wl,-rpath,{libdir}"]
    cmd += [f"-l{n}" for n in names] + ["-o", str(binary)]
    print("compiling:", " ".join(cmd[:8]), "...", flush=True)
    subprocess.run(cmd, check=True)
    return binary


def run_ns3(binary: Path, udp_share: float) -> dict[str, Any]:
    args = [str(binary), f"--flows={FLOWS}", f"--megabytes={MEGABYTES}", f"--rateGbps={RATE_GBPS}"]
    args.append(f"--udpShare={udp_share}")
    t0 = time.perf_counter()
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["process_wall_s"] = time.perf_counter() - t0
    return result


def sim_config(udp_share: float) -> dict[str, Any]:
    c = RATE_GBPS * 1e9 / 8
    wire = MEGABYTES * 1e6 / MSS * WIRE_PER_SEGMENT
    task = {"latency_s": 0.0, "cpu_s": 0.0, "fetch_bytes": [wire], "local_fraction": 0.0}
    return {
        "platform": {
            "slots": FLOWS,
            "host_cores": 1.0,
            "link_bytes_per_s": c,
            "cross_bytes_per_s": udp_share * c,
            "queue_bytes": 600 * 1502.0,
            "tcp": "loss",
            "mss_wire_bytes": float(WIRE_PER_SEGMENT),
        },
        "stages": [{"stage_id": 0, "gap_s": 0.0, "tasks": [dict(task) for _ in range(FLOWS)]}],
        "tail_s": 0.0,
    }


def run_sim(udp_share: float, repeat: int) -> dict[str, Any]:
    sys.path.insert(0, str(HERE.parent / "src"))
    from shufflelab.sim.calibration_model import run_model

    cfg = sim_config(udp_share)
    res = run_model(cfg)
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        run_model(cfg)
    wall = (time.perf_counter() - t0) / n
    return {"fct_s": [t["end_s"] for t in res["tasks"]], "wall_s": wall, "engine": res["engine"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="ns-3 runs per scenario (best wall time kept)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/sim-vs-ns3.md"))
    a = ap.parse_args()
    binary = compile_ns3()
    rows = []
    for share in (0.0, 0.5):
        ns = [run_ns3(binary, share) for _ in range(a.repeat)]
        sim = run_sim(share, a.repeat)
        ns_fct = statistics.mean(statistics.mean(r["fct_s"]) for r in ns)
        sim_fct = statistics.mean(sim["fct_s"])
        ns_wall = min(r["wall_s"] for r in ns)
        row = {
            "scenario": f"{FLOWS} x {MEGABYTES:g} MB cubic+ECN, RED {RATE_GBPS:g} Gbit/s, UDP {share * 100:g} %",
            "ns3_fct_s": ns_fct,
            "ns3_fct_range_s": [min(min(r["fct_s"]) for r in ns), max(max(r["fct_s"]) for r in ns)],
            "ns3_udp_rx_mbps": statistics.mean(r["udp_rx_bps"] for r in ns) / 1e6,
            "sim_fct_s": sim_fct,
            "fct_error": (sim_fct - ns_fct) / ns_fct,
            "ns3_wall_s": ns_wall,
            "sim_wall_s": sim["wall_s"],
            "speed_ratio": ns_wall / sim["wall_s"],
            "sim_engine": sim["engine"],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    lines = [
        "| scenario | ns-3 mean FCT (s) [min–max] | sim FCT (s) | FCT error | ns-3 wall (s) | sim wall (ms) "
        "| ns-3 / sim |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lo, hi = r["ns3_fct_range_s"]
        lines.append(
            f"| {r['scenario']} | {r['ns3_fct_s']:.3f} [{lo:.3f}–{hi:.3f}] | {r['sim_fct_s']:.3f} | "
            f"{r['fct_error'] * 100:+.1f} % | {r['ns3_wall_s']:.2f} | {r['sim_wall_s'] * 1e3:.3f} | "
            f"{r['speed_ratio']:,.0f}× |"
        )
    a.out.write_text("\n".join(lines) + "\n")
    (a.out.with_suffix(".json")).write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
