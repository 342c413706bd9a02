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


def test_new_namespaces_leave_out_those_of_a_live_run_and_those_that_went(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import json

    from shufflelab.emulate import netns

    present = ["sl0000aa-w1", "sl0000bb-w1", "sl0000cc-w1", "other"]
    monkeypatch.setattr(netns, "namespaces", lambda: present)
    monkeypatch.setattr(netns, "LEASE_DIR", tmp_path)
    (tmp_path / "0000bb.json").write_text(json.dumps({"pid": 1}))  # another run, still running
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / "0000cc.json").write_text(json.dumps({"pid": gone.pid}))  # a run killed: its lease stays
    before = {"sl0000aa-w1", "sl0000dd-w1"}  # dd: another run's, removed meanwhile
    assert labprocs.new_namespaces(before) == {"sl0000cc-w1"}
