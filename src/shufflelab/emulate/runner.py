"""The ``emulate`` backend: runs an experiment's scenarios as real jobs on the fabric.

Runs are grouped by what they need to share (network structure, Spark daemons); a group gets one
fabric and one cluster, and each run re-applies its own shaping and TCP settings (sysctls act on
new sockets, and every run is a new Spark application with new executors and connections).
Repetitions are interleaved (rep 1 of every scenario, then rep 2, ...) so slow drifts of this
shared machine spread over all scenarios instead of biasing one. Finished runs are skipped, so
re-running a spec resumes it.

This module is the planning and the lifecycle of groups and runs; what differs between workload
kinds is in :mod:`shufflelab.emulate.drivers` (the Spark applications' driver; the other kinds'
drivers are handed to the runner, ``kinds``: :data:`shufflelab.kinds.DRIVERS`), the wait loop in
:mod:`~shufflelab.emulate.waiting`, what runs around every job in
:mod:`~shufflelab.emulate.telemetry`, the record's assembly in :mod:`~shufflelab.emulate.record`,
and the machines are reached through a :class:`~shufflelab.emulate.protocols.Backend` (the local
namespaces unless one is given).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import random
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shufflelab import capabilities, listener, topology
from shufflelab.emulate import cds, drivers, record, telemetry, waiting
from shufflelab.emulate.drivers import Group
from shufflelab.emulate.protocols import Backend, Cluster, MachineLost
from shufflelab.emulate.record import RunContext
from shufflelab.emulate.spark import ClusterSpec
from shufflelab.jvm import spark_version
from shufflelab.netplan import NetPlan
from shufflelab.results import Store
from shufflelab.spec import ExperimentSpec, Scenario, SpecError, selected

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


class EmulateRunner:
    def __init__(
        self,
        spec: ExperimentSpec,
        spec_path: str,
        results_dir: Path,
        progress: Progress | None = None,
        caps: capabilities.Capabilities | None = None,
        select: list[str] | None = None,
        backend: Backend | None = None,
        kinds: Mapping[str, type[drivers.Driver]] | None = None,
    ) -> None:
        """``kinds``: workload name -> the driver of a kind that is not a Spark application
        (:data:`shufflelab.kinds.DRIVERS`; without it only Spark applications run)."""
        self.spec = spec
        self.kinds = dict(kinds or {})
        self.spec_path = spec_path
        self.scenarios = selected(spec, select, spec_path)
        self.results_dir = results_dir.resolve()
        self.name = spec.experiment.name
        self.store = Store(self.results_dir / f"{self.name}.duckdb")
        self.artifacts = self.results_dir / self.name / "runs"
        self.progress = progress or Progress()
        self.caps = caps
        if backend is None:
            from shufflelab.emulate import local

            backend = local.backend()
        self.backend = backend
        for sc in self.scenarios:  # a workload without its driver is refused before anything starts
            drivers.kind_of(sc.spec, self.kinds)

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

    def _group_key(self, spec: ExperimentSpec) -> Any:
        net = topology.build(spec)
        cluster = ClusterSpec.of(spec) if drivers.kind_of(spec, self.kinds).needs_cluster else None
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
        machines = self.backend.machines()
        if machines:
            env["machines"] = machines
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
        self.backend.clean()  # leftovers of crashed earlier runs (live runs are left alone)
        i = 0
        while i < len(todo):
            key = self._group_key(todo[i][0].spec)
            group = []
            while i < len(todo) and self._group_key(todo[i][0].spec) == key:
                group.append(todo[i])
                i += 1
            result.outcomes.extend(self._run_group(group, env))
        return result

    def _run_group(self, runs: list[tuple[Scenario, int]], env: dict[str, Any]) -> list[RunOutcome]:
        """The runs of one group on one fabric: its kind's group resources started once, the Spark
        cluster (if the kind needs one) started before the first run and again when it must be."""
        first = runs[0][0].spec
        clock = self.backend.clock
        outcomes = []
        self.progress.on_phase("building fabric")
        t0 = clock()
        with self.backend.open_fabric(topology.build(first), first.topology.offloads) as fabric:
            group = Group(fabric)
            fabric.configure(group.plan(runs[0][0]))
            kind = drivers.kind_of(first, self.kinds)
            try:
                kind.open_group(first, group, self.backend, self.progress.on_phase)
                setup_s = clock() - t0  # charged to the group's first run
                for sc, rep in runs:
                    outcome = self._run_in_group(sc, rep, group, env, setup_s)
                    setup_s = 0.0
                    outcomes.append(outcome)
                    self.progress.on_done(sc.label, outcome.status, outcome.job_time_s)
            finally:
                if group.cluster is not None:
                    self.progress.on_phase("stopping Spark cluster")
                    group.cluster.stop()
                kind.close_group(group, self.progress.on_phase)
        return outcomes

    def _run_in_group(self, sc: Scenario, rep: int, group: Group, env: dict[str, Any], setup_s: float) -> RunOutcome:
        kind = drivers.kind_of(sc.spec, self.kinds)
        if kind.needs_cluster and (
            group.cluster is None or not group.cluster.alive() or not sc.spec.spark.reuse_cluster
        ):
            if group.cluster is not None:
                group.cluster.stop()
                group.cluster = None
            group.cluster, setup_s, failed = self._start_cluster(sc, rep, group, env, setup_s)
            if group.cluster is None:  # every attempt failed (each recorded): on to the next run
                return failed[-1]
        return self._run(sc, rep, kind, group, env, setup_s)

    def _start_cluster(
        self, sc: Scenario, rep: int, group: Group, env: dict[str, Any], setup_s: float
    ) -> tuple[Cluster | None, float, list[RunOutcome]]:
        """Start the Spark cluster for run ``(sc, rep)``, up to ``CLUSTER_START_ATTEMPTS`` times. A
        failed start is recorded as a failed run of ``(sc, rep)`` with its cause, and what it started
        is torn down (daemons, their scratch folders) before the next attempt. Returns the cluster
        (None if every attempt failed), the run's setup time and the failed attempts (stored; the
        run's outcome is the run itself if a start succeeded, else the last of them)."""
        failed: list[RunOutcome] = []
        fabric, plan = group.fabric, group.plan(sc)
        scratch = fabric.lease.scratch / "spark"
        log_dir = self.results_dir / self.name / "clusters" / fabric.lease.lease_id
        clock = self.backend.clock
        for k in range(1, CLUSTER_START_ATTEMPTS + 1):
            fabric.configure(plan)  # daemons start under the scenario's TCP settings
            self.progress.on_phase("starting Spark cluster" + (f" (attempt {k})" if k > 1 else ""))
            started, t1 = time.time(), clock()
            cluster = self.backend.new_cluster(ClusterSpec.of(sc.spec), fabric, scratch, log_dir)
            try:
                cluster.start()
                return cluster, setup_s + clock() - t1, failed
            except MachineLost:  # no retry can bring a machine back: the experiment ends
                cluster.stop()
                raise
            except Exception as exc:  # a daemon died or never became ready: record, tear down, retry
                cluster.stop()
                shutil.rmtree(scratch, ignore_errors=True)
                why = f"{type(exc).__name__}: {exc}"
                cause = f"Spark cluster did not start (attempt {k} of {CLUSTER_START_ATTEMPTS}): {why}"
                failed.append(self._record_failed_start(sc, rep, env, plan, started, setup_s + clock() - t1, cause))
                self.progress.on_phase(cause[:200])
                setup_s = 0.0
            except BaseException:
                cluster.stop()
                raise
        return None, 0.0, failed

    def _record_failed_start(
        self, sc: Scenario, rep: int, env: dict[str, Any], plan: NetPlan, started: float, setup_s: float, cause: str
    ) -> RunOutcome:
        """A run that never began because its cluster did not start: stored failed with the cause."""
        ctx = self._context(sc, rep, env, setup_s, plan, started)
        ctx.fail("failed", cause[:500])
        ctx.finished_at = time.time()
        ctx.wall_s = ctx.finished_at - started
        self.store.write_run(record.failed_start(ctx))
        return RunOutcome(ctx.run_id, sc.label, rep, "failed", None, ctx.cause)

    def _context(
        self, sc: Scenario, rep: int, env: dict[str, Any], setup_s: float, plan: NetPlan, started: float | None = None
    ) -> RunContext:
        """A new run: the next attempt's number and id, a fresh artifact folder (with the scenario)."""
        attempt = self.store.attempts(sc.scenario_id, rep) + 1
        run_id = f"{sc.scenario_id}-r{rep}-a{attempt}"
        run_dir = self.artifacts / run_id
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        (run_dir / "scenario.json").write_text(
            json.dumps({"label": sc.label, "values": sc.values, "spec": sc.spec.model_dump(mode="json")}, indent=1)
        )
        return RunContext(
            self.name, sc, rep, attempt, run_id, run_dir, env, setup_s,
            started=time.time() if started is None else started, t_mono=self.backend.clock(), plan=plan,
        )  # fmt: skip

    def _run(
        self, sc: Scenario, rep: int, kind: type[drivers.Driver], group: Group, env: dict[str, Any], setup_s: float
    ) -> RunOutcome:
        """One run, whatever its kind: telemetry and cross traffic around the driver's job(s), the one
        wait loop, and the record written in every case (a failure is kept with its cause, also one
        met while tearing the run down; Ctrl-C is recorded as interrupted, then everything is torn
        down). A machine lost (:class:`MachineLost`) is raised again once the run is recorded."""
        ctx = self._context(sc, rep, env, setup_s, group.plan(sc))
        self.progress.on_run(sc.label, rep)
        driver: drivers.WorkloadDriver = kind(ctx, group, self.backend)
        fabric, b = group.fabric, self.backend
        lost: MachineLost | None = None
        try:
            telemetry.start(ctx.plan, fabric, ctx.run_dir, ctx.telemetry, self.progress.on_phase, b)
            jobs = driver.start(self.progress.on_phase)
            waited = waiting.wait(
                jobs, fabric, driver.timeout_s, ctx.timeout_cause,
                tick=driver.tick, period_s=driver.period_s, clock=b.clock, sleep=b.sleep,
            )  # fmt: skip
            driver.collect(waited)
        except KeyboardInterrupt:
            ctx.status, ctx.cause = "interrupted", "runner interrupted"
            raise
        except Exception as exc:  # infrastructure failure: keep the run, with its cause
            ctx.status, ctx.cause = "failed", f"{type(exc).__name__}: {exc}"
            lost = exc if isinstance(exc, MachineLost) else None
        finally:
            for what, step in (
                ("stopping the job", driver.release),
                ("stopping telemetry", lambda: telemetry.stop(fabric, ctx.run_dir, ctx.telemetry)),
                ("keeping the artifacts", driver.keep_artifacts),
            ):
                lost = _teardown(ctx, what, step) or lost
            ctx.finished_at, ctx.wall_s = time.time(), b.clock() - ctx.t_mono
            rec = driver.record()
            self.store.write_run(rec)
        if lost is not None:
            raise lost
        return RunOutcome(ctx.run_id, sc.label, rep, rec.run.status, rec.run.job_time_s, rec.run.cause)


def _teardown(ctx: RunContext, what: str, step: Callable[[], None]) -> MachineLost | None:
    """A step of a run's teardown: a failure fails the run (its first cause is kept) and the next
    steps and the record still happen; Ctrl-C is not caught. Returns a machine lost."""
    try:
        step()
    except Exception as exc:  # noqa: BLE001 - recorded as the run's cause
        ctx.fail("failed", f"{type(exc).__name__} while {what}: {exc}"[:500])
        return exc if isinstance(exc, MachineLost) else None
    return None
