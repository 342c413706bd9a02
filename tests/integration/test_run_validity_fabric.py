"""Faults injected from outside the runner, on the real fabric with real Spark: a run is stored as
what it was. Killing the cross traffic's iperf3 client mid-job makes the run failed (and resuming
runs it again); a worker killed during a run makes the next run restart the cluster and wait until
its master reports every worker alive; a worker killed while the cluster starts is recorded as a
failed run, the start is retried and the experiment goes on (the two worker faults in one experiment
that two tests read: w1's at its first start, w2's during its first run). Nothing is left behind. Two workers:
each of these faults needs a cluster, not a third worker (whose worker and executor JVMs cost about
9 CPU-s a cluster start)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import labprocs
from shufflelab.emulate import validity
from shufflelab.results import Store

pytestmark = [pytest.mark.root, pytest.mark.spark]

SPEC = """
[experiment]
name = "{name}"
repetitions = {reps}
run_timeout_s = 300

[topology]
kind = "shared"
bottleneck = {{ rate_mbps = 20, queue_bytes = 60_000 }}

[hosts]
master = {{ roles = ["spark-master"] }}
w1 = {{ roles = ["spark-worker"] }}
w2 = {{ roles = ["spark-worker"] }}
tgen = {{ roles = ["traffic-source"] }}
tsink = {{ roles = ["traffic-sink"] }}

[spark]
worker_memory = "768m"
executor_memory = "512m"
fast_jvm = true

[telemetry]
selftest = "off"

[cross_traffic]
udp_percent = {udp}

[workload]
name = "sort-aggregate"
params = {{ rows = {rows}, partitions = 6, payload_bytes = 100 }}
"""


def _worker_jvm(tag: str, host: str) -> list[int]:
    """The Spark worker daemon's JVM of ``host`` in the runs tagged ``tag`` (not the launcher JVM that
    computes its command line)."""
    return [
        pid
        for pid, cmd in labprocs.tagged(tag, "deploy.worker.Worker")
        if cmd.split()[0].endswith("java") and "launcher.Main" not in cmd and f"/spark/{host}/work " in f"{cmd} "
    ]


def _iperf3_client(tag: str) -> list[int]:
    return [pid for pid, cmd in labprocs.tagged(tag, "iperf3 -c 10.77") if cmd.startswith("iperf3 -c 10.77")]


def _wait_for(pred: Callable[[], Any], timeout: float, what: str, proc: subprocess.Popen[str]) -> Any:
    """Poll ``pred`` until it returns something true; fail at ``timeout`` or when ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if proc.poll() is not None:
            out, _ = proc.communicate()
            raise AssertionError(f"the runner exited ({proc.returncode}) before {what}:\n{out}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Lab:
    """Runs ``shufflelab run`` on small specs in ``tmp``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[str]] = []
        self.tag = labprocs.new_tag()  # in the environment of everything these runs start

    def start(self, name: str, reps: int = 1, udp: int = 0, rows: int = 40_000) -> subprocess.Popen[str]:
        spec = self.tmp / f"{name}.toml"
        spec.write_text(SPEC.format(name=name, reps=reps, udp=udp, rows=rows))
        p = subprocess.Popen(
            [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--results", str(self.tmp / "results"),
             "--no-report"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            env=labprocs.tagged_env(self.tag, COLUMNS="200"),
        )  # fmt: skip
        self.procs.append(p)
        return p

    def left(self) -> list[tuple[int, str]]:
        """Processes of these runs still alive."""
        return labprocs.tagged(self.tag)

    def namespaces(self) -> set[str]:
        """Namespaces of these runs' leases still there."""
        return labprocs.owned_namespaces(p.pid for p in self.procs)

    def assert_clean(self) -> None:
        """Nothing of the runs is left: no namespaces, no lab processes."""
        deadline = time.monotonic() + 20
        while self.left() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not self.left(), labprocs.describe(self.left())
        assert not self.namespaces(), self.namespaces()

    def teardown(self) -> None:
        labprocs.stop_runs(self.procs)  # after a failed test
        if self.namespaces() or self.left():
            subprocess.run([sys.executable, "-m", "shufflelab.cli", "clean"], capture_output=True, timeout=120)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """Whatever happens to the test, the runner is stopped and what it left is cleaned."""
    lab = Lab(tmp_path)
    try:
        yield lab
    finally:
        lab.teardown()


def _finish(p: subprocess.Popen[str]) -> str:
    out, _ = p.communicate(timeout=1200)
    assert "Traceback" not in out, out
    return out


def test_a_run_whose_cross_traffic_died_is_failed_and_rerun_on_resume(lab: Lab, tmp_path: Path) -> None:
    runs_dir = tmp_path / "results" / "udpkill" / "runs"
    p = lab.start("udpkill", udp=50, rows=120_000)
    # the job is running (its SparkSession is up) when the UDP client is killed
    ready = _wait_for(lambda: list(runs_dir.glob("*/driver_result_0.ready")), 600, "the job to start", p)
    (client,) = _wait_for(lambda: _iperf3_client(lab.tag), 30, "the iperf3 client", p)
    os.kill(client, signal.SIGKILL)
    assert not (ready[0].parent / "driver_result_0.json").exists(), "the job ended before the kill: make it longer"
    out = _finish(p)
    assert p.returncode == 1, out  # the command says a run failed
    db = Store(tmp_path / "results" / "udpkill.duckdb")
    run = db.query("SELECT * FROM runs").iloc[0]
    assert run["status"] == "failed", run.to_dict()
    assert "UDP cross traffic" in run["cause"] and "exited before the run ended" in run["cause"], run["cause"]
    ct = db.query("SELECT * FROM cross_traffic").iloc[0]
    assert not ct["alive_at_end"]
    assert run["job_time_s"] > 0  # the job itself succeeded: only the promise was broken

    # resuming runs it again; undisturbed, it keeps its promise
    p = lab.start("udpkill", udp=50, rows=120_000)
    out = _finish(p)
    assert p.returncode == 0, out
    assert "resuming" not in out  # nothing was kept: the failed run is not a finished one
    runs = db.query("SELECT run_id, attempt, status, job_time_s, bottleneck_tx_bytes FROM runs ORDER BY attempt")
    assert list(runs["status"]) == ["failed", "ok"], runs.to_string()
    ok = db.query(f"SELECT * FROM cross_traffic WHERE run_id = '{runs['run_id'][1]}'").iloc[0]
    assert (
        ok["alive_at_end"] and abs(ok["job_bits_per_second"] / ok["configured_bps"] - 1) <= validity.UDP_RATE_TOLERANCE
    )
    print(  # the before/after of a killed UDP client, for the record
        "killed client:", runs.iloc[0].to_dict(), "\nundisturbed:", runs.iloc[1].to_dict(),
        "\nUDP received (MB):", ct["received_bytes"] / 1e6, "vs", ok["received_bytes"] / 1e6,
        "\nUDP sent during the job (MB):", ct["job_bytes"], "vs", ok["job_bytes"] / 1e6,
    )  # fmt: skip
    lab.assert_clean()


@dataclass
class WorkerFaults:
    """One experiment of two runs with a worker killed twice: w1's while the cluster first starts, w2's
    during the first run."""

    out: str
    returncode: int
    results: Path
    left: list[tuple[int, str]]  # processes of the runs still alive at the end
    namespaces_left: set[str]


@pytest.fixture(scope="module")
def worker_faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerFaults]:
    """The two worker faults in one experiment (two tests read it): each needs a cluster start and a
    run after it, and one run serves both (a run's driver and executor JVMs cost about 20 CPU-s)."""
    tmp = tmp_path_factory.mktemp("worker-faults")
    lab = Lab(tmp)
    try:
        runs_dir = tmp / "results" / "workers" / "runs"
        p = lab.start("workers", reps=2, rows=120_000)
        (w1,) = _wait_for(lambda: _worker_jvm(lab.tag, "w1"), 600, "w1's worker", p)
        os.kill(w1, signal.SIGKILL)  # while the cluster starts: the start fails and is retried
        _wait_for(lambda: list(runs_dir.glob("*/driver_result_0.ready")), 600, "the first job", p)
        (w2,) = _wait_for(lambda: _worker_jvm(lab.tag, "w2"), 30, "w2's worker", p)
        os.kill(w2, signal.SIGKILL)  # during the first run: the runner finds the cluster dead before the next
        out = _finish(p)
        deadline = time.monotonic() + 20
        while lab.left() and time.monotonic() < deadline:
            time.sleep(0.5)
        yield WorkerFaults(out, p.returncode, tmp / "results", lab.left(), lab.namespaces())
    finally:
        lab.teardown()


def _runs(faults: WorkerFaults) -> Any:
    return Store(faults.results / "workers.duckdb").query("SELECT * FROM runs ORDER BY started_at")


def test_a_worker_killed_while_the_cluster_starts_is_recorded_and_the_start_retried(
    worker_faults: WorkerFaults,
) -> None:
    runs = _runs(worker_faults)
    out = worker_faults.out + runs[["rep", "attempt", "status", "cause"]].to_string()
    # the failed start is the first run's first attempt; the retried start's run is its second
    assert list(zip(runs["rep"], runs["attempt"], strict=True))[:2] == [(1, 1), (1, 2)], out
    assert runs["status"][0] == "failed", out
    assert runs["cause"][0].startswith("Spark cluster did not start (attempt 1 of 3)"), runs["cause"][0]
    assert "Spark daemon on w1 exited" in runs["cause"][0]
    assert runs["job_time_s"][1] > 0, out  # the retried start's run ran its job
    # a start that was retried does not fail the command: its status is that of each run's last
    # attempt (the first run usually ends ok, its executor on w2 lost mid-job)
    last = runs.groupby("rep")["status"].last()
    assert worker_faults.returncode == (0 if (last == "ok").all() else 1), out
    assert not worker_faults.left, labprocs.describe(worker_faults.left)
    assert not worker_faults.namespaces_left, worker_faults.namespaces_left


def test_a_restarted_cluster_is_ready_before_the_next_run_starts(worker_faults: WorkerFaults) -> None:
    runs = _runs(worker_faults)
    assert len(runs) == 3, runs[["status", "cause"]].to_string()
    (master_log,) = (worker_faults.results / "workers" / "clusters").glob("*/master-master.log")
    # three starts: the one w1's kill failed, its retry, and the restart after w2's kill
    assert master_log.read_text().count("Starting Spark master at") == 3
    second = runs.iloc[2]
    assert second["rep"] == 2 and second["status"] == "ok", second["cause"]
    # the second run's share of the master's log begins after the restarted master was up and every
    # worker had registered: none of the start-up is in it (the run was not started before)
    share = (Path(second["run_dir"]) / "logs" / "master-master.log").read_text()
    assert "Starting Spark master at" not in share and "Registering worker" not in share, share[:3000]
    assert not worker_faults.left, labprocs.describe(worker_faults.left)
    assert not worker_faults.namespaces_left, worker_faults.namespaces_left
