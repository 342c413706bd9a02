"""The userspace switch on the router host of a ``shared`` bottleneck, over SSH.

Locally the switch runs in the router namespace on its one port ``r:sw`` towards the hosts'
bridge, in and out on the same port (a one-armed router), with the namespace's kernel not
forwarding. Here the router host's data interface is that port: every mapped host routes each
other host's data address through the router host (the /32 routes of the kernel path), the
router's kernel does not forward (``ip_forward = 0``: it drops what is not its own, silently, and
still answers ARP for its address), and ``shufflelab-switch`` -- reading every frame on the data
interface with a packet socket -- forwards each packet to the host it is addressed to, through its
queue (rate, delay, droptail or RED/ECN) and its per-host DCTCP / VCC. Segmentation and receive
offloads are off on every data interface, so the switch sees frames, not 64 KB GSO/GRO segments.
Every change is under the hosts' leases; the switch is started through the backend's process
launcher (tagged with the lease, so ``clean --hosts`` stops it after a crash) as root.

The binary is the controller's (:func:`shufflelab.switch.controller.binary_path`) at the same path
on the router host (the hosts have the controller's checkout; nothing is deployed). Its config,
telemetry CSV and log live in the lease's scratch folder on the router host; the counters are the
CSV's last row (read with ``tail``), its samples are fetched into the run's ``queue_samples.csv``
with ``dev`` the spec's port name, as a local run writes them.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from shufflelab.hosts.control import HostError, Session
from shufflelab.hosts.deploy import HostPaths
from shufflelab.hosts.probe import cpu_count
from shufflelab.netplan import NetPlan, PortCounters
from shufflelab.switch.config import SwitchConfig, switch_cpu
from shufflelab.switch.controller import BINARY_NAME, TELEMETRY_HEADER, rows_at_end

if TYPE_CHECKING:
    from shufflelab.hosts.lease import HostLease
    from shufflelab.hosts.remote import Loop, SshProcess

OFFLOADS_OFF = {"tso": "off", "gso": "off", "gro": "off"}
_TAIL_BYTES = 65_536


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
    behind it with its MAC and its mode ``off``/``dctcp``/``vcc``) with that port being the router
    host's data interface ``router_dev``, the hosts' data addresses (the plan's network's) and MACs
    (``macs``: spec host -> MAC of its data interface), pinned to the router host's last CPU of
    ``ncpu``. Pure."""
    kind = plan.spec.topology.kind
    if kind != "shared":
        raise ValueError(f"topology.kind = {kind!r}: the router host's switch holds a shared bottleneck")
    cfg = plan.switch_config(macs)
    if cfg.cross:
        raise ValueError(
            "cross_traffic.generator = 'switch': the in-switch source runs on the local fabric only (the "
            "router host's switch does not report it yet); use generator = 'iperf3' on machines"
        )
    ports = [dataclasses.replace(p, ifname=router_dev) for p in cfg.ports]
    hosts = [dataclasses.replace(h, port=router_dev) for h in cfg.hosts]
    return dataclasses.replace(cfg, ports=ports, hosts=hosts, cpu=switch_cpu(ncpu))


def counters_from_tail(text: str, dev: str, whole: bool) -> PortCounters:
    """The port counters in the last complete row of ``dev`` in the end of a telemetry CSV (zeros
    before the first sample: just started). Pure."""
    return PortCounters.from_switch_row(rows_at_end(text, [dev], whole).get(dev))


def renamed_samples(text: str, dev: str, port: str) -> str:
    """A telemetry CSV's complete rows with ``dev`` named ``port`` (the spec's port name). Pure."""
    complete = text[: text.rfind("\n") + 1] if "\n" in text else ""
    rows = list(csv.reader(io.StringIO(complete)))
    out = io.StringIO()
    out.write(TELEMETRY_HEADER + "\n")
    w = csv.writer(out, lineterminator="\n")
    width = len(TELEMETRY_HEADER.split(","))
    for r in rows:
        if len(r) == width and r[0] != "t":
            w.writerow([r[0], port if r[1] == dev else r[1], *r[2:]])
    return out.getvalue()


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


class RouterSwitch:
    """``shufflelab-switch`` on the router host (see the module docstring); started, restarted and
    read from the runner's thread (the launcher waits on the SSH loop)."""

    def __init__(
        self, loop: Loop, hl: HostLease, place: str, scratch: str, launch: HostsLauncher, local: Path, port: str
    ) -> None:
        self._loop, self.hl, self.place, self._launch = loop, hl, place, launch
        self.session = hl.session
        self.dev = hl.session.host.data_interface
        self.port = port  # the spec network's name of the queue ("sw")
        self.config_path = f"{scratch}/switch.json"
        self.telemetry_path = f"{scratch}/switch-queues.csv"
        self.local = local
        self.config: SwitchConfig | None = None
        self.process: SshProcess | None = None
        self._starts = 0

    def _run(self, step: str, argv: Sequence[str], check: bool = True) -> str:
        return self._loop.call(self.session.run(step, argv, check=check)).stdout

    def ensure(self, cfg: SwitchConfig, restart: bool, timeout_s: float = 15.0) -> None:
        """Running with ``cfg``: started, or restarted when its config changed, it is not running or
        ``restart`` asks for fresh counters and telemetry (each run, as locally)."""
        if self.alive() and not restart and self.config == cfg:
            return
        self.stop()
        doc = json.dumps(cfg.to_json(Path(self.telemetry_path)), indent=2)
        self._loop.call(self.session.write_file("write the switch's config", self.config_path, doc, mode="644"))
        self._starts += 1
        log = self.local / f"switch-{self._starts:03d}.log"
        binary = HostPaths.of(self.session.host).switch
        proc = self._launch(self.place, [binary, self.config_path], log, privileged=True)
        self.process, self.config = proc, cfg
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "ready" in self._run("start the switch", ["head", "-c", "4096", proc.remote_log], check=False):
                return
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        tail = self.log_tail()
        self.stop()
        raise HostError(
            self.session.name, self.session.host.address, "start the switch",
            f"{BINARY_NAME} did not become ready within {timeout_s:g} s: {tail or 'no output'}",
        )  # fmt: skip

    def log_tail(self, chars: int = 2000) -> str:
        if self.process is None:
            return ""
        return self._run("read the switch's log", ["tail", "-c", str(chars), self.process.remote_log], check=False)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def failure(self) -> str | None:
        """Why the switch is gone while the fabric needs it (None: it runs)."""
        if self.process is None or self.process.poll() is None:
            return None
        return f"the userspace switch on router host {self.session.name} exited: {self.log_tail(500) or 'no output'}"

    def stop(self) -> None:
        """SIGTERM (its summary goes to its log, fetched next to the controller's copy)."""
        if self.process is not None:
            self.process.stop()
            self.process = None

    def counters(self) -> PortCounters:
        """The router port's counters since the switch's last start (its telemetry's last row)."""
        if self.process is None:
            return PortCounters(0, 0, 0, 0, 0, marks=0)
        text = self._run("read the switch's counters", ["tail", "-c", str(_TAIL_BYTES), self.telemetry_path], False)
        return counters_from_tail(text, self.dev, whole=len(text.encode()) < _TAIL_BYTES)

    def save_telemetry(self, run_dir: Path) -> None:
        """The switch's samples as the run's ``queue_samples.csv`` (``dev`` = the spec's port), its
        config and its log so far, in ``run_dir``."""
        if self.process is None or self.config is None:
            return
        raw = run_dir / "switch-queues.csv"
        try:
            self._loop.call(self.session.get("fetch the switch's telemetry", self.telemetry_path, raw))
            text = raw.read_text(errors="replace")
        except HostError:
            text = ""
        (run_dir / "queue_samples.csv").write_text(renamed_samples(text, self.dev, self.port))
        raw.unlink(missing_ok=True)
        (run_dir / "switch.json").write_text(
            self._run("read the switch's config", ["cat", self.config_path], check=False)
        )
        log = self._run("read the switch's log", ["cat", self.process.remote_log], check=False)
        (run_dir / "switch.log").write_text(log)
