"""Spark applications on the group's cluster: the built-in workloads and the user's own application.

Each of the run's ``workload.apps`` applications is one driver process (``shufflelab.workloads.
driver`` on a JSON request: the workload, its parameters, the application's Spark conf), started on
the master's host; they split the cluster's cores. While they run, faults are injected and the
congestion control of the job's connections is sampled; afterwards the drivers' results, the
executors' CPU time from the OS and the cluster's log slices are kept with the run.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from typing import Any, ClassVar

from shufflelab import sparkconf
from shufflelab.emulate import faults, record, waiting
from shufflelab.emulate.drivers.base import Driver, Group, Phase
from shufflelab.emulate.protocols import Backend, Cluster, Process
from shufflelab.emulate.record import RunContext, SparkOutput
from shufflelab.emulate.spark import DAEMON_PORTS, ClusterSpec
from shufflelab.results import RunRecord

CC_NAMES = ("cubic", "reno", "bbr", "dctcp", "vegas", "westwood", "htcp")


def cc_in_ss(
    text: str, skip_ports: tuple[int, ...] = DAEMON_PORTS, addresses: tuple[str, ...] = ("10.77.",)
) -> list[str]:
    """Congestion-control names of established inter-host connections in ``ss -tin`` output.

    An inter-host connection is one with an endpoint on one of ``addresses``: a host address
    (``10.214.5.11``) or a prefix ending in a dot (``10.77.``, the emulated fabric's), matched on the
    endpoint's IPv4 address whether ``ss`` shows it plain (``10.77.3.1:41234``) or IPv4-mapped, as
    for the JVM's dual-stack sockets (``[::ffff:10.77.3.1]:41234``). Connections to or from the
    Spark daemons' ports are skipped: they were opened (or accepted by a listener created) when the
    cluster started, possibly under another scenario's setting, and carry only control traffic.
    Executors' connections are new in every run.
    """

    def ours(host: str) -> bool:
        return any(host == a or (a.endswith(".") and host.startswith(a)) for a in addresses)

    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if i + 1 >= len(lines):
            continue
        endpoints = [tok.rsplit(":", 1) for tok in line.split() if ":" in tok]
        hosts = [h.strip("[]").removeprefix("::ffff:") for h, _ in endpoints]
        if not any(ours(h) for h in hosts):
            continue
        if any(str(port) == p for _, p in endpoints for port in skip_ports):
            continue
        for tok in lines[i + 1].split():
            if tok in CC_NAMES:
                found.append(tok)
                break
    return found


class SparkDriver(Driver):
    needs_cluster: ClassVar[bool] = True

    def __init__(self, ctx: RunContext, group: Group, backend: Backend) -> None:
        super().__init__(ctx, group, backend)
        assert group.cluster is not None, "a Spark run needs the group's cluster"
        self.cluster: Cluster = group.cluster
        spec = ctx.spec
        self.out = SparkOutput(total_cores=spec.spark.worker_cores * len(spec.hosts_with("spark-worker")))
        self.marks = self.cluster.log_marks()  # the run's share of the daemons' logs starts here
        self.injector = faults.Injector(ctx.plan, group.fabric, self.cluster, ctx.run_dir, backend.run, backend.launch)
        self.procs: list[Process] = []
        self.app_ids: list[str] = []
        self._ticks_before: tuple[int, int] | None = None
        self._every: waiting.Every | None = None

    # -- what a subclass may change ---------------------------------------------------------------------
    def app_context(self) -> tuple[dict[str, Any], list[str]]:
        """What every application of the run is handed besides its workload (``context``), and the
        jars to add to the driver's and executors' class path."""
        return {}, []

    def launch(self, k: int, request: dict[str, Any]) -> Process:
        """Start application ``k`` of the run from its ``request`` (the lab's driver process)."""
        path = self.ctx.run_dir / f"driver_request_{k}.json"
        path.write_text(json.dumps(request, indent=1))
        return self.cluster.driver(path, self.ctx.run_dir / f"driver_{k}.log")

    # -- the protocol ---------------------------------------------------------------------------------
    def request(self, k: int, context: dict[str, Any], extra_cp: list[str]) -> dict[str, Any]:
        ctx, spec = self.ctx, self.ctx.spec
        n_apps = spec.workload.apps
        conf = self.cluster.app_conf(
            spec,
            ctx.run_dir / "eventlog",
            getattr(spec.workload_params(), "partitions", None),
            cores_max=self.out.total_cores // n_apps,
            listener_out=ctx.run_dir / "listener" / f"app{k}.jsonl",
        )
        # after Spark's own jars, not before them (``extraClassPath``): the class-data archive's class
        # path (emulate/cds.py) stays the start of these JVMs', so they start from it
        if extra_cp:
            key = sparkconf.EXECUTOR_DIST_CLASS_PATH
            conf[key] = sparkconf.dist_class_path(conf.get(key), extra_cp)
        return {
            "app_name": f"shufflelab:{ctx.experiment}:{ctx.scenario.label}:rep{ctx.rep}:app{k}",
            "master": self.cluster.url,
            "workload": spec.workload.name,
            "params": spec.workload.param_data(),
            "conf": conf,
            "result": str(ctx.run_dir / f"driver_result_{k}.json"),
            "context": context,
            "class_path_after": extra_cp,
        }

    def start(self, phase: Phase) -> Sequence[waiting.Job]:
        ctx = self.ctx
        (ctx.run_dir / "eventlog").mkdir()
        n_apps = ctx.spec.workload.apps
        self._ticks_before = self.cluster.executor_cpu_ticks()
        context, extra_cp = self.app_context()
        for k in range(n_apps):
            self.procs.append(self.launch(k, self.request(k, context, extra_cp)))
        phase("running the job" if n_apps == 1 else f"running {n_apps} applications")
        self._every = waiting.Every(3.0, self._sample_cc, first_s=2.0, clock=self.backend.clock)
        return [waiting.ProcessJob(d) for d in self.procs]

    def _sample_cc(self) -> None:
        """Which congestion control the job's connections use."""
        addresses = tuple(self.group.fabric.network.host_addresses.values())
        for w in ClusterSpec.of(self.ctx.spec).workers:
            out = self.backend.run(
                ["ss", "-tin", "state", "established"], place=self.group.fabric.places[w], check=False
            )
            for name in cc_in_ss(out, addresses=addresses):
                self.out.cc_seen[name] = self.out.cc_seen.get(name, 0) + 1

    def tick(self) -> None:
        self.injector.tick()
        if self._every is not None:
            self._every()

    def collect(self, waited: waiting.Waited) -> None:
        ctx = self.ctx
        ctx.fail(waited.status, waited.cause)
        for k, d in enumerate(self.procs):
            d.stop()
            res_path = ctx.run_dir / f"driver_result_{k}.json"
            res = json.loads(res_path.read_text()) if res_path.exists() else {}
            self.out.driver_results.append(res)
            if res.get("app_id"):
                self.app_ids.append(res["app_id"])
            if not res.get("ok"):
                first_line = (res.get("error") or "").split("\n")[0][:500]
                log = ctx.run_dir / f"driver_{k}.log"
                ctx.fail("failed", first_line or f"driver {k} exited without a result; see {log}")
        ticks_after = self.cluster.executor_cpu_ticks()
        if self._ticks_before is not None and ticks_after is not None:
            hz = os.sysconf("SC_CLK_TCK")
            before = self._ticks_before
            self.out.executor_os_cpu = ((ticks_after[0] - before[0]) / hz, (ticks_after[1] - before[1]) / hz)

    def release(self) -> None:
        # a downed link comes back, a burst stops, whatever happened; then the drivers (if still up)
        self.out.fault_events = self.injector.close()
        for d in self.procs:
            d.stop()

    def keep_artifacts(self) -> None:
        with contextlib.suppress(OSError):
            self.cluster.copy_logs_since(self.marks, self.ctx.run_dir / "logs", self.app_ids)

    def record(self) -> RunRecord:
        return record.spark(self.ctx, self.out)
