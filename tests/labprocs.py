"""The processes of one test's lab runs, found by a tag in their environment instead of a process
name pattern: a name pattern also matches another test's (or another user's) Spark, iperf3 or HDFS
running at the same time on this machine; the tag is inherited by everything a run starts (its
daemons, the executors their workers fork, iperf3, the sampler, the proxies).

Reading ``/proc`` races with processes ending: one that ends between the listing and the reading
(``FileNotFoundError``, ``ProcessLookupError``) or that cannot be read is skipped, never an error."""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

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
