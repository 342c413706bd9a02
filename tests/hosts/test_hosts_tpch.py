"""TPC-H through near-data processing (seed 003's workload) over SSH on the session's stand-in hosts
(``lab6``), as small as shows pushdown working: one query (Q6) under the ``full`` policy at scale
factor 0.01 (1 MB files, one HDFS block each) on a dumbbell -- the Spark master and one worker on
machines of their own in rack 1, one storage host (NameNode, DataNode and NDP proxy) in rack 2, the
link between the racks on the router host -- run by ``shufflelab run --hosts``.

HDFS's configuration, its name and data folders and the proxy's spool are in the lease's folder on
the storage machine (the stand-ins' scratch folders are their own: nothing written there reaches
the controller otherwise), the tables are generated on the controller and put into HDFS from the
NameNode's machine, and the executors' per-read statistics come back from the worker's machine with
SFTP. The storage runs on its machine's own CPUs (``storage_cores x core_scale`` = its CPU count:
no cap). The answer must equal DuckDB's, every read of lineitem must have been a pushed-down partial
aggregate, and every host must be as before afterwards."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from shufflelab.ndp import connector, hadoop_jars

from .conftest import LAB6, Lab
from .test_hosts_quickstart import ROUTER, routing
from .test_hosts_run import cli, host_state

pytestmark = [LAB6, pytest.mark.root, pytest.mark.spark]

# the worker on a machine of its own: its statistics come back from a machine the driver is not on
MACHINES = {"master": "host1", "w1": "host2", "s1": "host4"}  # racks 1, 1, 2
CPUS = len(os.sched_getaffinity(0))  # the stand-ins' (nproc of this machine): the storage's, uncapped
SPEC = f"""
[experiment]
name = "tpch-hosts"
repetitions = 1
run_timeout_s = 240
[topology]
kind = "dumbbell"
bottleneck = {{ rate_mbps = 200, queue_bytes = 200_000 }}
[hosts]
master = {{ roles = ["spark-master"], rack = 1 }}
w1 = {{ roles = ["spark-worker"], rack = 1 }}
s1 = {{ roles = ["storage"], rack = 2 }}
[tcp]
congestion_control = "cubic"
[telemetry]
selftest = "off"
[spark]
worker_cores = 1
worker_memory = "1g"
executor_memory = "640m"
fast_jvm = true
conf = {{ "spark.sql.shuffle.partitions" = "1" }}
[workload]
name = "tpch"
[workload.params]
query = "q6"
policy = "full"
scale_factor = 0.01
file_mb = 1
block_mb = 1
storage_cores = {CPUS}
core_scale = 1
"""


def test_tpch_pushdown_runs_on_machines_and_its_reads_come_back(lab6: Lab, tmp_path: Path) -> None:
    if not hadoop_jars.jars_available():
        pytest.skip("Hadoop jars not fetched: python -m shufflelab.ndp.hdfs --fetch (make setup does it)")
    connector.ensure_jar()
    spec = tmp_path / "tpch-hosts.toml"
    spec.write_text(SPEC)
    inv = lab6.inventory_on(tmp_path / "inv.toml", MACHINES, ROUTER)
    results = tmp_path / "results"
    before, routes = host_state(lab6), routing(lab6)
    r = cli("run", str(spec), "--hosts", str(inv), "--results", str(results), "--no-report", timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with duckdb.connect(str(results / "tpch-hosts.duckdb"), read_only=True) as con:
        runs = con.execute("SELECT status, cause, bottleneck_tx_bytes FROM runs").fetchall()
        queries = con.execute("SELECT query, policy, correct, ok, error FROM ndp_queries").fetchall()
        reads = con.execute("SELECT path, operators, body_bytes, input_bytes FROM ndp_reads").fetchall()
    assert len(runs) == 1 and runs[0][0] == "ok", runs
    assert queries == [("q6", "full", True, True, None)], queries
    lineitem = [x for x in reads if "/lineitem/" in x[0]]
    body, read_there = sum(x[2] for x in lineitem), sum(x[3] for x in lineitem)
    print(f"tpch over SSH: {len(lineitem)} lineitem reads, {read_there} B read at the storage, {body} B sent back")
    # every file of lineitem read once, reduced to a partial aggregate at the storage machine
    assert len(lineitem) >= 1 and all("aggregate" in x[1] for x in lineitem), reads
    assert read_there > 50 * body, (read_there, body)
    assert host_state(lab6) == before and routing(lab6) == routes
