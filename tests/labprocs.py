"""The processes and namespaces of one test's lab runs. Processes are found by a tag in their
environment instead of a process name pattern: a name pattern also matches another test's (or
another user's) Spark, iperf3 or HDFS running at the same time on this machine; the tag is
inherited by everything a run starts (its daemons, the executors their workers fork, iperf3, the
sampler, the proxies).

Reading ``/proc`` races with processes ending: one that ends between the listing and the reading
(``FileNotFoundError``, ``ProcessLookupError``) or that cannot be read is skipped, never an error.

Namespaces: another session's run may create or remove its own at any time, so a test compares
only what appeared since it started and is not claimed by a lease whose owner still runs."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from shufflelab import procfs
from shufflelab.emulate import netns

TAG_VAR = "SHUFFLELAB_TEST_RUN"


def new_tag() -> str:
    return secrets.token_hex(6)


def tagged_env(tag: str, base: Mapping[str, str] | None = None, **more: str) -> dict[str, str]:
    """``base`` (this process's environment) with the tag, for a ``shufflelab`` command a test starts."""
    return {**(os.environ if base is None else base), TAG_VAR: tag, **more}


def _read(pid: str, name: str) -> bytes:
    return Path(f"/proc/{pid}/{name}").read_bytes()


def tagged(tag: str, pattern: str = "") -> list[tuple[int, str]]:
    """(pid, command line) of every live process with ``tag`` whose command line contains
    ``pattern`` (any when empty). Zombies (already ended, not yet reaped) are not listed."""
    needle = f"{TAG_VAR}={tag}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if needle not in _read(pid, "environ").split(b"\0"):
                continue
            cmd = _read(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace").strip()
            state = _read(pid, "stat").rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):  # gone meanwhile (FileNotFoundError, ProcessLookupError), or unreadable
            continue
        if state != b"Z" and pattern in cmd:
            found.append((int(pid), cmd))
    return found


def describe(procs: list[tuple[int, str]]) -> str:
    return "\n".join(f"{pid} {cmd[:300]}" for pid, cmd in procs)


def lab_namespaces() -> set[str]:
    """Every namespace named as a shufflelab run names its own (any session's)."""
    return {n for n in netns.namespaces() if netns.NS_PATTERN.match(n)}


def live_leases() -> set[str]:
    """Lease ids whose owner process still runs (another run, of this session or another one)."""
    ids = set()
    for f in netns.LEASE_DIR.glob("*.json") if netns.LEASE_DIR.exists() else []:
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            pid = int(json.loads(f.read_text()).get("pid") or 0)
            if pid and procfs.alive(pid):
                ids.add(f.stem)
    return ids


def new_namespaces(before: set[str]) -> set[str]:
    """Run namespaces that appeared since ``before`` and belong to no live run: what runs that have
    ended (this test's) left behind."""
    live = live_leases()
    out = set()
    for n in lab_namespaces() - before:
        m = netns.NS_PATTERN.match(n)
        if m and m.group(1) not in live:
            out.add(n)
    return out


def stop_runs(procs: Iterable[subprocess.Popen[str]]) -> None:
    """Stop the ``shufflelab run`` processes (each the leader of its own session) that are still
    running after a failed test: SIGINT to the group, so the runner tears its lab down, then SIGKILL
    if it has not ended within two minutes."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
            try:
                p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
