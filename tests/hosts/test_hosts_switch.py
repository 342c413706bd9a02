"""The userspace switch on a router host over SSH, its runner killed mid-job: the switch keeps
running, ``clean --hosts`` stops it and sets every host back. On the session's six stand-in hosts
(``lab6``) with experiments/cc-under-udp-switch.toml's DCTCP cell, as test_hosts_quickstart.py runs
it to the end -- that test also checks the switch's delay, RED/ECN and DCTCP over SSH (configuration,
counters, samples, marks, the self-test's RTT), which had a run of its own here."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shufflelab.switch import binary_path

from .conftest import Lab
from .test_hosts_quickstart import ROUTER, SWITCH_CELL, offloads, routing, shipped
from .test_hosts_run import ENV, _driver_running, cli, host_state, tagged_running

pytestmark = [
    pytest.mark.root,
    pytest.mark.spark,
    pytest.mark.skipif(binary_path() is None, reason="shufflelab-switch is not built (make setup)"),
]


def switch_running(lab: Lab) -> bool:
    """A lease-tagged shufflelab-switch runs on the router host."""
    return tagged_running(lab, ROUTER, b"shufflelab-switch")


def test_a_killed_runner_leaves_the_switch_to_clean(lab6: Lab, tmp_path: Path) -> None:
    """SIGKILL mid-job: the switch keeps running on the router host (tagged), ``clean --hosts`` stops
    it and sets forwarding, offloads, routes, sysctls back on every host."""
    inv, spec = shipped(lab6, tmp_path, "cc-under-udp-switch.toml", idle_traffic=True)
    spec.write_text(spec.read_text() + '\n[telemetry]\nselftest = "off"\n')
    before, routes, offs = host_state(lab6), routing(lab6), offloads(lab6)
    runner = subprocess.Popen(
        [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--hosts", str(inv),
         "--results", str(tmp_path / "res"), "--no-report", *SWITCH_CELL],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not (_driver_running(lab6) and switch_running(lab6)):
            assert runner.poll() is None, f"the runner ended before its job started: {runner.stderr.read()}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the job did not start within 240 s"
            time.sleep(0.3)
        assert offloads(lab6) != offs  # the switch's offloads are off while it runs
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert switch_running(lab6)  # nothing stopped it: the controller is gone
    r = cli("clean", "--hosts", str(inv), timeout=120)
    # the four machines of the run: the master's (with w1, tgen, tsink), w2's, w3's and the router
    assert r.returncode == 0 and "restored 4 leases" in r.stdout, r.stdout + r.stderr
    assert not switch_running(lab6)
    assert host_state(lab6) == before and routing(lab6) == routes and offloads(lab6) == offs
    r = cli("clean", "--hosts", str(inv), timeout=120)
    assert "restored 0 leases" in r.stdout, r.stdout
