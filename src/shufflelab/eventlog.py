"""Spark event-log parser: one row per task, stage and job, units normalised.

Reads an uncompressed, non-rolled event log (JSON lines; shufflelab sets
``spark.eventLog.compress=false`` and ``spark.eventLog.rolling.enabled=false``).

Units, stated once: every time stamp is epoch **milliseconds** (``*_ms`` columns that are points in
time end in ``_at_ms``); every duration is **milliseconds** as float -- Spark's nanosecond fields
(executor CPU time, deserialize CPU time, shuffle write time) are divided by 10^6; sizes are bytes.
``remote_reqs_duration_ms`` is Spark's sum over fetch requests and can exceed the task's wall time.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

NS_PER_MS = 1_000_000.0


@dataclass(frozen=True)
class TaskRow:
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


@dataclass(frozen=True)
class StageRow:
    stage_id: int
    stage_attempt: int
    name: str
    num_tasks: int
    submitted_at_ms: int | None
    completed_at_ms: int | None
    duration_ms: float | None
    failure_reason: str | None


@dataclass(frozen=True)
class JobRow:
    job_id: int
    submitted_at_ms: int
    completed_at_ms: int | None
    duration_ms: float | None
    result: str
    stage_ids: str  # comma-separated


@dataclass
class EventLog:
    app_id: str | None = None
    app_name: str | None = None
    app_start_ms: int | None = None
    app_end_ms: int | None = None
    spark_version: str | None = None
    executors: dict[str, str] = field(default_factory=dict)  # executor id -> host
    tasks: list[TaskRow] = field(default_factory=list)
    stages: list[StageRow] = field(default_factory=list)
    jobs: list[JobRow] = field(default_factory=list)
    skipped_lines: int = 0

    def workload_span_ms(self) -> float | None:
        """From the first job's submission to the last job's completion (the job time we report)."""
        done = [j for j in self.jobs if j.completed_at_ms is not None]
        if not done:
            return None
        last = max(j.completed_at_ms for j in done if j.completed_at_ms is not None)
        return float(last - min(j.submitted_at_ms for j in self.jobs))

    def all_jobs_succeeded(self) -> bool:
        return bool(self.jobs) and all(j.result == "JobSucceeded" for j in self.jobs)


def _i(d: dict[str, Any], key: str) -> int:
    v = d.get(key, 0)
    return int(v) if v is not None else 0


def _task(ev: dict[str, Any]) -> TaskRow:
    info: dict[str, Any] = ev.get("Task Info", {})
    m: dict[str, Any] = ev.get("Task Metrics") or {}
    sr: dict[str, Any] = m.get("Shuffle Read Metrics") or {}
    sw: dict[str, Any] = m.get("Shuffle Write Metrics") or {}
    im: dict[str, Any] = m.get("Input Metrics") or {}
    reason: dict[str, Any] = ev.get("Task End Reason") or {}
    launch = _i(info, "Launch Time")
    finish = _i(info, "Finish Time")
    return TaskRow(
        stage_id=_i(ev, "Stage ID"),
        stage_attempt=_i(ev, "Stage Attempt ID"),
        task_id=_i(info, "Task ID"),
        task_index=_i(info, "Index"),
        attempt=_i(info, "Attempt"),
        executor_id=str(info.get("Executor ID", "")),
        host=str(info.get("Host", "")),
        launch_at_ms=launch,
        finish_at_ms=finish,
        duration_ms=float(finish - launch) if finish else 0.0,
        successful=reason.get("Reason") == "Success" and not info.get("Failed", False),
        end_reason=str(reason.get("Reason", "")),
        executor_run_ms=float(_i(m, "Executor Run Time")),
        executor_cpu_ms=_i(m, "Executor CPU Time") / NS_PER_MS,
        deserialize_ms=float(_i(m, "Executor Deserialize Time")),
        deserialize_cpu_ms=_i(m, "Executor Deserialize CPU Time") / NS_PER_MS,
        gc_ms=float(_i(m, "JVM GC Time")),
        result_serialization_ms=float(_i(m, "Result Serialization Time")),
        result_bytes=_i(m, "Result Size"),
        memory_spilled_bytes=_i(m, "Memory Bytes Spilled"),
        disk_spilled_bytes=_i(m, "Disk Bytes Spilled"),
        input_bytes=_i(im, "Bytes Read"),
        input_records=_i(im, "Records Read"),
        fetch_wait_ms=float(_i(sr, "Fetch Wait Time")),
        remote_blocks=_i(sr, "Remote Blocks Fetched"),
        local_blocks=_i(sr, "Local Blocks Fetched"),
        remote_bytes=_i(sr, "Remote Bytes Read"),
        remote_bytes_to_disk=_i(sr, "Remote Bytes Read To Disk"),
        local_bytes=_i(sr, "Local Bytes Read"),
        shuffle_records_read=_i(sr, "Total Records Read"),
        remote_reqs_duration_ms=float(_i(sr, "Remote Requests Duration")),
        shuffle_write_bytes=_i(sw, "Shuffle Bytes Written"),
        shuffle_write_records=_i(sw, "Shuffle Records Written"),
        shuffle_write_ms=_i(sw, "Shuffle Write Time") / NS_PER_MS,
    )


def _stage(info: dict[str, Any]) -> StageRow:
    sub = info.get("Submission Time")
    comp = info.get("Completion Time")
    return StageRow(
        stage_id=_i(info, "Stage ID"),
        stage_attempt=_i(info, "Stage Attempt ID"),
        name=str(info.get("Stage Name", "")),
        num_tasks=_i(info, "Number of Tasks"),
        submitted_at_ms=int(sub) if sub is not None else None,
        completed_at_ms=int(comp) if comp is not None else None,
        duration_ms=float(comp - sub) if sub is not None and comp is not None else None,
        failure_reason=info.get("Failure Reason"),
    )


def parse_lines(lines: Any) -> EventLog:
    """Parse an iterable of event-log lines. Malformed lines (e.g. a torn last line) are counted."""
    log = EventLog()
    job_start: dict[int, tuple[int, list[int]]] = {}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            log.skipped_lines += 1
            continue
        kind = ev.get("Event")
        if kind == "SparkListenerLogStart":
            log.spark_version = ev.get("Spark Version")
        elif kind == "SparkListenerApplicationStart":
            log.app_id = ev.get("App ID")
            log.app_name = ev.get("App Name")
            log.app_start_ms = ev.get("Timestamp")
        elif kind == "SparkListenerApplicationEnd":
            log.app_end_ms = ev.get("Timestamp")
        elif kind == "SparkListenerExecutorAdded":
            log.executors[str(ev.get("Executor ID"))] = str(ev.get("Executor Info", {}).get("Host", ""))
        elif kind == "SparkListenerTaskEnd":
            log.tasks.append(_task(ev))
        elif kind == "SparkListenerStageCompleted":
            log.stages.append(_stage(ev.get("Stage Info", {})))
        elif kind == "SparkListenerJobStart":
            job_start[int(ev["Job ID"])] = (
                int(ev.get("Submission Time", 0)),
                list(ev.get("Stage IDs", [])),
            )
        elif kind == "SparkListenerJobEnd":
            jid = int(ev["Job ID"])
            sub, stage_ids = job_start.pop(jid, (0, []))
            comp = ev.get("Completion Time")
            log.jobs.append(
                JobRow(
                    job_id=jid,
                    submitted_at_ms=sub,
                    completed_at_ms=comp,
                    duration_ms=float(comp - sub) if comp is not None else None,
                    result=str((ev.get("Job Result") or {}).get("Result", "")),
                    stage_ids=",".join(str(s) for s in stage_ids),
                )
            )
    for jid, (sub, stage_ids) in job_start.items():  # jobs that never ended (killed run)
        log.jobs.append(JobRow(jid, sub, None, None, "Unfinished", ",".join(str(s) for s in stage_ids)))
    log.jobs.sort(key=lambda j: j.job_id)
    return log


def parse(path: str | Path) -> EventLog:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_lines(fh)


def records(rows: list[Any]) -> list[dict[str, Any]]:
    """Dataclass rows as dictionaries (for DataFrames and the results store)."""
    return [asdict(r) for r in rows]


def columns(row_type: type) -> list[str]:
    return [f.name for f in fields(row_type)]
