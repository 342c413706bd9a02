"""The class-data archive's key and the Spark copy it is recorded from (no JVM: the JDK and Spark are
stood in for by folders of files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shufflelab import jvm, listener
from shufflelab.emulate import cds


@pytest.fixture
def spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in Spark home with two jars; the cache in ``tmp_path/cache``."""
    home = tmp_path / "venv-a" / "pyspark"
    (home / "jars").mkdir(parents=True)
    (home / "bin").mkdir()
    (home / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    for name in ("spark-core_2.13-4.3.0.jar", "scala-library-2.13.jar"):
        (home / "jars" / name).write_bytes(name.encode() * 10)
    (home / "bin" / "link").symlink_to("spark-submit")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(jvm, "spark_home", lambda: home)
    monkeypatch.setattr(jvm, "spark_jars", lambda: home / "jars")
    monkeypatch.setattr(jvm, "java_version", lambda: "17.0.13")
    monkeypatch.setattr(jvm, "spark_version", lambda: "4.3.0")
    monkeypatch.setattr(listener, "jar_path", lambda: tmp_path / "cache" / "shufflelab-listener-abc.jar")
    return home


def test_a_checkout_whose_jars_are_the_same_files_shares_the_archive(
    spark: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another checkout's jars linked from the same files (as the installer links them from its
    cache): the same archive. Jars with the same names and contents but other files (another
    installation): another archive -- the JVM would refuse the first one there."""
    first = cds.archive_path()
    linked = tmp_path / "venv-b" / "pyspark"
    (linked / "jars").mkdir(parents=True)
    for jar in (spark / "jars").iterdir():
        os.link(jar, linked / "jars" / jar.name)
    monkeypatch.setattr(jvm, "spark_jars", lambda: linked / "jars")
    assert cds.archive_path() == first

    copied = tmp_path / "venv-c" / "pyspark"
    (copied / "jars").mkdir(parents=True)
    for jar in (spark / "jars").iterdir():
        (copied / "jars" / jar.name).write_bytes(jar.read_bytes())
    monkeypatch.setattr(jvm, "spark_jars", lambda: copied / "jars")
    assert cds.archive_path() != first


def test_the_archive_is_recorded_from_a_linked_copy_that_outlives_the_checkout(spark: Path) -> None:
    home = cds._linked_spark_home("k1")
    assert home is not None and home.parent == Path(os.environ["XDG_CACHE_HOME"]) / "shufflelab"
    for jar in (spark / "jars").iterdir():  # the same files: the checkout's JVMs match the archive
        assert (home / "jars" / jar.name).stat().st_ino == jar.stat().st_ino
    assert (home / "bin" / "link").is_symlink()
    assert not list(home.parent.glob("*.tmp*"))
    assert cds._linked_spark_home("k1") == home  # made once


def test_without_hard_links_the_archive_is_recorded_from_sparks_own_folder(
    spark: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cross_device(src: str, dst: str) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(cds.os, "link", cross_device)
    assert cds._linked_spark_home("k2") is None
    assert not list((Path(os.environ["XDG_CACHE_HOME"]) / "shufflelab").glob("spark-home-*"))
