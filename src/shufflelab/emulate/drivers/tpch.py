"""TPC-H queries through near-data processing: Spark applications as :class:`SparkDriver` runs them,
plus the group's storage hosts (HDFS, the NDP proxies, the TPC-H tables and their expected answers,
started once per group) and each run's storage cores, pushdown model and per-read statistics."""

from __future__ import annotations

import json
from typing import Any

from shufflelab.emulate import record
from shufflelab.emulate.drivers.base import Group, Phase
from shufflelab.emulate.drivers.spark import SparkDriver
from shufflelab.emulate.protocols import Backend
from shufflelab.results import RunRecord
from shufflelab.spec import ExperimentSpec


class TpchDriver(SparkDriver):
    @classmethod
    def open_group(cls, spec: ExperimentSpec, group: Group, backend: Backend, phase: Phase) -> None:
        from shufflelab.ndp import connector, tpch
        from shufflelab.ndp.storage import NdpStorage, workers_for

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
        )
        storage.start()
        try:
            assert storage.data_dir is not None
            storage.profile = tpch.profile(storage.data_dir)
            storage.expected = {
                q: json.loads(json.dumps(tpch.duckdb_answer(q, storage.data_dir), default=str)) for q in tpch.QUERIES
            }
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
        from shufflelab.ndp import advisor, connector
        from shufflelab.ndp.storage import HDFS_ROOT, workers_for

        storage, spec = self.group.storage, self.ctx.spec
        assert storage is not None and storage.cluster is not None, "a tpch run needs its group's storage"
        p = spec.workload_params()
        storage.set_cores(p.storage_cores, p.core_scale)
        model = advisor.Model(
            bandwidth_gbps=self.ctx.plan.link.rate_mbps / 1000.0,
            storage_hosts=len(storage.hosts),
            storage_cpus_per_host=p.storage_cores * p.core_scale,
            proxy_workers=workers_for(p.storage_cores),
            compute_cpus=float(self.out.total_cores),
            profile=storage.profile,
        )
        ndp = {
            "proxies": storage.proxy_urls(),
            "root": HDFS_ROOT,
            "user": storage.cluster.config.user,
            "stats_file": str(self.ctx.run_dir / "ndp_reads.jsonl"),
            "expected": storage.expected,
            "model": model.to_dict(),
        }
        return {"ndp": ndp}, [str(connector.ensure_jar())]

    def record(self) -> RunRecord:
        rec = super().record()
        rec.tables.update(record.ndp_tables(self.ctx.run_dir, self.out.driver_results))
        return rec
