"""A shared bottleneck on real hosts: the inventory's router host forwards between the others and
shapes its data interface; the quickstart's own topology (``shared``) runs through it over SSH,
its bytes cross the router's queue, and every host is as before afterwards."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from .conftest import Lab, sh, stand_in_hosts
from .test_hosts_run import cli, host_state, job_times, quickstart

pytestmark = [pytest.mark.root, pytest.mark.spark]


@pytest.fixture(scope="module")
def lab4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    with stand_in_hosts(tmp_path_factory.mktemp("slsshr"), 4) as lab:
        yield lab


def routing(lab: Lab) -> list[object]:
    return [
        (
            json.loads(sh("ip", "-j", "route", "show", ns=h.ns)),
            sh("sysctl", "-n", "net.ipv4.ip_forward", "net.ipv4.conf.all.send_redirects", ns=h.ns).split(),
        )
        for h in lab.hosts
    ]


def test_shared_bottleneck_through_a_router_host(lab4: Lab, tmp_path: Path) -> None:
    inv = lab4.inventory(tmp_path / "inv.toml")
    text = inv.read_text().replace('h4 = "host4"\n', "")
    inv.write_text('router = "host4"\n' + text)
    spec = quickstart(tmp_path / "quickstart.toml", reps=1, kind="shared")
    before, routes = host_state(lab4), routing(lab4)

    r = cli("run", str(spec), "--hosts", str(inv), "--results", str(tmp_path / "res"), "--no-report")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert job_times(tmp_path / "res" / "quickstart-hosts.duckdb")
    with duckdb.connect(str(tmp_path / "res" / "quickstart-hosts.duckdb"), read_only=True) as con:
        (sent,) = con.execute("SELECT bottleneck_tx_bytes FROM runs").fetchone() or (None,)
        (remote,) = con.execute("SELECT sum(remote_bytes) FROM tasks").fetchone() or (None,)
    # the shuffle's remote fetches left the router through its shaped queue
    assert sent is not None and remote is not None and remote > 0 and sent >= remote, (sent, remote)
    assert host_state(lab4) == before and routing(lab4) == routes  # routes, forwarding, shaping: back
    r = cli("clean", "--hosts", str(inv))
    assert r.returncode == 0 and "restored 0 leases" in r.stdout, r.stdout + r.stderr
