"""The runner's seams over SSH: a :class:`~shufflelab.emulate.protocols.CommandRunner` and a
:class:`~shufflelab.emulate.protocols.ProcessLauncher` on inventory hosts, for a synchronous runner.

The asyncssh sessions live on an event loop in a thread of its own (:class:`Loop`); the runner's
thread hands it coroutines and waits for their results, so Ctrl-C and SIGTERM reach the runner as
usual and its context managers restore the hosts through the same loop.

A launched process runs in its own session on the host (``setsid``: its pid is its process group,
which :meth:`SshProcess.stop` signals), tagged with the lease in its environment (so ``clean
--hosts`` finds it after a crash), its output in a log file on the host, fetched back next to the
local log path when it stops. Its SSH channel stays open while it runs (``setsid -w`` waits for it)
and carries its exit status back, so :meth:`SshProcess.poll` needs no round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import subprocess
import threading
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import asyncssh

from shufflelab.hosts.control import HostError, Session

T = TypeVar("T")


class Loop:
    """An asyncio event loop in a daemon thread; :meth:`call` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="shufflelab-ssh", daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()


def run_local(argv: Sequence[str], check: bool, timeout: float) -> str:
    """A command where the runner is (the controller)."""
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"`{shlex.join(argv)}` failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


async def run_remote(session: Session, argv: Sequence[str], check: bool, timeout: float) -> str:
    r = await session.run(f"run {argv[0]}", argv, check=check, timeout_s=timeout)
    return r.stdout


# The launched program's shell: prints its pid (a new session's leader, so also its process group)
# and becomes the program with its output in the log.
_INNER = 'echo "$$"; exec "$0" "$@" >"$SHUFFLELAB_LOG" 2>&1 </dev/null'


class SshProcess:
    """A long-running process on an inventory host (see the module docstring)."""

    def __init__(
        self, loop: Loop, session: Session, argv: Sequence[str], log: Path, remote_log: str, privileged: bool = False
    ) -> None:
        self._loop, self.session, self.argv = loop, session, list(argv)
        self.privileged = privileged  # runs as root (through sudo for another user): stopped as root
        self.log, self.remote_log = log, remote_log
        self._pid = 0
        self._proc: asyncssh.SSHClientProcess[str] | None = None
        self._done: asyncio.Future[int] | None = None
        self._fetched = False

    async def start(self, tag: str, env: Mapping[str, str]) -> None:
        folder = self.remote_log.rsplit("/", 1)[0] or "/"
        words = ["env", tag, f"SHUFFLELAB_LOG={self.remote_log}", *(f"{k}={v}" for k, v in env.items())]
        words += ["setsid", "-w", "sh", "-c", _INNER, *self.argv]
        command = f"mkdir -p {shlex.quote(folder)} && exec {shlex.join(words)}"
        step = f"start {Path(self.argv[0]).name}"
        self.session.check_alive(step)
        try:
            self._proc = await self.session.conn.create_process(command)
            async with asyncio.timeout(self.session.timeout_s):
                line = await self._proc.stdout.readline()
        except (asyncssh.Error, OSError) as exc:
            self.session.check_alive(step)
            raise HostError(self.session.name, self.session.host.address, step, str(exc)) from None
        except TimeoutError:
            self.session.check_alive(step)
            raise HostError(self.session.name, self.session.host.address, step, "no pid within the timeout") from None
        if not line.strip().isdigit():
            err = (await self._proc.stderr.read()) if self._proc.stderr else ""
            raise HostError(self.session.name, self.session.host.address, step, f"did not start: {line!r} {err}")
        self._pid = int(line)
        self._done = asyncio.ensure_future(self._wait())

    async def _wait(self) -> int:
        assert self._proc is not None
        try:
            r = await self._proc.wait()
        except (asyncssh.Error, OSError):
            return -1  # the connection is gone: the process is lost to us (clean --hosts stops it)
        if r.exit_status is not None:
            return int(r.exit_status)
        return -1

    @property
    def pid(self) -> int:
        """The process's pid on its host (and its process group)."""
        return self._pid

    def poll(self) -> int | None:
        if self._done is None or not self._done.done():
            return None
        return self._done.result()

    async def _stop(self, sig: int, grace_s: float) -> int:
        assert self._done is not None
        for s in (sig, signal.SIGKILL):
            if self._done.done():
                break
            name = signal.Signals(s).name.removeprefix("SIG")
            with contextlib.suppress(HostError):
                await self.session.run(
                    "stop a process",
                    group_signal_argv(name, self._pid),
                    check=False,
                    privileged=self.privileged,
                )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace_s if s == sig else 5.0):
                    await asyncio.shield(self._done)
        rc = self._done.result() if self._done.done() else -1
        if self._proc is not None:
            self._proc.close()
        await self._fetch_log()
        return rc

    async def _fetch_log(self) -> None:
        if self._fetched:
            return
        self._fetched = True
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(HostError):
            await self.session.get("fetch a log", self.remote_log, self.log)

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 5.0) -> int | None:
        """Send ``sig`` to the process group; SIGKILL after ``grace_s``; fetch the log; the exit code."""
        if self._done is None:
            return None
        return self._loop.call(self._stop(sig, grace_s))


def group_signal_argv(signal_name: str, pgid: int) -> list[str]:
    """The command that sends ``signal_name`` (``TERM``, ``KILL``, ...) to process group ``pgid``: the
    shell's own ``kill`` -- procps-ng's (4.0.2, Debian 12) takes ``-- -N`` for a signal option when N
    is a signal's number (a group of pid 1-64, common in a container's or a stand-in's PID namespace)
    and prints its usage instead of signalling."""
    return ["sh", "-c", 'kill -s "$0" -- "-$1"', signal_name, str(pgid)]


async def pull_tree(session: Session, remote: str, local: Path, skip: Sequence[str] = ()) -> int:
    """Copy every file below ``remote`` on the host to the same place below ``local`` (SFTP);
    the number of files copied."""
    r = await session.run(
        "list results", ["sh", "-c", 'cd "$1" 2>/dev/null && find . -type f', "sh", remote], check=False
    )
    names = [n.removeprefix("./") for n in r.stdout.splitlines() if n.strip()]
    names = [n for n in names if n not in skip]
    if not names:
        return 0
    try:
        async with session.conn.start_sftp_client() as sftp:
            for n in names:
                dest = local / n
                dest.parent.mkdir(parents=True, exist_ok=True)
                await sftp.get(f"{remote}/{n}", str(dest))
    except (asyncssh.Error, OSError) as exc:
        session.check_alive("fetch results")
        raise HostError(session.name, session.host.address, "fetch results", f"SFTP from {remote}: {exc}") from None
    return len(names)
