"""The in-switch cross-traffic source on the real fabric, no Spark (a MapReduce shuffle replay):
a run whose source is stopped mid-job (SIGUSR1 to the switch) is stored failed, with the reason,
as a run whose iperf3 client died is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import labprocs
from shufflelab import procfs
from shufflelab.results import Store
from shufflelab.switch import binary_path

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(binary_path() is None, reason="shufflelab-switch is not built (make setup)"),
]

SPEC = """
[experiment]
name = "xswitch"
run_timeout_s = 120

[topology]
kind = "shared"
bottleneck = { rate_mbps = 20, queue_bytes = 100_000, datapath = "switch" }

[hosts]
m1 = { roles = ["mapreduce"] }
m2 = { roles = ["mapreduce"] }
tgen = { roles = ["traffic-source"] }
tsink = { roles = ["traffic-sink"] }

[telemetry]
selftest = "off"

[cross_traffic]
udp_percent = 50
generator = "switch"
pattern = "poisson"

[workload]
name = "mapreduce"

[workload.params]
generator = "synthetic"
mappers = 2
reducers = 2
partition_mb = 4.0
dist = "constant"
map_s = 4.0
parallel_copies = 2
"""


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = procfs.children(todo.pop())
        out += kids
        todo += kids
    return out


def _switch_of(runner: int) -> int | None:
    """This runner's switch (a descendant; other switches on the machine are not ours)."""
    for pid in _descendants(runner):
        argv = procfs.cmdline(pid) or []
        if argv and argv[0].endswith("shufflelab-switch"):
            return pid
    return None


def test_a_run_whose_in_switch_source_stopped_is_failed(tmp_path: Path) -> None:
    spec = tmp_path / "xswitch.toml"
    spec.write_text(SPEC)
    p = subprocess.Popen(
        [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--results", str(tmp_path / "results"),
         "--no-report"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        started = None
        while started is None and time.monotonic() < deadline and p.poll() is None:
            logs = list((tmp_path / "results" / "xswitch" / "runs").glob("*/mapreduce"))
            pid = _switch_of(p.pid)
            # the source starts (SIGUSR2) before the job; the replay's folder appears with the job
            started = pid if logs and pid else None
            time.sleep(0.2)
        assert started is not None, "the job did not start"
        time.sleep(4)  # well inside the ~17 s job
        os.kill(started, signal.SIGUSR1)
        out, _ = p.communicate(timeout=300)
    finally:
        labprocs.stop_runs([p])
    assert "Traceback" not in out, out
    db = Store(tmp_path / "results" / "xswitch.duckdb")
    run = db.query("SELECT * FROM runs").iloc[0]
    assert run["status"] == "failed", run.to_dict()
    cause = run["cause"]
    assert "UDP cross traffic (in the switch): stopped sending before the run ended" in cause, cause
    assert "offered" in cause and "during the job" in cause, cause  # and short of its rate
    ct = db.query("SELECT * FROM cross_traffic").iloc[0]
    assert ct["generator"] == "switch" and not ct["alive_at_end"]
    assert 0 < ct["job_bits_per_second"] < 0.9 * ct["configured_bps"], ct.to_dict()
    log = next((tmp_path / "results" / "xswitch" / "runs").glob("*/switch.log")).read_text()
    assert "cross traffic stopped (SIGUSR1)" in log
