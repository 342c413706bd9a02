"""TPC-H through near-data processing (seed 003's workload) over SSH on the session's stand-in hosts
(``lab6``), as small as shows pushdown working: experiments/ndp-tpch.toml itself, one of its cells --
Q6 under the ``full`` policy, its storage of 4 emulated cores x 0.25 behind its 1000 Mbit/s link, the
storage and link of every cell of experiments/ndp-costs.toml (whose cells are ndp-tpch's:
tests/unit/test_shipped_cells.py) -- at scale factor 0.01 (1 MB files, one HDFS block each) on
three of its five hosts: the Spark master and one worker on machines of their own in rack 1, one
storage host (NameNode, DataNode and NDP proxy) in rack 2, the link between the racks on the router
host -- run by ``shufflelab run --hosts --select``.

HDFS's configuration, its name and data folders and the proxy's spool are in the lease's folder on
the storage machine (the stand-ins' scratch folders are their own: nothing written there reaches
the controller otherwise), the tables are generated on the controller and put into HDFS from the
NameNode's machine, and the executors' per-read statistics come back from the worker's machine with
SFTP. The storage is capped at one CPU of its machine's (``storage_cores x core_scale`` = 4 x 0.25): a CPU
cgroup on the storage machine under its lease, watched from here while the run lasts (the stand-in
gets the cgroup v1 ``cpu`` hierarchy this machine has, which ``ip netns exec`` leaves out of its
/sys). The answer must equal DuckDB's, every read of lineitem must have been a pushed-down partial
aggregate, the group must have held the storage's processes at the cap, and every host must be as
before afterwards, the group gone."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from shufflelab.ndp import connector, hadoop_jars

from . import shipped
from .conftest import Lab, StandIn, sh
from .test_hosts_quickstart import ROUTER, routing
from .test_hosts_run import ENV, host_state

pytestmark = [pytest.mark.root, pytest.mark.spark]

# the worker on a machine of its own: its statistics come back from a machine the driver is not on
MACHINES = {"master": "host1", "w1": "host2", "s1": "host4"}  # racks 1, 1, 2
CPUS = len(os.sched_getaffinity(0))  # the stand-ins' (nproc of this machine)
CPU_ROOT = Path("/sys/fs/cgroup/cpu")  # this machine's v1 cpu hierarchy, the stand-in's too once mounted
# capped below the machine's CPUs (on a one-CPU machine none is needed, none made); without a v1 cpu
# hierarchy here to give the stand-in, uncapped (the machine's own CPUs)
STORAGE_CPUS = 1 if (CPU_ROOT / "cpu.cfs_quota_us").exists() else CPUS
# ndp-tpch's cell at ndp-costs' storage and link (its 4 emulated cores x 0.25 = one CPU, 1000 Mbit/s);
# on a machine without a v1 cpu hierarchy, core_scale 0.5: 4 x 0.5 = the stand-in's two CPUs, uncapped
CELL = ["--select", "policy=full", "--select", "storage_cores=4", "--select", "rate=1000", "--select", "query=q6",
        "--select", "case=single"]  # fmt: skip


def trimmed(path: Path) -> Path:
    """experiments/ndp-tpch.toml, one repetition, on three of its hosts (the master, w1, s1), at
    scale factor 0.01 (1 MB files, one HDFS block each) with one shuffle partition, the tests'
    quicker JVMs (``spark.fast_jvm``) and no link self-test."""
    data = shipped.load("ndp-tpch.toml")
    data["experiment"].update(repetitions=1, run_timeout_s=240)
    data["hosts"] = {h: data["hosts"][h] for h in MACHINES}
    data["telemetry"] = {"selftest": "off"}
    data["spark"].update(fast_jvm=True, conf={"spark.sql.shuffle.partitions": "1"})
    data["workload"]["params"].update(scale_factor=0.01, file_mb=1, block_mb=1, core_scale=STORAGE_CPUS / 4)
    return shipped.write(data, path)


@contextlib.contextmanager
def cpu_hierarchy(host: StandIn) -> Iterator[None]:
    """The stand-in's /sys gets this machine's cgroup v1 cpu hierarchy (its sysfs, mounted by ``ip
    netns exec``, has none) for the test, in the stand-in's own mount namespace."""
    enter = ["nsenter", "-t", str(host.server_pid()), "-m", "--"]
    sh(*enter, "sh", "-c", "mount -t tmpfs slssh-cg /sys/fs/cgroup && mkdir /sys/fs/cgroup/cpu && "
       "mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu")  # fmt: skip
    try:
        yield
    finally:
        sh(*enter, "sh", "-c", "umount /sys/fs/cgroup/cpu; umount /sys/fs/cgroup", check=False)


def groups() -> dict[str, tuple[int, int]]:
    """The lease's CPU groups on the stand-ins (in this machine's hierarchy): quota and process count."""
    out = {}
    for d in CPU_ROOT.glob("shufflelab-hosts-*"):
        with contextlib.suppress(OSError, ValueError):
            out[d.name] = (int((d / "cpu.cfs_quota_us").read_text()), len((d / "cgroup.procs").read_text().split()))
    return out


def test_tpch_pushdown_runs_on_machines_and_its_reads_come_back(lab6: Lab, tmp_path: Path) -> None:
    if not hadoop_jars.jars_available():
        pytest.skip("Hadoop jars not fetched: python -m shufflelab.ndp.hdfs --fetch (make setup does it)")
    connector.ensure_jar()
    spec = trimmed(tmp_path / "ndp-tpch.toml")
    inv = lab6.inventory_on(tmp_path / "inv.toml", MACHINES, ROUTER)
    results = tmp_path / "results"
    before, routes, groups_before = host_state(lab6), routing(lab6), groups()
    storage = next(h for h in lab6.hosts if h.name == MACHINES["s1"])
    seen: dict[str, tuple[int, int]] = {}  # group -> quota, most processes at once
    argv = [
        sys.executable,
        "-m",
        "shufflelab.cli",
        "run",
        str(spec),
        "--hosts",
        str(inv),
        "--results",
        str(results),
        *CELL,
    ]
    with cpu_hierarchy(storage) if STORAGE_CPUS < CPUS else contextlib.nullcontext():
        proc = subprocess.Popen(
            [*argv, "--no-report"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
        )
        try:
            while proc.poll() is None:  # the groups as the run makes them (a look every 0.5 s)
                for name, (quota, n) in groups().items():
                    if name not in groups_before:
                        seen[name] = (quota, max(n, seen.get(name, (0, 0))[1]))
                time.sleep(0.5)
            stdout, stderr = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        left = {name for name in groups() if name not in groups_before}
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    with duckdb.connect(str(results / "ndp-tpch.duckdb"), read_only=True) as con:
        runs = con.execute("SELECT status, cause, bottleneck_tx_bytes FROM runs").fetchall()
        queries = con.execute("SELECT query, policy, correct, ok, error FROM ndp_queries").fetchall()
        reads = con.execute("SELECT path, operators, body_bytes, input_bytes FROM ndp_reads").fetchall()
    assert len(runs) == 1 and runs[0][0] == "ok", runs
    assert queries == [("q6", "full", True, True, None)], queries
    lineitem = [x for x in reads if "/lineitem/" in x[0]]
    body, read_there = sum(x[2] for x in lineitem), sum(x[3] for x in lineitem)
    print(f"tpch over SSH: {len(lineitem)} lineitem reads, {read_there} B read at the storage, {body} B sent back")
    print(f"tpch over SSH: CPU groups seen {seen}")
    # every file of lineitem read once, reduced to a partial aggregate at the storage machine
    assert len(lineitem) >= 1 and all("aggregate" in x[1] for x in lineitem), reads
    assert read_there > 50 * body, (read_there, body)
    if STORAGE_CPUS < CPUS:  # the storage machine's one group, at the cap, holding its daemons and proxy
        (name, (quota, most)), *others = seen.items()
        assert not others and name.endswith("-s1"), seen
        assert quota == STORAGE_CPUS * 100_000 and most >= 3, seen  # NameNode, DataNode, proxy
    else:
        assert not seen, seen
    assert not left, left  # removed with the storage, or with the lease
    assert host_state(lab6) == before and routing(lab6) == routes
