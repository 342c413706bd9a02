"""Per-host links, cross traffic, queue sampling and initcwnd/initrwnd over SSH: one run of the
quickstart's job on three stand-in hosts, each shaping its own egress (the star topology), with UDP at
75 % of the link from iperf3 between the two workers, the senders' queues sampled on their hosts, the
spec's initcwnd/initrwnd on each host's routes to the others during the run, the link self-test; every
host as before afterwards (routes included). The shared bottleneck on a router host is
test_hosts_quickstart's."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from .conftest import Lab, sh
from .test_hosts_run import ENV, cli, host_state, job_times, quickstart

pytestmark = [pytest.mark.root, pytest.mark.spark]


def test_udp_cross_traffic_and_queue_samples_over_ssh(lab: Lab, tmp_path: Path) -> None:
    inv = lab.inventory(tmp_path / "inv.toml")
    spec = quickstart(tmp_path / "quickstart.toml", reps=1, cross={"source": "h2", "sink": "h3", "udp_percent": 75})
    text = spec.read_text().replace("[tcp]\n", "[tcp]\ninitcwnd = 20\ninitrwnd = 30\n")
    spec.write_text(text.replace('selftest = "off"', 'selftest = "warn"'))
    before, routes = host_state(lab), [sh("ip", "-j", "route", "show", ns=h.ns) for h in lab.hosts]

    runner = subprocess.Popen(
        [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--hosts", str(inv),
         "--results", str(tmp_path / "res"), "--no-report"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True,
    )  # fmt: skip
    h2_data = json.loads(sh("ip", "-j", "-4", "addr", "show", "dev", "data0", ns=lab.hosts[1].ns))[0]
    h2_address = h2_data["addr_info"][0]["local"]
    seen: dict[str, object] = {}
    try:  # h1's route to h2's data address while the run is on
        deadline = time.monotonic() + 600
        while runner.poll() is None and time.monotonic() < deadline and not seen:
            for route in json.loads(sh("ip", "-j", "route", "show", ns=lab.hosts[0].ns)):
                if route.get("dst") == h2_address and route.get("metrics"):
                    seen = route
            time.sleep(0.5)
        out, err = runner.communicate(timeout=600)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == 0, out[-3000:] + err[-3000:]
    assert seen.get("metrics") == [{"initcwnd": 20, "initrwnd": 30}] and seen.get("dev") == "data0", seen
    db = tmp_path / "res" / "quickstart-hosts.duckdb"
    times = job_times(db)
    assert len(times) == 1, times
    with duckdb.connect(str(db), read_only=True) as con:
        udp = con.execute("SELECT run_id, kind, bytes, bits_per_second, error FROM cross_traffic").fetchall()
        samples = con.execute(
            "SELECT dev, count(*), max(backlog_bytes), max(sent_bytes) FROM queue_samples GROUP BY dev ORDER BY dev"
        ).fetchall()
        pct = con.execute("SELECT run_id, job_time_s FROM runs ORDER BY run_id").fetchall()
    print(f"job times {times}; runs {pct}; cross traffic {udp}; queue samples {samples}")
    # the iperf3 client on h2 sent to h3's data address, its JSON came back over SSH
    assert len(udp) == 1 and udp[0][1] == "udp" and udp[0][2] > 0 and udp[0][4] is None, udp
    # the run sampled each host's shaped data interface (named as the spec's ports)
    assert {s[0] for s in samples} == {"h1", "h2", "h3"}, samples
    assert all(s[1] > 0 and s[3] > 0 for s in samples), samples
    # the link self-test over SSH: each host's shaped egress measured
    (run,) = sorted((tmp_path / "res" / "quickstart-hosts" / "runs").iterdir())
    checks = json.loads((run / "selftest.json").read_text())
    rows = [(c["port"], c["src"], c["dst"], c["goodput_mbps"], c["rate_ratio"], c["rtt_ms"]) for c in checks]
    print(f"self-test: {rows}")
    assert sorted(c["src"] for c in checks) == ["h1", "h2", "h3"], checks
    assert all(c["goodput_mbps"] and c["rtt_ms"] is not None for c in checks), checks
    assert host_state(lab) == before
    assert [sh("ip", "-j", "route", "show", ns=h.ns) for h in lab.hosts] == routes
    r = cli("clean", "--hosts", str(inv))
    assert r.returncode == 0 and "restored 0 leases" in r.stdout, r.stdout + r.stderr
