"""The Spark conf keys the lab owns: refused in a spec, always the lab's in an application's conf."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shufflelab import sparkconf
from shufflelab import spec as S
from shufflelab.emulate import cds, spark
from shufflelab.emulate.spark import ClusterSpec, SparkCluster

# what a user may tune stays allowed (and wins over the lab's default where the lab sets one)
TUNABLE = {
    "spark.shuffle.compress": "true",
    "spark.shuffle.io.numConnectionsPerPeer": "2",
    "spark.reducer.maxSizeInFlight": "96m",
    "spark.executor.memory": "900m",
    "spark.executor.heartbeatInterval": "5s",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.shuffle.partitions": "4",
    "spark.eventLog.logBlockUpdates.enabled": "true",
}


@pytest.mark.parametrize("key", sorted(sparkconf.RESERVED))
def test_a_reserved_key_is_refused_naming_the_field(spec_dict: dict[str, Any], key: str) -> None:
    spec_dict["spark"] = {"conf": {key: "x", "spark.reducer.maxSizeInFlight": "96m"}}
    with pytest.raises(S.SpecError) as exc:
        S.parse(spec_dict, "exp.toml")
    msg = str(exc.value)
    assert "exp.toml" in msg
    assert f'spark.conf."{key}": Value error, reserved: {sparkconf.RESERVED[key]}' in msg


def test_a_reserved_key_in_a_matrix_point_or_case_is_refused(spec_dict: dict[str, Any]) -> None:
    spec_dict["matrix"] = {"spark.conf": [{}, {"spark.eventLog.enabled": "false"}]}
    with pytest.raises(S.SpecError, match=r'spark\.conf\."spark\.eventLog\.enabled": Value error, reserved'):
        S.parse(spec_dict, "exp.toml")
    del spec_dict["matrix"]
    spec_dict["cases"] = {"nolog": {"spark.conf": {"spark.eventLog.dir": "file:///tmp"}}}
    with pytest.raises(S.SpecError, match=r"case=nolog.*\n.*spark\.conf\.\"spark\.eventLog\.dir\""):
        S.parse(spec_dict, "exp.toml")


def test_tunable_keys_stay_allowed(spec_dict: dict[str, Any]) -> None:
    spec_dict["spark"] = {"conf": TUNABLE}
    assert S.parse(spec_dict).spark.conf == TUNABLE


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SparkCluster:
    jar = tmp_path / "listener.jar"
    monkeypatch.setattr(spark.listener, "ensure_jar", lambda: jar)
    monkeypatch.setattr(cds.listener, "ensure_jar", lambda: jar)
    monkeypatch.setattr(cds, "java_options", lambda: "-XX:SharedArchiveFile=/a.jsa -Xshare:auto")
    cs = ClusterSpec("master", ("w1", "w2"), 1, "1g", fast_jvm=True)
    addresses = {"master": "10.77.1.1", "w1": "10.77.1.2", "w2": "10.77.1.3"}
    return SparkCluster(cs, {h: f"ns-{h}" for h in addresses}, addresses, tmp_path / "scratch", tmp_path / "logs")


def test_the_lab_sets_every_reserved_key_and_the_spec_conf_wins_elsewhere(
    spec_dict: dict[str, Any], cluster: SparkCluster, tmp_path: Path
) -> None:
    spec_dict["spark"] = {"conf": {**TUNABLE, "spark.executor.extraJavaOptions": "-XX:+UseG1GC"}}
    sp = S.parse(spec_dict)
    conf = cluster.app_conf(sp, tmp_path / "ev", 4, cores_max=2, listener_out=tmp_path / "l.jsonl")
    assert set(sparkconf.RESERVED) <= set(conf)  # the reserved set is what the lab sets, nothing invented
    assert conf[sparkconf.EVENT_LOG_ENABLED] == "true" and conf[sparkconf.EVENT_LOG_DIR] == f"file://{tmp_path / 'ev'}"
    assert conf[sparkconf.MASTER] == cluster.url and conf[sparkconf.CORES_MAX] == "2"
    for key, value in TUNABLE.items():
        assert conf[key] == value
    # JVM options: the lab's (fast JVM, class-data archive) first, the spec's appended
    assert conf["spark.executor.extraJavaOptions"] == (
        f"{spark.FAST_JVM_OPTS} -XX:SharedArchiveFile=/a.jsa -Xshare:auto -XX:+UseG1GC"
    )
    assert conf["spark.driver.extraJavaOptions"] == f"{spark.FAST_JVM_OPTS} -XX:SharedArchiveFile=/a.jsa -Xshare:auto"


def test_app_conf_refuses_a_reserved_key_that_bypassed_validation(
    spec_dict: dict[str, Any], cluster: SparkCluster, tmp_path: Path
) -> None:
    sp = S.parse(spec_dict)
    bypass = sp.model_copy(update={"spark": sp.spark.model_copy(update={"conf": {"spark.eventLog.enabled": "false"}})})
    with pytest.raises(sparkconf.ReservedConfError, match="spark.eventLog.enabled"):
        cluster.app_conf(bypass, tmp_path / "ev", 4)


def test_the_master_and_workers_start_from_the_class_data_archive(cluster: SparkCluster, tmp_path: Path) -> None:
    """The daemons get the archive's options and its class path's first entry (the listener jar), so
    that the archive recorded for drivers and executors serves their classes too; without the archive
    (``spark.cds = false``) they start as before."""
    env = cluster._env("w1")
    assert env["SPARK_DAEMON_CLASSPATH"] == str(tmp_path / "listener.jar")
    assert env["SPARK_DAEMON_JAVA_OPTS"] == f"{spark.FAST_JVM_OPTS} -XX:SharedArchiveFile=/a.jsa -Xshare:auto"
    cluster.spec = ClusterSpec("master", ("w1", "w2"), 1, "1g", fast_jvm=True, cds=False)
    env = cluster._env("w1")
    assert "SPARK_DAEMON_CLASSPATH" not in env and env["SPARK_DAEMON_JAVA_OPTS"] == spark.FAST_JVM_OPTS


def test_the_clusters_processes_make_their_temporary_files_in_its_scratch_folder(
    cluster: SparkCluster, tmp_path: Path
) -> None:
    """pyspark's driver makes a folder for its gateway's connection file with tempfile.mkdtemp() and
    removes it only once the JVM answers: a driver killed while its JVM starts left an empty folder in
    /tmp for good. Every process of the cluster (the driver's environment is the master's) makes its
    temporary files in the cluster's scratch folder, which goes with the cluster."""
    env = cluster._env("master")
    tmp = Path(env["TMPDIR"])
    assert tmp.is_dir() and tmp.is_relative_to(tmp_path / "scratch"), tmp
    made = subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp())"],
        env={**os.environ, **env}, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert Path(made).parent == tmp, made


def test_dist_class_path_puts_the_jars_after_what_it_holds() -> None:
    assert sparkconf.dist_class_path(None, ["/c/a.jar"]) == "/c/a.jar"
    assert sparkconf.dist_class_path("", ["/c/a.jar", "/c/b.jar"]) == "/c/a.jar:/c/b.jar"
    assert sparkconf.dist_class_path("/h/x.jar", ["/c/a.jar"]) == "/h/x.jar:/c/a.jar"
    assert sparkconf.dist_class_path("/h/x.jar", []) == "/h/x.jar"
