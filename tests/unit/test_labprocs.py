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


def test_owned_namespaces_are_those_of_the_given_runs_leases_alive_or_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import json

    from shufflelab.emulate import netns

    present = ["sl0000aa-w1", "sl0000bb-w1", "sl0000cc-w1", "sl0000cc-r", "sl0000ee-w1", "other"]
    monkeypatch.setattr(netns, "namespaces", lambda: present)
    monkeypatch.setattr(netns, "LEASE_DIR", tmp_path)
    mine = subprocess.Popen(["true"])
    mine.wait()
    (tmp_path / "0000cc.json").write_text(json.dumps({"pid": mine.pid}))  # this test's run, killed: its lease stays
    (tmp_path / "0000bb.json").write_text(json.dumps({"pid": 1}))  # another run, still running
    other = subprocess.Popen(["true"])
    other.wait()
    (tmp_path / "0000ee.json").write_text(json.dumps({"pid": other.pid}))  # another test's run, killed
    (tmp_path / "0000ff.json").write_text("{not json")  # unreadable: nobody's
    # aa: no lease file (``clean`` removing it)
    assert labprocs.owned_namespaces({mine.pid}) == {"sl0000cc-w1", "sl0000cc-r"}
    assert labprocs.owned_namespaces([]) == set()
    assert labprocs.owned_namespaces(iter([other.pid, mine.pid])) == {"sl0000cc-w1", "sl0000cc-r", "sl0000ee-w1"}


def test_run_gives_the_output_and_the_pid_and_kills_at_the_timeout() -> None:
    tag = labprocs.new_tag()
    p, pid = labprocs.run(["sh", "-c", f'echo "$$ ${labprocs.TAG_VAR}"'], tag, timeout=30)
    assert p.returncode == 0 and p.stdout.split() == [str(pid), tag]
    with pytest.raises(subprocess.TimeoutExpired):
        labprocs.run(["sleep", "30"], tag, timeout=0.2)
    assert labprocs.tagged(tag) == []  # killed, not left running
