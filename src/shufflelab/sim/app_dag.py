"""A recorded Spark application as a stage DAG, for the fabric simulator's application model.

Source: a lab results store (``results.duckdb``), an imported event-log store (what ``shufflelab
analyze`` writes: the same ``stages``/``tasks``/``jobs`` tables), or a committed ``data/`` folder
of those tables as Parquet (``docs/results/*/data``). One application = one ``(run_id,
app_index)``. Pure apart from reading that store.

What a stage carries (per successful task of its last attempt):

- ``compute_s`` = deserialize + executor run − fetch wait (the task's own work; the time it
  waited on the network is the simulator's to model);
- ``write_bytes`` = shuffle bytes it wrote; ``read_bytes`` = shuffle bytes it read
  (remote + local: on the fabric, which blocks are local depends on the placement);
- ``reads_from``: the stages whose map outputs it fetches = its recorded parents
  (``stages.parent_ids``, from the event log's ``Parent IDs``). A parent Spark skipped (its
  output was reused) is not in the record; its blocks are taken from the latest recorded stage
  that wrote shuffle output and finished before this one was submitted. Stores without
  ``parent_ids`` get the same rule for every stage that read shuffle bytes;
- ``after``: ``reads_from`` plus, for a stage of job k > 0, every stage of job k − 1 (a driver runs
  its actions one after the other); ``delay_s`` = its submission − the end of what it waited for
  (driver time), kept as recorded.

The per-(map, reduce) bytes are not recorded (the event log has per-task totals only): a
reducer's ``read_bytes`` is split over the map tasks of its ``reads_from`` stages in proportion to
what each wrote (so every reducer reads exactly its recorded bytes).

**Compute times from an oversubscribed recording.** A task's recorded compute is wall time. Where
the recorded executors shared fewer physical cores than they had (the lab's 3 one-core executors on
a 2-core box), it holds time spent waiting for a core, and it is not what the task takes on a core
of its own. ``compute`` chooses what a stage carries (:class:`CpuAccount` records all of them):

- ``"recorded"``: the wall time as recorded (longer than one-core time on an oversubscribed box);
- ``"shared"``: the wall time × the task's mean processor-sharing rate ``min(1, C / n(t))`` over its
  lifetime (``n(t)`` = the application's tasks running on the machine at *t*, ``C`` = its physical
  cores), floored at the task's own thread CPU time (executor CPU + deserialize CPU) where recorded:
  a task's share of the machine can be no less than the CPU its thread used;
- ``"thread_cpu"``: the task thread's CPU time alone: a lower bound on one-core time (it leaves out
  the JVM's other threads — GC, JIT — and every off-CPU wait: disk, locks, the result's send);
- ``"auto"`` (default): ``"shared"`` when the machine's cores are known, else ``"recorded"``. They
  are known from the lab store's run record (``runs.environment_json`` ``cpus``: the whole box, all
  executors on it), or given (``cpus``: per recorded host, ``tasks.host``) for an imported event
  log, which does not record them.
"""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import duckdb
import numpy as np
import pandas as pd

TABLES = ("stages", "tasks", "jobs")
OPTIONAL = ("apps", "runs")

Compute = Literal["auto", "recorded", "shared", "thread_cpu"]


@dataclass(frozen=True)
class CpuAccount:
    """The recording's own CPU accounting of its tasks' compute (sums over the successful tasks, s)."""

    compute: str  # what the stages carry: "recorded", "shared" or "thread_cpu"
    recorded_s: float  # deserialize + executor run − fetch wait (wall)
    thread_cpu_s: float | None  # executor CPU + deserialize CPU of the task threads (None: not recorded)
    shared_s: float | None  # processor-sharing corrected (None: the machine's cores unknown)
    machine_cores: float | None  # physical cores of a recorded machine
    machines: str  # "the box" (lab: every executor on one machine) or "per host" (tasks.host)
    executor_cores: int
    peak_tasks: int  # the most tasks running at once on one machine

    def statement(self) -> str:
        """In words: what the compute times are and their bias."""
        thread = (
            f"their threads' CPU time is {self.thread_cpu_s:.2f} s ({100 * self.thread_cpu_s / self.recorded_s:.0f} %)"
            if self.thread_cpu_s is not None and self.recorded_s > 0
            else "the recording has no per-task CPU time"
        )
        base = f"recorded task compute (wall) {self.recorded_s:.2f} s in all; {thread}"
        if self.machine_cores is None:
            return (
                f"{base}. The recorded machines' cores are unknown (an event log does not record them; give "
                f"app.recorded_cpus), so compute times are used as recorded: if the {self.executor_cores} executor "
                f"cores shared fewer physical cores, they hold time spent waiting for a core and are longer than "
                f"one-core times (biased long)"
            )
        over = self.peak_tasks > self.machine_cores
        shared = (
            f"corrected for processor sharing ({self.machine_cores:g} physical cores {self.machines}, up to "
            f"{self.peak_tasks} tasks at once: each task's wall time × its mean min(1, cores / tasks running), "
            f"floored at its thread CPU) {self.shared_s:.2f} s"
        )
        used = {
            "shared": "the corrected times are used",
            "recorded": "the times as recorded are used (biased long)" if over else "the times as recorded are used",
            "thread_cpu": "the threads' CPU times are used (a lower bound: no GC or JIT threads, no off-CPU waits)",
        }[self.compute]
        if not over:
            most = f"{self.peak_tasks} tasks at most on {self.machine_cores:g} cores"
            return f"{base}; the machine was not oversubscribed ({most}): {used}"
        return f"{base}; {shared}; {used}"


class AppDagError(ValueError):
    """A recorded application that cannot be read as a stage DAG; the message names the file."""


@dataclass(frozen=True)
class TaskCost:
    compute_s: float
    write_bytes: float
    read_bytes: float


@dataclass(frozen=True)
class Stage:
    stage_id: int
    name: str
    job: int
    tasks: tuple[TaskCost, ...]
    reads_from: tuple[int, ...]  # stage ids whose shuffle output this stage fetches
    after: tuple[int, ...]  # stage ids that must end before it starts (reads_from ⊆ after)
    delay_s: float  # recorded driver time between `after` ending and its submission

    @property
    def write_bytes(self) -> float:
        return sum(t.write_bytes for t in self.tasks)

    @property
    def read_bytes(self) -> float:
        return sum(t.read_bytes for t in self.tasks)


@dataclass(frozen=True)
class Scaling:
    hosts: int
    cores_per_host: int
    task_factor: float
    bytes_factor: float

    def statement(self, recorded_slots: int) -> str:
        return (
            f"weak scaling from {recorded_slots} recorded executor cores to {self.hosts:,} hosts × "
            f"{self.cores_per_host} cores: every stage of n > 1 tasks gets round(n × {self.task_factor:g}) tasks "
            f"(single-task stages stay single), task i repeating recorded task i mod n with its compute time "
            f"unchanged and its shuffle bytes written and read × {self.bytes_factor:g}; a reducer's bytes are "
            f"split over its source map tasks in proportion to what each wrote, so the blocks are "
            f"{self.task_factor:g}× more and {self.task_factor:g}× smaller and a stage's shuffle "
            f"{self.task_factor * self.bytes_factor:g}× larger"
        )


@dataclass(frozen=True)
class AppDag:
    source: str
    run_id: str
    app_index: int
    slots: int  # executor cores of the recorded run
    job_time_s: float  # recorded: first job submitted → last job ended
    tail_s: float  # recorded: last stage ended → last job ended
    stages: tuple[Stage, ...]
    notes: tuple[str, ...] = ()
    scaling: Scaling | None = None
    cpu: CpuAccount | None = None

    def stage(self, stage_id: int) -> Stage:
        for s in self.stages:
            if s.stage_id == stage_id:
                return s
        raise KeyError(stage_id)

    @property
    def tasks(self) -> int:
        return sum(len(s.tasks) for s in self.stages)

    @property
    def shuffle_bytes(self) -> float:
        return sum(s.read_bytes for s in self.stages)


def _read_tables(path: Path) -> dict[str, pd.DataFrame]:
    if path.is_dir():
        out = {}
        for name in (*TABLES, *OPTIONAL):
            f = path / f"{name}.parquet"
            if f.is_file():
                out[name] = duckdb.sql("SELECT * FROM read_parquet(?)", params=[str(f)]).df()
            elif name in TABLES:
                raise AppDagError(f"{path}: no {name}.parquet (a data folder holds the store's tables as Parquet)")
        return out
    if not path.is_file():
        raise AppDagError(f"{path}: no such store or data folder")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as err:
        raise AppDagError(f"{path}: not a DuckDB results store ({err})") from None
    try:
        have = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        missing = [t for t in TABLES if t not in have]
        if missing:
            raise AppDagError(f"{path}: not a results store with Spark tables (missing {', '.join(missing)})")
        return {t: con.execute(f'SELECT * FROM "{t}"').df() for t in (*TABLES, *OPTIONAL) if t in have}
    finally:
        con.close()


def _apps_of(tables: dict[str, pd.DataFrame]) -> list[tuple[str, int]]:
    t = tables["stages"]
    idx = t["app_index"] if "app_index" in t else pd.Series(0, index=t.index)
    return sorted({(str(r), int(a)) for r, a in zip(t["run_id"], idx, strict=True)})


def _pick(tables: dict[str, pd.DataFrame], path: Path, run_id: str | None, app_index: int) -> tuple[str, int]:
    apps = _apps_of(tables)
    if not apps:
        raise AppDagError(f"{path}: no recorded stages")
    if run_id is not None:
        if (run_id, app_index) not in apps:
            known = ", ".join(sorted({r for r, _ in apps})[:10])
            raise AppDagError(f"{path}: no application run_id={run_id!r} app_index={app_index} (runs: {known})")
        return run_id, app_index
    jobs = tables["jobs"]
    if "app_index" not in jobs:
        jobs = jobs.assign(app_index=0)
    span = jobs.groupby(["run_id", "app_index"]).agg(a=("submitted_at_ms", "min"), b=("completed_at_ms", "max"))
    times = sorted(((float(r.b - r.a), str(k[0]), int(k[1])) for k, r in span.iterrows()), key=lambda x: x)
    if not times:
        return apps[0]
    _, rid, ai = times[(len(times) - 1) // 2]  # the median application (lower middle)
    return rid, ai


def _ints(text: Any) -> tuple[int, ...]:
    if text is None or (isinstance(text, float) and math.isnan(text)) or str(text).strip() == "":
        return ()
    return tuple(int(x) for x in str(text).split(","))


def _box_cpus(tables: dict[str, pd.DataFrame], rid: str) -> float | None:
    """The lab's record of the box's CPU count for run ``rid`` (``runs.environment_json``)."""
    runs = tables.get("runs")
    if runs is None or "environment_json" not in runs or "run_id" not in runs:
        return None
    for env in runs.loc[runs["run_id"] == rid, "environment_json"].dropna():
        try:
            cpus = json.loads(env).get("cpus")
        except (ValueError, AttributeError):
            continue
        if isinstance(cpus, int | float) and cpus > 0:
            return float(cpus)
    return None


def _shares(tasks: pd.DataFrame, machine: pd.Series, cores: float, slots: dict[str, float]) -> tuple[np.ndarray, int]:
    """Each task's mean processor-sharing rate ``min(1, cores / n(t))`` over its lifetime
    (launch → finish as the driver saw them) on its machine, and the most tasks computing at once on
    one machine. ``n(t)`` is capped at the machine's executor slots: the driver's timestamps overlap
    a task's end with the next one's launch on the same slot (up to 5 at once on the lab's 3)."""
    rates = np.ones(len(tasks))
    peak = 0
    launch = tasks["launch_at_ms"].to_numpy(float)
    finish = tasks["finish_at_ms"].to_numpy(float)
    for m in pd.unique(machine):
        idx = np.flatnonzero((machine == m).to_numpy())
        a, b = launch[idx], finish[idx]
        points = np.unique(np.concatenate([a, b]))
        if len(points) < 2:
            continue
        mids = (points[:-1] + points[1:]) / 2
        widths = np.diff(points)
        running = np.zeros(len(mids))
        for x, y in zip(a, b, strict=True):
            running[(mids > x) & (mids < y)] += 1
        running = np.minimum(running, slots[str(m)])
        peak = max(peak, int(running.max()))
        rate = np.where(running > 0, np.minimum(1.0, cores / np.maximum(running, 1)), 1.0)
        cum = np.concatenate([[0.0], np.cumsum(rate * widths)])
        lo, hi = np.searchsorted(points, a), np.searchsorted(points, b)
        span = b - a
        rates[idx] = np.where(span > 0, (cum[hi] - cum[lo]) / np.where(span > 0, span, 1), 1.0)
    return rates, peak


def _num(x: Any) -> float:
    return 0.0 if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def load_app(
    path: str | Path,
    run_id: str | None = None,
    app_index: int = 0,
    *,
    compute: Compute = "auto",
    cpus: float | None = None,
) -> AppDag:
    """The application ``(run_id, app_index)`` of a store or data folder (default: the one with the
    median job time). ``compute`` and ``cpus`` (physical cores per recorded host): how compute times
    from an oversubscribed recording are read (module docstring)."""
    if compute not in ("auto", "recorded", "shared", "thread_cpu"):
        raise AppDagError(f"compute: {compute!r} is not auto, recorded, shared or thread_cpu")
    if cpus is not None and not (cpus > 0 and math.isfinite(cpus)):
        raise AppDagError("cpus: the recorded machines' physical cores must be > 0")
    p = Path(path)
    tables = _read_tables(p)
    rid, ai = _pick(tables, p, run_id, app_index)

    def of(name: str) -> pd.DataFrame:
        t = tables[name]
        sel = t["run_id"] == rid
        if "app_index" in t:
            sel &= t["app_index"].fillna(0).astype(int) == ai
        return t[sel]

    stages, tasks, jobs = of("stages"), of("tasks"), of("jobs")
    tasks = tasks[tasks["successful"].astype(bool)]
    if stages.empty or tasks.empty or jobs.empty:
        raise AppDagError(f"{p}: application {rid}/{ai} has no successful tasks, stages or jobs")
    stages = stages.sort_values(["stage_id", "stage_attempt"]).groupby("stage_id").tail(1)
    notes: list[str] = []
    has_parents = "parent_ids" in stages.columns and stages["parent_ids"].notna().any()
    if not has_parents:
        notes.append("the store has no stage parents (recorded before parent_ids): sources inferred")
    job_of: dict[int, int] = {}
    for j in jobs.sort_values("job_id").itertuples():
        for sid in _ints(j.stage_ids):
            job_of.setdefault(sid, int(j.job_id))
    job_order = sorted(set(job_of.values()))
    ends = {int(s.stage_id): float(s.completed_at_ms or 0) for s in stages.itertuples()}
    app_start = float(jobs["submitted_at_ms"].min())
    app_end = float(jobs["completed_at_ms"].max())
    tasks = tasks.sort_values(["stage_id", "task_index", "attempt"]).reset_index(drop=True)
    account, compute_s = _compute_times(tables, (rid, ai), tasks, compute, cpus, p)
    costs: dict[int, list[TaskCost]] = {}
    for t, c in zip(tasks.itertuples(), compute_s, strict=True):
        read = float(t.remote_bytes or 0) + float(t.local_bytes or 0)
        costs.setdefault(int(t.stage_id), []).append(TaskCost(float(c), float(t.shuffle_write_bytes or 0), read))
    written = {sid: sum(c.write_bytes for c in cs) for sid, cs in costs.items()}
    out: list[Stage] = []
    recorded = {int(s) for s in stages["stage_id"]}
    for s in stages.sort_values("submitted_at_ms").itertuples():
        sid = int(s.stage_id)
        cs = costs.get(sid)
        if not cs:
            notes.append(f"stage {sid}: no successful task recorded, left out")
            continue
        reads = sum(c.read_bytes for c in cs) > 0
        parents = _ints(s.parent_ids) if has_parents else ()
        sources = [q for q in parents if q in recorded and written.get(q, 0) > 0]
        if reads and (len(sources) < len(parents) or not has_parents):
            earlier = [
                q for q in recorded
                if q not in sources and written.get(q, 0) > 0 and ends.get(q, math.inf) <= float(s.submitted_at_ms)
            ]  # fmt: skip
            if earlier:
                sources.append(max(earlier, key=lambda q: (ends[q], q)))
        if reads and not sources:
            notes.append(f"stage {sid}: reads shuffle bytes but no recorded stage wrote them; read as local input")
        job = job_of.get(sid, job_order[0] if job_order else 0)
        after = set(sources)
        k = job_order.index(job) if job in job_order else 0
        if k > 0:
            after |= {q for q, j in job_of.items() if j == job_order[k - 1] and q in recorded and q in costs}
        ready = max((ends[q] for q in after), default=app_start)
        delay = max(0.0, float(s.submitted_at_ms) - ready) / 1000
        out.append(Stage(sid, str(s.name), job, tuple(cs), tuple(sorted(sources)), tuple(sorted(after)), delay))
    kept = {s.stage_id for s in out}
    out = [replace(s, after=tuple(q for q in s.after if q in kept)) for s in out]
    slots = _slots(tables, rid, ai, tasks)
    last = max(ends[s.stage_id] for s in out)
    return AppDag(
        source=str(p),
        run_id=rid,
        app_index=ai,
        slots=slots,
        job_time_s=(app_end - app_start) / 1000,
        tail_s=max(0.0, app_end - last) / 1000,
        stages=tuple(out),
        notes=tuple(notes),
        cpu=account,
    )


def _compute_times(
    tables: dict[str, pd.DataFrame],
    app: tuple[str, int],
    tasks: pd.DataFrame,
    compute: Compute,
    cpus: float | None,
    p: Path,
) -> tuple[CpuAccount, np.ndarray]:
    """Per task (in ``tasks``' order) the compute time the DAG carries, and the account of it."""
    rid, ai = app
    wall = np.array(
        [
            max(0.0, _num(t.deserialize_ms) + _num(t.executor_run_ms) - _num(t.fetch_wait_ms)) / 1000
            for t in tasks.itertuples()
        ]
    )
    thread: np.ndarray | None = None
    if "executor_cpu_ms" in tasks and tasks["executor_cpu_ms"].notna().any():
        deser = pd.Series(tasks.get("deserialize_cpu_ms", 0.0), index=tasks.index).fillna(0)
        thread = (tasks["executor_cpu_ms"].fillna(0) + deser).to_numpy(float)
        thread = np.minimum(thread / 1000, wall)  # ms rounding of the wall time
    machine_cores, machines = (float(cpus), "per host") if cpus is not None else (_box_cpus(tables, rid), "on the box")
    executor_cores = _slots(tables, rid, ai, tasks) if "executor_id" in tasks else 1
    shared: np.ndarray | None = None
    peak = 0
    if machine_cores is not None:
        per_host = machines == "per host" and "host" in tasks
        machine = tasks["host"].astype(str) if per_host else pd.Series("box", index=tasks.index)
        executors = tasks["executor_id"].astype(str) if "executor_id" in tasks else machine
        per_executor = executor_cores / max(1, executors.nunique())
        slots = {str(m): executors[machine == m].nunique() * per_executor for m in pd.unique(machine)}
        rates, peak = _shares(tasks, machine, machine_cores, slots)
        shared = wall * rates
        if thread is not None:
            shared = np.maximum(shared, thread)
    use = compute
    if use == "auto":
        use = "shared" if shared is not None else "recorded"
    if use == "shared" and shared is None:
        raise AppDagError(
            f"{p}: compute 'shared' needs the recorded machines' physical cores: the store does not record them "
            "(give app.recorded_cpus)"
        )
    if use == "thread_cpu" and thread is None:
        raise AppDagError(f"{p}: compute 'thread_cpu': the store has no per-task CPU time (executor_cpu_ms)")
    chosen = {"recorded": wall, "shared": shared, "thread_cpu": thread}[use]
    assert chosen is not None
    account = CpuAccount(
        compute=use,
        recorded_s=float(wall.sum()),
        thread_cpu_s=None if thread is None else float(thread.sum()),
        shared_s=None if shared is None else float(shared.sum()),
        machine_cores=machine_cores,
        machines=machines,
        executor_cores=executor_cores,
        peak_tasks=peak,
    )
    return account, chosen


def _slots(tables: dict[str, pd.DataFrame], rid: str, ai: int, tasks: pd.DataFrame) -> int:
    apps = tables.get("apps")
    if apps is not None and "cores" in apps:
        row = apps[(apps["run_id"] == rid) & (apps["app_index"].fillna(0).astype(int) == ai)]
        if not row.empty and pd.notna(row["cores"].iloc[0]) and int(row["cores"].iloc[0]) > 0:
            return int(row["cores"].iloc[0])
    return max(1, int(tasks["executor_id"].nunique()))


def scale(dag: AppDag, hosts: int, cores_per_host: int = 1, *, task_factor: float | None = None,
          bytes_factor: float = 1.0) -> AppDag:  # fmt: skip
    """The application at ``hosts`` × ``cores_per_host`` executor cores: weak scaling (the same work
    per core; :meth:`Scaling.statement` says it in words). ``task_factor`` defaults to the ratio
    of cores, new / recorded."""
    if hosts < 1 or cores_per_host < 1:
        raise AppDagError("scale: hosts and cores_per_host must be >= 1")
    f = task_factor if task_factor is not None else hosts * cores_per_host / dag.slots
    if not (f > 0 and math.isfinite(f)) or not (bytes_factor > 0 and math.isfinite(bytes_factor)):
        raise AppDagError("scale: task_factor and bytes_factor must be finite and > 0")
    stages = []
    for s in dag.stages:
        n = len(s.tasks)
        m = 1 if n == 1 else max(1, round(n * f))
        tasks = tuple(
            TaskCost(t.compute_s, t.write_bytes * bytes_factor, t.read_bytes * bytes_factor)
            for t in (s.tasks[i % n] for i in range(m))
        )
        stages.append(replace(s, tasks=tasks))
    return replace(dag, stages=tuple(stages), scaling=Scaling(hosts, cores_per_host, f, bytes_factor))


def makespan_no_network(dag: AppDag, slots: int | None = None) -> float:
    """The application's time with an infinitely fast network: stages start ``delay_s`` after what
    they wait for, their tasks run FIFO (in order of stage readiness) on ``slots`` cores (default:
    the scaled cores, else the recorded ones); plus the recorded tail."""
    if slots is None:
        slots = dag.scaling.hosts * dag.scaling.cores_per_host if dag.scaling else dag.slots
    if slots < 1:
        raise AppDagError("makespan_no_network: slots must be >= 1")
    by_id = {s.stage_id: s for s in dag.stages}
    waiting = {s.stage_id: set(s.after) for s in dag.stages}
    left = {s.stage_id: len(s.tasks) for s in dag.stages}
    events: list[tuple[float, int, str, int]] = []  # (time, seq, kind, stage)
    seq = 0
    for sid, w in waiting.items():
        if not w:
            heapq.heappush(events, (by_id[sid].delay_s, seq, "ready", sid))
            seq += 1
    queue: list[tuple[int, float]] = []  # (stage, compute_s) FIFO
    head = 0
    free = slots
    now = end = 0.0
    while events:
        now, _, kind, sid = heapq.heappop(events)
        if kind == "ready":
            queue.extend((sid, t.compute_s) for t in by_id[sid].tasks)
        else:
            free += 1
            left[sid] -= 1
            if left[sid] == 0:
                end = max(end, now)
                for q, w in waiting.items():
                    if sid in w:
                        w.discard(sid)
                        if not w:
                            heapq.heappush(events, (now + by_id[q].delay_s, seq, "ready", q))
                            seq += 1
        while free > 0 and head < len(queue):
            q, c = queue[head]
            head += 1
            free -= 1
            heapq.heappush(events, (now + c, seq, "done", q))
            seq += 1
    return end + dag.tail_s


def core_app(dag: AppDag) -> dict[str, Any]:
    """The DAG as the Rust core's ``apps[i]`` (``crates/simcore/src/apps.rs``): stages by index."""
    index = {s.stage_id: i for i, s in enumerate(dag.stages)}
    return {
        "name": f"{dag.run_id}/{dag.app_index}",
        "tail_s": dag.tail_s,
        "stages": [
            {
                "id": s.stage_id,
                "after": [index[q] for q in s.after],
                "reads_from": [index[q] for q in s.reads_from if q in index],
                "delay_s": s.delay_s,
                "compute_s": [t.compute_s for t in s.tasks],
                "write_bytes": [t.write_bytes for t in s.tasks],
                "read_bytes": [t.read_bytes for t in s.tasks],
            }
            for s in dag.stages
        ],
    }
