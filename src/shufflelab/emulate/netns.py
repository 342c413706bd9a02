"""The one place that creates and removes system resources: namespaces, processes, scratch dirs.

Every namespace is named ``sl<lease>-<node>``; a lease file in ``/run/shufflelab`` records the
owning process, so :func:`clean` removes exactly what shufflelab left behind (processes in those
namespaces first, then the namespaces, whose deletion removes every veth inside them) and never
touches a live run unless forced.

Each namespace also gets its own resolver file, ``/etc/netns/<name>/resolv.conf``, which ``ip netns
exec`` mounts over ``/etc/resolv.conf`` for everything started there: the lab's hosts have no name
server, and with the machine's own one a lookup inside the fabric (Java resolves peer addresses
back to names) left through the default route into the fabric and waited 10 s for a reply that
never came, on every executor and driver start.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from shufflelab import cgroups, procfs
from shufflelab.names import whole

LEASE_DIR = Path(os.environ.get("SHUFFLELAB_LEASE_DIR", "/run/shufflelab"))
SCRATCH_ROOT = Path(os.environ.get("SHUFFLELAB_SCRATCH", "/var/tmp/shufflelab"))
NETNS_ETC = Path(os.environ.get("SHUFFLELAB_NETNS_ETC", "/etc/netns"))
NS_PATTERN = whole(r"sl([0-9a-f]{6})-([a-z0-9]+)")
# off only to measure what the private resolver saves (benchmarks/run_overhead.py --compare resolver)
PRIVATE_RESOLVER = True
# no name server: a lookup goes to the namespace's own loopback, where nothing listens, and fails at
# once (names in /etc/hosts still resolve; the fabric is addressed by IP everywhere)
RESOLV_CONF = (
    "# written by shufflelab for one of its namespaces; removed with the namespace\n"
    "nameserver 127.0.0.1\n"
    "options timeout:1 attempts:1\n"
)


class CommandError(RuntimeError):
    """An external command failed; the message carries the command and its stderr."""


def run(argv: Sequence[str], *, ns: str | None = None, check: bool = True, timeout: float = 60) -> str:
    """Run ``argv`` (inside namespace ``ns`` if given) and return its stdout."""
    full = ["ip", "netns", "exec", ns, *argv] if ns else list(argv)
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise CommandError(f"{full[0]!r} is not installed (run the setup: make setup)") from None
    if check and proc.returncode != 0:
        raise CommandError(f"`{' '.join(full)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def namespaces() -> list[str]:
    """Names of all network namespaces (``ip netns list``)."""
    out = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def pids_in(ns: str) -> list[int]:
    out = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def kill_pids(pids: Sequence[int], grace_s: float = 3.0) -> None:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL whatever is left."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(procfs.alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if procfs.alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    # reap our own children so no zombies remain
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def delete_namespace(ns: str) -> None:
    """Kill every process in ``ns`` and delete it (its interfaces go with it)."""
    for _ in range(3):
        pids = pids_in(ns)
        if not pids:
            break
        kill_pids(pids, grace_s=2.0)
    run(["ip", "netns", "delete", ns], check=False)
    shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)


def write_resolver(ns: str) -> None:
    """Give ``ns`` a resolver without a name server (see the module's docstring)."""
    d = NETNS_ETC / ns
    d.mkdir(parents=True, exist_ok=True)
    (d / "resolv.conf").write_text(RESOLV_CONF)


@dataclass
class NamespaceLease:
    """A run's claim on a name prefix; everything it creates carries ``prefix``."""

    lease_id: str
    scratch: Path
    namespaces: list[str] = field(default_factory=list)
    owner_pid: int = field(default_factory=os.getpid)

    @property
    def prefix(self) -> str:
        return f"sl{self.lease_id}-"

    def ns(self, node: str) -> str:
        return f"{self.prefix}{node}"

    @property
    def path(self) -> Path:
        return LEASE_DIR / f"{self.lease_id}.json"

    def save(self) -> None:
        LEASE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "scratch": str(self.scratch), "namespaces": self.namespaces}))
        tmp.replace(self.path)

    def create_namespace(self, node: str) -> str:
        name = self.ns(node)
        self.namespaces.append(name)
        self.save()  # record before creating: a crash in between still leaves a trace to clean
        run(["ip", "netns", "add", name])
        if PRIVATE_RESOLVER:
            write_resolver(name)
        return name

    def release(self) -> None:
        """Remove every namespace and process of this lease, then the scratch dir and lease file.

        Only the process that took the lease does this: a forked child unwinding a copy of the
        owner's stack must not tear down the owner's fabric.
        """
        if os.getpid() != self.owner_pid:
            return
        # processes we started: stop them by process group first, which also catches one that is
        # still on its way into its namespace (``ip netns pids`` cannot see it yet)
        for proc in list(_LIVE):
            if proc.ns.startswith(self.prefix):
                proc.stop(grace_s=2.0)
        present = namespaces()
        for name in [n for n in present if n in self.namespaces or n.startswith(self.prefix)]:
            delete_namespace(name)
        for name in self.namespaces:  # a namespace whose creation failed after its resolver was written
            shutil.rmtree(NETNS_ETC / name, ignore_errors=True)
        shutil.rmtree(self.scratch, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@contextlib.contextmanager
def lease() -> Iterator[NamespaceLease]:
    """Claim a fresh prefix; on exit (normal, exception, or signal turned exception) release it."""
    lease_id = secrets.token_hex(3)
    scratch = SCRATCH_ROOT / lease_id
    lz = NamespaceLease(lease_id, scratch)
    lz.save()  # first: whatever of a lease exists, its file does (see clean)
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        yield lz
    finally:
        lz.release()


@dataclass
class CleanReport:
    namespaces: list[str] = field(default_factory=list)
    skipped_live: list[str] = field(default_factory=list)
    scratch_dirs: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    resolvers: list[str] = field(default_factory=list)


def _lease_info(lease_id: str) -> dict[str, object] | None:
    """The lease file of ``lease_id`` (None without one; {} if unreadable)."""
    try:
        data = json.loads((LEASE_DIR / f"{lease_id}.json").read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _held(lease_id: str, force: bool) -> bool:
    """Whether ``lease_id``'s owner (another process) still runs: asked again before each removal, so
    that a lease taken while ``clean`` runs -- by a run started beside it -- is left alone."""
    info = _lease_info(lease_id)
    owner = int(str((info or {}).get("pid", 0) or 0))
    return bool(owner) and owner != os.getpid() and procfs.alive(owner) and not force


def clean(force: bool = False) -> CleanReport:
    """Remove what shufflelab runs left behind; leases whose owner still runs are kept unless ``force``.

    Another run may take a lease while this runs (``lease`` writes its file before anything else of
    it exists): each namespace, resolver folder and scratch folder is removed only if its lease is
    not held at that moment, never by a list of live leases read at the start."""
    report = CleanReport()
    if LEASE_DIR.exists():
        for f in LEASE_DIR.glob("*.json"):
            if _held(f.stem, force):
                continue
            info = _lease_info(f.stem) or {}
            scratch = info.get("scratch")
            if isinstance(scratch, str) and scratch and Path(scratch).exists():
                shutil.rmtree(scratch, ignore_errors=True)
                report.scratch_dirs.append(scratch)
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
    for name in namespaces():
        m = NS_PATTERN.match(name)
        if not m:
            continue
        if _held(m.group(1), force):
            report.skipped_live.append(name)
            continue
        delete_namespace(name)
        report.namespaces.append(name)
    if NETNS_ETC.is_dir():  # resolver files whose namespace is gone (a crash between the two steps)
        for d in NETNS_ETC.iterdir():
            m = NS_PATTERN.match(d.name)
            if m and d.is_dir() and not _held(m.group(1), force):
                shutil.rmtree(d, ignore_errors=True)
                report.resolvers.append(str(d))
    if SCRATCH_ROOT.exists():
        for d in SCRATCH_ROOT.iterdir():
            if d.is_dir() and not _held(d.name, force):
                shutil.rmtree(d, ignore_errors=True)
                report.scratch_dirs.append(str(d))
    # empty groups made a minute or more ago: never a live run's (forced: every empty one)
    for cg in cgroups.stale(min_age_s=0 if force else cgroups.STALE_AFTER_S):
        with contextlib.suppress(OSError):
            cg.rmdir()
            report.cgroups.append(str(cg))
    return report


# strong references: a process object dropped by an interrupted frame must still be stopped at teardown
_LIVE: set[NamespaceProcess] = set()


def _kill_unregistered_children(cmdlines: tuple[list[str], ...]) -> None:
    """Kill this process's children running one of ``cmdlines`` that no NamespaceProcess object owns."""
    owned = {p.popen.pid for p in _LIVE if getattr(p, "popen", None) is not None}
    for pid in procfs.children(os.getpid()):
        if pid in owned:
            continue
        argv = procfs.cmdline(pid)
        if argv is not None and any(argv == c for c in cmdlines):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


class NamespaceProcess:
    """A long-running process started inside a namespace, with its output in ``log``."""

    def __init__(
        self,
        ns: str,
        argv: Sequence[str],
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.ns = ns
        self.argv = list(argv)
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(log, "ab")  # noqa: SIM115 - lives as long as the process
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        full = ["ip", "netns", "exec", ns, *self.argv]
        try:
            self.popen = subprocess.Popen(
                full,
                stdout=self._fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=full_env,
                cwd=cwd,
                start_new_session=True,  # Ctrl-C reaches the runner, which stops children in order
            )
            _LIVE.add(self)
        except BaseException:
            # interrupted between fork and registration: nobody would stop this child later
            if getattr(self, "popen", None) is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
            else:
                _kill_unregistered_children((full, self.argv))
            self._fh.close()
            raise

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.popen.wait(timeout=timeout)

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 5.0) -> int | None:
        """Send ``sig``; SIGKILL after ``grace_s``; return the exit code."""
        code = stop_group(self.popen, sig, grace_s)
        if not self._fh.closed:
            self._fh.close()
        _LIVE.discard(self)
        return code


def stop_group(popen: subprocess.Popen[bytes], sig: int = signal.SIGTERM, grace_s: float = 5.0) -> int | None:
    """Send ``sig`` to the process group of ``popen`` (started in its own session); SIGKILL after
    ``grace_s``; return the exit code."""
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, sig)
        try:
            popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(timeout=5)
    return popen.returncode


def run_at(argv: Sequence[str], *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
    """:func:`run` as a :class:`~shufflelab.emulate.protocols.CommandRunner` (a place is a namespace)."""
    return run(argv, ns=place, check=check, timeout=timeout)


def launch_at(place: str, argv: Sequence[str], log: Path, /, env: Mapping[str, str] | None = None) -> NamespaceProcess:
    """:class:`NamespaceProcess` as a :class:`~shufflelab.emulate.protocols.ProcessLauncher`."""
    return NamespaceProcess(place, argv, log, env=env)
