"""The test helper that finds a lab run's processes by the tag in their environment: it finds a
tagged process and only that one, and a process that ends while it reads ``/proc`` is skipped."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import labprocs


def test_finds_the_tagged_process_and_not_an_untagged_one() -> None:
    tag = labprocs.new_tag()
    mine = subprocess.Popen(["sleep", "30"], env=labprocs.tagged_env(tag))
    other = subprocess.Popen(["sleep", "30"])
    try:
        assert [pid for pid, _ in labprocs.tagged(tag, "sleep")] == [mine.pid]
        assert labprocs.tagged(tag, "no such command") == []
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()
    assert labprocs.tagged(tag) == []


@pytest.mark.parametrize("error", [FileNotFoundError, ProcessLookupError, PermissionError])
def test_a_process_ending_while_read_is_skipped(monkeypatch: pytest.MonkeyPatch, error: type[OSError]) -> None:
    tag = labprocs.new_tag()
    mine = subprocess.Popen(["sleep", "30"], env=labprocs.tagged_env(tag))
    real = Path.read_bytes

    def racing(self: Path) -> bytes:
        if self.name == "cmdline" and self.parent.name == str(mine.pid):
            raise error(f"{self}: gone")  # listed, its environment read, then it ended
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", racing)
    try:
        assert labprocs.tagged(tag) == []
    finally:
        mine.kill()
        mine.wait()
