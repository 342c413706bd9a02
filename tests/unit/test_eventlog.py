"""Parses an event log recorded from a real shufflelab run (sort-aggregate, 3 workers, UDP 75 %)."""

from __future__ import annotations

import gzip

from conftest import FIXTURES
from shufflelab import eventlog
from shufflelab.eventlog.summary import app_row


def _log() -> eventlog.EventLog:
    with gzip.open(FIXTURES / "eventlog-sort-aggregate-udp75.jsonl.gz", "rt") as fh:
        return eventlog.parse_lines(fh)


def test_counts_and_identity() -> None:
    log = _log()
    assert log.app_id == "app-20261123002924-0001"
    assert log.spark_version == "4.3.0"
    assert len(log.jobs) == 5 and log.all_jobs_succeeded()
    assert len(log.tasks) == 88
    assert len(log.executors) == 3
    assert {t.host for t in log.tasks} == set(log.executors.values())


def test_units_are_normalised() -> None:
    log = _log()
    for t in log.tasks:
        assert t.successful
        assert t.finish_at_ms >= t.launch_at_ms
        assert t.duration_ms == t.finish_at_ms - t.launch_at_ms
        # CPU time came in ns and is now ms: never above run time (plus rounding of ms fields)
        assert t.executor_cpu_ms <= t.executor_run_ms + 1.0
        assert t.shuffle_write_ms <= t.executor_run_ms + 1.0
    assert 10_000 < sum(t.executor_cpu_ms for t in log.tasks) < 30_000


def test_shuffle_bytes_balance() -> None:
    log = _log()
    written = sum(t.shuffle_write_bytes for t in log.tasks)
    read = sum(t.remote_bytes + t.local_bytes for t in log.tasks)
    assert written == 140_240_960
    assert sum(t.remote_bytes for t in log.tasks) == 93_225_920
    assert read == written  # every byte written by maps is read once by reduces


def test_workload_span_and_stages() -> None:
    log = _log()
    assert log.workload_span_ms() == 102_048.0
    longest = max(log.stages, key=lambda s: s.duration_ms or 0)
    assert longest.num_tasks == 12 and (longest.duration_ms or 0) > 70_000


def test_torn_and_unfinished_logs() -> None:
    lines = [
        '{"Event":"SparkListenerJobStart","Job ID":0,"Submission Time":1000,"Stage IDs":[0]}',
        '{"Event":"SparkListenerTaskEnd","Stage ID":0,"Task Info":{"Task ID":1,"Launch Ti',
    ]
    log = eventlog.parse_lines(lines)
    assert log.skipped_lines == 1
    assert log.jobs[0].result == "Unfinished" and log.jobs[0].completed_at_ms is None
    assert log.workload_span_ms() is None and not log.all_jobs_succeeded()


def test_old_spark_zero_and_negative_times_are_missing_not_epoch() -> None:
    # Spark 1.x writes 0 (or -1) for a time it did not know
    lines = [
        '{"Event":"SparkListenerApplicationStart","App Name":"old","App ID":"app-1","Timestamp":0}',
        '{"Event":"SparkListenerJobStart","Job ID":0,"Submission Time":0,"Stage IDs":[0]}',
        '{"Event":"SparkListenerStageCompleted","Stage Info":{"Stage ID":0,"Submission Time":-1,'
        '"Completion Time":0,"Number of Tasks":1}}',
        '{"Event":"SparkListenerJobEnd","Job ID":0,"Completion Time":0,"Job Result":{"Result":"JobSucceeded"}}',
        '{"Event":"SparkListenerJobStart","Job ID":1,"Stage IDs":[1]}',  # no submission time at all
        '{"Event":"SparkListenerJobEnd","Job ID":1,"Completion Time":5000,"Job Result":{"Result":"JobSucceeded"}}',
        '{"Event":"SparkListenerApplicationEnd","Timestamp":-1}',
    ]
    log = eventlog.parse_lines(lines)
    assert [(j.submitted_at_ms, j.completed_at_ms, j.duration_ms) for j in log.jobs] == [
        (None, None, None),
        (None, 5000, None),
    ]
    assert (log.stages[0].submitted_at_ms, log.stages[0].completed_at_ms) == (None, None)
    assert (log.app_start_ms, log.app_end_ms) == (None, None)
    assert log.workload_span_ms() is None  # not 5000 - 0
    row = app_row(log, "ok", None)
    assert row["job_time_s"] is None and row["first_job_at_ms"] is None and row["last_job_end_at_ms"] == 5000
