"""TPC-H queries through near-data processing: Spark applications as :class:`SparkDriver` runs them,
plus the group's storage hosts (HDFS, the NDP proxies, the TPC-H tables and their expected answers,
started once per group) and each run's storage cores, pushdown model and per-read statistics.

The storage's files are where its places see them (the backend's ``staging``). The executors append
their per-read statistics to a file in a folder standing for the run's ``ndp-reads/`` -- one path on
every worker's place -- and each place's file is fetched back into the run's ``ndp_reads.jsonl``
(namespaces see this machine's files: they write that file directly). The connector's jar is named
by its path in this machine's cache, as the listener jar is: a cluster whose hosts keep their cache
elsewhere names each host's own (where ``shufflelab deploy`` brings it; the hosts backend's, through
a link on each host to its cache, so Spark hosts of different ``deploy_dir``s share one class path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shufflelab.emulate import record
from shufflelab.emulate.drivers.base import Group, Phase
from shufflelab.emulate.drivers.spark import SparkDriver
from shufflelab.emulate.protocols import Backend, SharedFiles
from shufflelab.emulate.spark import ClusterSpec
from shufflelab.results import RunRecord
from shufflelab.spec import ExperimentSpec


class TpchDriver(SparkDriver):
    @classmethod
    def open_group(cls, spec: ExperimentSpec, group: Group, backend: Backend, phase: Phase) -> None:
        from shufflelab.ndp import connector
        from shufflelab.ndp.storage import NdpStorage, emulated_to_real, workers_for

        phase("starting HDFS and the NDP proxies, loading TPC-H")
        p = spec.workload_params()
        connector.ensure_jar()  # fail before HDFS starts if the connector cannot be built
        storage = NdpStorage(
            group.fabric,
            backend.run,
            backend.launch,
            spec.hosts_with("storage"),
            group.fabric.lease.scratch / "ndp",
            p.scale_factor,
            file_mb=p.file_mb,
            block_mb=p.block_mb,
            proxy_workers=workers_for(p.storage_cores),
            staging=backend.staging,
            cpu_group=backend.cpu_group,
            # namespaces share this machine's CPUs; machines have their own (a cap only below their count)
            machines=not isinstance(backend.staging, SharedFiles),
        )
        # on machines the first run's cap is set before the storage starts (its processes start inside it)
        storage.start(emulated_to_real(p.storage_cores, p.core_scale))
        try:
            storage.read_reference()
        except BaseException:
            storage.stop()
            raise
        group.storage = storage

    @classmethod
    def close_group(cls, group: Group, phase: Phase) -> None:
        if group.storage is not None:
            phase("stopping HDFS and the NDP proxies")
            group.storage.stop()
            group.storage = None

    def app_context(self) -> tuple[dict[str, Any], list[str]]:
        """The storage's proxies, the expected answers and the pushdown model at this run's storage
        cores (set now), and the NDP connector's jar."""
        from shufflelab.ndp import connector
        from shufflelab.ndp.storage import HDFS_ROOT

        storage, spec = self.group.storage, self.ctx.spec
        assert storage is not None and storage.cluster is not None, "a tpch run needs its group's storage"
        p = spec.workload_params()
        storage.set_cores(p.storage_cores, p.core_scale)
        model = storage.model(
            bandwidth_gbps=self.ctx.plan.link.rate_mbps / 1000.0,
            storage_cpus_per_host=p.storage_cores * p.core_scale,
            compute_cpus=float(self.out.total_cores),
        )
        ndp = {
            "proxies": storage.proxy_urls(),
            "root": HDFS_ROOT,
            "user": storage.cluster.config.user,
            "stats_file": self._stats_file(),
            "expected": storage.expected,
            "model": model.to_dict(),
        }
        return {"ndp": ndp}, [str(connector.ensure_jar())]

    def _places(self) -> list[str]:
        """The places of the Spark hosts (driver and executors), each once."""
        c, places = ClusterSpec.of(self.ctx.spec), self.group.fabric.places
        return list(dict.fromkeys(places[h] for h in (c.master, *c.workers)))

    def _one_path(self, what: str, paths: dict[str, str]) -> str:
        """The path every place has for ``what`` (one class path and one option name it for all)."""
        if len(set(paths.values())) != 1:
            said = ", ".join(f"{p}: {v}" for p, v in paths.items())
            raise RuntimeError(f"{what} is not at one path on every Spark host's machine ({said})")
        return next(iter(paths.values()))

    def _stats_folder(self) -> Path:
        return self.ctx.run_dir / "ndp-reads"

    def _stats_file(self) -> str:
        """Where the executors append their reads: the run's ndp_reads.jsonl when the places see
        this machine's files, else a file in the folder standing for ndp-reads/ at every place."""
        local = self._stats_folder()
        there = self._one_path(
            "the folder of the per-read statistics", {p: self.backend.staging.folder(p, local) for p in self._places()}
        )
        if there == str(local):
            return str(self.ctx.run_dir / "ndp_reads.jsonl")
        return f"{there}/ndp_reads.jsonl"

    def _fetch_stats(self) -> None:
        """Each place's per-read statistics fetched into the run's ndp_reads.jsonl (namespaces: there already)."""
        local, staging = self._stats_folder(), self.backend.staging
        remote = self._stats_file()
        if remote == str(self.ctx.run_dir / "ndp_reads.jsonl"):
            return
        lines = []
        for p in self._places():
            dest = local / f"{p}.jsonl"
            if staging.get(p, remote, dest):
                lines.append(dest.read_text(errors="replace"))
        with open(self.ctx.run_dir / "ndp_reads.jsonl", "a") as out:
            out.write("".join(t if t.endswith("\n") or not t else t + "\n" for t in lines))

    def record(self) -> RunRecord:
        self._fetch_stats()
        rec = super().record()
        rec.tables.update(record.ndp_tables(self.ctx.run_dir, self.out.driver_results))
        return rec
