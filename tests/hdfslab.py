"""The HDFS lab of the root integration tests: a NameNode on ``nn`` and DataNodes on ``s1`` and
``s2`` (every block on both, 1 MiB blocks) on a shared 100 Mbit/s bottleneck, requests from
``client``. Skipped when the Hadoop jars have not been fetched (``make setup``)."""

from __future__ import annotations

from typing import Any

import pytest

from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric
from shufflelab.ndp import hadoop_jars, hdfs

MARKS = [
    pytest.mark.root,
    pytest.mark.skipif(
        not hadoop_jars.jars_available(),
        reason="Hadoop jars not fetched: run `make setup` (or `python -m shufflelab.ndp.hdfs --fetch`)",
    ),
]


def spec(name: str) -> dict[str, Any]:
    """The lab's experiment spec, named ``name``."""
    return {
        "experiment": {"name": name},
        "topology": {"kind": "shared", "bottleneck": {"rate_mbps": 100}},
        "hosts": {
            "nn": {"roles": ["spark-master"]},  # roles only satisfy the spec; no Spark is started
            "s1": {"roles": ["spark-worker"]},
            "s2": {"roles": ["spark-worker"]},
            "client": {},
        },
        "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 2}},
    }


def cluster(fab: NamespaceFabric, lz: netns.NamespaceLease) -> hdfs.HdfsCluster:
    """The lab's HDFS on ``fab`` (not started), its files under the lease's scratch."""
    return hdfs.HdfsCluster.on_fabric(
        fab,
        netns.run_at,
        netns.launch_at,
        "nn",
        ["s1", "s2"],
        lz.scratch / "hdfs",
        replication=2,
        block_bytes=1 << 20,
        client="client",
    )


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
