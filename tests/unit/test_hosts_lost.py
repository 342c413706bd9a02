"""A host that drops off, the pure parts (fakes of an asyncssh connection, never used by the
product): how soon keepalives give it up, commands failing at once once its connection is gone,
a restore that stops there and says how much is left, and the error the CLI prints."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import asyncssh
import pytest

from shufflelab.emulate.protocols import MachineLost
from shufflelab.hosts import lease
from shufflelab.hosts.commands import describe
from shufflelab.hosts.control import HostError, HostLost, Session, _Watch, keepalive
from shufflelab.hosts.inventory import InventoryHost


class _Conn:
    """An asyncssh connection whose host answers until ``drop`` (then: what asyncssh does when
    keepalives go unanswered -- the owner told, every open channel failing)."""

    def __init__(self, watch: _Watch, answer_after: int | None = None) -> None:
        self.watch, self.closed, self.ran = watch, False, []  # type: list[str]
        self.answer_after = answer_after  # commands that succeed before the host drops off

    def drop(self) -> None:
        self.closed = True
        self.watch.connection_lost(asyncssh.ConnectionLost("Server not responding to keepalive"))

    def is_closed(self) -> bool:
        return self.closed

    async def run(self, command: str, input: str | None = None, check: bool = False) -> Any:
        if self.answer_after is not None and len(self.ran) >= self.answer_after:
            self.drop()
        if self.closed:
            raise asyncssh.ConnectionLost("Server not responding to keepalive")
        self.ran.append(command)
        return SimpleNamespace(stdout="0\n", stderr="", exit_status=0, exit_signal=None)


def _session(answer_after: int | None = None) -> tuple[Session, _Conn]:
    watch = _Watch()
    conn = _Conn(watch, answer_after)
    host = InventoryHost(address="192.0.2.3", data_interface="eth1", agent=True)
    return Session("host3", host, conn, 5.0, watch), conn  # type: ignore[arg-type]


def test_keepalives_give_a_silent_host_up_after_four_intervals() -> None:
    # one keepalive per connect_timeout_s of silence, 3 may go unanswered, closed at the 4th interval
    assert keepalive(3) == (3, 3, 12)
    assert keepalive(10) == (10, 3, 40)


def test_a_lost_connection_fails_every_step_at_once_naming_host_and_step() -> None:
    s, conn = _session()
    assert s.lost is None
    assert asyncio.run(s.run("sysctl x", ["sysctl", "-n", "x"])).stdout == "0\n"
    conn.drop()
    assert s.lost == "Server not responding to keepalive"
    with pytest.raises(HostLost) as err:
        asyncio.run(s.run("shape eth1", ["tc", "qdisc", "show"]))
    assert str(err.value) == "host host3 (192.0.2.3): shape eth1: connection lost: Server not responding to keepalive"
    assert isinstance(err.value, HostError) and isinstance(err.value, MachineLost)
    assert conn.ran == ["sysctl -n x"]  # nothing was sent to the lost host
    with pytest.raises(HostLost, match="fetch a log: connection lost"):
        asyncio.run(s.get("fetch a log", "/x", "/tmp/never-written"))


def test_a_connection_lost_during_a_step_is_host_lost() -> None:
    s, _ = _session(answer_after=0)
    with pytest.raises(HostLost, match=r"^host host3 \(192.0.2.3\): run ss: connection lost: Server not responding"):
        asyncio.run(s.run("run ss", ["ss", "-tin"]))


def test_a_restore_stops_at_a_lost_host_and_says_how_much_is_left() -> None:
    changes = [
        {"kind": "sysctl", "name": "net.ipv4.tcp_ecn", "previous": "2"},
        {"kind": "qdisc", "interface": "eth1", "previous": "noqueue"},
        {"kind": "sysctl", "name": "net.ipv4.tcp_slow_start_after_idle", "previous": "1"},
    ]
    s, conn = _session(answer_after=1)  # the newest change is restored, then the host drops off
    problems = asyncio.run(lease.restore_changes(s, "0123456789ab", changes, "/leases/0123456789ab.json"))
    assert conn.ran == ["sysctl -w net.ipv4.tcp_slow_start_after_idle=1"]  # nothing tried after the loss
    assert problems == [
        "host host3 (192.0.2.3) lease 0123456789ab: restore the root qdisc of eth1: connection lost: "
        "Server not responding to keepalive; 2 of 3 changes not restored"
    ]  # and the lease file was not removed (no `rm`: clean --hosts restores the rest when it is back)


def test_the_cli_says_what_was_lost_then_what_could_not_be_restored() -> None:
    lost = HostLost("host3", "192.0.2.3", "run ss", "connection lost: Server not responding to keepalive")
    try:
        try:
            raise lost
        finally:
            raise lease.RestoreError(["host host3 (192.0.2.3) lease x: 3 of 3 changes not restored"])
    except lease.RestoreError as exc:
        said = describe(exc)
    assert said.splitlines() == [
        "host host3 (192.0.2.3): run ss: connection lost: Server not responding to keepalive",
        "  then: could not restore everything (the lease files stay; run shufflelab clean --hosts): "
        "host host3 (192.0.2.3) lease x: 3 of 3 changes not restored",
    ]
    assert describe(lost) == str(lost)
    assert describe(ValueError("other")) == "other"
