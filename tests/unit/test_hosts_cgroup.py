"""A CPU cgroup on a machine under its lease (TPC-H/NDP's weak storage machines over SSH), with a
fake of the SSH connection to a machine whose cgroup v1 ``cpu`` hierarchy is a dictionary (never
used by the product): the group is recorded in the lease file before it is made, a process started
through it puts itself in, and a restore -- the run's end, or ``clean --hosts`` after the controller
died -- moves every process left in it back to the parent group before removing it."""

from __future__ import annotations

import asyncio
import json
import shlex
from types import SimpleNamespace
from typing import Any

import pytest

from shufflelab.hosts import lease
from shufflelab.hosts.control import HostError, Session, _Watch
from shufflelab.hosts.inventory import InventoryHost
from shufflelab.hosts.remote import Loop

LID = "0123456789ab"
ROOT = lease.CGROUP_CPU_ROOT
GROUP = f"{ROOT}/shufflelab-hosts-{LID}-hdfs-s1"
LEASES = "/var/lib/shufflelab/leases"


class _Machine:
    """A machine's cgroup v1 cpu hierarchy (group -> its settings and pids), its files, and every
    command run there in order."""

    def __init__(self, controller: bool = True) -> None:
        self.controller = controller
        self.groups: dict[str, dict[str, Any]] = {}
        self.root_pids: list[int] = []
        self.files: dict[str, str] = {}
        self.ran: list[str] = []

    def is_closed(self) -> bool:
        return False

    async def run(self, command: str, input: str | None = None, check: bool = False) -> Any:
        self.ran.append(command)
        w = shlex.split(command)
        if w[:2] == ["sudo", "-n"]:
            w = w[3:]
        out, status = "", 0
        if w[:2] == ["sh", "-c"] and "cat >" in w[2]:  # the lease file, written atomically
            self.files[w[2].rsplit(" ", 1)[1]] = input or ""
        elif w == ["test", "-f", f"{ROOT}/cpu.cfs_quota_us"]:
            status = 0 if self.controller else 1
        elif w[:2] == ["sh", "-c"] and w[2].startswith("mkdir -p"):
            g = self.groups.setdefault(w[3], {"pids": []})
            g["period"], g["quota"] = int(w[4]), int(w[5])
        elif w[:2] == ["sh", "-c"] and w[2] == 'echo "$1" > "$0"':
            self.groups[w[3].rsplit("/", 1)[0]]["pids"].append(int(w[4]))
        elif w[:2] == ["sh", "-c"] and w[2].startswith("for p;"):
            assert w[3] == f"{ROOT}/cgroup.procs", w
            for g in self.groups.values():
                g["pids"] = [p for p in g["pids"] if str(p) not in w[4:]]
            self.root_pids += [int(p) for p in w[4:]]
        elif w[0] == "cat" and w[1].endswith("/cgroup.procs"):
            g = self.groups.get(w[1].rsplit("/", 1)[0])
            out, status = ("".join(f"{p}\n" for p in g["pids"]), 0) if g is not None else ("", 1)
        elif w[0] == "cat":
            out = self.files[w[1]]
        elif w[:2] == ["test", "-e"]:
            status = 0 if w[2] in self.groups else 1
        elif w[:2] == ["rmdir", "--"]:
            g = self.groups.get(w[2])
            status = 1 if g is None or g["pids"] else 0
            if status == 0:
                del self.groups[w[2]]
        elif w[:2] == ["rm", "-f"]:
            self.files.pop(w[2], None)
        elif w[:2] == ["sh", "-c"] and w[2].startswith("ls -1"):  # the lease files
            out = "".join(f"{p.rsplit('/', 1)[1]}\n" for p in self.files)
        return SimpleNamespace(stdout=out, stderr="busy" if status else "", exit_status=status, exit_signal=None)

    def index(self, prefix: str) -> int:
        """The position of the first command starting with ``prefix`` (after sudo)."""
        return next(i for i, c in enumerate(self.ran) if c.removeprefix("sudo -n -- ").startswith(prefix))


def _lease(machine: _Machine, user: str = "root") -> lease.HostLease:
    host = InventoryHost(address="192.0.2.7", data_interface="eth1", agent=True, user=user)
    return lease.HostLease(Session("node7", host, machine, 5.0, _Watch()), LID, LEASES)  # type: ignore[arg-type]


def test_the_group_is_recorded_in_the_lease_file_before_it_is_made() -> None:
    m = _Machine()
    hl = _lease(m)
    assert asyncio.run(hl.cpu_cgroup("hdfs-s1", 0.5)) == GROUP
    assert hl.changes == [{"kind": "cgroup", "path": GROUP}]
    assert m.groups[GROUP] == {"pids": [], "period": 100_000, "quota": 50_000}
    written = json.loads(m.files[f"{LEASES}/{LID}.json"])
    assert written["changes"] == [{"kind": "cgroup", "path": GROUP}]
    assert m.index("sh -c 'umask 077") < m.index("sh -c 'mkdir -p")  # recorded, then made
    # a new cap on the same group: changed, recorded once
    asyncio.run(hl.cpu_cgroup("hdfs-s1", 1))
    assert m.groups[GROUP]["quota"] == 100_000 and len(hl.changes) == 1


def test_a_machine_without_the_cpu_controller_is_refused_before_anything_is_recorded() -> None:
    m = _Machine(controller=False)
    hl = _lease(m)
    with pytest.raises(HostError, match=r"node7 .*no cgroup v1 cpu controller at /sys/fs/cgroup/cpu"):
        asyncio.run(hl.cpu_cgroup("hdfs-s1", 0.5))
    assert hl.changes == [] and not m.files and not m.groups


def test_restore_moves_the_processes_left_to_the_parent_before_removing_the_group() -> None:
    """Newest first: a group made after the lease tracked its processes is removed while they still
    run (they go back to the parent group), then they are stopped; the lease file goes last."""
    m = _Machine()
    hl = _lease(m)

    async def make() -> None:
        await hl.track_processes()
        await hl.cpu_cgroup("hdfs-s1", 0.25)
        await hl.add_to_cgroup(GROUP, 4242)
        await hl.add_to_cgroup(GROUP, 4343)

    asyncio.run(make())
    assert m.groups[GROUP]["pids"] == [4242, 4343]
    m.ran.clear()
    assert asyncio.run(hl.restore()) == []
    assert GROUP not in m.groups and m.root_pids == [4242, 4343]
    moved, removed = m.index("sh -c 'for p;"), m.index(f"rmdir -- {GROUP}")
    stopped = m.index("sh -c 'for p in /proc")  # the tagged processes
    assert moved < removed < stopped < m.index(f"rm -f {LEASES}/{LID}.json")
    assert f"{LEASES}/{LID}.json" not in m.files


def test_clean_removes_a_killed_controllers_group_from_its_lease_file() -> None:
    """The controller died (SIGKILL) with the group made and a daemon in it: ``clean --hosts``
    restores what the lease file records -- the daemon back in the parent group, the group gone --
    and a second clean finds nothing; a group of no lease, or another lease's, is never touched."""
    m = _Machine()
    other = f"{ROOT}/shufflelab-hosts-ba9876543210-hdfs-s1"
    m.groups[GROUP] = {"pids": [77], "period": 100_000, "quota": 25_000}
    m.groups[other] = {"pids": [78], "period": 100_000, "quota": 25_000}
    doc = {"id": LID, "host": "node7", "controller": {"machine": "gone", "pid": 1}, "changes": [
        {"kind": "cgroup", "path": GROUP}]}  # fmt: skip
    m.files[f"{LEASES}/{LID}.json"] = json.dumps(doc)
    session = _lease(m).session
    report = asyncio.run(lease.clean_host(session, LEASES))
    assert report.problems == [] and report.restored == [f"node7: {LID} (1 changes)"]
    assert GROUP not in m.groups and m.root_pids == [77] and other in m.groups
    assert not m.files
    # a lease file naming a group outside its own names: refused, left to a person
    m.files[f"{LEASES}/{LID}.json"] = json.dumps({**doc, "changes": [{"kind": "cgroup", "path": other}]})
    report = asyncio.run(lease.clean_host(session, LEASES))
    assert other in m.groups and len(report.problems) == 1 and "is not this lease's" in report.problems[0]


def test_a_group_already_gone_restores_without_a_problem() -> None:
    m = _Machine()
    hl = _lease(m)
    asyncio.run(hl.cpu_cgroup("hdfs-s1", 0.5))
    del m.groups[GROUP]  # removed with the storage (or never made: the controller died in between)
    assert asyncio.run(hl.restore()) == [] and not m.files


def test_the_backends_group_starts_its_processes_inside_and_a_user_may_put_them_there() -> None:
    """The hosts backend's CPU group: a process started through it writes its own pid into the
    group's ``cgroup.procs`` before it becomes the program; for a user other than root that file is
    given to the user when the group is made (sudo makes and removes the group)."""
    m = _Machine()
    hl = _lease(m, user="lab")
    loop = Loop()
    try:
        cg = lease.LeasedCgroup(loop, hl, "hdfs-s1", 0.5)
        cg.create()
        argv = cg.starting(["java", "-Xmx1g", "Main"])
        cg.remove()
    finally:
        loop.close()
    assert str(cg.path) == GROUP
    assert argv == ["sh", "-c", 'echo "$$" > "$0/cgroup.procs" && exec "$@"', GROUP, "java", "-Xmx1g", "Main"]
    assert f"sudo -n -- chown lab {GROUP}/cgroup.procs {GROUP}/tasks" in m.ran
    assert m.ran[m.index("sh -c 'mkdir -p")].startswith("sudo -n -- ")
    assert m.ran[m.index(f"rmdir -- {GROUP}")].startswith("sudo -n -- ")
    assert GROUP not in m.groups
