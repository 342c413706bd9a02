"""The leaf modules: /proc, the artifact cache, Maven's offline-then-online loop and where the switch binary is."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shufflelab import artifacts, cgroups, jvm, procfs


def test_procfs_sees_a_child_live_then_as_a_zombie() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in procfs.children(os.getpid())
        assert child.pid in procfs.live_children(os.getpid())
        assert (procfs.cmdline(child.pid) or [])[1:] == ["-c", "import time; time.sleep(30)"]
        child.kill()
        deadline = time.monotonic() + 10
        while procfs.state(child.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procfs.state(child.pid) == "Z"  # killed, not yet reaped
        assert child.pid in procfs.children(os.getpid())
        assert child.pid not in procfs.live_children(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert procfs.state(child.pid) is None and procfs.cmdline(child.pid) is None
    assert procfs.child_times(child.pid) is None
    cutime, cstime = procfs.child_times(os.getpid()) or (-1, -1)
    assert cutime >= 0 and cstime >= 0


def test_cache_root_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert artifacts.cache_root() == tmp_path / "shufflelab"


def test_publish_file_leaves_only_the_whole_file(tmp_path: Path) -> None:
    built = tmp_path / "built.jar"
    built.write_bytes(b"x" * 100_000)
    target = tmp_path / "cache" / "a.jar"
    artifacts.publish_file(built, target)
    assert target.read_bytes() == built.read_bytes()
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.jar"]
    with pytest.raises(FileNotFoundError):
        artifacts.publish_file(tmp_path / "missing.jar", tmp_path / "cache" / "b.jar")
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.jar"]  # no partial file left


def test_the_switch_binary_is_the_env_var_then_the_release_build_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def executable(p: Path) -> Path:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("#!/bin/sh\n")
        p.chmod(0o755)
        return p

    named = executable(tmp_path / "named" / "my-switch")
    built = tmp_path / "target" / "release" / artifacts.SWITCH_BINARY_NAME
    on_path = executable(tmp_path / "bin" / artifacts.SWITCH_BINARY_NAME)
    monkeypatch.setattr(artifacts, "switch_release_build", lambda: built)
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setenv("SHUFFLELAB_SWITCH", str(named))
    assert artifacts.switch_binary() == named
    named.chmod(0o644)  # not executable: the next place
    assert artifacts.switch_binary() == on_path
    executable(built)
    assert artifacts.switch_binary() == built
    on_path.unlink()
    built.unlink()
    assert artifacts.switch_binary() is None


def _fake_mvn(tmp_path: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text('#!/bin/sh\necho "$@" >> ' + str(tmp_path / "calls") + "\n" + script)
    mvn.chmod(mvn.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return tmp_path / "calls"


def test_maven_goes_online_after_offline_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_mvn(tmp_path, 'case "$*" in *" -o "*) echo offline-miss >&2; exit 1;; esac\nexit 0\n', monkeypatch)
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    cleaned: list[int] = []
    artifacts.maven(["package"], pom=pom, timeout_s=30, succeeded=lambda: True, after_failure=lambda: cleaned.append(1))
    lines = calls.read_text().splitlines()
    assert len(lines) == 2 and " -o " in f" {lines[0]} " and " -o " not in f" {lines[1]} "
    assert cleaned == [1]


def test_maven_names_both_tries_and_stops_when_hopeless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_mvn(tmp_path, "printf '\\033[1m[ERROR] COMPILATION ERROR\\n' >&2\nexit 1\n", monkeypatch)
    pom = tmp_path / "pom.xml"
    pom.write_text("<project/>")
    with pytest.raises(artifacts.MavenError) as exc:
        artifacts.maven(["package"], pom=pom, timeout_s=30, succeeded=lambda: True)
    assert len(exc.value.attempts) == 2 and "online (Maven Central)" in str(exc.value)
    assert "\x1b" not in str(exc.value) and "COMPILATION ERROR" in str(exc.value)
    calls.unlink()
    with pytest.raises(artifacts.MavenError) as exc:
        artifacts.maven(["package"], pom=pom, timeout_s=30, succeeded=lambda: True, hopeless="COMPILATION ERROR")
    assert len(exc.value.attempts) == 1 and len(calls.read_text().splitlines()) == 1
    # a run that exits 0 without producing what was asked for is a failure too
    _ok = tmp_path / "ok"
    (tmp_path / "bin" / "mvn").write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(artifacts.MavenError, match="exited 0"):
        artifacts.maven(["package"], pom=pom, timeout_s=30, succeeded=_ok.exists)


def test_cpu_quota_and_jvm() -> None:
    q = cgroups.cpu_quota()
    assert q is None or q > 0
    import pyspark

    assert jvm.spark_version() == pyspark.__version__
    assert (jvm.spark_jars()).is_dir()
