"""Root integration: a real HDFS (NameNode + two DataNodes from Hadoop's Maven jars) on the fabric.

Skipped when the Hadoop jars have not been fetched (``make setup`` fetches them)."""

from __future__ import annotations

import os
import random
import subprocess

import hdfslab
from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.cgroups import CPU_ROOT
from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric

pytestmark = hdfslab.MARKS

SPEC = hdfslab.spec("hdfs")


def test_hdfs_put_read_and_replicas_on_both_datanodes() -> None:
    sp = S.parse(SPEC)
    net = T.build(sp)
    data = random.Random(7).randbytes(5 * 1024 * 1024 + 123)  # five full 1 MiB blocks and a short one
    cgroups = (CPU_ROOT / "cpu.cfs_quota_us").exists()
    with netns.lease() as lz, NamespaceFabric(lz, net) as fab:
        fab.configure(netplan.of(sp, fab.network))
        cluster = hdfslab.cluster(fab, lz)
        marker = str(cluster.config.scratch)  # in every daemon's command line (its conf dir)
        cg = cluster.cpu_limit("s1", 1) if cgroups else None  # a weak storage host: one core
        with cluster:
            pids = [p.pid for p in cluster.daemons.values()]
            assert len(pids) == 3 and all(hdfslab.alive(p) for p in pids)
            if cg is not None:
                assert (cg / "cpu.cfs_quota_us").read_text().strip() == "100000"
                assert set(cluster.pids("s1")) <= {int(p) for p in (cg / "cgroup.procs").read_text().split()}
            src = lz.scratch / "in.bin"
            src.write_bytes(data)
            cluster.put(src, "/data/in.bin")
            assert cluster.read("/data/in.bin") == data
            assert cluster.get("/data/in.bin", lz.scratch / "out.bin") == len(data)
            assert (lz.scratch / "out.bin").read_bytes() == data
            assert cluster.status("/data/in.bin")["replication"] == 2
            blocks = cluster.block_locations("/data/in.bin")
            assert [b.offset for b in blocks] == [i << 20 for i in range(6)]
            assert sum(b.length for b in blocks) == len(data)
            for b in blocks:
                assert sorted(b.hosts) == ["s1", "s2"], b
                assert sorted(a.rsplit(":", 1)[0] for a in b.addresses) == sorted(
                    net.host_addresses[h] for h in ("s1", "s2")
                )
        # stopped: no daemon, no JVM of this cluster, no cgroup
        assert not cluster.daemons and not any(hdfslab.alive(p) for p in pids)
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
        assert not [p for p in left if int(p) != os.getpid()]
        if cg is not None:
            assert not cg.exists()
        print(f"hdfs timings: {cluster.timings}")
    # the lease's namespaces are gone (other runs' namespaces may come and go meanwhile)
    assert not [n for n in netns.namespaces() if n.startswith(lz.prefix)]
    assert not lz.scratch.exists()
