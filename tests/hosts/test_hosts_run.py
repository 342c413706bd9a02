"""``shufflelab run --hosts``: the quickstart experiment on the stand-in hosts through the SSH backend,
its job times against the local backend's, and a runner interrupted or killed mid-job leaving nothing
after ``clean --hosts``. The hosts are inspected directly (their namespaces), never through the backend."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import duckdb
import pytest

from shufflelab.hosts import lease

from .conftest import Lab, sh

pytestmark = [pytest.mark.root, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}
TAG = "SHUFFLELAB_LEASE="


def _toml_value(v: object) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)


def quickstart(
    path: Path, reps: int, kind: str = "star", cross: dict[str, object] | None = None, matrix: bool = False
) -> Path:
    """experiments/quickstart.toml on three hosts (the stand-ins): the master and two workers, each
    with its own 40 Mbit/s link (``star``; ``shared`` needs a router host besides), without the
    self-test (it needs namespaces), ``reps`` repetitions, the tests' quicker JVMs (``spark.fast_jvm``);
    without the cross-traffic matrix unless
    ``matrix`` (its iperf3 flows then go between the two workers), ``cross``: a ``[cross_traffic]``."""
    data = tomllib.loads((REPO / "experiments" / "quickstart.toml").read_text())
    data["experiment"]["repetitions"] = reps
    data["experiment"]["name"] = "quickstart-hosts"
    data["topology"]["kind"] = kind
    data["hosts"] = {
        "h1": {"roles": ["spark-master"]},
        "h2": {"roles": ["spark-worker"]},
        "h3": {"roles": ["spark-worker"]},
    }
    data["telemetry"] = {"selftest": "off"}
    data["spark"]["fast_jvm"] = True  # C1 only and the serial collector: half the CPU of a run
    if matrix:
        data["cross_traffic"] = {"source": "h2", "sink": "h3", **(cross or {})}
    else:
        data.pop("matrix", None)
        if cross:
            data["cross_traffic"] = cross
    lines = []
    for table, body in data.items():
        plain = {k: v for k, v in body.items() if not isinstance(v, dict) or table == "topology"}
        nested = {k: v for k, v in body.items() if isinstance(v, dict) and table != "topology"}
        lines.append(f"[{table}]")
        lines += [f"{json.dumps(k) if '.' in k else k} = {_toml_value(v)}" for k, v in plain.items()]
        for k, v in nested.items():
            lines.append(f"[{table}.{k}]")
            lines += [f"{kk} = {_toml_value(vv)}" for kk, vv in v.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(*args: str, timeout: float = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shufflelab.cli", *args], capture_output=True, text=True, env=env or ENV, timeout=timeout
    )


def host_state(lab: Lab) -> list[dict[str, object]]:
    """Per stand-in host: the data interface's root qdisc, the TCP sysctls, processes tagged with a lease."""
    out = []
    for h in lab.hosts:
        q = json.loads(sh("tc", "-j", "qdisc", "show", "dev", "data0", "root", ns=h.ns))[0]
        tagged = []
        for pid in sh("ip", "netns", "pids", h.ns).split():
            try:
                if TAG.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                    tagged.append(pid)
            except OSError:
                pass
        out.append(
            {
                "data0": f"{q['kind']} {q['handle']}",
                "cc": sh("sysctl", "-n", "net.ipv4.tcp_congestion_control", ns=h.ns).strip(),
                "ecn": sh("sysctl", "-n", "net.ipv4.tcp_ecn", ns=h.ns).strip(),
                "ssai": sh("sysctl", "-n", "net.ipv4.tcp_slow_start_after_idle", ns=h.ns).strip(),
                "tagged": tagged,
            }
        )
    return out


def job_times(db: Path) -> list[float]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT status, job_time_s, wall_s, setup_s, session_s, cause FROM runs ORDER BY rep"
        ).fetchall()
    assert all(r[0] == "ok" for r in rows), rows
    for r in rows:  # shown with -s: the per-run overhead of each backend
        print(f"{db.parent.name}: job {r[1]:.2f} s, wall {r[2]:.2f} s, setup {r[3]:.2f} s, session {r[4]} s")
    return [float(r[1]) for r in rows]


def udp_rate_missed(db: Path) -> str | None:
    """The cause when every run in ``db`` failed, and failed only because the iperf3 UDP sender fell
    short of its configured rate during the job (run validity's promise; None otherwise)."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT status, cause FROM runs").fetchall()
    prefix = "scenario not delivered: "
    if not rows or any(s != "failed" or not c or not c.startswith(prefix) for s, c in rows):
        return None
    problems = [p for _, c in rows for p in c[len(prefix) :].split("; ")]
    return "; ".join(problems) if all(p.startswith("UDP cross traffic: sent ") for p in problems) else None


def tagged_running(lab: Lab, host: int, program: bytes) -> bool:
    """A process of ``program`` tagged with a lease runs on stand-in ``host`` (an index)."""
    for pid in sh("ip", "netns", "pids", lab.hosts[host].ns).split():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if program in cmd and TAG.encode() in env:
            return True
    return False


def _driver_running(lab: Lab) -> bool:
    return tagged_running(lab, 0, b"shufflelab.workloads.driver")


def _controller_folders(tmp: Path) -> set[Path]:
    """The hosts backend's own folders for its leases in the temporary folder ``tmp``."""
    return set(tmp.glob(lease.local_folder_prefix("*") + "*"))


# SIGTERM (and SIGHUP) take SIGINT's path: tests/unit/test_cli_signals.py shows they become the same
# KeyboardInterrupt in the runner, so the SIGINT case here covers their teardown over SSH too
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_runner_stopped_mid_job_leaves_nothing_after_clean(lab: Lab, tmp_path: Path, sig: signal.Signals) -> None:
    # the runner's and clean's temporary folder of their own: no other run's folders in it (another
    # lane of the tests may run over SSH at the same time)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**ENV, "TMPDIR": str(tmp)}
    inv = lab.inventory(tmp_path / "inv.toml")
    spec = quickstart(tmp_path / "quickstart.toml", reps=1)
    before = host_state(lab)
    runner = subprocess.Popen(
        [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--hosts", str(inv),
         "--results", str(tmp_path / "res"), "--no-report"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not _driver_running(lab):
            assert runner.poll() is None, f"the runner ended before its job started: {runner.stderr.read()}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the job did not start within 240 s"
            time.sleep(0.3)
        during = host_state(lab)
        assert any(s["tagged"] for s in during) and during[0]["data0"].startswith("htb")
        runner.send_signal(sig)
        rc = runner.wait(timeout=120)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    if sig != signal.SIGKILL:
        assert rc == 130
        assert host_state(lab) == before  # the runner restored every host itself
        assert not _controller_folders(tmp)  # the runner removed its own folders
    else:
        assert rc == -signal.SIGKILL
        assert _controller_folders(tmp)  # a killed runner leaves its folders to clean
    r = cli("clean", "--hosts", str(inv), timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    if sig == signal.SIGKILL:
        assert "restored 3 leases" in r.stdout, r.stdout
    assert host_state(lab) == before
    # nor is the controller's own folder of the run's lease left (a killed runner left it until clean)
    assert not _controller_folders(tmp), _controller_folders(tmp)
    r = cli("clean", "--hosts", str(inv), timeout=120, env=env)
    assert "restored 0 leases" in r.stdout, r.stdout  # nothing left over


def test_run_refuses_to_shape_the_control_interface(lab: Lab, tmp_path: Path) -> None:
    inv = lab.inventory(tmp_path / "inv.toml")
    text = inv.read_text()
    at = text.index("[hosts.host2]")
    inv.write_text(text[:at] + text[at:].replace('data_interface = "data0"', 'data_interface = "ctl0"', 1))
    spec = quickstart(tmp_path / "quickstart.toml", reps=1)
    # doctor says so first, as a refusal of every (star) cell (it was a warning, exit 0)
    r = cli("doctor", "--hosts", str(inv), "--spec", str(spec), "--json", timeout=300)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {(f["host"], f["check"]): f for f in json.loads(r.stdout)["findings"]}
    assert rows[("host2", "data interface")]["level"] == "refuse", rows[("host2", "data interface")]
    assert rows[("*", "cells")]["detail"].startswith("0 of 1 cells"), rows[("*", "cells")]
    before = host_state(lab)
    r = cli("run", str(spec), "--hosts", str(inv), "--results", str(tmp_path / "res"), "--no-report", timeout=300)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    said = " ".join(r.stderr.split())
    assert "host host2" in said and "ctl0 carries the SSH control connection" in said, said
    assert host_state(lab) == before  # what the run changed on the other hosts is back
    r = cli("clean", "--hosts", str(inv), timeout=120)
    assert r.returncode == 0 and "restored 0 leases" in r.stdout, r.stdout + r.stderr


def test_worker_host_dropping_off_mid_job(lab: Lab, tmp_path: Path) -> None:
    """A worker's machine drops off mid-job, off both networks (SSH to it is lost and Spark loses its
    executors); its processes keep running: the runner ends on its own with an error naming the host,
    every other host is restored by it, and when the host is back ``clean --hosts`` restores its lease.
    (Off the control network only, Spark does not notice, and the runner ends the same way: the lost
    SSH connection alone decides, which the keepalive unit tests cover.)"""
    links = ["ctl0", "data0"]
    inv = lab.inventory(tmp_path / "inv.toml", connect_timeout_s=3, command_timeout_s=20)
    spec = quickstart(tmp_path / "quickstart.toml", reps=1)
    gone = lab.hosts[2]  # host3: spec host h3, a Spark worker
    before = host_state(lab)
    out, err = tmp_path / "runner.out", tmp_path / "runner.err"
    with open(out, "w") as fo, open(err, "w") as fe:
        runner = subprocess.Popen(
            [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--hosts", str(inv),
             "--results", str(tmp_path / "res"), "--no-report"],
            stdout=fo, stderr=fe, env=ENV, text=True,
        )  # fmt: skip
    dropped = False
    try:
        deadline = time.monotonic() + 240
        while not _driver_running(lab):
            assert runner.poll() is None, f"the runner ended before its job started: {err.read_text()}"
            assert time.monotonic() < deadline, "the job did not start within 240 s"
            time.sleep(0.3)
        for link in links:
            sh("ip", "link", "set", link, "down", ns=gone.ns)
        dropped, t_drop = True, time.monotonic()
        rc = runner.wait(timeout=180)  # no hang: the runner notices the lost host by itself
        took = time.monotonic() - t_drop
        after = host_state(lab)  # while host3 is still away
    finally:
        if dropped:
            for link in links:
                sh("ip", "link", "set", link, "up", ns=gone.ns)
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    said = " ".join(err.read_text().split())
    print(f"runner ended {took:.1f} s after host3 dropped off ({'+'.join(links)} down; exit {rc}): {said[-600:]}")
    assert rc == 1, out.read_text()[-2000:] + said
    assert "Traceback" not in said, said
    assert f"host host3 ({gone.address})" in said, said
    assert after[:2] == before[:2]  # the hosts that stayed reachable: restored by the runner itself
    assert after[2] != before[2] and after[2]["tagged"]  # host3 still has its changes (and its worker)
    with duckdb.connect(str(tmp_path / "res" / "quickstart-hosts.duckdb"), read_only=True) as con:
        runs = con.execute("SELECT status, cause FROM runs").fetchall()
    print(f"runs: {runs}")
    assert len(runs) == 1 and runs[0][0] == "failed" and "host3" in (runs[0][1] or ""), runs
    r = cli("clean", "--hosts", str(inv), timeout=120)  # host3 is back
    assert r.returncode == 0, r.stdout + r.stderr
    assert "restored 1 leases" in r.stdout and "host3" in r.stdout, r.stdout
    assert host_state(lab) == before
    r = cli("clean", "--hosts", str(inv), timeout=120)
    assert "restored 0 leases" in r.stdout, r.stdout  # nothing left over
