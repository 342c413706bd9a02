"""shufflelab's fabric simulator vs SimGrid on the 1,000-host all-to-all shuffle, side by side.

The scenario is ``experiments/sim-alltoall-1000.toml`` (25 racks x 40 hosts, 4 spines, every link
10 Gbit/s, 317 x 316 lognormal blocks of mean 10 MB, 5 fetches / 48 MiB in flight per reducer).
shufflelab runs it in a child process of this Python; SimGrid runs the same workload
(``benchmarks/simgrid/alltoall.py``) in a child of a Python that has pip ``simgrid`` (it builds
from source, 12-35 min here; a separate virtualenv keeps it out of the project's)::

    python3 -m venv /opt/simgrid-venv && /opt/simgrid-venv/bin/pip install simgrid==4.1  # needs libboost-dev, cmake
    nice -n 10 .venv/bin/python benchmarks/sim_vs_simgrid.py --simgrid-python /opt/simgrid-venv/bin/python \\
        [--leaves 25] [--maps 317 --reducers 316] [--out docs/benchmarks-sim-simgrid.json]

SimGrid is configured as the issue cites it: ``network/optim:Full``, ``network/crosstraffic:0``
(its default TCP model, LV08, otherwise: bandwidth factor 0.97, latency factor 13.01). The runs
alternate (shufflelab, SimGrid, shufflelab) so both see the same machine; per run: wall and CPU
seconds of the simulation (process start-up and the workload's construction excluded), peak
RSS, fetches and the simulated completion time. ``--leaves`` / ``--maps`` / ``--reducers`` scale
the scenario down for a quick check.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "experiments" / "sim-alltoall-1000.toml"
SIMGRID_SCRIPT = Path(__file__).resolve().parent / "simgrid" / "alltoall.py"
SIMGRID_CFG = ["network/optim:Full", "network/crosstraffic:0"]


def scenario(leaves: int | None, maps: int | None, reducers: int | None) -> dict[str, Any]:
    """The shipped spec as data, optionally scaled down."""
    import tomllib

    doc: dict[str, Any] = tomllib.loads(SPEC.read_text())
    if leaves is not None:
        doc["topology"]["leaves"] = leaves
    if maps is not None:
        doc["shuffle"]["maps"] = maps
    if reducers is not None:
        doc["shuffle"]["reducers"] = reducers
    return doc


def simgrid_params(doc: dict[str, Any], seed: int, cfg: list[str], model: str = "controller") -> dict[str, Any]:
    t, s = doc["topology"], doc["shuffle"]
    if t["host_gbps"] != t["uplink_gbps"] or t.get("host_delay_us", 1) != t.get("uplink_delay_us", 1):
        raise SystemExit("the SimGrid platform here has one link rate and latency: host and uplink must agree")
    if s["size"]["kind"] != "lognormal":
        raise SystemExit("the SimGrid side draws lognormal sizes only")
    return {
        "leaves": t["leaves"],
        "hosts_per_leaf": t["hosts_per_leaf"],
        "spines": t["spines"],
        "link_gbps": t["host_gbps"],
        "latency_us": t.get("host_delay_us", 1),
        "maps": s["maps"],
        "reducers": s["reducers"],
        "mean_bytes": s["size"]["mean_mib"] * 2**20,
        "sigma": s["size"]["sigma"],
        "max_reqs": s["max_reqs_in_flight"],
        "max_bytes": s["max_mib_in_flight"] * 2**20,
        "seed": seed,
        "cfg": cfg,
        "model": model,
    }


def child(doc_path: str) -> dict[str, Any]:
    """shufflelab's side, in this (child) process."""
    import resource

    from shufflelab.sim import fabric_spec
    from shufflelab.sim.core import simulate_fabric

    spec = fabric_spec.parse(json.loads(Path(doc_path).read_text()), str(SPEC))
    cfg = fabric_spec.core_config(spec, 0, SPEC.parent)
    w0, c0 = time.perf_counter(), time.process_time()
    result = simulate_fabric(cfg)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {
        "simulator": "shufflelab",
        "hosts": result["hosts"],
        "fetches": result["remote_fetches"],
        "wall_s": wall,
        "cpu_s": cpu,
        "completion_s": result["shuffle_completion_s"],
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def simgrid_env(python: Path) -> dict[str, str]:
    """The environment for SimGrid's Python: pip installs ``libsimgrid.so`` next to the module, in
    site-packages, where the loader does not look unless told."""
    out = subprocess.run(
        [str(python), "-c", "import site; print(':'.join(site.getsitepackages()))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(p for p in (out, env.get("LD_LIBRARY_PATH", "")) if p)
    return env


def run_child(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:2])}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    row: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return row


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2])))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--simgrid-python",
        type=Path,
        default=os.environ.get("SIMGRID_PYTHON"),
        help="a Python with pip simgrid installed (or SIMGRID_PYTHON)",
    )
    ap.add_argument("--leaves", type=int, default=None, help="racks (default: the spec's 25)")
    ap.add_argument("--maps", type=int, default=None)
    ap.add_argument("--reducers", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per simulator run")
    ap.add_argument(
        "--simgrid-cfg",
        action="append",
        default=None,
        help=f"a SimGrid --cfg item (repeatable; default: {' '.join(SIMGRID_CFG)}; 'none': SimGrid's defaults)",
    )
    ap.add_argument(
        "--simgrid-model",
        choices=("controller", "actors"),
        default="controller",
        help="how the SimGrid side is written (benchmarks/simgrid/alltoall.py): one controller starting every "
        "transfer, or an actor per reducer and per fetch with mailboxes",
    )
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    a = ap.parse_args()
    if a.simgrid_python is None or not Path(a.simgrid_python).exists():
        ap.error("--simgrid-python: a Python with pip simgrid installed is needed (see the module's doc)")
    sg_env = simgrid_env(Path(a.simgrid_python))
    check = subprocess.run([str(a.simgrid_python), "-c", "import simgrid"], capture_output=True, text=True, env=sg_env)
    if check.returncode != 0:
        ap.error(f"--simgrid-python {a.simgrid_python}: cannot import simgrid: {check.stderr.strip()[-300:]}")
    cfg = SIMGRID_CFG if a.simgrid_cfg is None else [c for c in a.simgrid_cfg if c != "none"]
    doc = scenario(a.leaves, a.maps, a.reducers)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        doc_path, params_path = Path(tmp) / "spec.json", Path(tmp) / "simgrid.json"
        doc_path.write_text(json.dumps(doc))
        params_path.write_text(json.dumps(simgrid_params(doc, a.seed, cfg, a.simgrid_model)))
        ours = [sys.executable, __file__, "--child", str(doc_path)]
        theirs = [str(a.simgrid_python), str(SIMGRID_SCRIPT), str(params_path)]
        for cmd, env in ((ours, None), (theirs, sg_env), (ours, None)):
            rows.append(run_child(cmd, a.timeout, env))
            r = rows[-1]
            print(
                f"{r['simulator']:<12} hosts {r['hosts']:,}  fetches {r['fetches']:,}  wall {r['wall_s']:.2f} s  "
                f"CPU {r['cpu_s']:.2f} s  completion {r['completion_s']:.4f} s  RSS {r['rss_mib']:.0f} MiB",
                flush=True,
            )
    ours_cpu = min(r["cpu_s"] for r in rows if r["simulator"] == "shufflelab")
    theirs_cpu = rows[1]["cpu_s"]
    ratio = theirs_cpu / ours_cpu
    print(f"SimGrid / shufflelab CPU seconds: {ratio:.0f}x")
    if a.out:
        meta = {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "simgrid_cfg": cfg,
            "simgrid_model": a.simgrid_model,
        }
        a.out.write_text(json.dumps({"meta": meta, "rows": rows, "cpu_ratio": ratio}, indent=2) + "\n")


if __name__ == "__main__":
    main()
