"""Leases: every change the backend makes on a host is recorded in a lease file *on that host*
before it is made, with what was there before, so that it can be undone after anything -- an
exception, Ctrl-C, SIGTERM (:func:`leased` restores on the way out), or a SIGKILL of the
controller or a lost connection (``shufflelab clean --hosts`` restores what the files record,
and nothing else).

A lease file is ``<lease_dir>/<id>.json``: the controller (machine, pid), the host, and the
changes in order -- ``sysctl`` (name, previous value), ``qdisc`` (interface; only a kernel-default
root qdisc is replaced, and restoring deletes ours so the kernel's default comes back),
``process`` (a tag in the environment of everything started, so no pid is ever guessed) and
``scratch`` (the lease's own folder ``/var/tmp/shufflelab-hosts/<id>``, removed) and ``route``
(a /32 route through the router host, added only where the host had none, deleted) and
``offloads`` (an interface's TSO/GSO/GRO, turned off for the userspace switch, set back) and
``cgroup`` (a cgroup v1 ``cpu`` group ``/sys/fs/cgroup/cpu/shufflelab-hosts-<id>-<name>`` capping
a weak storage machine's daemons: removed, any process left in it moved back to the parent group
first; :class:`LeasedCgroup` is the hosts backend's
:class:`~shufflelab.emulate.protocols.CpuCaps` group).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import secrets
import shlex
import shutil
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from shufflelab import procfs
from shufflelab.cgroups import CFS_PERIOD_US, CgroupError, cfs_quota_us
from shufflelab.hosts.control import HostError, HostLost, Session
from shufflelab.hosts.safety import SafetyError, check_shaping
from shufflelab.names import INTERFACE, whole
from shufflelab.routes import routes_to_restore

if TYPE_CHECKING:
    from shufflelab.hosts.remote import Loop

SYSCTL = whole(r"[a-z0-9_]+(\.[A-Za-z0-9_-]+)+")
LEASE_ID = whole(r"[0-9a-f]{12}")
TAG_VAR = "SHUFFLELAB_LEASE"
# the offloads the backend may change (``ethtool -K`` name -> ``ethtool -k`` name)
OFFLOADS = {"tso": "tcp-segmentation-offload", "gso": "generic-segmentation-offload", "gro": "generic-receive-offload"}
# every host's scratch folders live below this; a lease removes only ``SCRATCH_ROOT/<its id>``
SCRATCH_ROOT = "/var/tmp/shufflelab-hosts"


# a machine's cgroup v1 cpu hierarchy; a lease creates groups only directly below it, named after itself
CGROUP_CPU_ROOT = "/sys/fs/cgroup/cpu"
CGROUP_NAME = whole(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,80}")


def cgroup_path(lease_id: str, name: str) -> str:
    """The folder of the lease's CPU group ``name`` on a machine."""
    if not LEASE_ID.match(lease_id):
        raise ValueError(f"{lease_id!r} is not a lease id")
    if not CGROUP_NAME.match(name):
        raise ValueError(f"{name!r} is not a cgroup name")
    return f"{CGROUP_CPU_ROOT}/shufflelab-hosts-{lease_id}-{name}"


def scratch_path(lease_id: str) -> str:
    if not LEASE_ID.match(lease_id):
        raise ValueError(f"{lease_id!r} is not a lease id")
    return f"{SCRATCH_ROOT}/{lease_id}"


def new_lease_id() -> str:
    return secrets.token_hex(6)


def offload_states(ethtool_k: str) -> dict[str, str]:
    """``tso``/``gso``/``gro`` -> ``on``/``off`` from ``ethtool -k`` output (a feature it does not
    list, or lists as ``[fixed]``, is left out: it cannot be changed). Pure."""
    long_names = {v: k for k, v in OFFLOADS.items()}
    out = {}
    for line in ethtool_k.splitlines():
        name, _, rest = line.strip().partition(":")
        words = rest.split()
        if name in long_names and words and words[0] in ("on", "off") and "[fixed]" not in words:
            out[long_names[name]] = words[0]
    return out


def offload_args(interface: str, values: dict[str, str]) -> list[str]:
    """``ethtool -K`` for ``values`` (validated: known features, on/off, an interface name)."""
    if not INTERFACE.match(interface):
        raise ValueError(f"{interface!r} is not an interface name")
    args = ["ethtool", "-K", interface]
    for k, v in values.items():
        if k not in OFFLOADS or v not in ("on", "off"):
            raise ValueError(f"offload {k} = {v!r}")
        args += [k, v]
    return args


@dataclass
class HostLease:
    """The changes made on one host under one lease id (mirrored to the host's lease file)."""

    session: Session
    lease_id: str
    lease_dir: str
    changes: list[dict[str, Any]] = field(default_factory=list)
    created: float = field(default_factory=time.time)

    @property
    def path(self) -> str:
        return f"{self.lease_dir}/{self.lease_id}.json"

    def document(self) -> dict[str, Any]:
        return {
            "id": self.lease_id,
            "host": self.session.name,
            "address": self.session.host.address,
            "controller": {"machine": socket.gethostname(), "pid": os.getpid()},
            "created": self.created,
            "changes": self.changes,
        }

    async def _record(self, change: dict[str, Any]) -> None:
        self.changes.append(change)
        await self.session.write_file("write the lease file", self.path, json.dumps(self.document(), indent=1))

    async def open(self) -> None:
        await self.session.write_file("write the lease file", self.path, json.dumps(self.document(), indent=1))

    async def set_sysctl(self, name: str, value: str) -> None:
        """Set a sysctl, recording its previous value first (the first one, if set twice)."""
        if not SYSCTL.match(name):
            raise ValueError(f"{name!r} is not a sysctl name")
        step = f"sysctl {name} = {value}"
        if not any(c["kind"] == "sysctl" and c["name"] == name for c in self.changes):
            prev = await self.session.run(step, ["sysctl", "-n", name])
            await self._record({"kind": "sysctl", "name": name, "previous": prev.stdout.strip()})
        await self.session.run(step, ["sysctl", "-w", f"{name}={value}"], privileged=True)

    async def replace_root_qdisc(self, interface: str, qdisc: Sequence[str]) -> None:
        """Replace ``interface``'s root qdisc (e.g. ``["htb", "default", "1"]``). Refused on the
        control interface (unless allowed) and on an interface whose root qdisc someone configured:
        only a kernel default can be given back exactly."""
        step = f"shape {interface}"
        try:
            await check_shaping(self.session, interface)
        except SafetyError as exc:
            raise HostError(self.session.name, self.session.host.address, step, str(exc)) from None
        if not any(c["kind"] == "qdisc" and c["interface"] == interface for c in self.changes):
            root = await root_qdisc(self.session, interface, step)
            if root.get("handle") != "0:":
                raise HostError(
                    self.session.name,
                    self.session.host.address,
                    step,
                    f"{interface} has a configured root qdisc ({root.get('kind')} {root.get('handle')}); shufflelab "
                    "replaces only a kernel-default root qdisc, which it can restore exactly (remove it first)",
                )
            await self._record({"kind": "qdisc", "interface": interface, "previous": root.get("kind")})
        await self.session.run(step, ["tc", "qdisc", "replace", "dev", interface, "root", *qdisc], privileged=True)

    async def tc(self, interface: str, args: Sequence[str]) -> None:
        """Further tc changes (classes, children) below a root qdisc this lease replaced."""
        if not any(c["kind"] == "qdisc" and c["interface"] == interface for c in self.changes):
            raise ValueError(f"{interface}: replace its root qdisc under the lease first")
        await self.session.run(f"shape {interface}", ["tc", *args], privileged=True)

    async def add_route(
        self, destination: str, via: str | None, interface: str, attributes: Sequence[str] = ()
    ) -> None:
        """Route ``destination`` (one address) via ``via`` (None: on-link) on ``interface`` with
        route ``attributes`` (e.g. ``initcwnd 10``); refused when the host already has a route for
        exactly that address (only ours is removed on restore). Called again, it replaces ours."""
        dst = str(ipaddress.ip_address(destination))
        gw = str(ipaddress.ip_address(via)) if via is not None else None
        step = f"route {dst} via {gw}" if gw else f"route {dst} on {interface}"
        if not self.has_route(dst):
            r = await self.session.run(step, ["ip", "-j", "route", "show", "exact", f"{dst}/32"])
            if json.loads(r.stdout or "[]"):
                raise HostError(
                    self.session.name, self.session.host.address, step,
                    f"the host already has a route for {dst}/32; shufflelab adds only routes it can remove",
                )  # fmt: skip
            await self._record({"kind": "route", "destination": dst, "interface": interface})
        cmd = ["ip", "route", "replace", f"{dst}/32", *(["via", gw] if gw else []), "dev", interface, *attributes]
        await self.session.run(step, cmd, privileged=True)

    async def set_offloads(self, interface: str, values: dict[str, str]) -> None:
        """Set ``interface``'s offloads (``{"gro": "off"}``), recording their previous states first."""
        step = f"offloads of {interface}"
        offload_args(interface, values)  # validated before anything is recorded
        if not any(c["kind"] == "offloads" and c["interface"] == interface for c in self.changes):
            shown = await self.session.run(step, ["ethtool", "-k", interface])
            prev = offload_states(shown.stdout)
            await self._record({"kind": "offloads", "interface": interface, "previous": prev})
        else:
            prev = next(c["previous"] for c in self.changes if c["kind"] == "offloads" and c["interface"] == interface)
        wanted = {k: v for k, v in values.items() if k in prev}  # a fixed feature cannot be changed
        if wanted:
            await self.session.run(step, offload_args(interface, wanted), privileged=True)

    async def link_down(self, interface: str) -> None:
        """Take ``interface`` down (a fault), recording it and the routes it takes with it first, so
        that a restore -- also ``clean --hosts`` after a crash mid-fault -- brings both back."""
        if not INTERFACE.match(interface):
            raise ValueError(f"{interface!r} is not an interface name")
        step = f"take {interface} down"
        routes = (await self.session.run(step, ["ip", "route", "show"])).stdout.splitlines()
        await self._record({"kind": "link", "interface": interface, "routes": [r for r in routes if r.strip()]})
        await self.session.run(step, ["ip", "link", "set", "dev", interface, "down"], privileged=True)

    async def link_up(self, interface: str) -> None:
        """Bring ``interface`` up again with the routes :meth:`link_down` recorded (idempotent)."""
        downs = [c for c in self.changes if c["kind"] == "link" and c["interface"] == interface]
        await link_up(self.session, interface, downs[-1]["routes"] if downs else [])

    def routes(self) -> list[str]:
        """The destinations of the /32 routes this lease added, in the order it added them."""
        return [str(c["destination"]) for c in self.changes if c["kind"] == "route"]

    def has_route(self, destination: str) -> bool:
        """Whether this lease added the /32 route to ``destination``."""
        dst = str(ipaddress.ip_address(destination))
        return any(c["kind"] == "route" and c["destination"] == dst for c in self.changes)

    async def track_processes(self) -> str:
        """Record (once) that processes tagged with this lease may run; returns the tag
        (``NAME=VALUE``) to put in the environment of everything started."""
        tag = f"{TAG_VAR}={self.lease_id}"
        if not any(c["kind"] == "process" for c in self.changes):
            await self._record({"kind": "process", "tag": tag})
        return tag

    async def make_scratch(self) -> str:
        """The lease's scratch folder on the host (created as the SSH user, removed on restore)."""
        path = scratch_path(self.lease_id)
        if not any(c["kind"] == "scratch" for c in self.changes):
            await self._record({"kind": "scratch", "path": path})
        await self.session.run("create the scratch folder", ["mkdir", "-p", "-m", "700", path])
        return path

    async def cpu_cgroup(self, name: str, cores: float) -> str:
        """The lease's CPU group ``name`` capped at ``cores`` CPUs (cgroup v1 ``cpu``:
        ``cpu.cfs_quota_us = cores x cpu.cfs_period_us``), created -- recorded first -- or its cap
        changed; its folder. A user other than root gets its ``cgroup.procs`` (a process it starts may
        then put itself in). Refused, before anything is recorded, on a machine without the v1 ``cpu``
        controller at :data:`CGROUP_CPU_ROOT`."""
        path = cgroup_path(self.lease_id, name)
        quota = cfs_quota_us(cores)  # validates
        step = f"cap {name} at {cores:g} CPUs"
        if not any(c["kind"] == "cgroup" and c["path"] == path for c in self.changes):
            found = await self.session.run(step, ["test", "-f", f"{CGROUP_CPU_ROOT}/cpu.cfs_quota_us"], check=False)
            if found.exit_status != 0:
                raise HostError(
                    self.session.name, self.session.host.address, step,
                    f"no cgroup v1 cpu controller at {CGROUP_CPU_ROOT} (cpu.cfs_quota_us missing): a CPU cap "
                    "on this machine needs one (mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu)",
                )  # fmt: skip
            await self._record({"kind": "cgroup", "path": path})
        script = 'mkdir -p "$0" && echo "$1" > "$0/cpu.cfs_period_us" && echo "$2" > "$0/cpu.cfs_quota_us"'
        await self.session.run(step, ["sh", "-c", script, path, str(CFS_PERIOD_US), str(quota)], privileged=True)
        if self.session.host.needs_sudo:
            files = [f"{path}/cgroup.procs", f"{path}/tasks"]
            await self.session.run(step, ["chown", self.session.host.user, *files], privileged=True)
        return path

    async def add_to_cgroup(self, path: str, pid: int) -> None:
        """Move process ``pid`` of the machine (all its threads) into the lease's group at ``path``."""
        _check_cgroup(path, self.lease_id)
        step = f"move process {pid} into {path}"
        await self.session.run(step, ["sh", "-c", 'echo "$1" > "$0"', f"{path}/cgroup.procs", str(int(pid))])

    async def start(self, step: str, argv: Sequence[str], log: str = "/dev/null") -> None:
        """Start a daemon in its own session, tagged with this lease in its environment."""
        await self.track_processes()
        script = f'{TAG_VAR}={self.lease_id} setsid "$@" >{shlex.quote(log)} 2>&1 </dev/null & echo $!'
        await self.session.run(step, ["sh", "-c", script, "sh", *argv], privileged=True)

    async def restore(self) -> list[str]:
        """Undo every recorded change, newest first; remove the lease file if all went back.
        Returns the problems (empty: the host is as it was)."""
        return await restore_changes(self.session, self.lease_id, self.changes, self.path)


async def root_qdisc(session: Session, interface: str, step: str) -> dict[str, Any]:
    r = await session.run(step, ["tc", "-j", "qdisc", "show", "dev", interface, "root"])
    found = json.loads(r.stdout or "[]")
    if not found:
        raise HostError(session.name, session.host.address, step, f"{interface}: no such interface (no root qdisc)")
    return dict(found[0])


def _check_cgroup(path: str, lease_id: str) -> None:
    prefix = cgroup_path(lease_id, "x")[:-1]
    name = path.removeprefix(prefix)
    if not path.startswith(prefix) or not CGROUP_NAME.match(name):
        raise ValueError(f"cgroup {path!r} is not this lease's")


async def remove_cgroup(session: Session, lease_id: str, path: str, attempts: int = 50) -> None:
    """The lease's CPU group at ``path`` removed (nothing to do when it is not there): each process
    left in it moved back to the parent group first, then the folder removed (again, while a
    process was still leaving it)."""
    _check_cgroup(path, lease_id)
    step = f"remove the CPU cgroup {path}"
    parent = path.rsplit("/", 1)[0]
    reason = ""
    for _ in range(attempts):
        left = await session.run(step, ["cat", f"{path}/cgroup.procs"], check=False, privileged=True)
        if left.exit_status != 0:
            there = await session.run(step, ["test", "-e", path], check=False)
            if there.exit_status != 0:
                return
        elif left.stdout.split():
            move = 'for p; do echo "$p" > "$0" 2>/dev/null; done; exit 0'
            pids = [str(int(p)) for p in left.stdout.split()]
            await session.run(step, ["sh", "-c", move, f"{parent}/cgroup.procs", *pids], privileged=True)
        rm = await session.run(step, ["rmdir", "--", path], check=False, privileged=True)
        if rm.exit_status == 0:
            return
        reason = rm.stderr.strip() or rm.stdout.strip()
        await asyncio.sleep(0.1)
    raise HostError(session.name, session.host.address, step, f"the group is still there: {reason}")


@dataclass
class LeasedCgroup:
    """A CPU group on a machine under its lease (the hosts backend's
    :class:`~shufflelab.emulate.protocols.CpuGroup`): created, recorded first, by :meth:`create`; a
    process started through :meth:`starting` puts itself in before it becomes the program, so every
    thread it makes is capped; removed by :meth:`remove` or with the lease."""

    loop: Loop
    lease: HostLease
    name: str
    cores: float

    @property
    def path(self) -> PurePosixPath:
        return PurePosixPath(cgroup_path(self.lease.lease_id, self.name))

    def create(self) -> None:
        try:
            self.loop.call(self.lease.cpu_cgroup(self.name, self.cores))
        except HostError as exc:
            raise CgroupError(str(exc)) from None

    def add(self, pid: int) -> None:
        self.loop.call(self.lease.add_to_cgroup(str(self.path), pid))

    def starting(self, argv: Sequence[str]) -> list[str]:
        return ["sh", "-c", 'echo "$$" > "$0/cgroup.procs" && exec "$@"', str(self.path), *argv]

    def remove(self) -> None:
        try:
            self.loop.call(remove_cgroup(self.lease.session, self.lease.lease_id, str(self.path)))
        except HostError as exc:
            raise CgroupError(str(exc)) from None


_KILL_TAGGED = (
    'for p in /proc/[0-9]*; do if tr "\\000" "\\n" < "$p/environ" 2>/dev/null | grep -qxF "$1"; then '
    'kill -{sig} "${{p#/proc/}}" 2>/dev/null; fi; done; exit 0'
)


async def link_up(session: Session, interface: str, routes: Sequence[str]) -> None:
    """``interface`` up, and each of ``routes`` (``ip route show`` lines from before it went down)
    that is missing put back."""
    if not INTERFACE.match(interface):
        raise ValueError(f"{interface!r} is not an interface name")
    step = f"bring {interface} up"
    await session.run(step, ["ip", "link", "set", "dev", interface, "up"], privileged=True)
    now = (await session.run(step, ["ip", "route", "show"])).stdout
    for args in routes_to_restore([str(r) for r in routes], now):
        await session.run(f"restore the route {' '.join(args)}", ["ip", "route", "replace", *args], privileged=True)


async def restore_changes(session: Session, lease_id: str, changes: list[dict[str, Any]], path: str) -> list[str]:
    """Undo ``changes`` newest first; the problems (empty: all undone and the lease file removed).
    On a host whose connection is gone nothing more is tried: one problem says how many changes
    are left to ``clean --hosts`` (the lease file stays there)."""
    problems: list[str] = []
    for i, c in enumerate(reversed(changes)):
        try:
            if c["kind"] == "sysctl":
                await session.run(
                    f"restore sysctl {c['name']}", ["sysctl", "-w", f"{c['name']}={c['previous']}"], privileged=True
                )
            elif c["kind"] == "qdisc":
                step = f"restore the root qdisc of {c['interface']}"
                await session.run(
                    step, ["tc", "qdisc", "del", "dev", c["interface"], "root"], check=False, privileged=True
                )
                root = await root_qdisc(session, c["interface"], step)
                if root.get("handle") != "0:":
                    problems.append(f"{c['interface']}: root qdisc is still {root.get('kind')} {root.get('handle')}")
            elif c["kind"] == "process":
                tag = str(c["tag"])
                if not tag.startswith(f"{TAG_VAR}="):
                    raise ValueError(f"process tag {tag!r}")
                for sig in ("TERM", "KILL"):
                    await session.run(
                        "stop processes", ["sh", "-c", _KILL_TAGGED.format(sig=sig), "sh", tag], privileged=True
                    )
                    if sig == "TERM":
                        await asyncio.sleep(1.0)
            elif c["kind"] == "route":
                dst = str(ipaddress.ip_address(c["destination"]))
                await session.run(
                    f"remove the route to {dst}",
                    ["ip", "route", "del", f"{dst}/32", "dev", str(c["interface"])],
                    check=False,
                    privileged=True,
                )
                left = await session.run(
                    f"remove the route to {dst}", ["ip", "-j", "route", "show", "exact", f"{dst}/32"]
                )
                if json.loads(left.stdout or "[]"):
                    problems.append(f"the route to {dst}/32 is still there")
            elif c["kind"] == "offloads":
                if c["previous"]:
                    argv = offload_args(str(c["interface"]), dict(c["previous"]))
                    await session.run(f"restore the offloads of {c['interface']}", argv, privileged=True)
            elif c["kind"] == "link":  # a link-down fault the run did not end (a crash mid-fault)
                await link_up(session, str(c["interface"]), list(c.get("routes") or []))
            elif c["kind"] == "cgroup":
                await remove_cgroup(session, lease_id, str(c["path"]))
            elif c["kind"] == "scratch":
                if c["path"] != scratch_path(lease_id):
                    raise ValueError(f"scratch path {c['path']!r} is not this lease's")
                await session.run("remove the scratch folder", ["rm", "-rf", "--", c["path"]], privileged=True)
            else:
                problems.append(f"unknown change kind {c['kind']!r} (written by a newer shufflelab?)")
        except HostLost as exc:
            problems.append(f"{exc.step}: {exc.reason}; {len(changes) - i} of {len(changes)} changes not restored")
            break
        except (HostError, KeyError, ValueError) as exc:
            problems.append(str(exc))
    if not problems:
        await session.run("remove the lease file", ["rm", "-f", path], privileged=True)
    return [f"host {session.name} ({session.host.address}) lease {lease_id}: {p}" for p in problems]


_restores_begun = 0  # leased blocks that have begun restoring (run_controller stops repeating its cancel then)


@contextlib.asynccontextmanager
async def leased(
    sessions: dict[str, Session], lease_dir: str, lease_id: str | None = None
) -> AsyncIterator[dict[str, HostLease]]:
    """A lease on every host; on the way out -- normally, on an error, on cancellation (Ctrl-C,
    SIGTERM through :func:`run_controller`) -- every host is restored concurrently."""
    lid = lease_id or new_lease_id()
    leases = {n: HostLease(s, lid, lease_dir) for n, s in sessions.items()}
    try:
        await asyncio.gather(*(lease.open() for lease in leases.values()))
        yield leases
    finally:
        global _restores_begun
        _restores_begun += 1
        results = await asyncio.gather(*(lease.restore() for lease in leases.values()), return_exceptions=True)
        problems = [p for r in results if isinstance(r, list) for p in r]
        problems += [str(r) for r in results if isinstance(r, BaseException)]
        if problems:
            raise RestoreError(problems)


class RestoreError(RuntimeError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__(
            "could not restore everything (the lease files stay; run shufflelab clean --hosts): " + "; ".join(problems)
        )
        self.problems = problems


@dataclass
class CleanReport:
    restored: list[str] = field(default_factory=list)  # "host: lease id (n changes)"
    restored_ids: list[str] = field(default_factory=list)  # the lease ids of ``restored``
    skipped_live: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _alive_here(controller: dict[str, Any]) -> bool:
    if controller.get("machine") != socket.gethostname():
        return False
    pid = int(controller.get("pid") or 0)
    return 0 < pid != os.getpid() and procfs.alive(pid)


async def clean_host(session: Session, lease_dir: str, force: bool = False) -> CleanReport:
    """Restore what every lease file on the host records (and only that); a lease whose
    controller still runs on this machine is kept unless ``force``."""
    report = CleanReport()
    listing = await session.run(
        "list lease files", ["sh", "-c", 'ls -1 "$1" 2>/dev/null; exit 0', "sh", lease_dir], privileged=True
    )
    for entry in listing.stdout.split():
        stem = entry.removesuffix(".json")
        if not entry.endswith(".json") or not LEASE_ID.match(stem):
            continue
        path = f"{lease_dir}/{entry}"
        text = (await session.run(f"read lease {stem}", ["cat", path], privileged=True)).stdout
        try:
            doc = json.loads(text)
            changes = list(doc["changes"])
        except (ValueError, KeyError, TypeError):
            report.problems.append(f"host {session.name}: {path}: not a lease file shufflelab can read; left as is")
            continue
        if not force and _alive_here(doc.get("controller") or {}):
            report.skipped_live.append(f"{session.name}: {stem}")
            continue
        problems = await restore_changes(session, stem, changes, path)
        report.problems += problems
        if not problems:
            report.restored.append(f"{session.name}: {stem} ({len(changes)} changes)")
            report.restored_ids.append(stem)
    return report


def run_controller(main: Any) -> Any:
    """``asyncio.run(main)`` where Ctrl-C, SIGTERM and SIGHUP cancel the main task, so every
    :func:`leased` block restores its hosts before the process exits. A cancel that a library
    swallows (one that lands as an awaited step completes) is repeated every second until a
    :func:`leased` block has begun restoring -- never while it restores."""
    import signal

    async def wrapper() -> Any:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def again(begun: int) -> None:
            if not task.done() and _restores_begun == begun:
                task.cancel()
                loop.call_later(1.0, again, begun)

        def stop() -> None:
            task.cancel()
            loop.call_later(1.0, again, _restores_begun)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, stop)
        return await main

    return asyncio.run(wrapper())


def local_folder_prefix(lease_id: str) -> str:
    """The name prefix of the controller's own folder for a lease (in the temporary folder)."""
    return f"shufflelab-hosts-{lease_id}-"


def remove_local_folders(lease_ids: Iterable[str]) -> list[Path]:
    """The controller's folders of these leases, removed: a controller that was killed (SIGKILL)
    left them behind when its leases were restored by ``clean``."""
    removed = []
    for lid in dict.fromkeys(lease_ids):
        for folder in Path(tempfile.gettempdir()).glob(f"{local_folder_prefix(lid)}*"):
            if folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed
