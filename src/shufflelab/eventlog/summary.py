"""One application's ``apps`` row and its status, from a parsed log (shared by the lab's runner
and ``shufflelab analyze``; computed from running totals, so no task rows are needed)."""

from __future__ import annotations

from typing import Any

from shufflelab.eventlog.model import EventLog


def peak_cores(log: EventLog) -> int | None:
    """The most task slots (executor cores) alive at once, from executor added/removed events."""
    events: list[tuple[int, int]] = []
    for e in log.executor_rows:
        if e.total_cores is None:
            continue
        events.append((e.added_at_ms if e.added_at_ms is not None else -1, e.total_cores))
        if e.removed_at_ms is not None:
            events.append((e.removed_at_ms, -e.total_cores))
    if not events:
        return None
    now = peak = 0
    for _, d in sorted(events, key=lambda x: (x[0], x[1])):  # a removal before an addition at the same ms
        now += d
        peak = max(peak, now)
    return peak


def app_status(log: EventLog, partial: bool) -> tuple[str, str | None]:
    """``ok`` (ended, every job succeeded), ``failed`` (a job failed or a non-zero exit code),
    ``incomplete`` (no end: still running or killed) or ``partial`` (part of the log could not be
    read), with the cause."""
    if partial:
        return "partial", next((p for p in log.problems if "in-progress log" not in p), "part of the log is unreadable")
    if log.app_end_ms is None:
        return "incomplete", "no SparkListenerApplicationEnd: the application was still running or was killed"
    bad = [j for j in log.jobs if j.result != "JobSucceeded"]
    if bad:
        j = bad[0]
        why = log.job_errors.get(j.job_id)
        return "failed", f"job {j.job_id}: {j.result}" + (f": {why}" if why else "")
    if log.exit_code:
        return "failed", f"the application exited with code {log.exit_code}"
    return "ok", None


def app_row(log: EventLog, status: str, cause: str | None, app_index: int = 0) -> dict[str, Any]:
    """The ``apps`` table row of one application."""
    t = log.totals
    span = log.workload_span_ms()
    return {
        "app_index": app_index,
        "app_id": log.app_id,
        "status": status,
        "cause": cause[:500] if cause else None,
        "cores": peak_cores(log),
        "job_time_s": span / 1000.0 if span is not None else None,
        "session_s": None,
        "first_job_at_ms": log.first_job_at_ms(),
        "last_job_end_at_ms": log.last_job_end_at_ms(),
        "n_tasks": t.n_tasks,
        "executor_cpu_s": t.executor_cpu_ms / 1000.0,
        "executor_run_s": t.executor_run_ms / 1000.0,
        "fetch_wait_s": t.fetch_wait_ms / 1000.0,
        "remote_bytes_read": t.remote_bytes,
        "shuffle_bytes_written": t.shuffle_write_bytes,
    }
