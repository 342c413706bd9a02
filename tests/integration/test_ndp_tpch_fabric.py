"""Root integration: TPC-H through the whole NDP stack on the fabric, end to end.

A dumbbell: Spark (master + one worker) on rack 1; two storage hosts on rack 2 running HDFS
(NameNode on s1, a DataNode on each, every block on both), the NDP proxies in the storage hosts'
CPU cgroups. TPC-H at scale 0.01 is generated, loaded and Q6 runs under two policies -- ``none``
(whole files cross the link, Spark decodes them) and ``full`` (partial aggregates at the storage
hosts) -- and Q1 under ``net-aware``. Every answer must equal DuckDB's; the connector's reads must
show what each policy pushed; nothing may be left behind.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import labprocs
from shufflelab import cgroups
from shufflelab.emulate import cds
from shufflelab.ndp import hadoop_jars
from shufflelab.results import Store

pytestmark = [pytest.mark.root, pytest.mark.spark]

SPEC = """
[experiment]
name = "ndp-tiny"
repetitions = 1
run_timeout_s = 300

[topology]
kind = "dumbbell"
bottleneck = { rate_mbps = 200, queue_bytes = 200_000 }

[hosts]
master = { roles = ["spark-master"], rack = 1 }
w1 = { roles = ["spark-worker"], rack = 1 }
s1 = { roles = ["storage"], rack = 2 }
s2 = { roles = ["storage"], rack = 2 }

[tcp]
congestion_control = "cubic"

[spark]
worker_cores = 2
worker_memory = "1g"
executor_memory = "640m"
fast_jvm = true
conf = { "spark.sql.shuffle.partitions" = "2" }

[workload]
name = "tpch"
params = { query = "q6", scale_factor = 0.01, file_mb = 1, block_mb = 1, storage_cores = 2, core_scale = 0.5 }

[cases.none]
"workload.params.policy" = "none"

[cases.full]
"workload.params.policy" = "full"

[cases.netaware-q1]
"workload.params.policy" = "net-aware"
"workload.params.query" = "q1"
"""


def test_tpch_through_ndp_under_three_policies(tmp_path: Path) -> None:
    if not hadoop_jars.jars_available():
        pytest.skip("Hadoop jars not fetched: python -m shufflelab.ndp.hdfs --fetch (make setup does it)")
    spec = tmp_path / "ndp.toml"
    spec.write_text(SPEC)
    tag = labprocs.new_tag()
    p, runner = labprocs.run(
        [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--results", str(tmp_path / "results")],
        tag, timeout=1200,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    store = Store(tmp_path / "results" / "ndp-tiny.duckdb")
    runs = store.query(
        "SELECT r.run_id, s.label, r.status, r.cause, r.bottleneck_tx_bytes FROM runs r JOIN scenarios s USING "
        "(scenario_id) ORDER BY s.label"
    )
    assert list(runs["status"]) == ["ok"] * 3, runs.to_string()
    by_case = {lbl.split("case=")[-1]: rid for lbl, rid in zip(runs["label"], runs["run_id"], strict=True)}
    queries = store.query("SELECT * FROM ndp_queries")
    assert len(queries) == 3 and queries["correct"].all() and queries["ok"].all(), queries.to_string()
    reads = store.query("SELECT * FROM ndp_reads")
    none = reads[reads["run_id"] == by_case["none"]]
    full = reads[reads["run_id"] == by_case["full"]]
    lineitem_none = none[none["path"].str.contains("/lineitem/")]
    lineitem_full = full[full["path"].str.contains("/lineitem/")]
    assert len(lineitem_none) == len(lineitem_full) > 1  # one read per file
    assert (lineitem_none["operators"].fillna("") == "").all(), lineitem_none.to_string()
    assert lineitem_full["operators"].str.contains("aggregate").all(), lineitem_full.to_string()
    # whole files vs a few partial sums
    assert lineitem_none["body_bytes"].sum() > 50 * lineitem_full["body_bytes"].sum()
    tx = dict(zip(runs["run_id"], runs["bottleneck_tx_bytes"], strict=True))
    assert tx[by_case["none"]] > tx[by_case["full"]] + lineitem_none["body_bytes"].sum() / 2
    # Net-Aware said what it chose and why
    na = queries[queries["policy_asked"] == "net-aware"].iloc[0]
    est = json.loads(na["estimate_json"])
    assert na["policy"] in ("none", "filter", "filter+project", "full") and est["policy"] == na["policy"]
    assert set(est["times_s"]) == {"none", "filter", "filter+project", "full"}
    # the connector's jar comes after Spark's own jars: the drivers and executors started from the
    # class-data archive, whose class path is the start of theirs (a JVM that cannot use it says so)
    if cds.java_options():
        logs = [*tmp_path.rglob("driver_*.log"), *tmp_path.rglob("executors-*/*/stdout")]
        refused = [str(p) for p in logs if "Unable to use shared archive" in p.read_text(errors="replace")]
        assert len(logs) >= 6 and not refused, refused
    # nothing left behind: namespaces, HDFS daemons, proxies, cgroups
    assert not labprocs.owned_namespaces({runner}), labprocs.owned_namespaces({runner})
    left = labprocs.tagged(tag)  # the run's HDFS daemons, proxies and Spark: all gone
    assert not left, labprocs.describe(left)
    # none of its groups left: its storage made them minutes ago; another run's made in the last
    # seconds may still be empty for a moment (``CpuCgroup.starting``)
    assert not cgroups.stale(min_age_s=5)
