"""``shufflelab clean`` (netns.clean) beside a run that takes its lease meanwhile: the namespaces, the
resolver folder and the scratch folder of a lease whose owner runs are left alone, whenever the lease
was taken; a dead owner's are removed. No root: the namespace commands are replaced by recorders."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from shufflelab.emulate import netns


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in ("LEASE_DIR", "SCRATCH_ROOT", "NETNS_ETC"):
        monkeypatch.setattr(netns, name, tmp_path / name.lower())
        (tmp_path / name.lower()).mkdir()
    monkeypatch.setattr(netns.cgroups, "stale", lambda *a, **k: [])
    yield tmp_path


def _take(lease_id: str, owner: int) -> None:
    """What :func:`netns.lease` and a fabric leave of lease ``lease_id`` owned by process ``owner``."""
    scratch = netns.SCRATCH_ROOT / lease_id
    (netns.LEASE_DIR / f"{lease_id}.json").write_text(
        json.dumps({"pid": owner, "scratch": str(scratch), "namespaces": [f"sl{lease_id}-w1"]})
    )
    scratch.mkdir()
    (netns.NETNS_ETC / f"sl{lease_id}-w1").mkdir()


@pytest.fixture
def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_a_lease_taken_while_clean_runs_is_left_alone(
    dirs: Path, monkeypatch: pytest.MonkeyPatch, dead_pid: int
) -> None:
    _take("0dead0", dead_pid)  # a killed run's leftovers
    deleted: list[str] = []

    def listing() -> list[str]:
        # another run starts now, after clean has read the lease files: its lease, namespace, folders
        _take("0a11fe", os.getppid())
        return ["sl0dead0-w1", "sl0a11fe-w1", "other"]

    monkeypatch.setattr(netns, "namespaces", listing)
    monkeypatch.setattr(netns, "delete_namespace", deleted.append)
    report = netns.clean()
    assert deleted == ["sl0dead0-w1"] and report.skipped_live == ["sl0a11fe-w1"]
    assert (netns.SCRATCH_ROOT / "0a11fe").is_dir() and (netns.NETNS_ETC / "sl0a11fe-w1").is_dir()
    assert (netns.LEASE_DIR / "0a11fe.json").exists()
    assert not (netns.SCRATCH_ROOT / "0dead0").exists() and not (netns.NETNS_ETC / "sl0dead0-w1").exists()
    assert not (netns.LEASE_DIR / "0dead0.json").exists()

    # forced, the live one goes too
    monkeypatch.setattr(netns, "namespaces", lambda: ["sl0a11fe-w1"])
    netns.clean(force=True)
    assert deleted[-1] == "sl0a11fe-w1" and not (netns.SCRATCH_ROOT / "0a11fe").exists()


def test_a_lease_writes_its_file_before_its_scratch_folder(dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    mkdir = Path.mkdir

    def watched(self: Path, *a: object, **k: object) -> None:
        if self.parent == netns.SCRATCH_ROOT:  # the lease's own scratch folder: its file exists already
            seen.append(any(netns.LEASE_DIR.glob("*.json")))
        mkdir(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", watched)
    monkeypatch.setattr(netns, "namespaces", lambda: [])
    with netns.lease() as lz:
        assert lz.scratch.is_dir()
    assert seen == [True]
