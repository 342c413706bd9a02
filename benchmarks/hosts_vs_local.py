"""Benchmark: experiments/quickstart.toml's job time over SSH (the hosts backend on stand-in hosts)
against the local backend's, the same spec run in turn on the same machine.

Six stand-in hosts (tests/hosts/conftest.py's lab: network namespaces, each with its own OpenSSH
server): the spec's six hosts on five of them, the master sharing host1 with w1, and the sixth the
router host that carries the shared bottleneck, as tests/hosts/test_hosts_quickstart.py maps them.
The spec is the shipped one with one repetition per round and its JVMs as shipped (not the tests'
quicker ones). Each round runs the selected scenarios once over SSH and once locally, the order
alternating from round to round; ratios are read pair by pair (same scenario, same round). Needs root.

    .venv/bin/python benchmarks/hosts_vs_local.py --rounds 2 --out docs/benchmarks-hosts-vs-local.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from hosts.conftest import stand_in_hosts  # noqa: E402
from hosts.test_hosts_quickstart import MACHINES, ROUTER  # noqa: E402

SPEC = REPO / "experiments" / "quickstart.toml"


def job_times(db: Path) -> dict[int, float]:
    """The ok runs' job times by their scenario's UDP percentage."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT job_time_s, run_id IN (SELECT run_id FROM cross_traffic WHERE kind = 'udp' AND bytes > 0) "
            "FROM runs WHERE status = 'ok'"
        ).fetchall()
    return {75 if udp else 0: float(t) for t, udp in rows}


def run(spec: Path, results: Path, hosts: Path | None, select: list[str]) -> tuple[dict[int, float], float]:
    args = [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--results", str(results), "--no-report"]
    if hosts is not None:
        args += ["--hosts", str(hosts)]
    for s in select:
        args += ["--select", s]
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return job_times(results / "quickstart.duckdb"), time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--udp", type=int, nargs="+", default=[0, 75], choices=[0, 75], help="the scenarios to run")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces)")
    load_at_start = os.getloadavg()[0]
    select = [] if sorted(set(a.udp)) == [0, 75] else [f"udp={a.udp[0]}"]
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="hosts-vs-local-") as tmp_name:
        tmp = Path(tmp_name)
        spec = tmp / "quickstart.toml"
        spec.write_text(SPEC.read_text().replace("repetitions = 3", "repetitions = 1"))
        (tmp / "lab").mkdir()
        with stand_in_hosts(tmp / "lab", 6) as lab:
            inv = lab.inventory_on(tmp / "inv.toml", MACHINES, ROUTER)
            for k in range(a.rounds):
                order = ["hosts", "local"] if k % 2 == 0 else ["local", "hosts"]
                got: dict[str, dict[int, float]] = {}
                for backend in order:
                    res = tmp / f"r{k}-{backend}"
                    got[backend], wall = run(spec, res, inv if backend == "hosts" else None, select)
                    print(f"round {k + 1} {backend}: job {got[backend]} (command {wall:.0f} s)", flush=True)
                for udp in sorted(got["hosts"]):
                    h, loc = got["hosts"][udp], got["local"][udp]
                    rows.append({"round": k + 1, "udp_percent": udp, "hosts_job_s": h, "local_job_s": loc,
                                 "ratio": h / loc, "first": order[0]})  # fmt: skip
    for udp in sorted({int(str(r["udp_percent"])) for r in rows}):
        ratios = [float(str(r["ratio"])) for r in rows if r["udp_percent"] == udp]
        print(f"UDP {udp} %: job over SSH / local, pair by pair: {[round(x, 2) for x in ratios]}, "
              f"median {statistics.median(ratios):.2f}")  # fmt: skip
    if a.out:
        doc = {
            "command": "sudo .venv/bin/python benchmarks/hosts_vs_local.py " + " ".join(sys.argv[1:]),
            "spec": "experiments/quickstart.toml, repetitions = 1 per round, JVMs as shipped",
            "hosts": "six stand-in hosts: master and w1 on host1, w2-w3, tgen, tsink one each, host6 the router",
            "load_average_at_start": load_at_start,
            "load_average_at_end": os.getloadavg()[0],  # its own runs' load, mostly
            "rows": rows,
        }
        a.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
