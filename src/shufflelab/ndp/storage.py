"""The storage side of an NDP experiment on the fabric: HDFS on the hosts with role ``storage``,
TPC-H loaded into it, one NDP proxy per storage host, each host's daemons and proxy in one CPU
cgroup (the weak storage machines of seed 003).

The NameNode runs on the first storage host, a DataNode on every storage host, replication =
number of storage hosts (every host holds every block, so any proxy serves any file). Data are
written from the NameNode's host, so loading never crosses the bottleneck between the racks.

Core counts are *emulated*: this machine has two cores, so an emulated core is ``core_scale`` of a
real one (0.25 by default: 1/2/4 emulated storage cores are 0.25/0.5/1 real CPU). The compute side
is scaled the same way by its Spark core count (documented with the experiment).

On machines (``machines``: each place is a machine with CPUs of its own) the cap is a CPU cgroup on
the storage machine, created under its lease (the backend's ``cpu_group``), set only where
``storage_cores × core_scale`` is below the machine's CPU count (read there): at that count it would
never bind, and a run asking for more CPUs than the machine has fails at once, saying so (the hosts
backend refuses such a cell before it starts). There the first run's cap is set before HDFS starts,
so the daemons and proxies start inside their group.

The TPC-H tables are generated here and put into HDFS from the NameNode's host (through the
backend's :class:`~shufflelab.emulate.protocols.Staging`); the proxies run in their place's Python
with their spool in a folder there, and are ready once they answer HTTP at their address, asked
from their place.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shufflelab import cgroups
from shufflelab.emulate.protocols import (
    CommandRunner,
    CpuCaps,
    Fabric,
    Process,
    ProcessLauncher,
    SharedFiles,
    Staging,
)
from shufflelab.ndp import advisor, hdfs, hdfs_config, tpch

PROXY_PORT = 9880
HDFS_ROOT = "/tpch"


class StorageError(RuntimeError):
    pass


@dataclass
class NdpStorage:
    """HDFS and the NDP proxies on ``hosts`` of ``fabric``, reached through the backend's ``run``
    and ``launch``."""

    fabric: Fabric
    run: CommandRunner
    launch: ProcessLauncher
    hosts: list[str]
    scratch: Path
    scale_factor: float
    file_mb: int = 16
    block_mb: int = 32
    proxy_workers: int = 1
    proxy_max_queue: int = 64
    exec_timeout_s: float = 300.0
    staging: Staging = field(default_factory=SharedFiles)  # the files at each place
    cpu_group: CpuCaps = cgroups.local_group  # CPU caps at the places
    machines: bool = False  # the places are machines with CPUs of their own (else this machine's namespaces)
    cluster: hdfs.HdfsCluster | None = field(default=None, init=False)
    proxies: dict[str, Process] = field(default_factory=dict, init=False)
    proxy_logs: dict[str, Path] = field(default_factory=dict, init=False)
    data_dir: Path | None = field(default=None, init=False)
    cores: float | None = field(default=None, init=False)
    cpus: dict[str, int] = field(default_factory=dict, init=False)  # a machine's CPU count, once read
    timings: dict[str, float] = field(default_factory=dict, init=False)
    profile: dict[str, Any] = field(default_factory=dict, init=False)  # tpch.profile() of the loaded data
    expected: dict[str, Any] = field(default_factory=dict, init=False)  # DuckDB's answer per query

    # -- addresses ------------------------------------------------------------------------------
    @property
    def addresses(self) -> dict[str, str]:
        return dict(self.fabric.network.host_addresses)

    def proxy_urls(self) -> list[str]:
        return [f"http://{self.addresses[h]}:{PROXY_PORT}" for h in self.hosts]

    def hdfs_dir(self, table: str) -> str:
        return f"{HDFS_ROOT}/{table}"

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, cpus: float | None = None) -> None:
        """HDFS up, TPC-H loaded, proxies listening. On failure everything started is stopped.
        ``cpus``: on machines, the first run's storage CPUs (``storage_cores × core_scale``): where
        that caps a host, its group is made first and its daemons and proxy start inside it (their
        JVMs sized for it); later runs move them as :meth:`set_cores` does."""
        if not self.hosts:
            raise StorageError("no host has role 'storage'")
        if self.file_mb > self.block_mb:
            raise StorageError(
                f"file_mb ({self.file_mb}) must not exceed block_mb ({self.block_mb}): one file, one block"
            )
        t0 = time.monotonic()
        self.data_dir = tpch.prepare(self.scale_factor, self.file_mb)
        self.timings["prepare_s"] = time.monotonic() - t0
        try:
            self.cluster = hdfs.HdfsCluster.on_fabric(
                self.fabric,
                self.run,
                self.launch,
                self.hosts[0],
                self.hosts,
                self.scratch / "hdfs",
                block_bytes=self.block_mb * 1024 * 1024,
                staging=self.staging,
                cpu_group=self.cpu_group,
            )
            if cpus is not None and self.machines:
                for h in self.capped(cpus):
                    self.cluster.cpu_limit(h, cpus)
                self.cores = cpus
            t1 = time.monotonic()
            self.cluster.start()
            self.timings["hdfs_start_s"] = time.monotonic() - t1
            t2 = time.monotonic()
            self._load()
            self.timings["load_s"] = time.monotonic() - t2
            t3 = time.monotonic()
            for h in self.hosts:
                self.proxies[h] = self._proxy(h)
            for h, p in self.proxies.items():
                self._wait_listening(h, p)
            self.timings["proxies_s"] = time.monotonic() - t3
        except BaseException:
            self.stop()
            raise

    def _load(self) -> None:
        assert self.cluster is not None and self.data_dir is not None
        man = tpch.manifest(self.data_dir)
        for table in tpch.TABLES:
            self.cluster.mkdirs(self.hdfs_dir(table))
            for f in man["tables"][table]["files"]:
                self.cluster.put(self.data_dir / table / f["name"], f"{self.hdfs_dir(table)}/{f['name']}")

    def _proxy(self, host: str) -> Process:
        assert self.cluster is not None
        addr = self.addresses
        place = self.fabric.places[host]
        spool = self.staging.folder(place, self.scratch / "ndp-spool" / host)
        python, env = self.staging.python(place)
        argv = [
            python, "-m", "shufflelab.ndp.proxy",
            "--listen", f"{addr[host]}:{PROXY_PORT}",
            "--webhdfs", f"http://{addr[self.hosts[0]]}:{hdfs_config.NN_HTTP_PORT}",
            "--workers", str(self.proxy_workers), "--max-queue", str(self.proxy_max_queue),
            "--exec-timeout", f"{self.exec_timeout_s:g}",
            "--user", self.cluster.config.user, "--spool", spool,
        ]  # fmt: skip
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), **env}
        log = self.proxy_logs[host] = self.scratch / "logs" / f"ndp-proxy-{host}.log"
        cg = self.cluster.cgroups.get(host)
        started = cg.starting(argv) if cg is not None else argv
        proc = self.launch(place, started, log, env)
        if cg is not None and started == argv:  # not started inside: moved in
            cg.add(proc.pid)
        return proc

    def _wait_listening(self, host: str, proc: Process, timeout_s: float = 60) -> None:
        """Until the proxy answers HTTP at its address, asked from its own place (any status: the
        proxy serves POSTs)."""
        assert self.cluster is not None
        deadline = time.monotonic() + timeout_s
        url = f"http://{self.addresses[host]}:{PROXY_PORT}/"
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                proc.stop(grace_s=1)  # its log comes back (on a machine) once stopped
                log = self.proxy_logs[host]
                text = log.read_text(errors="replace")[-1500:] if log.exists() else "(no log)"
                raise StorageError(f"the NDP proxy on {host} exited: {text}")
            r = self.cluster._request(host, "GET", url, timeout=5, check=False)
            if "status" in r:
                return
            time.sleep(0.2)
        raise StorageError(f"the NDP proxy on {host} is not listening after {timeout_s:g} s")

    def machine_cpus(self, host: str) -> int:
        """The CPU count of ``host``'s machine, read there (once)."""
        if host not in self.cpus:
            self.cpus[host] = int(self.run(["nproc"], place=self.fabric.places[host], timeout=30).strip())
        return self.cpus[host]

    def capped(self, real: float) -> list[str]:
        """The storage hosts a cap of ``real`` CPUs binds on: every one here (this machine's
        namespaces); on machines those with more CPUs (one with fewer: a :class:`StorageError`)."""
        if not self.machines:
            return list(self.hosts)
        out = []
        for h in self.hosts:
            n = self.machine_cpus(h)
            if real > n:
                raise StorageError(
                    f"workload.params.storage_cores x core_scale = {real:g} CPUs, more than the {n} CPUs of "
                    f"{h}'s machine: a cap cannot give a storage host CPUs its machine does not have; give it at "
                    f"most {n}, or machines with as many"
                )
            if real < n:
                out.append(h)
        return out

    def set_cores(self, emulated_cores: float, core_scale: float) -> None:
        """Cap every storage host (DataNode, NameNode, proxy) at ``emulated_cores × core_scale`` CPUs
        (on machines: where that is below the machine's CPUs; elsewhere no group); the proxies run one
        pushdown per emulated core (restarted when that number changes)."""
        assert self.cluster is not None
        real = emulated_to_real(emulated_cores, core_scale)
        capped = self.capped(real)
        workers = workers_for(emulated_cores)
        if workers != self.proxy_workers and self.proxies:
            for p in self.proxies.values():
                p.stop(grace_s=5)
            self.proxies.clear()
        self.proxy_workers = workers
        if self.cores != real:
            for h in self.hosts:
                if h not in capped:
                    self.cluster.cpu_unlimit(h)  # (its processes back to the parent group)
                    continue
                self.cluster.cpu_limit(h, real)
                proxy = self.proxies.get(h)
                if proxy is not None and proxy.poll() is None:
                    self.cluster.cgroups[h].add(proxy.pid)
            self.cores = real
        if not self.proxies:
            for h in self.hosts:
                self.proxies[h] = self._proxy(h)  # starts inside the host's cgroup, or joins it at once
            for h, p in self.proxies.items():
                self._wait_listening(h, p)

    def read_reference(self) -> None:
        """The loaded data's :attr:`profile` (what the pushdown model reads) and DuckDB's answer to
        every TPC-H query (:attr:`expected`, what a run's answers are checked against), from this
        machine's copy of the data."""
        assert self.data_dir is not None, "the storage is not started"
        self.profile = tpch.profile(self.data_dir)
        self.expected = {
            q: json.loads(json.dumps(tpch.duckdb_answer(q, self.data_dir), default=str)) for q in tpch.QUERIES
        }

    def model(self, bandwidth_gbps: float, storage_cpus_per_host: float, compute_cpus: float) -> advisor.Model:
        """The Net-Aware advisor's model of a run on this storage at its cores (:meth:`set_cores`: the
        proxies' workers): the link's ``bandwidth_gbps``, each storage host's CPUs and Spark's."""
        return advisor.Model(
            bandwidth_gbps=bandwidth_gbps,
            storage_hosts=len(self.hosts),
            storage_cpus_per_host=storage_cpus_per_host,
            proxy_workers=self.proxy_workers,
            compute_cpus=compute_cpus,
            profile=self.profile,
        )

    def alive(self) -> bool:
        return (
            self.cluster is not None
            and self.cluster.alive()
            and bool(self.proxies)
            and all(p.poll() is None for p in self.proxies.values())
        )

    def stop(self) -> None:
        for p in self.proxies.values():
            p.stop(grace_s=5)
        self.proxies.clear()
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None
        self.cores = None

    def __enter__(self) -> NdpStorage:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def emulated_to_real(cores: float, core_scale: float) -> float:
    return max(0.01, cores * core_scale)


def workers_for(emulated_cores: float) -> int:
    return max(1, math.ceil(emulated_cores))
