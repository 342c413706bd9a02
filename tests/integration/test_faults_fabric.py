"""Fault injection on a real run: an executor killed, a host's link down for 3 s and a UDP burst
while a Spark job runs; Spark recovers, the faults and the recovery are recorded, and nothing is
left behind (namespaces, iperf3, Spark daemons)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import labprocs
from shufflelab.results import Store

pytestmark = [pytest.mark.root, pytest.mark.spark]

SPEC = """
[experiment]
name = "faults"
repetitions = 1
run_timeout_s = 300

[topology]
kind = "shared"
bottleneck = { rate_mbps = 20, queue_bytes = 60_000 }

[hosts]
master = { roles = ["spark-master"] }
w1 = { roles = ["spark-worker"] }
w2 = { roles = ["spark-worker"] }
tgen = { roles = ["traffic-source"] }
tsink = { roles = ["traffic-sink"] }

[spark]
worker_memory = "768m"
executor_memory = "512m"
fast_jvm = true

[telemetry]
selftest = "off"

[workload]
name = "sort-aggregate"
params = { rows = 120_000, partitions = 6, payload_bytes = 100 }

[[faults]]
kind = "udp-burst"
at_s = 0.5
duration_s = 2

[[faults]]
kind = "executor-kill"
at_s = 1.0
host = "w2"

[[faults]]
kind = "link-down"
at_s = 1.5
host = "w1"
duration_s = 3
"""


def test_faults_are_injected_recorded_and_cleaned_up(tmp_path: Path) -> None:
    spec = tmp_path / "faults.toml"
    spec.write_text(SPEC)
    tag = labprocs.new_tag()
    p, runner = labprocs.run(
        [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--results", str(tmp_path / "results"),
         "--no-report"],
        tag, timeout=900,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    store = Store(tmp_path / "results" / "faults.duckdb")
    runs = store.query("SELECT * FROM runs")
    assert len(runs) == 1
    run = runs.iloc[0]
    # Spark recovered from all three: the job finished
    assert run["status"] == "ok", run["cause"]
    assert run["failed_tasks"] is not None and run["stage_reattempts"] is not None
    f = store.query('SELECT * FROM faults ORDER BY "index"')
    assert list(f["kind"]) == ["udp-burst", "executor-kill", "link-down"], f.to_string()
    assert f["error"].isna().all(), f["error"].tolist()
    assert (f["started_at"].notna()).all() and (f["ended_at"] >= f["started_at"]).all()
    down = f[f["kind"] == "link-down"].iloc[0]
    assert down["ended_at"] - down["started_at"] == pytest.approx(3.0, abs=0.8)
    assert "SIGKILL" in f[f["kind"] == "executor-kill"].iloc[0]["detail"]
    assert "sent" in f[f["kind"] == "udp-burst"].iloc[0]["detail"]
    saved = json.loads((Path(run["run_dir"]) / "faults.json").read_text())
    assert len(saved) == 3
    # the killed executor's tasks (if any were running) failed and were re-run elsewhere
    assert run["n_tasks"] >= 6
    rep = subprocess.run(
        [sys.executable, "-m", "shufflelab.cli", "report", str(tmp_path / "results" / "faults.duckdb"),
         "--out", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "Faults and Spark's recovery" in (tmp_path / "report" / "report.md").read_text()
    assert not labprocs.owned_namespaces({runner}), labprocs.owned_namespaces({runner})
    left = labprocs.tagged(tag)  # the run's Spark, iperf3 and driver: all gone
    assert not left, labprocs.describe(left)
