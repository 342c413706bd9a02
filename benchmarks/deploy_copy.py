"""Benchmark: what ``shufflelab deploy --hosts`` costs to fill one machine, by cipher and by SFTP
copies in flight.

One stand-in host (a network namespace with its own OpenSSH server, the tests' lab from
tests/hosts/conftest.py) that sees neither this checkout nor its virtual environment nor its cache,
so deploy brings everything (the source, every package the runs need, the listener jar). Each
setting deploys to the empty folder and is removed again, the settings in turn, ``--rounds`` times:
ratios are read pair by pair. Reports the wall time of each deploy and the controller's CPU time
(the deploy process). The cipher is forced through asyncssh's ``encryption_algs``; the copies in
flight through ``shufflelab.hosts.deploy._COPIES_PER_HOST``. Needs root.

    .venv/bin/python benchmarks/deploy_copy.py --rounds 2 --out docs/benchmarks-deploy.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from hosts.conftest import stand_in_hosts  # noqa: E402
from shufflelab import artifacts  # noqa: E402

SETTINGS = [  # (copies in flight, cipher or "" for the product's own order)
    (8, "chacha20-poly1305@openssh.com"),
    (32, "chacha20-poly1305@openssh.com"),
    (8, "aes128-gcm@openssh.com"),
    (32, "aes128-gcm@openssh.com"),
]

PATCH = """
import sys
import asyncssh
import shufflelab.hosts.control as control
import shufflelab.hosts.deploy as deploy
deploy._COPIES_PER_HOST = {copies}
_connect = asyncssh.connect
async def _forced(*a, **k):
    k["encryption_algs"] = [{cipher!r}]
    return await _connect(*a, **k)
control.asyncssh.connect = _forced
from shufflelab.cli import main
sys.argv = ["shufflelab", *sys.argv[1:]]
main()
"""


def deploy(inv: Path, copies: int, cipher: str) -> dict[str, object]:
    t0, c0 = time.monotonic(), os.times()
    r = subprocess.run(
        [sys.executable, "-c", PATCH.format(copies=copies, cipher=cipher), "deploy", "--hosts", str(inv)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    wall, c1 = time.monotonic() - t0, os.times()
    if r.returncode:
        raise SystemExit(f"deploy failed ({copies}, {cipher}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    cpu = c1.children_user + c1.children_system - c0.children_user - c0.children_system
    return {"copies": copies, "cipher": cipher, "wall_s": round(wall, 2), "controller_cpu_s": round(cpu, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces)")
    hide = [REPO, Path(sys.prefix), artifacts.cache_root()]
    hide = [p for p in hide if p.is_dir() and not any(q != p and p.is_relative_to(q) for q in hide)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="sldeploybench") as tmp, stand_in_hosts(Path(tmp), 1, hide=hide) as lab:
        target = Path(tmp) / "deployed"
        target.mkdir()
        inv = lab.inventory(Path(tmp) / "inv.toml", extra={"host1.deploy_dir": f'"{target}"'})
        for rnd in range(args.rounds):
            for copies, cipher in SETTINGS:
                row = {"round": rnd, **deploy(inv, copies, cipher)}
                print(json.dumps(row), flush=True)
                rows.append(row)
                subprocess.run(
                    [sys.executable, "-m", "shufflelab.cli", "deploy", "--hosts", str(inv), "--remove"],
                    capture_output=True,
                    timeout=300,
                    check=True,
                )
    if args.out:
        args.out.write_text(json.dumps({"command": " ".join(sys.argv), "runs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
