"""benchmarks/sim_vs_ns3.py's compile step: a program is built beside its cached name and renamed
into place, so a benchmark never runs a half-written binary another one is still writing, and a
failed build leaves nothing behind (g++ faked; ns-3 itself is not needed here)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from benchmarks import sim_vs_ns3


@pytest.fixture()
def program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sim_vs_ns3, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(sim_vs_ns3, "find_ns3", lambda: (tmp_path / "include", tmp_path / "lib", ["ns3.44-core"]))
    source = tmp_path / "src" / "two_tier.cc"
    source.parent.mkdir()
    source.write_text("int main() {}\n")
    (source.parent / "hosts.h").write_text("// hosts\n")
    return source


def test_the_binary_appears_whole_under_its_name_and_no_part_is_left(
    program: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[Path] = []

    def gxx(cmd: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        out = Path(cmd[cmd.index("-o") + 1])
        assert not (sim_vs_ns3.CACHE / out.name.split(".")[0]).exists(), "built over the cached name"
        out.write_text("binary")
        written.append(out)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(sim_vs_ns3.subprocess, "run", gxx)
    binary = sim_vs_ns3.compile_ns3(program, "two_tier")
    assert binary.read_text() == "binary" and binary.name.startswith("two_tier-")
    assert written[0] != binary and not written[0].exists()
    assert sorted(p.name for p in sim_vs_ns3.CACHE.iterdir()) == [binary.name]
    # cached: not built again
    monkeypatch.setattr(sim_vs_ns3.subprocess, "run", None)
    assert sim_vs_ns3.compile_ns3(program, "two_tier") == binary


def test_a_failed_build_leaves_no_binary_and_no_part(program: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def gxx(cmd: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        Path(cmd[cmd.index("-o") + 1]).write_text("half")
        raise subprocess.CalledProcessError(1, cmd)

    monkeypatch.setattr(sim_vs_ns3.subprocess, "run", gxx)
    with pytest.raises(subprocess.CalledProcessError):
        sim_vs_ns3.compile_ns3(program, "two_tier")
    assert list(sim_vs_ns3.CACHE.iterdir()) == []
