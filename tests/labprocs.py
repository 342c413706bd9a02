"""The processes and namespaces of one test's lab runs. Processes are found by a tag in their
environment instead of a process name pattern: a name pattern also matches another test's (or
another user's) Spark, iperf3 or HDFS running at the same time on this machine; the tag is
inherited by everything a run starts (its daemons, the executors their workers fork, iperf3, the
sampler, the proxies).

Reading ``/proc`` races with processes ending: one that ends between the listing and the reading
(``FileNotFoundError``, ``ProcessLookupError``) or that cannot be read is skipped, never an error.

Namespaces: another test's run, or another session's, may create or remove its own at any time, and
one killed on purpose (SIGKILL) leaves its own until ``clean``: a test looks only at the namespaces
of the leases its own runs took (the lease file names the process that took it, alive or not)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

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


def run(argv: list[str], tag: str, timeout: float) -> tuple[subprocess.CompletedProcess[str], int]:
    """``subprocess.run`` of a command with the tag (killed at ``timeout``, as ``run`` does), and the
    pid it ran as: a ``shufflelab run``'s leases name it (:func:`owned_namespaces`)."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=tagged_env(tag)) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise
    return subprocess.CompletedProcess(argv, p.returncode, out, err), p.pid


def describe(procs: list[tuple[int, str]]) -> str:
    return "\n".join(f"{pid} {cmd[:300]}" for pid, cmd in procs)


def lab_namespaces() -> set[str]:
    """Every namespace named as a shufflelab run names its own (any session's)."""
    return {n for n in netns.namespaces() if netns.NS_PATTERN.match(n)}


def owned_namespaces(owners: Iterable[int]) -> set[str]:
    """Run namespaces whose lease was taken by one of ``owners`` (the pids of this test's ``shufflelab
    run`` processes, or its own for a lease taken in the test), whether the owner still runs or not.
    A lease file outlives its namespaces (written before the first, removed after the last), so a
    run's leftovers are always found; a namespace whose lease file is gone is ``clean`` removing it."""
    pids = set(owners)
    out = set()
    for n in lab_namespaces():
        m = netns.NS_PATTERN.match(n)
        if not m:
            continue
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            f = netns.LEASE_DIR / f"{m.group(1)}.json"
            if int(json.loads(f.read_text()).get("pid") or 0) in pids:
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
