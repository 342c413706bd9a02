"""Reading event logs: codec framing, names, torn and corrupt input, unknown events and fields.

The logs Spark itself wrote are checked in test_eventlog_fixtures.py; here the framing of each
codec is exercised on streams built with the same block libraries (several streams concatenated,
stored blocks, cut and damaged streams) and the parser on hand-made lines."""

from __future__ import annotations

import gzip
import io
import json
import struct
import tempfile
from pathlib import Path

import cramjam
import lzf
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from shufflelab import eventlog
from shufflelab.eventlog import compression
from shufflelab.eventlog.files import discover, split_name
from shufflelab.eventlog.summary import app_status

APP = [
    {"Event": "SparkListenerLogStart", "Spark Version": "4.3.0"},
    {"Event": "SparkListenerApplicationStart", "App Name": "demo", "App ID": "app-1", "Timestamp": 1000, "User": "u"},
    {
        "Event": "SparkListenerExecutorAdded",
        "Timestamp": 1100,
        "Executor ID": "1",
        "Executor Info": {"Host": "h1", "Total Cores": 4},
    },  # fmt: skip
    {
        "Event": "SparkListenerJobStart",
        "Job ID": 0,
        "Submission Time": 1200,
        "Stage IDs": [0],
        "Properties": {"spark.sql.execution.id": "0"},
    },  # fmt: skip
    *(
        {
            "Event": "SparkListenerTaskEnd",
            "Stage ID": 0,
            "Stage Attempt ID": 0,
            "Task End Reason": {"Reason": "Success"},
            "Task Info": {
                "Task ID": i,
                "Index": i,
                "Attempt": 0,
                "Launch Time": 1200,
                "Finish Time": 1300,
                "Executor ID": "1",
                "Host": "h1",
            },
            "Task Metrics": {
                "Executor CPU Time": 50_000_000,
                "Executor Run Time": 90,
                "Shuffle Read Metrics": {"Remote Bytes Read": 10, "Fetch Wait Time": 3},
            },
        }
        for i in range(300)
    ),  # fmt: skip
    {
        "Event": "SparkListenerStageCompleted",
        "Stage Info": {
            "Stage ID": 0,
            "Stage Attempt ID": 0,
            "Stage Name": "s",
            "Number of Tasks": 300,
            "Submission Time": 1200,
            "Completion Time": 1300,
            "Parent IDs": [],
        },
    },  # fmt: skip
    {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": 1400, "Job Result": {"Result": "JobSucceeded"}},
    {"Event": "SparkListenerExecutorRemoved", "Timestamp": 1500, "Executor ID": "1", "Removed Reason": "idle"},
    {"Event": "SparkListenerApplicationEnd", "Timestamp": 1600},
]
TEXT = b"".join(json.dumps(e).encode() + b"\n" for e in APP)


def _lz4_stream(data: bytes, block: int = 4096) -> bytes:
    out = []
    for i in range(0, len(data), block):
        chunk = data[i : i + block]
        comp = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if i // block % 3 == 2:  # lz4-java stores a block it cannot shrink: method 0x10
            out.append(b"LZ4Block" + bytes([0x10]) + struct.pack("<iii", len(chunk), len(chunk), 0) + chunk)
        else:
            out.append(b"LZ4Block" + bytes([0x20]) + struct.pack("<iii", len(comp), len(chunk), 0) + comp)
    out.append(b"LZ4Block" + bytes([0x10]) + struct.pack("<iii", 0, 0, 0))  # end mark
    return b"".join(out)


def _snappy_stream(data: bytes, block: int = 4096) -> bytes:
    out = [b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)]
    for i in range(0, len(data), block):
        comp = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out.append(struct.pack(">i", len(comp)) + comp)
    return b"".join(out)


def _lzf_stream(data: bytes, block: int = 4096) -> bytes:
    out = []
    for i in range(0, len(data), block):
        chunk = data[i : i + block]
        comp = lzf.compress(chunk)
        if comp is None or i // block % 4 == 3:
            out.append(b"ZV\x00" + struct.pack(">H", len(chunk)) + chunk)
        else:
            out.append(b"ZV\x01" + struct.pack(">HH", len(comp), len(chunk)) + comp)
    return b"".join(out)


def _zstd_stream(data: bytes) -> bytes:
    # one frame per "flush", as zstd-jni with setCloseFrameOnFlush(true) writes
    c = zstandard.ZstdCompressor()
    lines = data.split(b"\n")[:-1]
    return b"".join(c.compress(b"\n".join(lines[i : i + 50]) + b"\n") for i in range(0, len(lines), 50))


ENCODERS = {
    "zstd": _zstd_stream,
    "lz4": _lz4_stream,
    "snappy": _snappy_stream,
    "lzf": _lzf_stream,
    "gzip": gzip.compress,
}


def _decode(blob: bytes, codec: str) -> bytes:
    return b"".join(compression.decompress(io.BytesIO(blob), codec, "f"))


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_each_codec_round_trips_and_two_streams_concatenate(codec: str) -> None:
    blob = ENCODERS[codec](TEXT)
    assert compression.sniff(blob[:16]) == codec
    assert _decode(blob, codec) == TEXT
    assert _decode(blob + ENCODERS[codec](TEXT), codec) == TEXT + TEXT


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_a_cut_stream_yields_what_it_has_then_says_truncated(codec: str) -> None:
    blob = ENCODERS[codec](TEXT)
    cut = blob[: len(blob) // 2]
    got = []
    with pytest.raises(compression.TruncatedLog, match=f"f: {codec} stream ends inside"):
        for chunk in compression.decompress(io.BytesIO(cut), codec, "f"):
            got.append(chunk)
    assert got and TEXT.startswith(b"".join(got))


@pytest.mark.parametrize("codec", ["zstd", "lz4", "snappy", "lzf"])
def test_damaged_bytes_are_a_corrupt_log_naming_the_file(codec: str) -> None:
    blob = bytearray(ENCODERS[codec](TEXT))
    blob[0:2] = b"\x00\x07"  # the first header / magic
    with pytest.raises(compression.LogReadError, match=r"^f: "):
        _decode(bytes(blob), codec)


def test_unknown_codec_is_named() -> None:
    with pytest.raises(compression.UnknownCodec, match="unknown event-log codec 'brotli'"):
        compression.decompress(io.BytesIO(b""), "brotli", "f")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("app-20240101000000-0001", ("app-20240101000000-0001", None, False, False)),
        ("local-1700000000000.zstd.inprogress", ("local-1700000000000", "zstd", True, False)),
        ("application_1700000000000_0001_1.lz4", ("application_1700000000000_0001_1", "lz4", False, False)),
        ("events_3_app-1.zstd.compact", ("events_3_app-1", "zstd", False, True)),
    ],
)
def test_log_names(name: str, expected: tuple[str, str | None, bool, bool]) -> None:
    assert split_name(name) == expected


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("codec", ["zstd", "lz4", "snappy", "lzf"])
def test_parse_a_compressed_file_by_its_name_and_by_its_bytes(tmp_path: Path, codec: str) -> None:
    blob = ENCODERS[codec](TEXT)
    for name in (f"app-1.{codec}", "app-1"):  # the suffix, or sniffed from the magic bytes
        log = eventlog.parse(_write(tmp_path / codec / name, blob))
        assert (len(log.tasks), len(log.stages), len(log.jobs)) == (300, 1, 1)
        assert log.problems == []


def test_rolling_directory_reads_files_in_index_order_from_the_last_compacted(tmp_path: Path) -> None:
    lines = TEXT.split(b"\n")[:-1]
    d = tmp_path / "eventlog_v2_app-1"
    # events_1 was compacted into events_2.compact (a real compactor keeps a subset; here all of it)
    _write(d / "events_1_app-1.zstd", _zstd_stream(b"garbage that must not be read\n"))
    _write(d / "events_2_app-1.zstd.compact", _zstd_stream(b"\n".join(lines[:100]) + b"\n"))
    _write(d / "events_10_app-1.lz4", _lz4_stream(b"\n".join(lines[200:]) + b"\n"))
    _write(d / "events_3_app-1", b"\n".join(lines[100:200]) + b"\n")
    _write(d / "appstatus_app-1", b"")
    log = eventlog.parse(d)
    assert (len(log.tasks), len(log.jobs), log.app_end_ms) == (300, 1, 1600)
    assert [t.task_id for t in log.tasks] == list(range(300))  # index order: 2, 3, 10
    assert log.problems == [] and log.skipped_lines == 0


def test_in_progress_torn_last_line_is_tolerated_and_reported(tmp_path: Path) -> None:
    cut = TEXT[: TEXT.index(b'"Task ID": 150') + 5]
    f = _write(tmp_path / "app-1.inprogress", cut)
    res = eventlog.read_source(discover([f])[0][0])
    log = res.log
    assert len(log.tasks) == 150 and log.truncated_last_line and not res.partial  # tasks 0..149 whole
    assert log.jobs[0].result == "Unfinished"
    assert any("last line is incomplete" in p and str(f) in p for p in log.problems)
    assert any("still running or was killed" in p for p in log.problems)


def test_a_finished_log_cut_short_is_partial(tmp_path: Path) -> None:
    blob = _zstd_stream(TEXT)
    f = _write(tmp_path / "app-1.zstd", blob[: len(blob) * 2 // 3])
    res = eventlog.read_source(discover([f])[0][0])
    assert res.partial and 0 < len(res.log.tasks) < 300
    assert any(p.startswith(f"{f}: zstd stream ends inside a frame") for p in res.log.problems)


def test_unknown_events_and_fields_are_counted_not_fatal() -> None:
    lines = [json.dumps(e) for e in APP]
    lines.insert(3, json.dumps({"Event": "SparkListenerFromTheFuture", "x": 1}))
    lines.insert(3, json.dumps({"Event": "SparkListenerFromTheFuture", "x": 2}))
    task = dict(APP[5])
    task["Task Info"] = {**task["Task Info"], "New Field": 1}
    task["Brand New"] = True
    lines.insert(6, json.dumps(task))
    log = eventlog.parse_lines(lines)
    assert log.unknown_events == {"SparkListenerFromTheFuture": 2}
    assert log.unknown_fields == {"SparkListenerTaskEnd.Brand New": 1, "SparkListenerTaskEnd.Task Info.New Field": 1}
    assert len(log.tasks) == 301


def test_rows_and_totals() -> None:
    log = eventlog.parse_lines(TEXT.split(b"\n"))
    assert log.executor_rows == [eventlog.ExecutorRow("1", "h1", 4, 1100, 1500, "idle", None)]
    assert log.jobs[0].sql_execution_id == 0
    assert log.totals.n_tasks == 300 and log.totals.remote_bytes == 3000
    assert log.totals.executor_cpu_ms == pytest.approx(300 * 50.0)
    assert log.tasks[0].executor_cpu_ms == 50.0  # ns -> ms


def test_not_a_spark_log_and_empty_inputs_are_named(tmp_path: Path) -> None:
    f = _write(tmp_path / "data.json", b'{"a": 1}\n{"b": 2}\n')
    res = eventlog.read_source(discover([f])[0][0])
    assert res.nothing_read and res.log.problems == [f"{f}: not a Spark event log (no line is a Spark listener event)"]
    (tmp_path / "empty").mkdir()
    sources, problems = discover([tmp_path / "empty", tmp_path / "missing"])
    assert sources == []
    assert problems == [
        f"{tmp_path / 'empty'}: no event logs in this directory",
        f"{tmp_path / 'missing'}: no such file or directory",
    ]
    g = _write(tmp_path / "app-2.brotli", b"\x8b\x01\x02binary")
    res = eventlog.read_source(discover([g])[0][0])
    assert (
        res.nothing_read and "unknown event-log codec 'brotli'" in res.log.problems[0] and str(g) in res.log.problems[0]
    )


def test_a_line_longer_than_many_chunks_is_read_whole() -> None:
    big = {"Event": "SparkListenerEnvironmentUpdate", "Spark Properties": {"spark.master": "x" * 3_000_000}}
    text = json.dumps(big).encode() + b"\n" + TEXT
    p = eventlog.Parser()
    p.feed_stream((text[i : i + 1000] for i in range(0, len(text), 1000)), "f")
    log = p.finish()
    assert log.spark_conf == {"spark.master": "x" * 3_000_000} and len(log.tasks) == 300 and log.problems == []


# -- a line torn inside a log (issue 31, item 1) ------------------------------------------------------

PLAIN_43 = Path(__file__).resolve().parents[1] / "fixtures" / "eventlogs" / "spark-4.3" / "plain"


def _torn(text: bytes, index: int, keep: int) -> bytes:
    """``text`` with its line ``index`` cut to its first ``keep`` bytes (the newline after it kept)."""
    lines = text.split(b"\n")
    lines[index] = lines[index][:keep]
    return b"\n".join(lines)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_line_torn_anywhere_inside_a_real_log_is_counted_reported_and_partial(data: st.DataObject) -> None:
    (src_file,) = PLAIN_43.iterdir()
    text = src_file.read_bytes()
    lines = text.split(b"\n")
    index = data.draw(st.sampled_from([i for i, x in enumerate(lines) if x]), label="line")
    keep = data.draw(st.integers(1, len(lines[index]) - 1), label="bytes kept")
    with tempfile.TemporaryDirectory() as d:
        f = _write(Path(d) / src_file.name, _torn(text, index, keep))
        res = eventlog.read_source(discover([f])[0][0])
    log = res.log
    assert res.partial and log.damaged_lines == 1, log.problems
    (problem,) = [p for p in log.problems if "could not be decoded" in p]
    assert problem.startswith(f"{f}: 1 line inside the log")
    status, cause = app_status(log, res.partial)
    assert status == "partial" and cause == problem
    kind = lines[index][10 : lines[index].find(b'"', 10)].decode()
    if keep > 10 + len(kind) + 1:  # the event's name is whole: the problem names it
        assert kind in problem


def test_a_torn_job_end_is_partial_not_failed_and_a_torn_stage_end_is_named() -> None:
    lines = TEXT.split(b"\n")
    job_end = next(i for i, x in enumerate(lines) if x.startswith(b'{"Event": "SparkListenerJobEnd"'))
    stage_end = next(i for i, x in enumerate(lines) if x.startswith(b'{"Event": "SparkListenerStageCompleted"'))
    # json.dumps writes '": "': the parser's fast prefix does not apply, every line is decoded
    log = eventlog.parse_lines(_torn(TEXT, job_end, 60).split(b"\n"), "app-1")
    assert app_status(log, bool(log.damaged_lines))[0] == "partial"
    assert [j.result for j in log.jobs] == ["Unknown"]  # not "Unfinished", and the application is not failed
    assert log.problems == [
        "app-1: 1 line inside the log could not be decoded (torn or damaged JSON) and was left out: "
        "SparkListenerJobEnd (job 0: how the job ended is unknown)"
    ]
    log = eventlog.parse_lines(_torn(TEXT, stage_end, 90).split(b"\n"), "app-1")
    assert log.stages == [] and len(log.tasks) == 300 and log.damaged_events == {"SparkListenerStageCompleted": 1}
    assert "SparkListenerStageCompleted (stage 0: its stage row is missing, its tasks are kept)" in log.problems[0]


def test_a_torn_last_line_of_lines_is_not_damage() -> None:
    log = eventlog.parse_lines(TEXT.split(b"\n")[:-1][:-1] + [TEXT.split(b"\n")[-2][:30]])
    assert log.truncated_last_line and log.damaged_lines == 0 and log.problems == []
