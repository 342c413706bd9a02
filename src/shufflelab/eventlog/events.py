"""Spark listener events -> rows, streamed line by line.

The parser reads each line's event name from its start (Spark writes ``{"Event":"<name>",...``)
and decodes the JSON only of the events it turns into rows; the others (task starts, block
manager and environment events, SQL plans, ...) are counted and passed over, which is most of the
bytes of a big log. Events and fields this version does not know (a newer Spark) are counted per
event type, never fatal. Task rows leave the parser in batches (``on_tasks``) so a log of any size
is read in bounded memory; everything else (stages, jobs, executors, SQL executions) is small and
kept.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from shufflelab.eventlog.batch import TASK_COLUMNS, TaskBatch
from shufflelab.eventlog.compression import LogReadError, TruncatedLog
from shufflelab.eventlog.model import (
    NS_PER_MS,
    EventLog,
    ExecutorRow,
    JobRow,
    SqlExecutionRow,
    StageRow,
    TaskRow,
)

try:  # a C parser: several times faster than json on task events
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is a dependency
    _loads = json.loads  # type: ignore[assignment]

try:  # the Rust core (crates/eventlogcore): chunks split and task ends decoded into columns
    import shufflelab_eventlogcore as RUST
except ImportError:  # pragma: no cover - built by scripts/setup.sh; without it the Python path reads
    RUST = None

_PREFIX = b'{"Event":"'
_TASK_END = b'{"Event":"SparkListenerTaskEnd",'
_TASK_START = b'{"Event":"SparkListenerTaskStart",'
_TASK_EVENTS = (_TASK_END, _TASK_START)
_SQL = "org.apache.spark.sql.execution.ui."

# Events Spark 3.x/4.x write that carry nothing the tables need: counted, not decoded.
PASSED_OVER = frozenset(
    {
        "SparkListenerTaskStart",
        "SparkListenerTaskGettingResult",
        "SparkListenerStageSubmitted",
        "SparkListenerBlockManagerAdded",
        "SparkListenerBlockManagerRemoved",
        "SparkListenerBlockUpdated",
        "SparkListenerUnpersistRDD",
        "SparkListenerResourceProfileAdded",
        "SparkListenerExecutorMetricsUpdate",
        "SparkListenerStageExecutorMetrics",
        "SparkListenerSpeculativeTaskSubmitted",
        "SparkListenerUnschedulableTaskSetAdded",
        "SparkListenerUnschedulableTaskSetRemoved",
        "SparkListenerMiscellaneousProcessAdded",
        "SparkListenerExecutorBlacklisted",
        "SparkListenerExecutorExcluded",
        "SparkListenerExecutorUnblacklisted",
        "SparkListenerExecutorUnexcluded",
        "SparkListenerExecutorBlacklistedForStage",
        "SparkListenerExecutorExcludedForStage",
        "SparkListenerNodeBlacklisted",
        "SparkListenerNodeExcluded",
        "SparkListenerNodeUnblacklisted",
        "SparkListenerNodeUnexcluded",
        "SparkListenerNodeBlacklistedForStage",
        "SparkListenerNodeExcludedForStage",
        _SQL + "SparkListenerSQLAdaptiveSQLMetricUpdates",
        _SQL + "SparkListenerDriverAccumUpdates",
        "org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent",
        "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent",
        "org.apache.spark.sql.streaming.StreamingQueryListener$QueryIdleEvent",
        "org.apache.spark.sql.streaming.StreamingQueryListener$QueryTerminatedEvent",
    }
)

# The fields each decoded event has in Spark 3.5 and 4.x; any other is counted as unknown.
KNOWN_FIELDS: dict[str, frozenset[str]] = {
    "SparkListenerLogStart": frozenset({"Event", "Spark Version"}),
    "SparkListenerApplicationStart": frozenset(
        {"Event", "App Name", "App ID", "Timestamp", "User", "App Attempt ID", "Driver Logs", "Driver Attributes"}
    ),
    "SparkListenerApplicationEnd": frozenset({"Event", "Timestamp", "ExitCode"}),
    "SparkListenerEnvironmentUpdate": frozenset(
        {
            "Event",
            "JVM Information",
            "Spark Properties",
            "Hadoop Properties",
            "System Properties",
            "Metrics Properties",
            "Classpath Entries",
            "Resource Profiles",
        }
    ),
    "SparkListenerExecutorAdded": frozenset({"Event", "Timestamp", "Executor ID", "Executor Info"}),
    "SparkListenerExecutorRemoved": frozenset({"Event", "Timestamp", "Executor ID", "Removed Reason"}),
    "SparkListenerTaskEnd": frozenset(
        {
            "Event",
            "Stage ID",
            "Stage Attempt ID",
            "Task Type",
            "Task End Reason",
            "Task Info",
            "Task Executor Metrics",
            "Task Metrics",
        }
    ),
    "SparkListenerTaskEnd.Task Info": frozenset(
        {
            "Task ID",
            "Index",
            "Attempt",
            "Partition ID",
            "Launch Time",
            "Executor ID",
            "Host",
            "Locality",
            "Speculative",
            "Getting Result Time",
            "Finish Time",
            "Failed",
            "Killed",
            "Accumulables",
        }
    ),
    "SparkListenerTaskEnd.Task Metrics": frozenset(
        {
            "Executor Deserialize Time",
            "Executor Deserialize CPU Time",
            "Executor Run Time",
            "Executor CPU Time",
            "Peak Execution Memory",
            "Peak On Heap Execution Memory",
            "Peak Off Heap Execution Memory",
            "Result Size",
            "JVM GC Time",
            "Result Serialization Time",
            "Memory Bytes Spilled",
            "Disk Bytes Spilled",
            "Shuffle Read Metrics",
            "Shuffle Write Metrics",
            "Input Metrics",
            "Output Metrics",
            "Updated Blocks",
        }
    ),
    "SparkListenerStageCompleted": frozenset({"Event", "Stage Info"}),
    "SparkListenerJobStart": frozenset(
        {"Event", "Job ID", "Submission Time", "Stage Infos", "Stage IDs", "Properties"}
    ),
    "SparkListenerJobEnd": frozenset({"Event", "Job ID", "Completion Time", "Job Result"}),
    _SQL + "SparkListenerSQLExecutionStart": frozenset(
        {
            "Event",
            "executionId",
            "rootExecutionId",
            "description",
            "details",
            "physicalPlanDescription",
            "sparkPlanInfo",
            "time",
            "modifiedConfigs",
            "jobTags",
            "jobGroupId",
            "queryId",
        }
    ),
    _SQL + "SparkListenerSQLExecutionEnd": frozenset({"Event", "executionId", "time", "errorMessage", "queryId"}),
}

# Spark settings kept with the application (they explain its schedule and shuffle).
KEPT_CONF = (
    "spark.master",
    "spark.submit.deployMode",
    "spark.executor.cores",
    "spark.executor.instances",
    "spark.executor.memory",
    "spark.task.cpus",
    "spark.default.parallelism",
    "spark.sql.shuffle.partitions",
    "spark.sql.adaptive.enabled",
    "spark.dynamicAllocation.enabled",
    "spark.dynamicAllocation.maxExecutors",
    "spark.speculation",
    "spark.shuffle.service.enabled",
    "spark.shuffle.compress",
    "spark.io.compression.codec",
    "spark.eventLog.compress",
    "spark.eventLog.compression.codec",
    "spark.eventLog.rolling.enabled",
)

# Task-end events whose fields are all checked against KNOWN_FIELDS: the first CHECK_FIRST and then
# one in CHECK_EVERY (the others are decoded into typed structs that skip unknown fields).
CHECK_FIRST = 1000
CHECK_EVERY = 1000


def _i(d: dict[str, Any], key: str) -> int:
    v = d.get(key, 0)
    return int(v) if v is not None else 0


def _opt_int(v: Any) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _time(v: Any) -> int | None:
    """A point in time (epoch ms) of an application, stage, job or SQL event; None when missing or
    not positive: old Spark (1.x) writes 0 or -1 for a time it did not know, which is no time."""
    t = _opt_int(v)
    return t if t is not None and t > 0 else None


_EMPTY: dict[str, Any] = {}

UNREADABLE_END = "Unknown"
"""A job's result when its SparkListenerJobEnd line could not be decoded (how it ended is unknown)."""

_EVENT_NAME = re.compile(rb'\{\s*"Event"\s*:\s*(?:"([^"]*)"|"?)')  # group 1: None when the name is cut
_ID_AFTER = {key: re.compile(re.escape(key) + rb"\s*(\d+)") for key in (b'"Stage ID":', b'"Job ID":')}
_ID_EVENTS = {
    "stage": frozenset({"SparkListenerStageCompleted", "SparkListenerStageSubmitted", "SparkListenerTaskEnd"}),
    "job": frozenset({"SparkListenerJobStart", "SparkListenerJobEnd"}),
}
# what a damaged line of these events loses (said in the problem)
_LOST = {
    "SparkListenerStageCompleted": ": its stage row is missing, its tasks are kept",
    "SparkListenerJobEnd": ": how the job ended is unknown",
    "SparkListenerJobStart": ": the job's submission time and stages are unknown",
    "SparkListenerTaskEnd": ": a task row is missing",
}


def _intact(line: bytes) -> bool:
    """Whether a line passed over without decoding is a whole JSON object. Cheap for the usual
    case (it ends in ``}`` with as many ``{`` as ``}``); otherwise decoded to be sure (a brace inside
    a string can unbalance a whole line). A torn line is a strict prefix of an object: the braces
    it opened are not all closed."""
    if line.endswith(b"}") and line.count(b"{") == line.count(b"}"):
        return True
    try:
        _loads(line)
    except ValueError:
        return False
    return True


class Parser:
    """Feed it lines (:meth:`feed_stream` for decompressed chunks), then :meth:`finish`.

    With ``on_tasks`` the task rows go there as columns (:class:`TaskRow` field name -> values),
    about ``batch`` rows at a time, with the log parsed so far; with ``on_batch`` instead, as a
    :class:`~shufflelab.eventlog.batch.TaskBatch` (which can write itself to CSV without making
    Python objects of the rows); without either they are collected as :class:`TaskRow` in
    ``log.tasks``.

    Task ends are decoded by the Rust core when it is installed (``shufflelab_eventlogcore``; the
    module attribute ``RUST``), else by the Python path (``taskend``); both give the same rows."""

    def __init__(
        self,
        on_tasks: Callable[[dict[str, list[Any]], EventLog], None] | None = None,
        batch: int = 10_000,
        *,
        on_batch: Callable[[TaskBatch, EventLog], None] | None = None,
    ) -> None:
        self.log = EventLog()
        self._on_tasks = on_tasks
        self._on_batch = on_batch
        self._core = RUST
        self._batch = batch
        self._pending: list[Any] = []  # segments: Rust TaskColumns or dictionaries of lists
        self._n_pending = 0
        self._job_start: dict[int, tuple[int | None, list[int], int | None]] = {}
        self._execs: dict[str, list[Any]] = {}
        self._sql: dict[int, dict[str, Any]] = {}
        self._task_starts = 0
        self._task_ends = 0
        self._damage: list[str] = []  # the current file's undecodable lines, described (reported per file)
        self._damaged_job_ends: set[int] = set()
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "SparkListenerLogStart": self._log_start,
            "SparkListenerApplicationStart": self._app_start,
            "SparkListenerApplicationEnd": self._app_end,
            "SparkListenerEnvironmentUpdate": self._environment,
            "SparkListenerExecutorAdded": self._executor_added,
            "SparkListenerExecutorRemoved": self._executor_removed,
            "SparkListenerTaskEnd": self._task_end,
            "SparkListenerStageCompleted": self._stage_completed,
            "SparkListenerJobStart": self._job_started,
            "SparkListenerJobEnd": self._job_ended,
            _SQL + "SparkListenerSQLExecutionStart": self._sql_start,
            _SQL + "SparkListenerSQLExecutionEnd": self._sql_end,
        }
        self._bhandlers = {k.encode(): v for k, v in self._handlers.items()}
        self._bpassed = {k.encode() for k in PASSED_OVER}

    # ------------------------------------------------------------------ reading

    def feed_stream(self, chunks: Iterable[bytes], name: str) -> bool:
        """Read one file's decompressed chunks. A read error is recorded as a problem naming the
        file and ends this file (what came before it is kept). Returns False when the file ended
        in a torn line or a truncated frame."""
        pieces: list[bytes] = []  # the start of a line that continues in the next chunk(s)
        log = self.log
        line_fn = self._line
        clean = True
        try:
            for chunk in chunks:
                log.bytes_read += len(chunk)
                if b"\n" not in chunk:  # inside a long line (a big SQL plan): no quadratic joins
                    pieces.append(chunk)
                    continue
                if pieces:
                    pieces.append(chunk)
                    chunk = b"".join(pieces)
                if self._core is not None:
                    last = self._rust_lines(chunk, line_fn)
                else:
                    lines = chunk.split(b"\n")
                    last = lines.pop()
                    self._lines(lines, line_fn)
                pieces = [last] if last else []
        except TruncatedLog as exc:
            log.problems.append(str(exc))
            clean = False
        except LogReadError as exc:
            log.problems.append(str(exc))
            clean = False
        rest = b"".join(pieces)
        if rest.strip() and not self._line(rest, True):
            log.truncated_last_line = True
            log.skipped_lines -= 1  # counted as torn, not as a malformed line
            if clean:
                log.problems.append(f"{name}: the last line is incomplete ({len(rest)} bytes; the log was cut)")
            clean = False
        self.report_damage(name)
        return clean

    def report_damage(self, name: str) -> None:
        """One problem naming ``name`` for the lines read since the last call that could not be
        decoded (a torn or damaged line inside the log, not its cut last line): how many, and the
        events they were, so a lost stage or job end is visible."""
        if not self._damage:
            return
        n = len(self._damage)
        kinds: dict[str, int] = {}
        for d in self._damage:
            kinds[d] = kinds.get(d, 0) + 1
        shown = ", ".join(k + (f" x{c}" if c > 1 else "") for k, c in list(kinds.items())[:8])
        more = f" and {len(kinds) - 8} more" if len(kinds) > 8 else ""
        self.log.problems.append(
            f"{name}: {n} line{'s' if n > 1 else ''} inside the log could not be decoded (torn or damaged "
            f"JSON) and {'were' if n > 1 else 'was'} left out: {shown}{more}"
        )
        self._damage = []

    def _damaged(self, line: bytes) -> None:
        """Count an undecodable line (not the cut last line) and describe it by the event its start
        names: a stage's or job's id where it can be read, and what the table loses."""
        log = self.log
        log.damaged_lines += 1
        event = "a line whose event cannot be read"
        what = ""
        m = _EVENT_NAME.match(line)
        if m is not None:
            event = m.group(1).decode("utf-8", errors="replace") if m.group(1) else "an event whose name is cut"
            for key, noun in ((b'"Stage ID":', "stage"), (b'"Job ID":', "job")):
                found = _ID_AFTER[key].search(line) if event in _ID_EVENTS[noun] else None
                if found is not None:
                    what = f"{noun} {int(found.group(1))}"
                    if event == "SparkListenerJobEnd":
                        self._damaged_job_ends.add(int(found.group(1)))
                    break
        log.damaged_events[event] += 1
        lost = _LOST.get(event, "")
        self._damage.append(event + (f" ({what}{lost})" if what else (f" ({lost[2:]})" if lost else "")))

    def _lines(self, lines: list[bytes], line_fn: Callable[[bytes, bool], bool]) -> None:
        """Whole lines of one chunk: task ends decoded together, task starts counted, every other
        event one by one (before the chunk's task ends, so the application is known first)."""
        task_ends = [x for x in lines if x.startswith(_TASK_END)]
        n_other = len(lines) - len(task_ends)
        if n_other:
            others = [x for x in lines if not x.startswith(_TASK_EVENTS)]
            starts = n_other - len(others)
            if starts:  # not decoded: checked to be whole (inline, the cheap part of _intact)
                odd = [
                    x
                    for x in lines
                    if x.startswith(_TASK_START) and not (x.endswith(b"}") and x.count(b"{") == x.count(b"}"))
                ]
                for line in odd:
                    if not _intact(line):
                        starts -= 1
                        self.log.lines += 1
                        self.log.skipped_lines += 1
                        self._damaged(line)
            self._task_starts += starts
            self.log.lines += starts
            self.log.events += starts
            for line in others:
                line_fn(line, False)
        if task_ends:
            self._task_lines(task_ends)

    def _rust_lines(self, chunk: bytes, line_fn: Callable[[bytes, bool], bool]) -> bytes:
        """:meth:`_lines` on the Rust core: the chunk split and its task ends decoded there, the
        same decisions taken here; returns what follows the last newline. A chunk whose task ends
        do not all fit the typed decoding has them read by the Python path (:meth:`_task_lines`)."""
        c = self._core.scan(chunk)  # type: ignore[union-attr]
        log = self.log
        starts = c.starts
        for line in c.odd_starts() if starts else ():  # not decoded: checked to be whole
            if not _intact(line):
                starts -= 1
                log.lines += 1
                log.skipped_lines += 1
                self._damaged(line)
        self._task_starts += starts
        log.lines += starts
        log.events += starts
        for line in c.others():
            line_fn(line, False)
        if c.n_ends:
            cols = c.columns()
            if cols is None:
                self._task_lines(c.end_lines())
            else:
                n = len(cols)
                log.lines += n
                log.events += n
                for i in _checked(self._task_ends, n):
                    keys = c.end_keys(i)
                    if keys is not None:  # (a decoded line is an object)
                        self._count_unknown(*keys)
                self._add_rust(cols)
        return c.last()  # type: ignore[no-any-return]

    def _task_lines(self, lines: list[bytes]) -> None:
        from shufflelab.eventlog import taskend  # (msgspec: imported when the Python path reads)

        log = self.log
        log.lines += len(lines)
        log.events += len(lines)
        for i in _checked(self._task_ends, len(lines)):
            try:
                ev = _loads(lines[i])
            except ValueError:
                continue
            if isinstance(ev, dict):
                self._check_task_fields(ev)
        try:
            events = taskend.decode_many(lines)
        except taskend.DecodeError:  # some line does not fit the typed decoder: one by one
            events = []
            for line in lines:
                try:
                    events.append(taskend.decode_one(line))
                except taskend.DecodeError:
                    try:
                        ev = _loads(line)
                    except ValueError:
                        log.skipped_lines += 1
                        log.events -= 1
                        self._damaged(line)
                        continue
                    self._add_task(self._task_row(ev, check=False))
        if events:
            self._add_columns(taskend.columns(events), len(events))

    def feed(self, line: bytes | str, last: bool = False) -> None:
        """One line (compatibility with line iterables); ``last``: the input's last line, which may
        be torn (an application still writing its log) without being damage."""
        if isinstance(line, str):
            line = line.encode("utf-8", errors="replace")
        self.log.bytes_read += len(line) + 1
        if line.strip() and not self._line(line.rstrip(b"\r\n"), last) and last:
            self.log.truncated_last_line = True

    def _line(self, line: bytes, tail: bool) -> bool:
        log = self.log
        log.lines += 1
        if line.startswith(_PREFIX):
            end = line.find(b'"', 10)
            kind = line[10:end]
            if kind == b"SparkListenerTaskEnd" and not tail:
                # the hot event: typed decoding; every CHECK_EVERY-th one (and the first ones) also
                # as a dictionary, to count fields this version does not know
                n = self._task_ends
                if n >= CHECK_FIRST and n % CHECK_EVERY:
                    row = self._core.task_row(line) if self._core is not None else None
                    if row is None:  # (the Rust core decodes no line the typed decoder would not)
                        from shufflelab.eventlog import taskend

                        with contextlib.suppress(*taskend.DecodeError):  # unexpected types: the dictionary path decides
                            row = taskend.row(line)
                    if row is not None:
                        log.events += 1
                        self._add_task(row)
                        return True
            handler = self._bhandlers.get(kind)
            if handler is None and not tail:
                if not _intact(line):  # passed over, but torn: not an event
                    log.skipped_lines += 1
                    self._damaged(line)
                    return False
                log.events += 1
                if kind == b"SparkListenerTaskStart":
                    self._task_starts += 1
                elif kind == b"org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate":
                    self._adaptive_update(line)
                elif kind not in self._bpassed:
                    log.unknown_events[kind.decode("utf-8", errors="replace")] += 1
                return True
        elif not line.strip():
            log.lines -= 1
            return True
        try:
            ev = _loads(line)
        except ValueError:
            log.skipped_lines += 1
            if not tail:
                self._damaged(line)
            return False
        if not isinstance(ev, dict) or not isinstance(ev.get("Event"), str):
            log.skipped_lines += 1  # JSON, but not a Spark event
            return True
        name = ev["Event"]
        log.events += 1
        h = self._handlers.get(name)
        if h is not None:
            known = KNOWN_FIELDS.get(name) if name != "SparkListenerTaskEnd" else None  # (its own check)
            if known is not None and not known.issuperset(ev):
                for k in ev.keys() - known:
                    log.unknown_fields[f"{name}.{k}"] += 1
            h(ev)
        elif name == "SparkListenerTaskStart":
            self._task_starts += 1
        elif name == _SQL + "SparkListenerSQLAdaptiveExecutionUpdate":
            self._count_adaptive(_opt_int(ev.get("executionId")))
        elif name not in PASSED_OVER:
            log.unknown_events[name] += 1
        return True

    # ------------------------------------------------------------------ events

    def _log_start(self, ev: dict[str, Any]) -> None:
        self.log.spark_version = ev.get("Spark Version")

    def _app_start(self, ev: dict[str, Any]) -> None:
        log = self.log
        log.app_id = ev.get("App ID")
        log.app_name = ev.get("App Name")
        log.app_start_ms = _time(ev.get("Timestamp"))
        log.user = ev.get("User")
        attempt = ev.get("App Attempt ID")
        log.app_attempt_id = str(attempt) if attempt is not None else None

    def _app_end(self, ev: dict[str, Any]) -> None:
        self.log.app_end_ms = _time(ev.get("Timestamp"))
        self.log.exit_code = _opt_int(ev.get("ExitCode"))

    def _environment(self, ev: dict[str, Any]) -> None:
        props = ev.get("Spark Properties") or {}
        if isinstance(props, list):  # very old logs: [[key, value], ...]
            props = {p[0]: p[1] for p in props if isinstance(p, list) and len(p) == 2}
        self.log.spark_conf = {k: str(props[k]) for k in KEPT_CONF if k in props}

    def _executor_added(self, ev: dict[str, Any]) -> None:
        eid = str(ev.get("Executor ID"))
        info = ev.get("Executor Info") or _EMPTY
        host = str(info.get("Host", ""))
        self.log.executors[eid] = host
        row = self._execs.setdefault(eid, [eid, host, None, None, None, None, None])
        row[1] = host
        row[2] = _opt_int(info.get("Total Cores"))
        row[3] = _time(ev.get("Timestamp"))
        row[6] = _opt_int(info.get("Resource Profile Id"))

    def _executor_removed(self, ev: dict[str, Any]) -> None:
        eid = str(ev.get("Executor ID"))
        row = self._execs.setdefault(eid, [eid, "", None, None, None, None, None])
        row[4] = _time(ev.get("Timestamp"))
        row[5] = str(ev.get("Removed Reason", ""))[:1000]

    def _task_end(self, ev: dict[str, Any]) -> None:
        self._add_task(self._task_row(ev))

    def _check_task_fields(self, ev: dict[str, Any]) -> None:
        """Count the fields of a task end this version does not know (top level, task info, metrics)."""
        info, metrics = ev.get("Task Info"), ev.get("Task Metrics")
        self._count_unknown(
            ev, info if isinstance(info, dict) else None, metrics if isinstance(metrics, dict) else None
        )

    def _count_unknown(self, top: Any, info: Any, metrics: Any) -> None:
        """The fields (keys) of a task end's top level, task info and metrics (None: not an
        object) that this version does not know, counted."""
        log = self.log
        log.task_ends_checked += 1
        for key, keys in (("", top), ("Task Info.", info), ("Task Metrics.", metrics)):
            if keys is None:
                continue
            d = keys if isinstance(keys, dict) else dict.fromkeys(keys)  # (key order as a dictionary's)
            known = KNOWN_FIELDS["SparkListenerTaskEnd" + ("." + key[:-1] if key else "")]
            if not known.issuperset(d):
                for k in d.keys() - known:
                    log.unknown_fields[f"SparkListenerTaskEnd.{key}{k}"] += 1

    def _task_row(self, ev: dict[str, Any], check: bool = True) -> tuple[Any, ...]:
        if check:
            self._check_task_fields(ev)
        info: dict[str, Any] = ev.get("Task Info") or _EMPTY
        m: dict[str, Any] = ev.get("Task Metrics") or _EMPTY
        sr: dict[str, Any] = m.get("Shuffle Read Metrics") or _EMPTY
        sw: dict[str, Any] = m.get("Shuffle Write Metrics") or _EMPTY
        im: dict[str, Any] = m.get("Input Metrics") or _EMPTY
        reason = str((ev.get("Task End Reason") or _EMPTY).get("Reason", ""))
        launch = _i(info, "Launch Time")
        finish = _i(info, "Finish Time")
        return (
            _i(ev, "Stage ID"),
            _i(ev, "Stage Attempt ID"),
            _i(info, "Task ID"),
            _i(info, "Index"),
            _i(info, "Attempt"),
            str(info.get("Executor ID", "")),
            str(info.get("Host", "")),
            launch,
            finish,
            float(finish - launch) if finish else 0.0,
            reason == "Success" and not info.get("Failed", False),
            reason,
            float(_i(m, "Executor Run Time")),
            _i(m, "Executor CPU Time") / NS_PER_MS,
            float(_i(m, "Executor Deserialize Time")),
            _i(m, "Executor Deserialize CPU Time") / NS_PER_MS,
            float(_i(m, "JVM GC Time")),
            float(_i(m, "Result Serialization Time")),
            _i(m, "Result Size"),
            _i(m, "Memory Bytes Spilled"),
            _i(m, "Disk Bytes Spilled"),
            _i(im, "Bytes Read"),
            _i(im, "Records Read"),
            float(_i(sr, "Fetch Wait Time")),
            _i(sr, "Remote Blocks Fetched"),
            _i(sr, "Local Blocks Fetched"),
            _i(sr, "Remote Bytes Read"),
            _i(sr, "Remote Bytes Read To Disk"),
            _i(sr, "Local Bytes Read"),
            _i(sr, "Total Records Read"),
            float(_i(sr, "Remote Requests Duration")),
            _i(sw, "Shuffle Bytes Written"),
            _i(sw, "Shuffle Records Written"),
            _i(sw, "Shuffle Write Time") / NS_PER_MS,
            bool(info.get("Speculative", False)),
        )

    def _add_task(self, row: tuple[Any, ...]) -> None:
        """One task row (the dictionary path)."""
        self._add_columns({c: [v] for c, v in zip(TASK_COLUMNS, row, strict=True)}, 1)

    def _add_rust(self, cols: Any) -> None:
        """:meth:`_add_columns` for columns decoded by the Rust core (its counts are exact; float
        columns are summed here, in the same order, as from lists)."""
        n = len(cols)
        successful, fetch_failed, speculative, remote, local, written = cols.counts()
        t = self.log.totals
        t.n_tasks += n
        t.failed_tasks += n - successful
        t.fetch_failures += fetch_failed
        t.speculative_tasks += speculative
        t.executor_run_ms += sum(memoryview(cols.floats("executor_run_ms")).cast("d"))
        t.executor_cpu_ms += sum(memoryview(cols.floats("executor_cpu_ms")).cast("d"))
        t.fetch_wait_ms += sum(memoryview(cols.floats("fetch_wait_ms")).cast("d"))
        t.remote_bytes += remote
        t.local_bytes += local
        t.shuffle_write_bytes += written
        self._task_ends += n
        if self._on_tasks is None and self._on_batch is None:
            self.log.tasks.extend(TaskRow(*r) for r in zip(*cols.to_dict().values(), strict=True))
            return
        self._pending.append(cols)
        self._n_pending += n
        if self._n_pending >= self._batch:
            self._flush()

    def _add_columns(self, cols: dict[str, list[Any]], n: int) -> None:
        """Running totals, then the rows to the batch (or the in-memory list)."""
        t = self.log.totals
        t.n_tasks += n
        t.failed_tasks += n - sum(cols["successful"])
        t.fetch_failures += cols["end_reason"].count("FetchFailed")
        t.speculative_tasks += sum(cols["speculative"])
        t.executor_run_ms += sum(cols["executor_run_ms"])
        t.executor_cpu_ms += sum(cols["executor_cpu_ms"])
        t.fetch_wait_ms += sum(cols["fetch_wait_ms"])
        t.remote_bytes += sum(cols["remote_bytes"])
        t.local_bytes += sum(cols["local_bytes"])
        t.shuffle_write_bytes += sum(cols["shuffle_write_bytes"])
        self._task_ends += n
        if self._on_tasks is None and self._on_batch is None:
            self.log.tasks.extend(TaskRow(*r) for r in zip(*cols.values(), strict=True))
            return
        last = self._pending[-1] if self._pending else None
        if isinstance(last, dict):  # rows of the Python path: one segment until a Rust one comes
            for c, values in cols.items():
                last[c].extend(values)
        else:
            self._pending.append({c: list(cols[c]) for c in TASK_COLUMNS})
        self._n_pending += n
        if self._n_pending >= self._batch:
            self._flush()

    def _flush(self) -> None:
        if self._n_pending:
            batch = TaskBatch(self._pending, self._n_pending)
            if self._on_batch is not None:
                self._on_batch(batch, self.log)
            elif self._on_tasks is not None:
                self._on_tasks(batch.columns(), self.log)
        self._pending = []
        self._n_pending = 0

    def _stage_completed(self, ev: dict[str, Any]) -> None:
        info = ev.get("Stage Info") or _EMPTY
        sub = _time(info.get("Submission Time"))
        comp = _time(info.get("Completion Time"))
        parents = info.get("Parent IDs") or []
        self.log.stages.append(
            StageRow(
                stage_id=_i(info, "Stage ID"),
                stage_attempt=_i(info, "Stage Attempt ID"),
                name=str(info.get("Stage Name", "")),
                num_tasks=_i(info, "Number of Tasks"),
                submitted_at_ms=sub,
                completed_at_ms=comp,
                duration_ms=float(comp - sub) if sub is not None and comp is not None else None,
                failure_reason=info.get("Failure Reason"),
                parent_ids=",".join(str(p) for p in sorted(parents)),
            )
        )

    def _job_started(self, ev: dict[str, Any]) -> None:
        props = ev.get("Properties") or _EMPTY
        sql_id = _opt_int(props.get("spark.sql.execution.id")) if isinstance(props, dict) else None
        jid = _i(ev, "Job ID")
        self._job_start[jid] = (_time(ev.get("Submission Time")), list(ev.get("Stage IDs") or []), sql_id)
        if sql_id is not None and sql_id in self._sql:
            self._sql[sql_id]["job_ids"].append(jid)

    def _job_ended(self, ev: dict[str, Any]) -> None:
        jid = _i(ev, "Job ID")
        sub, stage_ids, sql_id = self._job_start.pop(jid, (None, [], None))  # (its start unread: no time)
        comp = _time(ev.get("Completion Time"))
        result = ev.get("Job Result") or _EMPTY
        exc = result.get("Exception") if isinstance(result, dict) else None
        if isinstance(exc, dict) and exc.get("Message"):
            self.log.job_errors[jid] = _headline(str(exc["Message"]))
        self.log.jobs.append(
            JobRow(
                job_id=jid,
                submitted_at_ms=sub,
                completed_at_ms=comp,
                duration_ms=float(comp - sub) if comp is not None and sub is not None else None,
                result=str(result.get("Result", "")),
                stage_ids=",".join(str(s) for s in stage_ids),
                sql_execution_id=sql_id,
            )
        )

    def _sql_start(self, ev: dict[str, Any]) -> None:
        xid = _opt_int(ev.get("executionId"))
        if xid is None:
            return
        s = self._sql.setdefault(xid, {"job_ids": [], "adaptive": 0, "end": None, "error": None})
        s["root"] = _opt_int(ev.get("rootExecutionId"))
        s["description"] = str(ev.get("description") or "")[:2000]
        s["start"] = _time(ev.get("time"))

    def _sql_end(self, ev: dict[str, Any]) -> None:
        xid = _opt_int(ev.get("executionId"))
        if xid is None:
            return
        s = self._sql.setdefault(xid, {"job_ids": [], "adaptive": 0, "root": None, "description": "", "start": None})
        s["end"] = _time(ev.get("time"))
        err = ev.get("errorMessage")
        s["error"] = str(err)[:2000] if err else None

    def _adaptive_update(self, line: bytes) -> None:
        """A re-plan by adaptive query execution: only its execution id is read (the plan is big)."""
        at = line.find(b'"executionId":', 0, 400)
        if at < 0:
            return
        at += 14
        end = at
        while end < len(line) and line[end : end + 1].isdigit():
            end += 1
        self._count_adaptive(_opt_int(line[at:end]) if end > at else None)

    def _count_adaptive(self, xid: int | None) -> None:
        if xid is not None and xid in self._sql:
            self._sql[xid]["adaptive"] += 1

    # ------------------------------------------------------------------ the end

    def finish(self) -> EventLog:
        log = self.log
        self._flush()
        for jid, (sub, stage_ids, sql_id) in self._job_start.items():  # jobs that never ended (killed run)
            # (or whose end line is damaged: how it ended is unknown)
            result = UNREADABLE_END if jid in self._damaged_job_ends else "Unfinished"
            log.jobs.append(JobRow(jid, sub, None, None, result, ",".join(str(s) for s in stage_ids), sql_id))
        self._job_start = {}
        log.jobs.sort(key=lambda j: j.job_id)
        log.executor_rows = [ExecutorRow(*r) for r in sorted(self._execs.values(), key=_exec_order)]
        log.sql_executions = [
            SqlExecutionRow(
                execution_id=xid,
                root_execution_id=s.get("root"),
                description=s.get("description") or "",
                started_at_ms=s.get("start"),
                completed_at_ms=s.get("end"),
                duration_ms=float(s["end"] - s["start"])
                if s.get("end") is not None and s.get("start") is not None
                else None,
                error=s.get("error"),
                job_ids=",".join(str(j) for j in sorted(s["job_ids"])),
                adaptive_updates=s["adaptive"],
            )
            for xid, s in sorted(self._sql.items())
        ]
        log.running_tasks = max(0, self._task_starts - self._task_ends)
        return log


_ERROR_LINE = re.compile(r"^[\w.$]+(Error|Exception|Exit|Interrupt)\b.*:")


def _headline(message: str) -> str:
    """A failed job's cause in one line: Spark's first line and, for an exception from the user's
    code (a Python traceback inside it), that exception's own line."""
    lines = message.split("\n")
    first = lines[0].strip()
    for line in lines[1:]:
        if line.startswith("\tat "):  # the JVM stack: the user's exception came before it
            break
        if _ERROR_LINE.match(line.strip()):
            first = f"{first} ... {line.strip()}"
            break
    return first[:500]


def _checked(n0: int, n: int) -> list[int]:
    """Which of ``n`` task ends, after ``n0`` read before them, have their fields checked: the
    first CHECK_FIRST of the log and one in CHECK_EVERY after them."""
    first = range(max(0, min(n, CHECK_FIRST - n0)))
    every = range((-n0) % CHECK_EVERY, n, CHECK_EVERY)
    return sorted({*first, *(i for i in every if n0 + i >= CHECK_FIRST)})


def _exec_order(row: list[Any]) -> tuple[int, str]:
    eid = str(row[0])
    return (int(eid), eid) if eid.isdigit() else (-1, eid)


def parse_lines(lines: Iterable[bytes | str], name: str = "<lines>") -> EventLog:
    """Parse an iterable of event-log lines. Malformed lines (e.g. a torn last line) are counted;
    undecodable ones are also a problem naming ``name``."""
    p = Parser()
    held: bytes | str | None = None  # each line is fed once the next one is seen: the last may be torn
    for line in lines:
        if held is not None:
            p.feed(held)
        held = line
    if held is not None:
        p.feed(held, last=True)
    p.report_damage(name)
    return p.finish()
