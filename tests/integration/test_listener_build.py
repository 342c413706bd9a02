"""The task listener compiles against the installed pyspark's jars (needs a JDK)."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from shufflelab import listener

pytestmark = pytest.mark.skipif(not shutil.which("javac"), reason="javac not found (JDK 17 needed)")


def test_builds_a_jar_with_the_listener_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    jar = listener.ensure_jar()
    assert jar.parent == tmp_path / "shufflelab" and jar.exists()
    with zipfile.ZipFile(jar) as z:
        assert "shufflelab/TaskFlowListener.class" in z.namelist()
    assert listener.ensure_jar() == jar  # cached: the same file, not rebuilt
    assert list(tmp_path.rglob("*.jar")) == [jar]
