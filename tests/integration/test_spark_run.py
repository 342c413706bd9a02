"""Root integration with real Spark: tiny data, a real cluster, real cross traffic.

One experiment (reno, UDP 0 % and 60 %) is run through the CLI, interrupted (SIGINT) once its first
run is stored and resumed to its end with the report: the resumed experiment is the end-to-end test's
record (its two ok runs, their bytes, CC, telemetry and report), the interruption and the resume the
other test's, which then kills (SIGKILL) a third run and cleans. One experiment for both, shared by
a module fixture: an uninterrupted one of its own repeated what the resumed one shows. JVMs use the
fast flags (``spark.fast_jvm``) to keep CI short; measurements never do. Two workers: the shuffle
crosses the shared link from either, and a third cost about 9 CPU-s (its worker and executor JVMs)
a cluster start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import labprocs
from shufflelab.emulate import netns
from shufflelab.emulate.record import parse_cc_observed
from shufflelab.results import Store

pytestmark = [pytest.mark.root, pytest.mark.spark]

TINY = """
[experiment]
name = "{name}"
repetitions = 1
run_timeout_s = 240

[topology]
kind = "shared"
bottleneck = {{ rate_mbps = 20, queue_bytes = 60_000 }}

[hosts]
master = {{ roles = ["spark-master"] }}
w1 = {{ roles = ["spark-worker"] }}
w2 = {{ roles = ["spark-worker"] }}
tgen = {{ roles = ["traffic-source"] }}
tsink = {{ roles = ["traffic-sink"] }}

[tcp]
congestion_control = "reno"

[spark]
worker_memory = "768m"
executor_memory = "512m"
fast_jvm = true

[workload]
name = "sort-aggregate"
params = {{ rows = 40_000, partitions = 6, payload_bytes = 100 }}

[matrix]
"cross_traffic.udp_percent" = [0, 60]
"""


def _cli(*args: str, tag: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "shufflelab.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=labprocs.tagged_env(tag), **kw,
    )  # fmt: skip


def _wait_for(pred: Any, timeout: float, what: str, proc: subprocess.Popen[str] | None = None) -> None:
    """Poll ``pred``; fail at ``timeout`` or, with its output, as soon as ``proc`` has exited."""
    deadline = time.monotonic() + timeout
    while not pred():
        if proc is not None and proc.poll() is not None:
            out, _ = proc.communicate()
            raise AssertionError(f"the runner exited ({proc.returncode}) before {what}:\n{out}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def _ok_runs(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        return int(Store(db).query("SELECT count(*) AS n FROM runs WHERE status = 'ok'")["n"][0])
    except Exception:  # noqa: BLE001 - the runner may hold the file for a moment
        return 0


@dataclass
class Resumed:
    """The experiment interrupted after its first run and resumed to its end (with the report)."""

    results: Path
    db: Path
    tag: str
    runners: set[int]  # the pids of its two `shufflelab run` processes (their leases name them)
    interrupted_rc: int
    interrupted_out: str
    namespaces_left_by_sigint: set[str]
    processes_left_by_sigint: list[tuple[int, str]]
    ok_after_sigint: int
    resumed_rc: int
    resumed_out: str


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Resumed]:
    tmp = tmp_path_factory.mktemp("spark-run")
    spec = tmp / "tiny.toml"
    spec.write_text(TINY.format(name="tiny"))
    results = tmp / "results"
    db = results / "tiny.duckdb"
    tag = labprocs.new_tag()
    procs: list[subprocess.Popen[str]] = []
    try:
        # 1. SIGINT after the first run is stored: the runner tears down and exits
        p = _cli("run", str(spec), "--results", str(results), "--no-report", tag=tag, start_new_session=True)
        procs.append(p)
        _wait_for(lambda: _ok_runs(db) >= 1, 600, "the first run", p)
        os.kill(p.pid, signal.SIGINT)
        first_out, _ = p.communicate(timeout=120)
        left_ns, left_procs, ok_after = labprocs.owned_namespaces({p.pid}), labprocs.tagged(tag), _ok_runs(db)
        # 2. re-running resumes: only the missing run is done, then the report is written
        p = _cli("run", str(spec), "--results", str(results), tag=tag, start_new_session=True)
        procs.append(p)
        out, _ = p.communicate(timeout=900)
        yield Resumed(
            results, db, tag, {q.pid for q in procs}, procs[0].returncode, first_out, left_ns, left_procs, ok_after,
            p.returncode, out,
        )  # fmt: skip
    finally:
        labprocs.stop_runs(procs)  # after a failed wait


def test_end_to_end_run_and_report(resumed: Resumed) -> None:
    assert resumed.resumed_rc == 0, resumed.resumed_out
    store = Store(resumed.db)
    every = store.query("SELECT status, cause FROM runs ORDER BY started_at")
    # the two runs of the matrix ok; the one SIGINT stopped (if it had begun) kept as interrupted
    assert sorted(every["status"]) in (["ok", "ok"], ["interrupted", "ok", "ok"]), every.to_string()
    runs = store.query("SELECT * FROM runs WHERE status = 'ok' ORDER BY started_at")
    ok = "(SELECT run_id FROM runs WHERE status = 'ok')"
    for _, r in runs.iterrows():
        # shuffle bytes really crossed the bottleneck: the reducers read from the other worker, and
        # the bottleneck carried at least that. The share is not a property of the lab: on a busy
        # box one executor takes most tasks (16 % remote, 0.93 of 5.7 MB, was seen), so the floor
        # is an amount -- about a tenth of the smallest remote read seen -- and none read remotely fails
        assert r["remote_bytes_read"] > 100_000, (r["remote_bytes_read"], r["local_bytes_read"])
        assert r["bottleneck_tx_bytes"] >= r["remote_bytes_read"]
        # the configured congestion control was in use on the workers' connections (ss -ti)
        seen = parse_cc_observed(r["cc_observed"])
        assert seen, "ss saw no inter-host connection"
        assert set(seen) == {"reno"}, seen
        assert r["n_tasks"] > 0 and r["job_time_s"] > 0
    # the box sampler split the machine's CPU time between the lab (Spark, the switch, iperf3: its
    # process tree and namespaces) and other work, and recorded its own cost
    box = runs[["box_runq_per_core", "box_foreign_share", "box_nice_share", "box_sampler_share"]]
    assert box.notna().all().all() and (box["box_sampler_share"] > 0).all(), box.to_string()
    for run_dir in runs["run_dir"]:
        assert pd.read_csv(Path(run_dir) / "box_load.csv")["lab_cpu"].iloc[-1] > 0, run_dir
    ct = store.query(f"SELECT * FROM cross_traffic WHERE run_id IN {ok}")
    assert len(ct) == 1 and ct["kind"][0] == "udp" and ct["bytes"][0] > 0
    q = store.query(
        f"SELECT run_id, count(*) AS n, max(backlog_bytes) AS mx FROM queue_samples WHERE run_id IN {ok} GROUP BY 1"
    )
    assert len(q) == 2 and (q["n"] > 10).all()
    tasks = store.query(f"SELECT count(*) AS n FROM tasks WHERE run_id IN {ok}")["n"][0]
    assert tasks == runs["n_tasks"].sum()
    # the task listener saw every task the event log has, and heartbeats showed fetch progress
    apps = store.query(f"SELECT run_id, n_tasks, listener_tasks FROM apps WHERE run_id IN {ok}")
    assert (apps["listener_tasks"] == apps["n_tasks"]).all(), apps.to_string()
    prog = store.query("SELECT count(*) AS n FROM task_progress")["n"][0]
    assert prog > 0
    # the executor plugin measured every task's user-mode CPU (never more than the thread's total)
    cpu = store.query(
        f"SELECT n_tasks, plugin_tasks, task_user_cpu_s, task_thread_cpu_s FROM apps WHERE run_id IN {ok}"
    )
    assert (cpu["plugin_tasks"] == cpu["n_tasks"]).all(), cpu.to_string()
    assert (cpu["task_user_cpu_s"] > 0).all() and (cpu["task_user_cpu_s"] <= cpu["task_thread_cpu_s"] * 1.05).all()
    osc = store.query("SELECT executor_user_s, executor_sys_s FROM runs WHERE status = 'ok'")
    assert (osc["executor_user_s"] > 0).all() and (osc["executor_sys_s"] >= 0).all()
    report = resumed.results / "tiny-report"
    assert (report / "report.html").exists() and (report / "figures" / "backlog.png").exists()
    md = (report / "report.md").read_text()
    assert "Slowdown from cross traffic" in md and "ran on the kernel datapath" in md
    assert "Shuffle path share" in md and "What-if check" in md
    # the starvation detector on a tiny run: one repetition per side can only be inconclusive
    d = subprocess.run(
        [sys.executable, "-m", "shufflelab.cli", "diagnose", str(resumed.db)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"},
    )  # fmt: skip
    assert d.returncode == 0, d.stdout + d.stderr
    assert "inconclusive" in d.stdout and "n = 1/1" in d.stdout, d.stdout
    assert not labprocs.owned_namespaces(resumed.runners), labprocs.owned_namespaces(resumed.runners)
    left = labprocs.tagged(resumed.tag)  # the run's processes (Spark, iperf3, the sampler, the driver): all gone
    assert not left, labprocs.describe(left)


def test_interrupt_resume_kill_and_clean(resumed: Resumed, tmp_path: Path) -> None:
    # 1. SIGINT after the first run is stored: the runner tore down and exited
    assert resumed.interrupted_rc == 130, resumed.interrupted_out
    assert not resumed.namespaces_left_by_sigint, "SIGINT left namespaces behind"
    assert not resumed.processes_left_by_sigint, labprocs.describe(resumed.processes_left_by_sigint)
    assert resumed.ok_after_sigint == 1

    # 2. re-running resumed: only the missing run was done
    assert resumed.resumed_rc == 0, resumed.resumed_out
    assert "resuming: 1 of 2" in resumed.resumed_out
    runs = Store(resumed.db).query("SELECT scenario_id, rep, status FROM runs WHERE status = 'ok'")
    assert len(runs) == 2 and runs["scenario_id"].nunique() == 2

    # 3. SIGKILL while the cluster is up leaves things behind; `clean` removes them
    spec = tmp_path / "killed.toml"
    spec.write_text(TINY.format(name="killed"))
    results = tmp_path / "results"
    tag = labprocs.new_tag()
    p = _cli("run", str(spec), "--results", str(results), "--no-report", tag=tag, start_new_session=True)
    _wait_for(lambda: labprocs.tagged(tag, "deploy.worker.Worker"), 300, "Spark workers", p)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    left = labprocs.owned_namespaces({p.pid})
    assert left, "expected the killed runner's namespaces to remain"
    c = _cli("clean", tag=tag)
    out, _ = c.communicate(timeout=120)
    assert c.returncode == 0, out
    assert not left & labprocs.lab_namespaces(), left & labprocs.lab_namespaces()
    _wait_for(lambda: not labprocs.tagged(tag), 20, "processes to exit")
    lease_files = list(netns.LEASE_DIR.glob("*.json")) if netns.LEASE_DIR.exists() else []
    assert not [f for f in lease_files if json.loads(f.read_text()).get("pid") == p.pid]
