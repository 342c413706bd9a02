"""What /proc says about processes: children, state, command line, reaped children's CPU time."""

from __future__ import annotations

import glob
import os


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (signal 0; one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def children(pid: int) -> list[int]:
    """Child processes of ``pid``, zombies included (each thread keeps its own children list)."""
    out: list[int] = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(path) as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:
            continue
    return out


def state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (``R``, ``S``, ``Z``...), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def live_children(pid: int) -> list[int]:
    """Live (not zombie) child processes of ``pid``."""
    return [k for k in children(pid) if state(k) not in (None, "Z")]


def cmdline(pid: int) -> list[str] | None:
    """The argument vector of ``pid``, None if it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None


def child_times(pid: int) -> tuple[int, int] | None:
    """(cutime, cstime) of ``pid`` in clock ticks: CPU time of its reaped children."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[13]), int(fields[14])  # fields 16 and 17 of proc(5), counted from "state"
