"""The rows an event log turns into, units normalised.

Units, stated once: every time stamp is epoch **milliseconds** (``*_ms`` columns that are points in
time end in ``_at_ms``); every duration is **milliseconds** as float -- Spark's nanosecond fields
(executor CPU time, deserialize CPU time, shuffle write time) are divided by 10^6; sizes are bytes.
``remote_reqs_duration_ms`` is Spark's sum over fetch requests and can exceed the task's wall time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from typing import Any

NS_PER_MS = 1_000_000.0


@dataclass(frozen=True)
class TaskRow:
    """One finished task attempt (``SparkListenerTaskEnd``)."""

    stage_id: int
    stage_attempt: int
    task_id: int
    task_index: int
    attempt: int
    executor_id: str
    host: str
    launch_at_ms: int
    finish_at_ms: int
    duration_ms: float
    successful: bool
    end_reason: str
    executor_run_ms: float
    executor_cpu_ms: float
    deserialize_ms: float
    deserialize_cpu_ms: float
    gc_ms: float
    result_serialization_ms: float
    result_bytes: int
    memory_spilled_bytes: int
    disk_spilled_bytes: int
    input_bytes: int
    input_records: int
    fetch_wait_ms: float
    remote_blocks: int
    local_blocks: int
    remote_bytes: int
    remote_bytes_to_disk: int
    local_bytes: int
    shuffle_records_read: int
    remote_reqs_duration_ms: float
    shuffle_write_bytes: int
    shuffle_write_records: int
    shuffle_write_ms: float
    speculative: bool = False


@dataclass(frozen=True)
class StageRow:
    """One finished stage attempt (``SparkListenerStageCompleted``)."""

    stage_id: int
    stage_attempt: int
    name: str
    num_tasks: int
    submitted_at_ms: int | None
    completed_at_ms: int | None
    duration_ms: float | None
    failure_reason: str | None
    parent_ids: str = ""  # comma-separated stage ids this stage reads from (the stage DAG)


@dataclass(frozen=True)
class JobRow:
    job_id: int
    submitted_at_ms: int | None  # None: not recorded (old Spark writes 0 then), or its start line unreadable
    completed_at_ms: int | None
    duration_ms: float | None
    result: str
    stage_ids: str  # comma-separated
    sql_execution_id: int | None = None  # the SQL execution that ran this job, if any


@dataclass(frozen=True)
class ExecutorRow:
    """One executor: when it was added and removed, its host and task slots (cores)."""

    executor_id: str
    host: str
    total_cores: int | None
    added_at_ms: int | None
    removed_at_ms: int | None
    removed_reason: str | None
    resource_profile_id: int | None


@dataclass(frozen=True)
class SqlExecutionRow:
    """One SQL execution (a DataFrame action or SQL statement) and the jobs it ran."""

    execution_id: int
    root_execution_id: int | None
    description: str
    started_at_ms: int | None
    completed_at_ms: int | None
    duration_ms: float | None
    error: str | None
    job_ids: str  # comma-separated
    adaptive_updates: int  # how often adaptive query execution re-planned it


@dataclass
class Totals:
    """Running sums over the tasks of one application (so nothing needs the task rows kept)."""

    n_tasks: int = 0
    failed_tasks: int = 0
    fetch_failures: int = 0
    speculative_tasks: int = 0
    executor_cpu_ms: float = 0.0
    executor_run_ms: float = 0.0
    fetch_wait_ms: float = 0.0
    remote_bytes: int = 0
    local_bytes: int = 0
    shuffle_write_bytes: int = 0


@dataclass
class EventLog:
    """One application's event log, parsed (rows kept in memory: for logs of the lab's own runs and
    tests; :mod:`shufflelab.eventlog.ingest` streams big logs into the store instead)."""

    app_id: str | None = None
    app_name: str | None = None
    app_start_ms: int | None = None
    app_end_ms: int | None = None
    spark_version: str | None = None
    executors: dict[str, str] = field(default_factory=dict)  # executor id -> host
    tasks: list[TaskRow] = field(default_factory=list)
    stages: list[StageRow] = field(default_factory=list)
    jobs: list[JobRow] = field(default_factory=list)
    skipped_lines: int = 0  # lines that are not Spark events: undecodable (torn), or JSON of something else
    app_attempt_id: str | None = None
    user: str | None = None
    exit_code: int | None = None
    executor_rows: list[ExecutorRow] = field(default_factory=list)
    sql_executions: list[SqlExecutionRow] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    spark_conf: dict[str, str] = field(default_factory=dict)  # a few settings that explain the run
    events: int = 0  # lines that were Spark events
    lines: int = 0
    bytes_read: int = 0  # uncompressed
    unknown_events: Counter[str] = field(default_factory=Counter)
    unknown_fields: Counter[str] = field(default_factory=Counter)  # "Event.Field" -> events carrying it
    task_ends_checked: int = 0  # task-end events whose fields were checked (a sample in big logs)
    job_errors: dict[int, str] = field(default_factory=dict)  # failed job -> its exception's message
    running_tasks: int = 0  # task starts without an end (an unfinished application)
    truncated_last_line: bool = False
    damaged_lines: int = 0  # lines inside the log (not its cut last line) that could not be decoded
    damaged_events: Counter[str] = field(default_factory=Counter)  # their event names (as far as readable)
    problems: list[str] = field(default_factory=list)  # what could not be read, naming the file

    def first_job_at_ms(self) -> int | None:
        """The first job's submission (None when no job has a submission time)."""
        return min((j.submitted_at_ms for j in self.jobs if j.submitted_at_ms is not None), default=None)

    def last_job_end_at_ms(self) -> int | None:
        """The last job's completion (None when no job ended: a running or killed application)."""
        return max((j.completed_at_ms for j in self.jobs if j.completed_at_ms is not None), default=None)

    def workload_span_ms(self) -> float | None:
        """From the first job's submission to the last job's completion (the job time we report);
        None when either is unknown."""
        first, last = self.first_job_at_ms(), self.last_job_end_at_ms()
        return float(last - first) if first is not None and last is not None else None

    def all_jobs_succeeded(self) -> bool:
        return bool(self.jobs) and all(j.result == "JobSucceeded" for j in self.jobs)


def records(rows: list[Any]) -> list[dict[str, Any]]:
    """Dataclass rows as dictionaries (for DataFrames and the results store)."""
    return [asdict(r) for r in rows]


def columns(row_type: type) -> list[str]:
    return [f.name for f in fields(row_type)]
