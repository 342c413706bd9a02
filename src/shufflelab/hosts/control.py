"""SSH control of inventory hosts with asyncssh: concurrent sessions, commands that name the host
and the step when they fail, SFTP, host keys verified against known_hosts.

Only :func:`connect` opens connections, and only to an inventory host's own address
(:func:`shufflelab.hosts.safety.check_target`); no ``~/.ssh/config`` is read, so nothing can
redirect a connection elsewhere (no ProxyJump, no HostName rewrite).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from shufflelab.emulate.protocols import MachineLost
from shufflelab.hosts.inventory import Inventory, InventoryHost
from shufflelab.hosts.safety import check_target


class HostError(RuntimeError):
    """A step failed on a host; the message names the host, its address and the step."""

    def __init__(self, host: str, address: str, step: str, reason: str) -> None:
        super().__init__(f"host {host} ({address}): {step}: {reason}")
        self.host, self.address, self.step, self.reason = host, address, step, reason


class HostKeyError(HostError):
    """The host's key is not the one known_hosts has for its address (or it has none)."""


class HostLost(HostError, MachineLost):
    """The SSH connection to the host is gone (no answer to keepalives, reset, closed under us):
    nothing more can be done there until it is back; ``shufflelab clean --hosts`` then restores
    what its lease file records."""


# a connection is lost after this many keepalives in a row go unanswered (one every
# ``connect_timeout_s`` of silence from the host)
KEEPALIVE_COUNT_MAX = 3


def keepalive(connect_timeout_s: float) -> tuple[float, int, float]:
    """The keepalive interval, how many may go unanswered, and after how long a silent host is
    given up (asyncssh sends one per interval of silence and closes after one more interval)."""
    return connect_timeout_s, KEEPALIVE_COUNT_MAX, connect_timeout_s * (KEEPALIVE_COUNT_MAX + 1)


def cipher_preference(defaults: Sequence[str], aes_instructions: bool) -> list[str]:
    """The ciphers offered, in order: asyncssh's own, with AES-GCM (128 before 256) first where the
    controller's processor has AES instructions -- a deploy to a stand-in host cost the controller
    11.5-13.0 CPU-s with AES-GCM against 14.9-16.5 with ChaCha20-Poly1305, asyncssh's first
    (docs/benchmarks.md, "Deploy"). A server without AES-GCM negotiates the next one it has. Pure."""
    if not aes_instructions:
        return list(defaults)
    gcm = [a for a in ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com") if a in defaults]
    return gcm + [a for a in defaults if a not in gcm]


def _aes_instructions(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """This machine's processor has AES instructions (its ``flags`` list ``aes``)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    return any(line.startswith("flags") and "aes" in line.partition(":")[2].split() for line in text.splitlines())


def _ciphers() -> list[str]:
    defaults = [a.decode() for a in asyncssh.encryption.get_default_encryption_algs()]
    return cipher_preference(defaults, _aes_instructions())


class _Watch(asyncssh.SSHClient):
    """Keeps why the connection ended (asyncssh calls :meth:`connection_lost` once it is gone)."""

    def __init__(self) -> None:
        self.lost: str | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = (str(exc) or type(exc).__name__) if exc is not None else "the connection was closed"


@dataclass(frozen=True)
class Result:
    stdout: str
    stderr: str
    exit_status: int


class Session:
    """One SSH connection to one inventory host. Commands are argument lists (quoted here)."""

    def __init__(
        self,
        name: str,
        host: InventoryHost,
        conn: asyncssh.SSHClientConnection,
        timeout_s: float,
        watch: _Watch | None = None,
    ) -> None:
        self.name, self.host, self.conn, self.timeout_s = name, host, conn, timeout_s
        self._watch = watch

    def _error(self, step: str, reason: str) -> HostError:
        return HostError(self.name, self.host.address, step, reason)

    @property
    def lost(self) -> str | None:
        """Why the connection is gone (None: it is up)."""
        if self._watch is not None and self._watch.lost is not None:
            return self._watch.lost
        return "the connection is closed" if self.conn.is_closed() else None

    def gone(self, step: str) -> HostLost:
        """The error for ``step`` on a host whose connection is gone."""
        return HostLost(self.name, self.host.address, step, f"connection lost: {self.lost or 'closed'}")

    def check_alive(self, step: str) -> None:
        """Raise :class:`HostLost` at once (no waiting for a timeout) if the connection is gone."""
        if self.lost is not None:
            raise self.gone(step)

    async def run(
        self,
        step: str,
        argv: Sequence[str],
        *,
        check: bool = True,
        privileged: bool = False,
        input: str | None = None,
        timeout_s: float | None = None,
    ) -> Result:
        """Run ``argv`` on the host (through ``sudo -n`` when ``privileged`` and the user is not
        root); a non-zero exit, a timeout or a lost connection raise :class:`HostError` naming ``step``
        (:class:`HostLost` for a lost connection, at once once it is known to be gone)."""
        self.check_alive(step)
        words = list(argv)
        if privileged and self.host.needs_sudo:
            words = ["sudo", "-n", "--", *words]
        command = shlex.join(words)
        limit = timeout_s or self.timeout_s
        try:
            async with asyncio.timeout(limit):  # (wait_for may swallow a cancel on 3.11: gh-86296)
                r = await self.conn.run(command, input=input, check=False)
        except TimeoutError:
            self.check_alive(step)
            raise self._error(step, f"`{command}` did not finish within {limit:g} s") from None
        except (asyncssh.Error, OSError) as exc:
            self.check_alive(step)
            raise self._error(step, f"`{command}`: {exc}") from None
        out = r.stdout if isinstance(r.stdout, str) else (r.stdout or b"").decode(errors="replace")
        err = r.stderr if isinstance(r.stderr, str) else (r.stderr or b"").decode(errors="replace")
        status = r.exit_status if r.exit_status is not None else -1
        if check and status != 0:
            detail = err.strip() or out.strip() or "no output"
            if r.exit_signal:
                detail = f"killed by {r.exit_signal[0]}; {detail}"
            raise self._error(step, f"`{command}` exited {status}: {detail[-2000:]}")
        return Result(out, err, status)

    async def write_file(self, step: str, path: str, text: str, mode: str = "600") -> None:
        """Replace ``path`` atomically (a temporary file renamed over it), as root when needed."""
        folder = os.path.dirname(path) or "/"
        tmp = f"{path}.tmp"
        script = f"umask 077 && mkdir -p {shlex.quote(folder)} && cat > {shlex.quote(tmp)} && chmod {mode} "
        script += f"{shlex.quote(tmp)} && mv -f {shlex.quote(tmp)} {shlex.quote(path)}"
        await self.run(step, ["sh", "-c", script], privileged=True, input=text)

    async def put(self, step: str, local: str | Path, remote: str) -> None:
        """Copy a local file to the host with SFTP (as the SSH user)."""
        self.check_alive(step)
        try:
            async with self.conn.start_sftp_client() as sftp:
                await sftp.put(str(local), remote)
        except (asyncssh.Error, OSError) as exc:
            self.check_alive(step)
            raise self._error(step, f"SFTP put {local} -> {remote}: {exc}") from None

    async def get(self, step: str, remote: str, local: str | Path) -> None:
        """Copy a file from the host with SFTP (as the SSH user)."""
        self.check_alive(step)
        try:
            async with self.conn.start_sftp_client() as sftp:
                await sftp.get(remote, str(local))
        except (asyncssh.Error, OSError) as exc:
            self.check_alive(step)
            raise self._error(step, f"SFTP get {remote} -> {local}: {exc}") from None

    def close(self) -> None:
        self.conn.close()


async def open_session(inv: Inventory, name: str) -> Session:
    """Connect to inventory host ``name``; errors name the host and say what to do."""
    host = inv.hosts[name]
    check_target(inv, host.address)
    known = inv.ssh.known_hosts
    if not os.path.isfile(known):
        raise HostKeyError(
            name, host.address, "connect", f"known_hosts file {known} does not exist (host keys must be verified)"
        )
    options: dict[str, object] = {
        "username": host.user,
        "port": host.port,
        "known_hosts": known,
        "config": None,  # no ~/.ssh/config: nothing may redirect the connection
        "connect_timeout": inv.ssh.connect_timeout_s,
        "login_timeout": inv.ssh.connect_timeout_s,
        "encryption_algs": _ciphers(),
    }
    # a host that stops answering (it crashed, its network went) is noticed: in-flight commands and
    # channels fail with HostLost instead of waiting on a dead TCP connection
    options["keepalive_interval"], options["keepalive_count_max"], _ = keepalive(inv.ssh.connect_timeout_s)
    watch = _Watch()
    options["client_factory"] = lambda: watch
    if host.key_file is not None:
        options["client_keys"] = [host.key_file]
        options["agent_path"] = None
    else:
        sock = os.environ.get("SSH_AUTH_SOCK")
        if not sock:
            raise HostError(name, host.address, "connect", "agent = true, but SSH_AUTH_SOCK is not set")
        options["agent_path"] = sock
    step = "connect"
    try:
        async with asyncio.timeout(inv.ssh.connect_timeout_s + 5):
            conn = await asyncssh.connect(host.address, **options)  # type: ignore[arg-type]
    except asyncssh.HostKeyNotVerifiable as exc:
        raise HostKeyError(
            name,
            host.address,
            step,
            f"host key not verified against {known}: {exc.reason}. If the host was reinstalled, check its "
            f"key out of band and replace its line (ssh-keygen -R '[{host.address}]:{host.port}' -f {known}); "
            "otherwise someone may be in the middle",
        ) from None
    except asyncssh.KeyImportError as exc:
        raise HostError(name, host.address, step, f"key file {host.key_file}: {exc}") from None
    except asyncssh.PermissionDenied:
        how = f"key {host.key_file}" if host.key_file else "the agent's keys"
        raise HostError(name, host.address, step, f"authentication as {host.user!r} with {how} was refused") from None
    except TimeoutError:
        raise HostError(
            name,
            host.address,
            step,
            f"unreachable: no SSH answer on port {host.port} within {inv.ssh.connect_timeout_s:g} s",
        ) from None
    except (OSError, asyncssh.Error) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
        raise HostError(name, host.address, step, f"unreachable on port {host.port}: {reason}") from None
    return Session(name, host, conn, inv.ssh.command_timeout_s, watch)


@contextlib.asynccontextmanager
async def connect(inv: Inventory, names: Sequence[str] | None = None) -> AsyncIterator[dict[str, Session]]:
    """Open sessions to ``names`` (default: every inventory host) concurrently. If any fails, the
    others are closed and one :class:`HostError` names every host that failed."""
    wanted = list(names) if names is not None else list(inv.hosts)
    results = await asyncio.gather(*(open_session(inv, n) for n in wanted), return_exceptions=True)
    sessions = {n: r for n, r in zip(wanted, results, strict=True) if isinstance(r, Session)}
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        for s in sessions.values():
            s.close()
        first = failures[0]
        if len(failures) == 1 or not all(isinstance(f, HostError) for f in failures):
            raise first
        assert isinstance(first, HostError)
        raise type(first)(
            first.host,
            first.address,
            first.step,
            first.reason
            + "".join(
                f"; also host {f.host} ({f.address}): {f.reason}" for f in failures[1:] if isinstance(f, HostError)
            ),
        )
    try:
        yield sessions
    finally:
        for s in sessions.values():
            s.close()
