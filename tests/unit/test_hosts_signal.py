"""Stopping a process group on a machine: the command the hosts backend (``SshProcess.stop``) and the
switch's controller send must signal a group whatever its id -- procps-ng's ``kill`` (4.0.2) reads
``-- -63`` as the signal option ``-63`` and prints its usage, so a group of pid 1-64 (a fresh PID
namespace's: the stand-in machines', a container's) was never stopped, and a restarted switch ran
beside the old one (both forwarding every packet, both writing the same telemetry CSV)."""

from __future__ import annotations

import subprocess
import time

import pytest

from shufflelab.hosts.remote import group_signal_argv


def _members(pgid: int) -> list[str]:
    """The live (not zombie) processes of group ``pgid``."""
    out = subprocess.run(["ps", "-o", "pid=,stat=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.split() and not line.split()[1].startswith("Z")]


@pytest.mark.parametrize("pgid", [2, 63, 64])
def test_a_small_groups_signal_is_sent_not_misread_as_an_option(pgid: int) -> None:
    r = subprocess.run(group_signal_argv("0", pgid), capture_output=True, text=True, timeout=10)
    said = r.stdout + r.stderr
    assert "sage" not in said, said  # kill's usage: the argument was taken for an option
    assert r.returncode == 0 or "No such process" in said or "not permitted" in said, said


def test_the_command_stops_a_whole_group() -> None:
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60; wait"], start_new_session=True)
    try:
        time.sleep(0.2)
        subprocess.run(group_signal_argv("TERM", leader.pid), check=True, timeout=10)
        assert leader.wait(timeout=10) != 0
        deadline = time.monotonic() + 10  # the two sleeps, reparented, go once their new parent reaps them
        while _members(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _members(leader.pid) == []
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait()
