"""Read one application's log (all its files, any codec) through the streaming parser."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shufflelab.eventlog.batch import TaskBatch
from shufflelab.eventlog.compression import UnknownCodec, decompress
from shufflelab.eventlog.events import Parser
from shufflelab.eventlog.files import LogSource, discover
from shufflelab.eventlog.model import EventLog


class NotAnEventLog(ValueError):
    """Nothing in the input could be read as a Spark event log (the message names the file)."""


@dataclass
class ReadResult:
    log: EventLog
    codecs: list[str]  # per file read: the codec or "none"
    partial: bool  # something could not be read (corrupt, cut, unknown codec, a line inside the log
    # undecodable), beyond the torn tail an application that is still running (or was killed) leaves

    @property
    def nothing_read(self) -> bool:
        return self.log.events == 0


def read_source(
    src: LogSource,
    on_tasks: Callable[[dict[str, list[Any]], EventLog], None] | None = None,
    batch: int = 10_000,
    on_bytes: Callable[[int], None] | None = None,
    *,
    on_batch: Callable[[TaskBatch, EventLog], None] | None = None,
) -> ReadResult:
    """Parse every file of ``src`` in order. Problems are recorded in ``log.problems``, naming the
    file; reading goes on with the next file where it can. Task rows go to ``on_tasks`` (columns
    as lists) or ``on_batch`` (a :class:`~shufflelab.eventlog.batch.TaskBatch`), see
    :class:`~shufflelab.eventlog.events.Parser`."""
    parser = Parser(on_tasks, batch, on_batch=on_batch)
    log = parser.log
    log.problems += src.problems + src.notes
    codecs: list[str] = []
    partial = bool(src.problems)
    last = len(src.parts) - 1
    for i, part in enumerate(src.parts):
        if part.size == 0:
            if not (src.in_progress and i == last):
                log.problems.append(f"{part.name}: empty file")
                partial = True
            continue
        try:
            with part.open() as fh:
                head = fh.read(16)
            codec = _codec(part, head)
        except UnknownCodec as exc:
            log.problems.append(str(exc))
            partial = True
            continue
        except OSError as exc:
            log.problems.append(f"{part.name}: cannot be read ({exc})")
            partial = True
            continue
        codecs.append(codec or "none")
        damaged = log.damaged_lines
        try:
            with part.open() as fh:
                stream = _Progress(fh, on_bytes) if on_bytes else fh
                clean = parser.feed_stream(decompress(stream, codec, part.name), part.name)  # type: ignore[arg-type]
        except OSError as exc:
            log.problems.append(f"{part.name}: read failed ({exc})")
            clean = False
        if not clean and not (src.in_progress and i == last):
            partial = True
        if log.damaged_lines > damaged:  # a line inside the file could not be decoded: damage, in any log
            partial = True
    parser.finish()
    if log.events == 0 and not log.problems:
        first = src.parts[0].name if src.parts else src.display
        log.problems.append(f"{first}: not a Spark event log (no line is a Spark listener event)")
    elif log.events and log.app_id is None:
        log.problems.append(f"{src.display}: no SparkListenerApplicationStart event (the start of the log is missing)")
        partial = True
    if src.in_progress:
        log.problems.append(f"{src.display}: the application was still running or was killed (in-progress log)")
    return ReadResult(log, codecs, partial)


def _codec(part: Any, head: bytes) -> str | None:
    from shufflelab.eventlog.files import codec_of

    return codec_of(part, head)


class _Progress:
    """Reports the compressed bytes read (for a progress bar)."""

    def __init__(self, fh: Any, cb: Callable[[int], None]) -> None:
        self.fh, self.cb = fh, cb

    def read(self, n: int) -> bytes:
        b: bytes = self.fh.read(n)
        self.cb(len(b))
        return b


def parse(path: str | Path) -> EventLog:
    """Parse one application's event log: a file (any of Spark's codecs, in progress or not), a
    rolling log directory, or a zip holding one log. Rows are kept in memory; what could not be
    read is in ``problems`` (an unreadable file gives a log without events, not an exception)."""
    sources, problems = discover([Path(path)])
    if not sources:
        raise NotAnEventLog("; ".join(problems) or f"{path}: no event log")
    if len(sources) > 1:
        raise ValueError(f"{path}: holds {len(sources)} event logs; parse one at a time (or ingest them)")
    return read_source(sources[0]).log
