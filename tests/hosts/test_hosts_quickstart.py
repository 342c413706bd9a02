"""experiments/quickstart.toml as it is (one repetition instead of three) on seven stand-in hosts: its
six hosts and its shared bottleneck on a router host, its scenario with cross traffic (UDP at 75 % of
the link from tgen to tsink through the router; the scenario without it is the same run minus the
iperf3 pair, covered by the other hosts tests), its link self-test; the job time against the local
backend's, and every host as before afterwards."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import duckdb
import pytest

from .conftest import Lab, sh
from .test_hosts_run import REPO, cli, host_state, job_times

pytestmark = [pytest.mark.root, pytest.mark.spark]

SPEC_HOSTS = ["master", "w1", "w2", "w3", "tgen", "tsink"]
UDP = ["--select", "udp=75"]  # the scenario with cross traffic through the router host


def routing(lab: Lab) -> list[object]:
    """Every host's routes and forwarding settings (the router host changes both while it runs)."""
    return [
        (
            json.loads(sh("ip", "-j", "route", "show", ns=h.ns)),
            sh("sysctl", "-n", "net.ipv4.ip_forward", "net.ipv4.conf.all.send_redirects", ns=h.ns).split(),
        )
        for h in lab.hosts
    ]


def by_udp(db: Path) -> dict[bool, list[float]]:
    """Job times of the runs with and without UDP cross traffic."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT job_time_s, run_id IN (SELECT run_id FROM cross_traffic WHERE kind = 'udp' AND bytes > 0) "
            "FROM runs WHERE status = 'ok'"
        ).fetchall()
    out: dict[bool, list[float]] = {False: [], True: []}
    for t, udp in rows:
        out[bool(udp)].append(float(t))
    return out


def test_the_quickstart_unchanged_over_ssh_agrees_with_local(lab7: Lab, tmp_path: Path) -> None:
    inv = lab7.inventory(tmp_path / "inv.toml")
    text = inv.read_text()
    text = text[: text.index("[map]")] + "[map]\n"
    text += "".join(f'{h} = "host{i}"\n' for i, h in enumerate(SPEC_HOSTS, start=1))
    inv.write_text('router = "host7"\n' + text)
    spec = tmp_path / "quickstart.toml"
    original = (REPO / "experiments" / "quickstart.toml").read_text()
    spec.write_text(original.replace("repetitions = 3", "repetitions = 1"))
    before, routes = host_state(lab7), routing(lab7)

    r = cli("run", str(spec), "--hosts", str(inv), "--results", str(tmp_path / "hosts"), "--no-report", *UDP)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert host_state(lab7) == before and routing(lab7) == routes  # shaping, sysctls, routes, forwarding: back
    db = tmp_path / "hosts" / "quickstart.duckdb"
    job_times(db)
    remote = by_udp(db)
    with duckdb.connect(str(db), read_only=True) as con:
        udp = con.execute("SELECT bytes, bits_per_second FROM cross_traffic WHERE kind = 'udp'").fetchall()
        backlog = con.execute("SELECT dev, count(*), max(backlog_bytes) FROM queue_samples GROUP BY dev").fetchall()
        hosts = {row[0] for row in con.execute("SELECT DISTINCT host FROM tasks").fetchall()}
        through = con.execute(
            "SELECT r.bottleneck_tx_bytes, (SELECT sum(remote_bytes) FROM tasks t WHERE t.run_id = r.run_id) "
            "FROM runs r"
        ).fetchall()
    print(f"over SSH: {remote}; UDP {udp}; router queue {backlog}")
    assert len(remote[False]) == 0 and len(remote[True]) == 1, remote
    # the shuffle's remote fetches left the router host through its shaped queue
    assert through and all(sent is not None and rb and sent >= rb for sent, rb in through), through
    # what the driver wrote on the master's host came back: event logs (the tasks table, the executors
    # on the stand-ins' data addresses) and the listener's output
    assert hosts and all(str(h).startswith("10.214.") for h in hosts), hosts
    runs = sorted((tmp_path / "hosts" / "quickstart" / "runs").iterdir())
    assert runs and all(any((d / "eventlog").iterdir()) for d in runs)
    assert all(any(p.stat().st_size for p in (d / "listener").glob("*.jsonl")) for d in runs)
    # the router host's queue sampled, named as the emulated router's downlink
    assert len(backlog) == 1 and backlog[0][1] > 0 and backlog[0][2] > 0, backlog

    r = cli("run", str(spec), "--results", str(tmp_path / "local"), "--no-report", *UDP)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    local = by_udp(tmp_path / "local" / "quickstart.duckdb")
    print(f"local: {local}")
    ratio = statistics.median(remote[True]) / statistics.median(local[True])
    print(f"UDP 75 %: job over SSH / local = {ratio:.2f}")
    assert 0.5 < ratio < 2.0, (remote, local)

    r = cli("clean", "--hosts", str(inv))
    assert r.returncode == 0 and "restored 0 leases" in r.stdout, r.stdout + r.stderr
