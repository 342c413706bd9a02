"""Parses an event log recorded from a real shufflelab run (sort-aggregate, 3 workers, UDP 75 %)."""

from __future__ import annotations

import gzip

from conftest import FIXTURES
from shufflelab import eventlog


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
