"""``SparkListenerTaskEnd`` -- most of a big log's bytes -- decoded straight into typed structs.

msgspec decodes only the fields declared here and skips the rest (accumulables, executor metrics)
without building Python objects for them: about three times faster than decoding the whole event
into dictionaries. A line whose fields have unexpected types raises ``msgspec.ValidationError``;
the parser then falls back to the dictionary path for that line.
"""

from __future__ import annotations

from typing import Any

import msgspec

from shufflelab.eventlog.model import NS_PER_MS


def _struct(name: str, fields: list[tuple[str, str, Any, Any]]) -> Any:
    """A struct whose attributes are ``attr`` and whose JSON keys are Spark's names."""
    return msgspec.defstruct(
        name,
        [(attr, typ, default) for attr, _, typ, default in fields],
        rename={attr: key for attr, key, _, _ in fields},
    )


Reason = _struct("Reason", [("reason", "Reason", str, "")])
Info = _struct(
    "Info",
    [
        ("task_id", "Task ID", int, 0),
        ("index", "Index", int, 0),
        ("attempt", "Attempt", int, 0),
        ("launch", "Launch Time", int, 0),
        ("finish", "Finish Time", int, 0),
        ("executor", "Executor ID", str, ""),
        ("host", "Host", str, ""),
        ("speculative", "Speculative", bool, False),
        ("failed", "Failed", bool, False),
    ],
)
ShuffleRead = _struct(
    "ShuffleRead",
    [
        ("remote_blocks", "Remote Blocks Fetched", int, 0),
        ("local_blocks", "Local Blocks Fetched", int, 0),
        ("fetch_wait", "Fetch Wait Time", int, 0),
        ("remote_bytes", "Remote Bytes Read", int, 0),
        ("remote_to_disk", "Remote Bytes Read To Disk", int, 0),
        ("local_bytes", "Local Bytes Read", int, 0),
        ("records", "Total Records Read", int, 0),
        ("reqs_duration", "Remote Requests Duration", int, 0),
    ],
)
ShuffleWrite = _struct(
    "ShuffleWrite",
    [
        ("bytes", "Shuffle Bytes Written", int, 0),
        ("time", "Shuffle Write Time", int, 0),
        ("records", "Shuffle Records Written", int, 0),
    ],
)
Input = _struct("Input", [("bytes", "Bytes Read", int, 0), ("records", "Records Read", int, 0)])
Metrics = _struct(
    "Metrics",
    [
        ("deser", "Executor Deserialize Time", int, 0),
        ("deser_cpu", "Executor Deserialize CPU Time", int, 0),
        ("run", "Executor Run Time", int, 0),
        ("cpu", "Executor CPU Time", int, 0),
        ("result_size", "Result Size", int, 0),
        ("gc", "JVM GC Time", int, 0),
        ("result_ser", "Result Serialization Time", int, 0),
        ("mem_spill", "Memory Bytes Spilled", int, 0),
        ("disk_spill", "Disk Bytes Spilled", int, 0),
        ("sr", "Shuffle Read Metrics", ShuffleRead | None, None),
        ("sw", "Shuffle Write Metrics", ShuffleWrite | None, None),
        ("inp", "Input Metrics", Input | None, None),
    ],
)
TaskEnd = _struct(
    "TaskEnd",
    [
        ("stage", "Stage ID", int, 0),
        ("stage_attempt", "Stage Attempt ID", int, 0),
        ("reason", "Task End Reason", Reason | None, None),
        ("info", "Task Info", Info | None, None),
        ("metrics", "Task Metrics", Metrics | None, None),
    ],
)

_decode = msgspec.json.Decoder(TaskEnd).decode
_NO_INFO = Info()
_NO_METRICS = Metrics()
_NO_SR = ShuffleRead()
_NO_SW = ShuffleWrite()
_NO_IN = Input()

DecodeError = (msgspec.ValidationError, msgspec.DecodeError)


def row(line: bytes) -> tuple[Any, ...]:
    """The task row (:class:`~shufflelab.eventlog.model.TaskRow` field order) of one task-end line."""
    ev = _decode(line)
    info = ev.info or _NO_INFO
    m = ev.metrics or _NO_METRICS
    sr = m.sr or _NO_SR
    sw = m.sw or _NO_SW
    inp = m.inp or _NO_IN
    reason = ev.reason.reason if ev.reason is not None else ""
    launch, finish = info.launch, info.finish
    return (
        ev.stage,
        ev.stage_attempt,
        info.task_id,
        info.index,
        info.attempt,
        info.executor,
        info.host,
        launch,
        finish,
        float(finish - launch) if finish else 0.0,
        reason == "Success" and not info.failed,
        reason,
        float(m.run),
        m.cpu / NS_PER_MS,
        float(m.deser),
        m.deser_cpu / NS_PER_MS,
        float(m.gc),
        float(m.result_ser),
        m.result_size,
        m.mem_spill,
        m.disk_spill,
        inp.bytes,
        inp.records,
        float(sr.fetch_wait),
        sr.remote_blocks,
        sr.local_blocks,
        sr.remote_bytes,
        sr.remote_to_disk,
        sr.local_bytes,
        sr.records,
        float(sr.reqs_duration),
        sw.bytes,
        sw.records,
        sw.time / NS_PER_MS,
        info.speculative,
    )


_decode_many = msgspec.json.Decoder(list[TaskEnd]).decode  # type: ignore[valid-type]


def decode_many(lines: list[bytes]) -> list[Any]:
    """Task-end lines decoded in one call (as a JSON array); raises like :func:`row` when any line
    does not fit."""
    return _decode_many(b"[" + b",".join(lines) + b"]")


def decode_one(line: bytes) -> Any:
    return _decode(line)


def columns(events: list[Any]) -> dict[str, list[Any]]:
    """Decoded task ends as columns in :class:`~shufflelab.eventlog.model.TaskRow` field order (one
    comprehension per column: much cheaper than a tuple per task)."""
    infos = [e.info or _NO_INFO for e in events]
    ms = [e.metrics or _NO_METRICS for e in events]
    srs = [m.sr or _NO_SR for m in ms]
    sws = [m.sw or _NO_SW for m in ms]
    inps = [m.inp or _NO_IN for m in ms]
    reasons = [e.reason.reason if e.reason is not None else "" for e in events]
    launch = [i.launch for i in infos]
    finish = [i.finish for i in infos]
    return {
        "stage_id": [e.stage for e in events],
        "stage_attempt": [e.stage_attempt for e in events],
        "task_id": [i.task_id for i in infos],
        "task_index": [i.index for i in infos],
        "attempt": [i.attempt for i in infos],
        "executor_id": [i.executor for i in infos],
        "host": [i.host for i in infos],
        "launch_at_ms": launch,
        "finish_at_ms": finish,
        "duration_ms": [float(f - s) if f else 0.0 for s, f in zip(launch, finish, strict=True)],
        "successful": [r == "Success" and not i.failed for r, i in zip(reasons, infos, strict=True)],
        "end_reason": reasons,
        "executor_run_ms": [float(m.run) for m in ms],
        "executor_cpu_ms": [m.cpu / NS_PER_MS for m in ms],
        "deserialize_ms": [float(m.deser) for m in ms],
        "deserialize_cpu_ms": [m.deser_cpu / NS_PER_MS for m in ms],
        "gc_ms": [float(m.gc) for m in ms],
        "result_serialization_ms": [float(m.result_ser) for m in ms],
        "result_bytes": [m.result_size for m in ms],
        "memory_spilled_bytes": [m.mem_spill for m in ms],
        "disk_spilled_bytes": [m.disk_spill for m in ms],
        "input_bytes": [x.bytes for x in inps],
        "input_records": [x.records for x in inps],
        "fetch_wait_ms": [float(x.fetch_wait) for x in srs],
        "remote_blocks": [x.remote_blocks for x in srs],
        "local_blocks": [x.local_blocks for x in srs],
        "remote_bytes": [x.remote_bytes for x in srs],
        "remote_bytes_to_disk": [x.remote_to_disk for x in srs],
        "local_bytes": [x.local_bytes for x in srs],
        "shuffle_records_read": [x.records for x in srs],
        "remote_reqs_duration_ms": [float(x.reqs_duration) for x in srs],
        "shuffle_write_bytes": [x.bytes for x in sws],
        "shuffle_write_records": [x.records for x in sws],
        "shuffle_write_ms": [x.time / NS_PER_MS for x in sws],
        "speculative": [i.speculative for i in infos],
    }
