"""Root integration: ``analyze --engine spark`` on the lab's own Spark standalone cluster (master and
one 1-core worker) reading event logs from the lab's HDFS (a NameNode and a DataNode on a storage
host), all in namespaces: the Parquet tables equal a local ingest of the same logs, and nothing is
left behind. Kept small (three fixture logs, the smallest cluster): CI time matters.

Skipped when the Hadoop jars have not been fetched (``make setup`` fetches them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import labprocs
from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric
from shufflelab.emulate.spark import FAST_JVM_OPTS, ClusterSpec, SparkCluster
from shufflelab.eventlog import ingest as ing
from shufflelab.ndp import hadoop_jars, hdfs
from shufflelab.results import Store

pytestmark = [
    pytest.mark.root,
    pytest.mark.spark,
    pytest.mark.skipif(
        not hadoop_jars.jars_available(),
        reason="Hadoop jars not fetched: run `make setup` (or `python -m shufflelab.ndp.hdfs --fetch`)",
    ),
]

FIXTURES = Path(__file__).parent.parent / "fixtures" / "eventlogs" / "spark-4.3"
LOGS = ("plain", "rolling", "zstd")  # a plain file, a rolling directory (with its empty appstatus file), zstd

SPEC: dict[str, Any] = {
    "experiment": {"name": "analyze-spark"},
    "topology": {"kind": "shared", "bottleneck": {"rate_mbps": 1000}},
    "hosts": {
        "master": {"roles": ["spark-master"]},
        "w1": {"roles": ["spark-worker"]},
        "s1": {},  # HDFS: NameNode and DataNode (role 'storage' belongs to the TPC-H workload)
    },
    "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 2}},  # satisfies the spec only
}

TABLES = ("experiments", "scenarios", "runs", "apps", "jobs", "stages", "tasks", "executors", "sql_executions",
          "eventlog_sources")  # fmt: skip
# where each log was read from and when each store was written: not what was read
WHERE = ("source", "run_dir", "environment_json", "problems_json", "mtime", "ingested_at", "created_at")


def _tables(db: Path) -> dict[str, list[str]]:
    s = Store(db)
    out = {}
    for t in TABLES:
        df = s.query(f"SELECT * FROM {t}")
        cols = sorted(c for c in df.columns if c not in WHERE)
        out[t] = sorted(map(repr, df[cols].itertuples(index=False)))
    return out


def test_spark_engine_on_the_lab_cluster_reads_hdfs_and_equals_the_local_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    for sub in LOGS:
        for f in (FIXTURES / sub).rglob("*"):
            if f.is_file():
                dest = logs / f.relative_to(FIXTURES)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(f.read_bytes())
    local = tmp_path / "local.duckdb"
    ing.ingest([logs], local, workers=1)

    tag = labprocs.new_tag()
    monkeypatch.setenv(labprocs.TAG_VAR, tag)  # every daemon, executor and the driver carry it
    sp = S.parse(SPEC)
    net = T.build(sp)
    out = tmp_path / "tables.parquet"
    with netns.lease() as lz, NamespaceFabric(lz, net) as fab:
        fab.configure(netplan.of(sp, fab.network))
        addr = fab.network.host_addresses
        storage = hdfs.HdfsCluster.on_fabric(
            fab, netns.run_at, netns.launch_at, "s1", ["s1"], lz.scratch / "hdfs", replication=1, client="master"
        )
        spark = SparkCluster(
            ClusterSpec(master="master", workers=("w1",), worker_cores=1, worker_memory="768m", fast_jvm=True),
            dict(fab.places), addr, lz.scratch / "spark", lz.scratch / "spark-logs",
        )  # fmt: skip
        with storage:
            for f in sorted(logs.rglob("*")):
                if f.is_file():
                    storage.put(f, "/spark-logs/" + f.relative_to(logs).as_posix())
            spark.start()
            try:
                m = addr["master"]
                argv = [
                    sys.executable, "-m", "shufflelab.cli", "analyze", f"{storage.default_fs}/spark-logs",
                    "--engine", "spark", "--master", spark.url, "--db", str(out),
                    "--spark-conf", f"spark.driver.host={m}", "--spark-conf", f"spark.driver.bindAddress={m}",
                    "--spark-conf", "spark.executor.memory=512m",
                    "--spark-conf", f"spark.executor.extraJavaOptions={FAST_JVM_OPTS}",
                    "--spark-conf", f"spark.driver.extraJavaOptions={FAST_JVM_OPTS}",
                    "--spark-conf", f"spark.local.dir={lz.scratch / 'driver'}",
                ]  # fmt: skip
                p = subprocess.run(
                    ["ip", "netns", "exec", fab.places["master"], *argv],
                    capture_output=True, text=True, timeout=600, env=labprocs.tagged_env(tag, SPARK_LOCAL_IP=m),
                )  # fmt: skip
            finally:
                spark.stop()
        assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
        assert "3 application(s) written to" in " ".join(p.stdout.split()), p.stdout
        runs = Store(out).query("SELECT run_dir FROM runs ORDER BY run_dir")
        assert all(r.startswith(f"{storage.default_fs}/spark-logs/") for r in runs["run_dir"]), runs
        assert _tables(out) == _tables(local)
        marker = str(lz.scratch)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert not [pid for pid in left if int(pid) != os.getpid()]
    assert not labprocs.tagged(tag), labprocs.describe(labprocs.tagged(tag))
    assert not labprocs.owned_namespaces({os.getpid()})  # the lease this test took
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".")]  # no staging folder
