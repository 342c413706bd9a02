"""The userspace switch on the router host of a ``shared`` bottleneck or a ``dumbbell``, over SSH.

Locally the switch runs in the router namespace on its one port ``r:sw`` towards the hosts'
bridge, in and out on the same port (a one-armed router), with the namespace's kernel not
forwarding. Here the router host's data interface is that port: every mapped host routes each
other host's data address through the router host (the /32 routes of the kernel path), the
router's kernel does not forward (``ip_forward = 0``: it drops what is not its own, silently, and
still answers ARP for its address), and ``shufflelab-switch`` -- reading every frame on the data
interface with a packet socket -- forwards each packet to the host it is addressed to, through its
queue (rate, delay, droptail or RED/ECN) and its per-host DCTCP / VCC. Segmentation and receive
offloads are off on every data interface, so the switch sees frames, not 64 KB GSO/GRO segments.
On a ``dumbbell`` the hosts route only the other rack's machines through the router host, and the
switch holds the link's two directions as two queues of its one port (one per rack, each named as
the spec's port towards that rack); it forwards only frames addressed to the router host's MAC (a
rack's own frames, flooded to it by the data network, are not its to forward).
Every change is under the hosts' leases. The switch itself is the local fabric's
(:class:`shufflelab.switch.controller.Switch`, which the fabric is handed as its
:class:`~shufflelab.emulate.protocols.Switches`), given the backend's command runner and process
launcher on the router host (both as root; the launcher tags it with the lease, so ``clean
--hosts`` stops it after a crash): this module only prepares the router host and says what the
switch's config is there.

The binary is the controller's (:func:`shufflelab.artifacts.switch_binary`) at the same path
on the router host, or the deployed one (``deploy_dir``). Its config, telemetry CSV and log live in
the lease's scratch folder on the router host; the counters are the CSV's last row (read with
``tail``), its samples are fetched into the run's ``queue_samples.csv`` with ``dev`` the spec's
port name, as a local run writes them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from shufflelab.emulate.protocols import SwitchError
from shufflelab.hosts.control import HostError, Session
from shufflelab.hosts.deploy import HostPaths
from shufflelab.hosts.probe import cpu_count
from shufflelab.netplan import NetPlan, PortCounters
from shufflelab.switch_telemetry import TELEMETRY_HEADER, complete_rows, rows_at_end

if TYPE_CHECKING:
    from shufflelab.emulate.protocols import CommandRunner, Process, ProcessLauncher, Switches, UserspaceSwitch
    from shufflelab.hosts.lease import HostLease
    from shufflelab.hosts.remote import SshProcess
    from shufflelab.switch.config import SwitchConfig

OFFLOADS_OFF = {"tso": "off", "gso": "off", "gro": "off"}


class HostsLauncher(Protocol):
    """The hosts backend's process launcher (:meth:`HostsBackend.launch`), which can start as root."""

    def __call__(
        self,
        place: str,
        argv: Sequence[str],
        log: Path,
        /,
        env: Mapping[str, str] | None = None,
        *,
        privileged: bool = False,
    ) -> SshProcess: ...


def router_switch_config(plan: NetPlan, macs: Mapping[str, str], router_dev: str, ncpu: int) -> SwitchConfig:
    """The local fabric's switch configuration (:meth:`shufflelab.netplan.NetPlan.switch_config`:
    the link's rate, delay, queue and RED on the shared topology's one router port, every host
    behind it with its MAC and its mode ``off``/``dctcp``/``vcc``, the in-switch UDP source of
    ``cross_traffic.generator = "switch"``) with that port being the router host's data interface
    ``router_dev``, the hosts' data addresses (the plan's network's) and MACs
    (``macs``: spec host -> MAC of its data interface), pinned to the router host's last CPU of
    ``ncpu``. A ``dumbbell``'s two router ports (``sw1``, ``sw2``: towards each rack) are two queues
    of that one interface, named as the spec's ports: each host behind its rack's, the link's rate,
    delay and queue on each. Pure."""
    kind = plan.spec.topology.kind
    if kind not in ("shared", "dumbbell"):
        raise ValueError(f"topology.kind = {kind!r}: the router host's switch holds a shared bottleneck or a dumbbell")
    cfg = plan.switch_config(macs, ncpu)
    if kind == "dumbbell":  # the ports keep their names (hosts and sources name them), on the one interface
        ports = [dataclasses.replace(p, ifname=router_dev, name=p.port_name) for p in cfg.ports]
        hosts, cross = list(cfg.hosts), list(cfg.cross)
    else:
        ports = [dataclasses.replace(p, ifname=router_dev) for p in cfg.ports]
        hosts = [dataclasses.replace(h, port=router_dev) for h in cfg.hosts]
        cross = [dataclasses.replace(c, port=router_dev) for c in cfg.cross]  # the sink's queue is the one port's
    by_ip = {h.ip: h for h in reversed(hosts)}  # spec hosts sharing a machine: one entry, its first host's
    hosts = [by_ip[ip] for ip in dict.fromkeys(h.ip for h in hosts)]
    return dataclasses.replace(cfg, ports=ports, hosts=hosts, cross=cross)


def counters_from_tail(text: str, dev: str, whole: bool) -> PortCounters:
    """The port counters in the last complete row of ``dev`` in the end of a telemetry CSV (zeros
    before the first sample: just started). Pure."""
    return PortCounters.from_switch_row(rows_at_end(text, [dev], whole).get(dev))


def renamed_samples(text: str, dev: str, port: str) -> str:
    """A telemetry CSV's complete rows with ``dev`` named ``port`` (the spec's port name). Pure."""
    return complete_rows(text, TELEMETRY_HEADER, {dev: port})


async def mac_address(session: Session) -> str:
    """The MAC address of the host's data interface."""
    dev = session.host.data_interface
    r = await session.run(f"read {dev}'s MAC address", ["ip", "-j", "link", "show", "dev", dev])
    info = json.loads(r.stdout or "[]")
    if not info or not info[0].get("address"):
        raise HostError(session.name, session.host.address, f"read {dev}'s MAC address", f"{dev} has no MAC address")
    return str(info[0]["address"])


async def prepare_router(hl: HostLease) -> int:
    """The router host made ready for the switch, under its lease: no kernel forwarding (the switch
    forwards), no redirects, no HTB of the kernel path, offloads off on its data interface; the
    binary there. Returns its CPU count."""
    s, dev = hl.session, hl.session.host.data_interface
    binary = HostPaths.of(s.host).switch
    found = await s.run("find the userspace switch", ["test", "-x", binary], check=False)
    if found.exit_status != 0:
        raise HostError(
            s.name, s.host.address, "find the userspace switch",
            f"{binary} is missing or not executable (the router host needs the controller's checkout at the same "
            "path with the switch built: cargo build --release -p shufflelab-switch, or make setup)",
        )  # fmt: skip
    await hl.set_sysctl("net.ipv4.ip_forward", "0")
    for scope in ("all", dev):
        await hl.set_sysctl(f"net.ipv4.conf.{scope}.send_redirects", "0")
    shown = (await s.run(f"shape {dev}", ["tc", "qdisc", "show", "dev", dev])).stdout
    if "htb 1: root" in shown and any(c["kind"] == "qdisc" and c["interface"] == dev for c in hl.changes):
        await hl.tc(dev, ["qdisc", "del", "dev", dev, "root"])  # the kernel path's queue: the switch queues
    await hl.set_offloads(dev, OFFLOADS_OFF)
    return await cpu_count(s) or 1


def as_root(session: Session, run: CommandRunner, launch: HostsLauncher) -> tuple[CommandRunner, ProcessLauncher]:
    """The backend's seams on the router host as root (``sudo -n`` for another user): the switch
    opens a packet socket, and its files and process are root's."""

    def run_as_root(argv: Sequence[str], *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
        words = ["sudo", "-n", "--", *argv] if session.host.needs_sudo else list(argv)
        return run(words, place=place, check=check, timeout=timeout)

    def launch_as_root(place: str, argv: Sequence[str], log: Path, /, env: Mapping[str, str] | None = None) -> Process:
        return launch(place, argv, log, env, privileged=True)

    return run_as_root, launch_as_root


def router_switch(
    cfg: SwitchConfig,
    hl: HostLease,
    place: str,
    scratch: str,
    local: Path,
    run: CommandRunner,
    launch: HostsLauncher,
    switches: Switches,
) -> UserspaceSwitch:
    """The userspace switch with ``cfg`` on router host ``place`` (not started; made by ``switches``):
    its files in the lease's folder ``scratch`` there, the launcher's log in ``local``."""
    root_run, root_launch = as_root(hl.session, run, launch)
    binary = HostPaths.of(hl.session.host).switch
    return switches(cfg, place, scratch, local, root_run, root_launch, binary=binary)


def start_router_switch(switch: UserspaceSwitch, hl: HostLease, timeout_s: float = 15.0) -> None:
    """Start ``switch``; a switch that does not become ready is a :class:`HostError` naming the host."""
    try:
        switch.start(timeout_s)
    except SwitchError as exc:
        raise HostError(hl.session.name, hl.session.host.address, "start the switch", str(exc)) from None
