"""Stand-in hosts for the SSH backend: network namespaces (``slssh...``) on a control bridge,
each running Debian's OpenSSH server on its own address with a generated host key, an authorized
key for a generated client key, a data interface (``data0``, on a second bridge) and a private
``/var/lib/shufflelab`` and scratch folder (tmpfs in the server's own mount namespace) and its own
processes (a PID namespace), so each has its own lease files and a restore on one never touches
another's. The backend reaches them only over SSH; tests inspect them directly to check its work.

A lab records the test process that made it (``OWNERS/<tag>``); a lab whose maker is gone -- a test
process killed before its clean-up ran -- is swept when the next one starts (:func:`sweep_stale`):
its namespaces with whatever still runs in them (its OpenSSH servers), its bridges and veths."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from shufflelab import procfs
from shufflelab.emulate.fabric import available_congestion_controls, ensure_congestion_control_allowed
from shufflelab.hosts.lease import SCRATCH_ROOT

SSHD = "/usr/sbin/sshd"
LOGIN_HOME = Path(os.path.expanduser("~root"))  # the stand-ins' login user is root
SHELL_STARTUP = (".bashrc", ".bash_profile", ".bash_login", ".profile")
LEASE_PARENT = Path("/var/lib/shufflelab")
SCRATCH_PARENT = Path(SCRATCH_ROOT)  # the hosts' scratch folders: each stand-in has its own
# each server in a mount namespace (its own lease files and scratch) and a PID namespace of its own
UNSHARE = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc"]
OWNERS = Path("/run/shufflelab-stand-ins")  # <tag>: the pid of the test process that made the lab
# what a lab of tag T creates on this machine: namespaces slsshTh<i>, bridges slsshbT and slsshdT,
# veths slsshTv<i> and slsshTd<i> (their peers in the namespaces)
STAND_IN_NS = re.compile(r"slssh([0-9a-f]{4})h[0-9]+")
STAND_IN_LINK = re.compile(r"slssh[bd]([0-9a-f]{4})|slssh([0-9a-f]{4})[vd][0-9]+")


def _tag_of(name: str, pattern: re.Pattern[str]) -> str | None:
    m = pattern.fullmatch(name)
    return next((g for g in m.groups() if g), None) if m else None


def stale_stand_ins(
    namespaces: Iterable[str],
    links: Iterable[str],
    owners: Mapping[str, int],
    alive: Callable[[int], bool],
    busy: Callable[[str], bool],
) -> tuple[list[str], list[str]]:
    """The namespaces and links of stand-in labs left behind: a lab whose maker (``owners``: tag ->
    pid) is gone, or, with no maker recorded, none of whose namespaces has a process left (``busy``)
    -- never a lab being made or used by a test process that still runs. Pure."""
    namespaces, links = list(namespaces), list(links)
    tags: dict[str, list[str]] = {}
    for ns in namespaces:
        tag = _tag_of(ns, STAND_IN_NS)
        if tag is not None:
            tags.setdefault(tag, []).append(ns)
    for link in links:
        tag = _tag_of(link, STAND_IN_LINK)
        if tag is not None:
            tags.setdefault(tag, [])

    def stale(tag: str) -> bool:
        if tag in owners:
            return not alive(owners[tag])
        return not any(busy(ns) for ns in tags[tag])

    gone = {t for t in tags if stale(t)}
    return (
        sorted(ns for ns in namespaces if _tag_of(ns, STAND_IN_NS) in gone),
        sorted(link for link in links if _tag_of(link, STAND_IN_LINK) in gone),
    )


@dataclass
class StandIn:
    name: str
    ns: str
    address: str
    host_key_pub: str
    launcher: int = 0  # pid of `ip netns exec ... unshare --fork`; the server is its only child

    def server_pid(self) -> int:
        """The OpenSSH server's pid as this machine sees it (it is pid 1 in its own PID namespace);
        ``/proc/<pid>/root`` is its file system view (lease files, scratch)."""
        return int(Path(f"/proc/{self.launcher}/task/{self.launcher}/children").read_text().split()[0])


@dataclass
class Lab:
    root: Path
    controller: str
    client_key: Path
    known_hosts: Path
    hosts: list[StandIn] = field(default_factory=list)

    def inventory(self, path: Path | None = None, extra: dict[str, str] | None = None, **ssh: object) -> Path:
        """Write an inventory of every stand-in host (host1 -> spec host h1 ...)."""
        settings = {"connect_timeout_s": 5, "command_timeout_s": 60, **ssh}  # ssh: these or more [ssh] fields
        lines = ["[ssh]", f'known_hosts = "{self.known_hosts}"']
        lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
        for h in self.hosts:
            lines += [f"[hosts.{h.name}]", f'address = "{h.address}"', f'key_file = "{self.client_key}"']
            lines += ['data_interface = "data0"']
            for k, v in (extra or {}).items():
                if k.startswith(f"{h.name}."):
                    lines.append(f"{k.split('.', 1)[1]} = {v}")
        lines.append("[map]")
        lines += [f'{h.name.replace("host", "h")} = "{h.name}"' for h in self.hosts]
        p = path or self.root / "inventory.toml"
        p.write_text("\n".join(lines) + "\n")
        return p

    def inventory_on(self, path: Path, machines: Mapping[str, str], router: int) -> Path:
        """Write an inventory of every stand-in host whose map is ``machines`` (spec host -> stand-in
        host) and whose router host is the stand-in at index ``router``."""
        text = self.inventory(path).read_text()
        text = text[: text.index("[map]")] + "[map]\n" + "".join(f'{h} = "{m}"\n' for h, m in machines.items())
        path.write_text(f'router = "{self.hosts[router].name}"\n' + text)
        return path


def sh(*argv: str, ns: str | None = None, check: bool = True) -> str:
    full = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
    p = subprocess.run(full, capture_output=True, text=True, timeout=30)
    if check and p.returncode:
        raise RuntimeError(f"{' '.join(full)}: {p.stderr.strip()}")
    return p.stdout


def _free_subnet() -> ipaddress.IPv4Network:
    used = {
        ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network
        for link in json.loads(sh("ip", "-j", "addr"))
        for a in link.get("addr_info", [])
        if a.get("family") == "inet"
    }
    for _ in range(50):
        net = ipaddress.ip_network(f"10.213.{secrets.randbelow(250) + 1}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free 10.213.x.0/24 subnet for the stand-in hosts")


def _wait_port(address: str, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((address, 22), timeout=1):
                return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


def _kill_in(ns: str) -> None:
    for pid in sh("ip", "netns", "pids", ns, check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def sweep_stale() -> tuple[list[str], list[str]]:
    """Remove the stand-in labs left behind by test processes that are gone (see
    :func:`stale_stand_ins`); the namespaces and links removed."""
    namespaces = [line.split()[0] for line in sh("ip", "netns", "list", check=False).splitlines() if line.strip()]
    links = [link["ifname"] for link in json.loads(sh("ip", "-j", "link", "show", check=False) or "[]")]
    owners = {}
    for f in OWNERS.glob("*") if OWNERS.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            owners[f.name] = int(f.read_text())
    gone_ns, gone_links = stale_stand_ins(
        namespaces, links, owners, procfs.alive, lambda ns: bool(sh("ip", "netns", "pids", ns, check=False).split())
    )
    for ns in gone_ns:
        _kill_in(ns)
        sh("ip", "netns", "delete", ns, check=False)
    for link in gone_links:
        sh("ip", "link", "delete", link, check=False)
    for tag in {_tag_of(x, STAND_IN_NS) for x in gone_ns} | {_tag_of(x, STAND_IN_LINK) for x in gone_links}:
        if tag:
            (OWNERS / tag).unlink(missing_ok=True)
    return gone_ns, gone_links


@contextlib.contextmanager
def stand_in_hosts(root: Path, n: int, hide: Sequence[Path] = ()) -> Iterator[Lab]:
    """``n`` stand-in hosts; ``hide``: folders of this machine they do not see (an empty tmpfs over
    each in their mount namespace), as a machine without the controller's checkout."""
    if not os.path.exists(SSHD):
        pytest.skip(f"{SSHD} is missing (scripts/setup.sh installs openssh-server)")
    sweep_stale()  # labs of test processes killed before their clean-up (their servers too)
    tag = secrets.token_hex(2)
    OWNERS.mkdir(parents=True, exist_ok=True)
    (OWNERS / tag).write_text(str(os.getpid()))
    net = _free_subnet()
    addrs = list(net.hosts())
    bridge, data_bridge = f"slsshb{tag}", f"slsshd{tag}"
    servers: list[subprocess.Popen[bytes]] = []
    namespaces: list[str] = []
    lab = Lab(root, str(addrs[0]), root / "client_key", root / "known_hosts")
    try:
        # the stand-ins are namespaces, not machines: they may pick only a congestion control the
        # init namespace allows (a machine's own default namespace picks any), so allow them all
        # (as the local backend does for its namespaces; a machine may allow only its default)
        ensure_congestion_control_allowed(set(available_congestion_controls()))
        for parent in (LEASE_PARENT, SCRATCH_PARENT):
            parent.mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(exist_ok=True)  # OpenSSH's privilege separation directory
        sh("ip", "link", "add", bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{addrs[0]}/{net.prefixlen}", "dev", bridge)
        sh("ip", "link", "set", bridge, "up")
        sh("ip", "link", "add", data_bridge, "type", "bridge")
        sh("ip", "link", "set", data_bridge, "up")
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "slssh-client", "-f", str(lab.client_key))
        (root / "authorized_keys").write_text(Path(f"{lab.client_key}.pub").read_text())
        empty = root / "empty"
        empty.write_text("")
        known = []
        for i in range(1, n + 1):
            ns, addr = f"slssh{tag}h{i}", str(addrs[9 + i])
            sh("ip", "netns", "add", ns)
            namespaces.append(ns)
            sh("ip", "link", "add", f"slssh{tag}v{i}", "type", "veth", "peer", "name", "ctl0", "netns", ns)
            sh("ip", "link", "set", f"slssh{tag}v{i}", "master", bridge, "up")
            sh("ip", "link", "set", "lo", "up", ns=ns)
            sh("ip", "addr", "add", f"{addr}/{net.prefixlen}", "dev", "ctl0", ns=ns)
            sh("ip", "link", "set", "ctl0", "up", ns=ns)
            # data0: the data network (a second bridge, no controller on it); data1: a veth pair inside
            # the host, state the backend must leave alone
            sh("ip", "link", "add", f"slssh{tag}d{i}", "type", "veth", "peer", "name", "data0", "netns", ns)
            sh("ip", "link", "set", f"slssh{tag}d{i}", "master", data_bridge, "up")
            sh("ip", "link", "add", "data1", "type", "veth", "peer", "name", "data1p", ns=ns)
            third = net.network_address.packed[2]
            for dev, octet in (("data0", 214), ("data1", 215)):
                sh("ip", "addr", "add", f"10.{octet}.{third}.{9 + i}/24", "dev", dev, ns=ns)
                sh("ip", "link", "set", dev, "up", ns=ns)
            sh("ip", "link", "set", "data1p", "up", ns=ns)
            key = root / f"host{i}_key"
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"slssh-host{i}", "-f", str(key))
            cfg = root / f"sshd_host{i}.conf"
            cfg.write_text(
                f"ListenAddress {addr}\nPort 22\nHostKey {key}\nAuthorizedKeysFile {root}/authorized_keys\n"
                f"PidFile {root}/sshd_host{i}.pid\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                "Subsystem sftp internal-sftp\nMaxSessions 50\nMaxStartups 50\n"
            )
            # as a machine of its own: its own lease files and scratch (tmpfs in the server's mount
            # namespace) and its own processes (a PID namespace: a restore on one host stops the
            # processes tagged with the lease there, never another stand-in's)
            # (/run/netns too: doctor's throw-away namespaces are named by a pid, the same on every stand-in)
            script = f"mount -t tmpfs slssh {LEASE_PARENT} && mount -t tmpfs slssh {SCRATCH_PARENT} && "
            script += "mount -t tmpfs slssh /run/netns && "
            # the login user's shell start-up files are empty on the stand-ins: a command over SSH runs
            # through the login shell, which reads ~/.bashrc; this machine's (a version manager's init,
            # which waits up to 60 s on a lock a killed shell left) would slow or hang every command
            script += "".join(f"mount --bind {empty} {shlex.quote(str(f))} && " for f in _shell_startup_files())
            script += "".join(f"mount -t tmpfs slssh {shlex.quote(str(p))} && " for p in hide)
            script += f"exec {SSHD} -D -e -f {cfg}"
            log = open(root / f"sshd_host{i}.log", "wb")  # noqa: SIM115 (closed with the process)
            servers.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", ns, *UNSHARE, "sh", "-c", script],
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
            )
            pub = Path(f"{key}.pub").read_text().split()
            known.append(f"{addr} {pub[0]} {pub[1]}")
            lab.hosts.append(StandIn(f"host{i}", ns, addr, f"{pub[0]} {pub[1]}", servers[-1].pid))
        lab.known_hosts.write_text("\n".join(known) + "\n")
        for h in lab.hosts:
            _wait_port(h.address)
        yield lab
    finally:
        for p in servers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for ns in namespaces:  # sessions the servers forked, and anything started through them
            _kill_in(ns)
        for p in servers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        for ns in namespaces:
            sh("ip", "netns", "delete", ns, check=False)
        sh("ip", "link", "delete", bridge, check=False)
        sh("ip", "link", "delete", data_bridge, check=False)
        (OWNERS / tag).unlink(missing_ok=True)
        # LEASE_PARENT and SCRATCH_PARENT stay (empty): they are the mount points of the stand-ins'
        # tmpfs, and removing them would detach the mounts of another lab's stand-ins running now
        # (another test session), whose lease files would then be this machine's


def _shell_startup_files() -> list[Path]:
    """The login user's shell start-up files present on this machine (a bind mount needs its target)."""
    return [LOGIN_HOME / name for name in SHELL_STARTUP if (LOGIN_HOME / name).is_file()]


def _lab(tmp_path_factory: pytest.TempPathFactory, n: int) -> Iterator[Lab]:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    with stand_in_hosts(tmp_path_factory.mktemp(f"slssh{n}"), n) as lab:
        yield lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Three stand-in hosts (the master and two workers of a star topology)."""
    yield from _lab(tmp_path_factory, 3)


@pytest.fixture(scope="session")
def lab6(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Six stand-in hosts: the quickstart's six spec hosts on five (the master sharing with a
    worker) and a router host. One lab for the session (each lane of the root/Spark tests has its own,
    made by the first of its tests that needs one): each test leaves every host as it found it, and
    checks that it does."""
    yield from _lab(tmp_path_factory, 6)
