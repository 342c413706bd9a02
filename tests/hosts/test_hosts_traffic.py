"""Cross traffic and queue sampling over SSH: the quickstart's cross-traffic matrix (UDP at 0 and 75 %
of the link) on the stand-in hosts, iperf3 between two of them, the senders' queues sampled on
their hosts; every host as before afterwards."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from .conftest import Lab
from .test_hosts_run import cli, host_state, job_times, quickstart

pytestmark = [pytest.mark.root, pytest.mark.spark]


def test_udp_cross_traffic_and_queue_samples_over_ssh(lab: Lab, tmp_path: Path) -> None:
    inv = lab.inventory(tmp_path / "inv.toml")
    spec = quickstart(tmp_path / "quickstart.toml", reps=1, matrix=True)
    before = host_state(lab)

    r = cli("run", str(spec), "--hosts", str(inv), "--results", str(tmp_path / "res"), "--no-report")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    db = tmp_path / "res" / "quickstart-hosts.duckdb"
    times = job_times(db)
    with duckdb.connect(str(db), read_only=True) as con:
        udp = con.execute("SELECT run_id, kind, bytes, bits_per_second, error FROM cross_traffic").fetchall()
        samples = con.execute(
            "SELECT dev, count(*), max(backlog_bytes), max(sent_bytes) FROM queue_samples GROUP BY dev ORDER BY dev"
        ).fetchall()
        pct = con.execute("SELECT run_id, job_time_s FROM runs ORDER BY run_id").fetchall()
    print(f"job times {times}; runs {pct}; cross traffic {udp}; queue samples {samples}")
    # the 75 % run's iperf3 client on h2 sent to h3's data address, its JSON came back over SSH
    assert len(udp) == 1 and udp[0][1] == "udp" and udp[0][2] > 0 and udp[0][4] is None, udp
    # every run sampled each host's shaped data interface (named as the spec's ports)
    assert {s[0] for s in samples} == {"h1", "h2", "h3"}, samples
    assert all(s[1] > 0 and s[3] > 0 for s in samples), samples
    assert host_state(lab) == before
    r = cli("clean", "--hosts", str(inv))
    assert r.returncode == 0 and "restored 0 leases" in r.stdout, r.stdout + r.stderr
