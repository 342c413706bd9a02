"""The ``emulate`` backend: runs an experiment's scenarios as real Spark jobs on the fabric.

Runs are grouped by what they need to share (network structure, Spark daemons); a group gets one
fabric and one cluster, and each run re-applies its own shaping and TCP settings (sysctls act on
new sockets, and every run is a new Spark application with new executors and connections).
Repetitions are interleaved (rep 1 of every scenario, then rep 2, ...) so slow drifts of this
shared machine spread over all scenarios instead of biasing one. Finished runs are skipped, so
re-running a spec resumes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from shufflelab import capabilities, eventlog, listener, sparkconf, topology
from shufflelab.emulate import cds, faults, netns, selftest, traffic, validity, waiting
from shufflelab.emulate.fabric import Fabric
from shufflelab.emulate.spark import DAEMON_PORTS, ClusterSpec, SparkCluster
from shufflelab.emulate.traffic import CrossTraffic, udp_payload_rate_bps
from shufflelab.jvm import spark_version
from shufflelab.results import RunRecord, RunRow, Store
from shufflelab.spec import ExperimentSpec, Scenario, SpecError, expand

_CC_NAMES = ("cubic", "reno", "bbr", "dctcp", "vegas", "westwood", "htcp")
# a cluster that does not start (a daemon died, never became ready) is torn down and started again this
# many times for a run before the run is given up (each failed start is recorded as a failed run)
CLUSTER_START_ATTEMPTS = 3


class Interrupted(KeyboardInterrupt):
    """Raised on SIGTERM/SIGHUP so that every context manager tears down what it created."""


@dataclass
class Progress:
    """Callbacks the CLI uses to draw progress; the defaults do nothing."""

    on_start: Callable[[int, int], None] = lambda total, done: None
    on_run: Callable[[str, int], None] = lambda label, rep: None
    on_phase: Callable[[str], None] = lambda text: None
    on_done: Callable[[str, str, float | None], None] = lambda label, status, job_s: None


@dataclass
class RunOutcome:
    run_id: str
    label: str
    rep: int
    status: str
    job_time_s: float | None
    cause: str | None = None


@dataclass
class ExperimentResult:
    store_path: Path
    outcomes: list[RunOutcome] = field(default_factory=list)
    skipped: int = 0


@dataclass
class _Live:
    """What a run started around its job (filled step by step, so a failure stops what exists)."""

    before: dict[str, Any] = field(default_factory=dict)
    sampler: netns.Process | None = None
    traffic: CrossTraffic | None = None


def _start_telemetry_and_traffic(
    spec: ExperimentSpec, fabric: Fabric, run_dir: Path, live: _Live, progress: Progress
) -> None:
    """Configure the fabric for this run, start the queue sampler (kernel datapath; the switch samples
    itself) and the cross traffic, and record the bottleneck counters."""
    net = fabric.network
    # the userspace switch (if this spec needs it) restarts: its telemetry and counters are this run's
    fabric.configure(spec, restart_switch=True)
    if spec.telemetry.selftest != "off":  # the idle fabric, before telemetry and traffic start
        progress.on_phase("self-testing the links")
        selftest.for_run(spec, fabric, run_dir, fabric.selftest_cache)  # -> run_dir/selftest.json
    live.before = {p.ifname: fabric.counters(p) for p in net.bottlenecks}
    if fabric.switch is None:
        args = [sys.executable, "-m", "shufflelab.emulate.sampler",
                "--period-ms", str(spec.telemetry.queue_period_ms),
                "--max-s", str(spec.experiment.run_timeout_s + 120),
                "--out", str(run_dir / "queue_samples.csv")]  # fmt: skip
        for p in net.bottlenecks:
            args += ["--dev", p.ifname]
        live.sampler = netns.Process(fabric.ns[topology.ROUTER], args, run_dir / "sampler.log")
    ct = spec.cross_traffic
    if ct.active:
        src, dst = spec.traffic_endpoints()
        assert src is not None and dst is not None
        progress.on_phase("starting cross traffic")
        live.traffic = CrossTraffic(
            fabric.ns[src], fabric.ns[dst], net.host_addresses[dst], run_dir / "traffic",
            spec.experiment.run_timeout_s + 60,
        )  # fmt: skip
        live.traffic.start(udp_payload_rate_bps(spec.topology.bottleneck.rate_mbps, ct.udp_percent), ct.tcp_pairs)
        time.sleep(ct.warmup_s)


def _stop_telemetry_and_traffic(fabric: Fabric, run_dir: Path, live: _Live) -> tuple[list[dict[str, Any]], dict]:
    """Stop what :func:`_start_telemetry_and_traffic` started; return the traffic results and the
    bottleneck counters after the run; save the switch's telemetry and config with the run."""
    rows = live.traffic.stop() if live.traffic is not None else []
    if live.sampler is not None:
        live.sampler.stop()
    after: dict[str, Any] = {}
    try:
        after = {p.ifname: fabric.counters(p) for p in fabric.network.bottlenecks}
    except Exception:  # noqa: BLE001 - fabric may be half gone on interrupt
        after = {}
    if fabric.switch is not None:  # its telemetry (the kernel sampler's columns + marks) and config
        with contextlib.suppress(OSError):
            fabric.switch.save_telemetry(run_dir / "queue_samples.csv")
            shutil.copyfile(fabric.switch.config_path, run_dir / "switch.json")
            shutil.copyfile(fabric.switch.log, run_dir / "switch.log")
    return rows, after


def _bottleneck_deltas(before: dict[str, Any], after: dict[str, Any]) -> tuple[int | None, int | None]:
    """Bytes sent and packets dropped by the bottleneck ports during a run (None without counters)."""
    if not before:
        return None, None
    keys = [k for k in after if k in before]
    return (
        sum(after[k].tx_bytes - before[k].tx_bytes for k in keys),
        sum(after[k].drops - before[k].drops for k in keys),
    )


def _job_window(apps: pd.DataFrame | None) -> validity.Window | None:
    """The span of a Spark run's jobs on the wall clock: first submission to last completion over
    its applications (None unless every application has both)."""
    if apps is None or apps.empty or not {"first_job_at_ms", "last_job_end_at_ms"} <= set(apps.columns):
        return None
    if apps["first_job_at_ms"].isna().any() or apps["last_job_end_at_ms"].isna().any():
        return None
    return validity.Window(float(apps["first_job_at_ms"].min()) / 1000, float(apps["last_job_end_at_ms"].max()) / 1000)


def _traffic_during(rows: list[dict[str, Any]], traffic_dir: Path, window: validity.Window | None) -> None:
    """Add to each cross-traffic row what its client sent during the job (``job_*``)."""
    for row in rows:
        if window is None or row.get("started_at") is None:
            continue
        ivs = traffic.sent_intervals(traffic_dir / row["result_file"], row["started_at"])
        if not ivs:  # no JSON result (a killed client): what it sent is unknown
            continue
        sent, covered = traffic.sent_between(ivs, window.start, window.end)
        row["job_bytes"], row["job_seconds"] = sent, covered
        row["job_bits_per_second"] = sent * 8 / window.seconds if window.seconds > 0 else None


def _promises(
    spec: ExperimentSpec,
    run_dir: Path,
    rows: list[dict[str, Any]],
    window: validity.Window | None,
    events: list[faults.FaultEvent],
) -> list[str]:
    """What the scenario promised and the run did not deliver (empty: the run is what it claims)."""
    _traffic_during(rows, run_dir / "traffic", window)
    return (
        validity.traffic_problems(spec.cross_traffic, spec.topology.bottleneck.rate_mbps, rows, window)
        + validity.fault_problems(spec.faults, events)
        + validity.selftest_problems(spec.telemetry.selftest, _selftest_rows(run_dir))
    )


def _sum_or_none(rows: list[dict[str, Any]], key: str) -> float | None:
    """Sum of ``key`` over the applications, or None unless every application has it."""
    vals = [r.get(key) for r in rows]
    return float(sum(vals)) if vals and all(v is not None for v in vals) else None  # type: ignore[arg-type]


def environment(caps: capabilities.Capabilities) -> dict[str, Any]:
    """What a run records about the host it ran on."""
    commit = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, cwd=Path(__file__).parent, timeout=5,
        ).stdout.strip() or None  # fmt: skip
    return {
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pyspark": spark_version(),
        "shufflelab_commit": commit,
        "cpus": os.cpu_count(),
        "capabilities": caps.to_dict(),
    }


def _cc_in_ss(text: str, skip_ports: tuple[int, ...] = DAEMON_PORTS) -> list[str]:
    """Congestion-control names of established inter-host connections in ``ss -tin`` output.

    Connections to or from the Spark daemons' ports are skipped: they were opened (or accepted
    by a listener created) when the cluster started, possibly under another scenario's setting,
    and carry only control traffic. Executors' connections are new in every run.
    """
    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "10.77." not in line or i + 1 >= len(lines):
            continue
        ports = {p.rsplit(":", 1)[-1] for p in line.split() if ":" in p}
        if any(str(port) in ports for port in skip_ports):
            continue
        tokens = lines[i + 1].split()
        for tok in tokens:
            if tok in _CC_NAMES:
                found.append(tok)
                break
    return found


def load_samples(path: Path, t0: float) -> pd.DataFrame:
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame()
    df = pd.read_csv(path)
    if df.empty:
        return df
    df["t_rel_s"] = df["t"] - t0
    return df


class EmulateRunner:
    def __init__(
        self,
        spec: ExperimentSpec,
        spec_path: str,
        results_dir: Path,
        progress: Progress | None = None,
        caps: capabilities.Capabilities | None = None,
        select: list[str] | None = None,
    ) -> None:
        self.spec = spec
        self.spec_path = spec_path
        self.scenarios = [
            sc for sc in expand(spec, spec_path) if all(part in sc.label.split(",") for part in (select or []))
        ]
        if not self.scenarios:
            raise SpecError(f"{spec_path}: no scenario matches --select {' '.join(select or [])}")
        self.results_dir = results_dir.resolve()
        self.name = spec.experiment.name
        self.store = Store(self.results_dir / f"{self.name}.duckdb")
        self.artifacts = self.results_dir / self.name / "runs"
        self.progress = progress or Progress()
        self.caps = caps
        self._storage: Any = None  # NdpStorage of the current group (workload tpch)

    # -- planning ----------------------------------------------------------------------------------
    def plan(self) -> list[tuple[Scenario, int]]:
        """Runs still to do, in execution order (grouped by fabric/cluster, reps interleaved)."""
        done = self.store.completed()
        groups: dict[Any, list[Scenario]] = {}
        for sc in self.scenarios:
            groups.setdefault(self._group_key(sc.spec), []).append(sc)
        todo = []
        meta = self.spec.experiment
        for g, scs in enumerate(groups.values()):
            for rep in range(1, meta.repetitions + 1):
                order = list(scs)
                if meta.order == "shuffled":  # seeded: a resumed experiment keeps its order
                    random.Random(f"{meta.seed}:{g}:{rep}").shuffle(order)
                for sc in order:
                    if (sc.scenario_id, rep) not in done:
                        todo.append((sc, rep))
        return todo

    @staticmethod
    def _group_key(spec: ExperimentSpec) -> Any:
        net = topology.build(spec)
        cluster = None if spec.workload.name == "mapreduce" else ClusterSpec.of(spec)
        return (net.structure_key(), cluster, spec.topology.offloads)

    def preflight(self) -> None:
        caps = self.caps or capabilities.probe()
        self.caps = caps
        problems: list[str] = []
        for sc in self.scenarios:
            for p in capabilities.check(sc.spec, caps, f"{self.spec_path} [{sc.label}]"):
                if p not in problems:
                    problems.append(p)
        if any(sc.spec.spark.listener for sc in self.scenarios):
            try:
                listener.ensure_jar()
            except listener.ListenerBuildError as exc:
                problems.append(f"spark.listener = true but the listener cannot be built: {exc}")
        if not problems and any(sc.spec.spark.cds for sc in self.scenarios) and not cds.archive_path().exists():
            self.progress.on_phase("recording the JVM class-data archive (once, about a minute)")
            try:
                cds.ensure_archive()
            except (cds.CdsError, listener.ListenerBuildError) as exc:
                problems.append(f"spark.cds = true but the class-data archive cannot be recorded: {exc}")
        if problems:
            raise SpecError("this host cannot run the experiment:\n  - " + "\n  - ".join(problems))

    # -- execution ---------------------------------------------------------------------------------
    def run(self) -> ExperimentResult:
        self.preflight()
        assert self.caps is not None
        env = environment(self.caps)
        self.store.init_experiment(
            self.name, self.spec.experiment.description, self.spec.model_dump_json(), self.spec_path
        )
        self.store.add_scenarios(
            [
                {
                    "scenario_id": s.scenario_id,
                    "label": s.label,
                    "values": s.values,
                    "spec_json": s.spec.model_dump_json(),
                    "backend": "emulate",
                }
                for s in self.scenarios
            ]
        )
        todo = self.plan()
        total = len(self.scenarios) * self.spec.experiment.repetitions
        result = ExperimentResult(self.store.path, skipped=total - len(todo))
        self.progress.on_start(total, result.skipped)
        netns.clean()  # leftovers of crashed earlier runs (live runs are left alone)
        i = 0
        while i < len(todo):
            key = self._group_key(todo[i][0].spec)
            group = []
            while i < len(todo) and self._group_key(todo[i][0].spec) == key:
                group.append(todo[i])
                i += 1
            result.outcomes.extend(self._run_group(group, env))
        return result

    def _run_group(self, group: list[tuple[Scenario, int]], env: dict[str, Any]) -> list[RunOutcome]:
        first = group[0][0].spec
        net = topology.build(first)
        outcomes = []
        with netns.lease() as lease:
            self.progress.on_phase("building fabric")
            t0 = time.monotonic()
            fabric = Fabric(lease, net, offloads=first.topology.offloads)
            with fabric:
                fabric.configure(first)
                fabric_s = time.monotonic() - t0
                cluster: SparkCluster | None = None
                self._storage = None
                try:
                    if first.workload.name == "tpch":  # storage hosts: HDFS, TPC-H, NDP proxies (once per group)
                        self.progress.on_phase("starting HDFS and the NDP proxies, loading TPC-H")
                        t1 = time.monotonic()
                        self._storage = self._start_storage(first, fabric, lease.scratch)
                        fabric_s += time.monotonic() - t1
                    for sc, rep in group:
                        setup_s = fabric_s
                        fabric_s = 0.0
                        if sc.spec.workload.name == "mapreduce":  # no Spark: transfer agents replay a trace
                            outcome = self._run_replay(sc, rep, fabric, env, setup_s)
                            outcomes.append(outcome)
                            self.progress.on_done(sc.label, outcome.status, outcome.job_time_s)
                            continue
                        if cluster is None or not cluster.alive() or not sc.spec.spark.reuse_cluster:
                            if cluster is not None:
                                cluster.stop()
                                cluster = None
                            cluster, setup_s, failed = self._start_cluster(sc, rep, fabric, lease, env, setup_s)
                            if cluster is None:  # every attempt failed (each recorded): on to the next run
                                outcomes.append(failed[-1])
                                self.progress.on_done(sc.label, failed[-1].status, None)
                                continue
                        outcome = self._run_one(sc, rep, fabric, cluster, env, setup_s)
                        outcomes.append(outcome)
                        self.progress.on_done(sc.label, outcome.status, outcome.job_time_s)
                finally:
                    if cluster is not None:
                        self.progress.on_phase("stopping Spark cluster")
                        cluster.stop()
                    if self._storage is not None:
                        self.progress.on_phase("stopping HDFS and the NDP proxies")
                        self._storage.stop()
                        self._storage = None
        return outcomes

    def _start_cluster(
        self, sc: Scenario, rep: int, fabric: Fabric, lease: Any, env: dict[str, Any], setup_s: float
    ) -> tuple[SparkCluster | None, float, list[RunOutcome]]:
        """Start the Spark cluster for run ``(sc, rep)``, up to ``CLUSTER_START_ATTEMPTS`` times. A
        failed start is recorded as a failed run of ``(sc, rep)`` with its cause, and what it started
        is torn down (daemons, their scratch folders) before the next attempt. Returns the cluster
        (None if every attempt failed), the run's setup time and the failed attempts (stored; the
        run's outcome is the run itself if a start succeeded, else the last of them)."""
        failed: list[RunOutcome] = []
        scratch = lease.scratch / "spark"
        for k in range(1, CLUSTER_START_ATTEMPTS + 1):
            fabric.configure(sc.spec)  # daemons start under the scenario's TCP settings
            self.progress.on_phase("starting Spark cluster" + (f" (attempt {k})" if k > 1 else ""))
            started, t1 = time.time(), time.monotonic()
            cluster = SparkCluster(
                ClusterSpec.of(sc.spec),
                fabric.ns,
                fabric.network.host_addresses,
                scratch,
                self.results_dir / self.name / "clusters" / lease.lease_id,
            )
            try:
                cluster.start()
                return cluster, setup_s + time.monotonic() - t1, failed
            except Exception as exc:  # a daemon died or never became ready: record, tear down, retry
                cluster.stop()
                shutil.rmtree(scratch, ignore_errors=True)
                why = f"{type(exc).__name__}: {exc}"
                cause = f"Spark cluster did not start (attempt {k} of {CLUSTER_START_ATTEMPTS}): {why}"
                failed.append(self._record_failed_start(sc, rep, env, started, setup_s + time.monotonic() - t1, cause))
                self.progress.on_phase(cause[:200])
                setup_s = 0.0
            except BaseException:
                cluster.stop()
                raise
        return None, 0.0, failed

    def _record_failed_start(
        self, sc: Scenario, rep: int, env: dict[str, Any], started: float, setup_s: float, cause: str
    ) -> RunOutcome:
        """A run that never began because its cluster did not start: stored failed with the cause."""
        attempt, run_id, run_dir = self._new_run(sc, rep)
        cause = cause[:500]
        run: dict[str, Any] = {
            "run_id": run_id, "scenario_id": sc.scenario_id, "rep": rep, "attempt": attempt,
            "status": "failed", "cause": cause, "backend": "emulate", "started_at": started,
            "finished_at": time.time(), "wall_s": time.time() - started, "setup_s": setup_s,
            "n_apps": sc.spec.workload.apps, "run_dir": str(run_dir),
            "environment_json": json.dumps({**env, "emulation": capabilities.emulation(sc.spec)}),
        }  # fmt: skip
        self.store.write_run(RunRecord(run=RunRow.of(run), tables={}))
        return RunOutcome(run_id, sc.label, rep, "failed", None, cause)

    # -- near-data processing (workload tpch) ---------------------------------------------------------
    def _start_storage(self, spec: ExperimentSpec, fabric: Fabric, scratch: Path) -> Any:
        from shufflelab.ndp import connector, tpch
        from shufflelab.ndp.storage import NdpStorage, workers_for

        p = spec.workload_params()
        connector.ensure_jar()  # fail before HDFS starts if the connector cannot be built
        storage = NdpStorage(
            fabric,
            spec.hosts_with("storage"),
            scratch / "ndp",
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
        return storage

    def _ndp_context(self, spec: ExperimentSpec, run_dir: Path, total_cores: int) -> dict[str, Any]:
        from shufflelab.ndp import advisor
        from shufflelab.ndp.storage import HDFS_ROOT, workers_for

        storage = self._storage
        assert storage is not None and storage.cluster is not None
        p = spec.workload_params()
        storage.set_cores(p.storage_cores, p.core_scale)
        model = advisor.Model(
            bandwidth_gbps=spec.topology.bottleneck.rate_mbps / 1000.0,
            storage_hosts=len(storage.hosts),
            storage_cpus_per_host=p.storage_cores * p.core_scale,
            proxy_workers=workers_for(p.storage_cores),
            compute_cpus=float(total_cores),
            profile=storage.profile,
        )
        return {
            "proxies": storage.proxy_urls(),
            "root": HDFS_ROOT,
            "user": storage.cluster.config.user,
            "stats_file": str(run_dir / "ndp_reads.jsonl"),
            "expected": storage.expected,
            "model": model.to_dict(),
        }

    def _run_one(
        self,
        sc: Scenario,
        rep: int,
        fabric: Fabric,
        cluster: SparkCluster,
        env: dict[str, Any],
        setup_s: float,
    ) -> RunOutcome:
        spec = sc.spec
        attempt, run_id, run_dir = self._new_run(sc, rep)
        self.progress.on_run(sc.label, rep)
        started = time.time()
        t_mono = time.monotonic()
        status, cause = "ok", None
        app_ids: list[str] = []
        driver_results: list[dict[str, Any]] = []
        self._executor_os_cpu: tuple[float, float] | None = None
        total_cores = spec.spark.worker_cores * len(spec.hosts_with("spark-worker"))
        cc_seen: dict[str, int] = {}
        traffic_rows: list[dict[str, Any]] = []
        marks = cluster.log_marks()
        live = _Live()
        after: dict[str, Any] = {}
        injector = faults.Injector(spec, fabric, cluster, run_dir)
        fault_events: list[faults.FaultEvent] = []
        try:
            _start_telemetry_and_traffic(spec, fabric, run_dir, live, self.progress)
            event_dir = run_dir / "eventlog"
            event_dir.mkdir()
            n_apps = spec.workload.apps
            cores_each = total_cores // n_apps
            partitions = getattr(spec.workload_params(), "partitions", None)
            ticks_before = cluster.executor_cpu_ticks()
            drivers = []
            context: dict[str, Any] = {}
            extra_cp: list[str] = []
            if spec.workload.name == "tpch":
                from shufflelab.ndp import connector

                context["ndp"] = self._ndp_context(spec, run_dir, total_cores)
                extra_cp.append(str(connector.ensure_jar()))
            for k in range(n_apps):
                request: dict[str, Any] = {
                    "app_name": f"shufflelab:{self.name}:{sc.label}:rep{rep}:app{k}",
                    "master": cluster.url,
                    "workload": spec.workload.name,
                    "params": spec.workload.param_data(),
                    "conf": cluster.app_conf(
                        spec,
                        event_dir,
                        partitions,
                        cores_max=cores_each,
                        listener_out=run_dir / "listener" / f"app{k}.jsonl",
                    ),  # fmt: skip
                    "result": str(run_dir / f"driver_result_{k}.json"),
                    "context": context,
                }
                for key in (sparkconf.DRIVER_CLASS_PATH, sparkconf.EXECUTOR_CLASS_PATH):
                    if extra_cp:
                        cp = [c for c in [request["conf"].get(key), *extra_cp] if c]
                        request["conf"][key] = ":".join(cp)
                req_path = run_dir / f"driver_request_{k}.json"
                req_path.write_text(json.dumps(request, indent=1))
                drivers.append(cluster.driver(req_path, run_dir / f"driver_{k}.log"))
            self.progress.on_phase("running the job" if n_apps == 1 else f"running {n_apps} applications")
            workers = ClusterSpec.of(spec).workers

            def sample_cc() -> None:  # which congestion control the job's connections use
                for w in workers:
                    out = netns.run(["ss", "-tin", "state", "established"], ns=fabric.ns[w], check=False)
                    for name in _cc_in_ss(out):
                        cc_seen[name] = cc_seen.get(name, 0) + 1

            every = waiting.Every(3.0, sample_cc, first_s=2.0)

            def tick() -> None:
                injector.tick()
                every()

            waited = waiting.wait(
                [waiting.ProcessJob(d) for d in drivers],
                fabric,
                spec.experiment.run_timeout_s,
                f"job exceeded run_timeout_s={spec.experiment.run_timeout_s:g}",
                tick=tick,
            )
            if waited.status != "ok":
                status, cause = waited.status, waited.cause
            for k, d in enumerate(drivers):
                d.stop()
                res_path = run_dir / f"driver_result_{k}.json"
                res = json.loads(res_path.read_text()) if res_path.exists() else {}
                driver_results.append(res)
                if res.get("app_id"):
                    app_ids.append(res["app_id"])
                if status == "ok" and not res.get("ok"):
                    status = "failed"
                    first_line = (res.get("error") or "").split("\n")[0][:500]
                    cause = first_line or f"driver {k} exited without a result; see {run_dir / f'driver_{k}.log'}"
            ticks_after = cluster.executor_cpu_ticks()
            if ticks_before is not None and ticks_after is not None:
                hz = os.sysconf("SC_CLK_TCK")
                self._executor_os_cpu = (
                    (ticks_after[0] - ticks_before[0]) / hz,
                    (ticks_after[1] - ticks_before[1]) / hz,
                )
        except KeyboardInterrupt:
            status, cause = "interrupted", "runner interrupted"
            raise
        except Exception as exc:  # infrastructure failure: keep the run, with its cause
            status, cause = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            fault_events = injector.close()  # a downed link comes back, a burst stops, whatever happened
            traffic_rows, after = _stop_telemetry_and_traffic(fabric, run_dir, live)
            with contextlib.suppress(OSError):
                cluster.copy_logs_since(marks, run_dir / "logs", app_ids)
            record = self._record(
                sc, rep, attempt, run_id, run_dir, status, cause, started, t_mono, setup_s,
                driver_results, cc_seen, traffic_rows, live.before, after, env, total_cores,
            )  # fmt: skip
            problems = _promises(spec, run_dir, traffic_rows, _job_window(record.tables.get("apps")), fault_events)
            record.tables["cross_traffic"] = pd.DataFrame(traffic_rows)
            record.run.status, record.run.cause = validity.verdict(record.run.status, record.run.cause, problems)
            if fault_events:
                record.tables["faults"] = pd.DataFrame([dataclasses.asdict(e) for e in fault_events])
            if spec.workload.name == "tpch":
                record.tables.update(_ndp_tables(run_dir, driver_results))
            self.store.write_run(record)
        return RunOutcome(
            run_id,
            sc.label,
            rep,
            record.run.status,
            record.run.job_time_s,
            record.run.cause,
        )

    def _new_run(self, sc: Scenario, rep: int) -> tuple[int, str, Path]:
        """The next attempt's number, id and fresh artifact folder (with the scenario it ran)."""
        attempt = self.store.attempts(sc.scenario_id, rep) + 1
        run_id = f"{sc.scenario_id}-r{rep}-a{attempt}"
        run_dir = self.artifacts / run_id
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        (run_dir / "scenario.json").write_text(
            json.dumps({"label": sc.label, "values": sc.values, "spec": sc.spec.model_dump(mode="json")}, indent=1)
        )
        return attempt, run_id, run_dir

    def _run_replay(self, sc: Scenario, rep: int, fabric: Fabric, env: dict[str, Any], setup_s: float) -> RunOutcome:
        """One MapReduce shuffle replay (seed 002): agents on the ``mapreduce`` hosts, the fabric's
        telemetry and cross traffic as for a Spark run; fetches go to the ``mr_fetches`` table."""
        from shufflelab.mapreduce import replay as mr
        from shufflelab.mapreduce import trace as mrt

        spec = sc.spec
        p = spec.workload_params()
        attempt, run_id, run_dir = self._new_run(sc, rep)
        self.progress.on_run(sc.label, rep)
        started, t_mono = time.time(), time.monotonic()
        net = fabric.network
        status, cause = "ok", None
        job = None
        job_started = job_ended = None
        live = _Live()
        traffic_rows: list[dict[str, Any]] = []
        after: dict[str, Any] = {}
        result = None
        try:
            _start_telemetry_and_traffic(spec, fabric, run_dir, live, self.progress)
            if p.trace:
                tr = mrt.load(p.trace)
            elif p.generator == "hadoop-sort":
                tr = mrt.hadoop_sort(p.mappers, p.reducers, p.input_mb_per_map, seed=p.seed)
            else:
                tr = mrt.synthetic(p.mappers, p.reducers, p.partition_mb, dist=p.dist, spread=p.spread,
                                   map_s=p.map_s, reduce_s=p.reduce_s, seed=p.seed)  # fmt: skip
            tr = tr.model_copy(update={"parallel_copies": p.parallel_copies})
            nodes = spec.hosts_with("mapreduce")
            job = mr.FabricJob(
                tr, {n: fabric.ns[n] for n in nodes}, {n: net.host_addresses[n] for n in nodes}, run_dir,
                placement=p.placement, timeout_s=spec.experiment.run_timeout_s,
            )  # fmt: skip
            self.progress.on_phase("replaying the shuffle")
            job_started = time.time()
            job.start()
            # the agents give up at run_timeout_s themselves; the runner allows them 15 s to report
            waited = waiting.wait(
                [waiting.GraceFree(job)],
                fabric,
                spec.experiment.run_timeout_s + 15,
                f"job exceeded run_timeout_s={spec.experiment.run_timeout_s:g}",
                period_s=0.2,
            )
            if waited.status != "ok":
                status, cause = waited.status, waited.cause
            job_ended = time.time()
            result = job.result()
            if status == "ok" and not result.ok:
                status, cause = "failed", "; ".join(result.errors[:3]) or "an agent failed"
                if any("deadline:" in e for e in result.errors):  # the agents gave up at run_timeout_s
                    status = "timeout"
                    cause = f"job exceeded run_timeout_s={spec.experiment.run_timeout_s:g}: {cause}"
        except KeyboardInterrupt:
            status, cause = "interrupted", "runner interrupted"
            raise
        except Exception as exc:  # infrastructure failure: keep the run, with its cause
            status, cause = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            if job is not None:
                job.stop()
            traffic_rows, after = _stop_telemetry_and_traffic(fabric, run_dir, live)
            window = validity.Window(job_started, job_ended) if job_started and job_ended else None
            status, cause = validity.verdict(status, cause, _promises(spec, run_dir, traffic_rows, window, []))
            samples = load_samples(run_dir / "queue_samples.csv", started)
            fetches = result.fetches if result is not None else pd.DataFrame()
            nodes_all = spec.hosts_with("mapreduce")
            before = live.before
            tx, drops = _bottleneck_deltas(before, after)
            run = {
                "run_id": run_id, "scenario_id": sc.scenario_id, "rep": rep, "attempt": attempt,
                "status": status, "cause": cause, "backend": "emulate", "started_at": started,
                "finished_at": time.time(), "wall_s": time.monotonic() - t_mono, "setup_s": setup_s,
                "job_time_s": result.job_time_s if result is not None and status == "ok" else None,
                "n_apps": 1, "n_tasks": len(tr.maps) + len(tr.reduces) if "tr" in locals() else None,
                "remote_bytes_read": int(fetches["bytes"].sum()) if not fetches.empty else None,
                "bottleneck_tx_bytes": tx, "bottleneck_drops": drops,
                "bottleneck_max_backlog_bytes": int(samples["backlog_bytes"].max()) if not samples.empty else None,
                "cc_configured": ",".join(sorted({spec.tcp_for(h).congestion_control for h in nodes_all})),
                "run_dir": str(run_dir),
                "environment_json": json.dumps(
                    {**env, "emulation": capabilities.emulation(spec), "selftest": _selftest_rows(run_dir)}
                ),
            }  # fmt: skip
            keep = ["map", "reduce", "src", "dst", "bytes", "t_request", "t_first_byte", "t_end", "fct_s", "start_s"]
            tables = {
                "queue_samples": samples,
                "cross_traffic": pd.DataFrame(traffic_rows),
                "mr_fetches": fetches[[c for c in keep if c in fetches.columns]] if not fetches.empty else fetches,
            }
            self.store.write_run(RunRecord(run=RunRow.of(run), tables=tables))
        return RunOutcome(run_id, sc.label, rep, status, cast(float | None, run["job_time_s"]), cause)

    def _record(
        self,
        sc: Scenario,
        rep: int,
        attempt: int,
        run_id: str,
        run_dir: Path,
        status: str,
        cause: str | None,
        started: float,
        t_mono: float,
        setup_s: float,
        driver_results: list[dict[str, Any]],
        cc_seen: dict[str, int],
        traffic_rows: list[dict[str, Any]],
        before: dict[str, Any],
        after: dict[str, Any],
        env: dict[str, Any],
        total_cores: int,
    ) -> RunRecord:
        spec = sc.spec
        n_apps = spec.workload.apps
        per_app: dict[str, list[pd.DataFrame]] = {"tasks": [], "stages": [], "jobs": [], "task_progress": []}
        app_rows = []
        for k in range(n_apps):
            res = driver_results[k] if k < len(driver_results) else {}
            app_id = res.get("app_id")
            row: dict[str, Any] = {"app_index": k, "app_id": app_id, "cores": total_cores // n_apps}
            session = None
            if res.get("session_ready_at") and res.get("started_at"):
                session = res["session_ready_at"] - res["started_at"]
            row["session_s"] = session
            path = run_dir / "eventlog" / app_id if app_id else None
            if path is None or not path.exists():
                row.update(status="failed", cause=res.get("error") or "no event log was written")
                app_rows.append(row)
                continue
            log = eventlog.parse(path)
            lpath = run_dir / "listener" / f"app{k}.jsonl"
            if lpath.exists():
                llog = listener.parse(lpath)
                row["listener_tasks"] = len(llog.ends)
                if not llog.progress.empty:
                    prog = llog.progress.copy()
                    prog["app_index"] = k
                    per_app["task_progress"].append(prog)
            plugin_files = (
                sorted((run_dir / "logs" / app_id).glob(f"executors-*/*/{listener.PLUGIN_FILE}")) if app_id else []
            )
            if plugin_files:
                tc = listener.task_cpu(plugin_files)
                row["plugin_tasks"] = len(tc)
                row["task_user_cpu_s"] = float(tc["user_ns"].sum()) / 1e9
                row["task_thread_cpu_s"] = float(tc["cpu_ns"].sum()) / 1e9
            for name, rows in (("tasks", log.tasks), ("stages", log.stages), ("jobs", log.jobs)):
                df = pd.DataFrame(eventlog.records(rows))
                df["app_index"] = k
                per_app[name].append(df)
            span = log.workload_span_ms()
            ok = res.get("ok", False) and log.all_jobs_succeeded()
            tk = pd.DataFrame(eventlog.records(log.tasks))
            row.update(
                status="ok" if ok else "failed",
                cause=None if ok else (res.get("error") or "a Spark job did not succeed").split("\n")[0][:500],
                job_time_s=span / 1000.0 if span is not None else None,
                first_job_at_ms=min((j.submitted_at_ms for j in log.jobs), default=None),
                last_job_end_at_ms=max((j.completed_at_ms or 0 for j in log.jobs), default=None),
                n_tasks=len(log.tasks),
                executor_cpu_s=float(tk["executor_cpu_ms"].sum()) / 1000 if not tk.empty else 0.0,
                executor_run_s=float(tk["executor_run_ms"].sum()) / 1000 if not tk.empty else 0.0,
                fetch_wait_s=float(tk["fetch_wait_ms"].sum()) / 1000 if not tk.empty else 0.0,
                remote_bytes_read=int(tk["remote_bytes"].sum()) if not tk.empty else 0,
                shuffle_bytes_written=int(tk["shuffle_write_bytes"].sum()) if not tk.empty else 0,
            )
            app_rows.append(row)
        if status == "ok":
            bad = [r for r in app_rows if r.get("status") != "ok"]
            if bad:
                status, cause = "failed", f"app {bad[0]['app_index']}: {bad[0].get('cause')}"
        tables: dict[str, pd.DataFrame] = {
            name: pd.concat(dfs, ignore_index=True) for name, dfs in per_app.items() if dfs
        }
        tables["apps"] = pd.DataFrame(app_rows)
        samples = load_samples(run_dir / "queue_samples.csv", started)
        tables["queue_samples"] = samples
        tables["cross_traffic"] = pd.DataFrame(traffic_rows)
        tx, drops = _bottleneck_deltas(before, after)
        with_marks = [k for k in after if k in before and after[k].marks is not None and before[k].marks is not None]
        ecn_marks = sum(after[k].marks - before[k].marks for k in with_marks) if with_marks else None
        tasks = tables.get("tasks", pd.DataFrame())
        has_tasks = not tasks.empty
        recovered = faults.recovery(tasks, tables.get("stages"))
        times = [r["job_time_s"] for r in app_rows if r.get("job_time_s") is not None]
        sessions = [r["session_s"] for r in app_rows if r.get("session_s") is not None]
        cc_conf = ",".join(sorted({spec.tcp_for(h).congestion_control for h in spec.hosts_with("spark-worker")}))
        run = {
            "run_id": run_id,
            "scenario_id": sc.scenario_id,
            "rep": rep,
            "attempt": attempt,
            "status": status,
            "cause": cause,
            "backend": "emulate",
            "started_at": started,
            "finished_at": time.time(),
            "wall_s": time.monotonic() - t_mono,
            "setup_s": setup_s,
            "session_s": max(sessions) if sessions else None,
            "app_id": ",".join(str(r["app_id"]) for r in app_rows if r.get("app_id")) or None,
            # with several simultaneous applications: the mean of their job times
            "job_time_s": sum(times) / len(times) if times and len(times) == n_apps else None,
            "n_apps": n_apps,
            "total_cores": total_cores,
            # the task threads' user-mode CPU (executor plugin): the event log's executorCpuTime without
            # the interrupt work this kernel charges to whatever thread runs
            "task_user_cpu_s": _sum_or_none(app_rows, "task_user_cpu_s"),
            "task_thread_cpu_s": _sum_or_none(app_rows, "task_thread_cpu_s"),
            # executor JVMs' user and system CPU from the OS (reaped by the worker daemons): unlike the
            # event log's executorCpuTime it separates interrupt work charged as system time
            "executor_user_s": self._executor_os_cpu[0] if self._executor_os_cpu else None,
            "executor_sys_s": self._executor_os_cpu[1] if self._executor_os_cpu else None,
            "n_jobs": len(tables["jobs"]) if "jobs" in tables else 0,
            "n_tasks": len(tasks),
            "executor_cpu_s": float(tasks["executor_cpu_ms"].sum()) / 1000 if has_tasks else None,
            "executor_run_s": float(tasks["executor_run_ms"].sum()) / 1000 if has_tasks else None,
            "fetch_wait_s": float(tasks["fetch_wait_ms"].sum()) / 1000 if has_tasks else None,
            "remote_bytes_read": int(tasks["remote_bytes"].sum()) if has_tasks else None,
            "local_bytes_read": int(tasks["local_bytes"].sum()) if has_tasks else None,
            "shuffle_bytes_written": int(tasks["shuffle_write_bytes"].sum()) if has_tasks else None,
            "bottleneck_tx_bytes": tx,
            "bottleneck_drops": drops,
            "bottleneck_marks": ecn_marks,
            "failed_tasks": recovered["failed_tasks"] if has_tasks else None,
            "fetch_failures": recovered["fetch_failures"] if has_tasks else None,
            "stage_reattempts": recovered["stage_reattempts"] if has_tasks else None,
            "bottleneck_max_backlog_bytes": int(samples["backlog_bytes"].max()) if not samples.empty else None,
            "cc_configured": cc_conf,
            "cc_observed": ",".join(f"{k}:{v}" for k, v in sorted(cc_seen.items())) or None,
            "run_dir": str(run_dir),
            "environment_json": json.dumps(
                {**env, "emulation": capabilities.emulation(spec), "selftest": _selftest_rows(run_dir)}
            ),
        }
        return RunRecord(run=RunRow.of(run), tables=tables)


NDP_READ_COLUMNS = (
    "path", "proxy", "policy", "operators", "rows", "body_bytes", "input_bytes", "exec_s", "read_s", "queue_s",
    "datanode", "elapsed_s",
)  # fmt: skip


def _ndp_tables(run_dir: Path, driver_results: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """The queries of a tpch run (policy used, time, answer checked, Net-Aware's estimate) and the
    connector's per-partition reads (bytes received, the proxy's timings)."""
    rows = []
    for res in driver_results:
        out = res.get("output") or {}
        for q in out.get("queries", []):
            rows.append(
                {
                    "i": q.get("i"), "query": q.get("query"), "policy_asked": q.get("policy_asked"),
                    "policy": q.get("policy"), "arrival_s": q.get("arrival_s"), "time_s": q.get("time_s"),
                    "rows": q.get("rows"), "correct": q.get("correct"), "ok": q.get("ok"), "error": q.get("error"),
                    "estimate_json": json.dumps(q["estimate"]) if q.get("estimate") else None,
                }
            )  # fmt: skip
    reads = []
    path = run_dir / "ndp_reads.jsonl"
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue  # a line cut short by a killed executor
            reads.append({k: doc.get(k) for k in NDP_READ_COLUMNS})
    return {"ndp_queries": pd.DataFrame(rows), "ndp_reads": pd.DataFrame(reads)}


def _selftest_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The link self-test the run was preceded by (``selftest.json``; empty if none ran)."""
    try:
        return json.loads((run_dir / "selftest.json").read_text())
    except (OSError, ValueError):
        return []


def parse_cc_observed(value: str | None) -> dict[str, int]:
    """``"cubic:12,reno:1"`` -> ``{"cubic": 12, "reno": 1}``."""
    if not value:
        return {}
    return {k: int(v) for k, v in (item.split(":") for item in value.split(",")) if re.match(r"^\d+$", v)}
