"""Spark event logs -> one row per task, stage, job, executor and SQL execution, units normalised.

Reads every log Spark 3.x and 4.x writes: uncompressed or compressed with any of Spark's codecs
(:mod:`~shufflelab.eventlog.compression`), single files or rolling directories, finished, failed,
killed or still in progress (:mod:`~shufflelab.eventlog.files`), streamed line by line
(:mod:`~shufflelab.eventlog.events`); :mod:`~shufflelab.eventlog.ingest` writes them into the
results store. Units are stated in :mod:`~shufflelab.eventlog.model`.
"""

from shufflelab.eventlog.compression import CorruptLog, LogReadError, TruncatedLog, UnknownCodec
from shufflelab.eventlog.events import Parser, parse_lines
from shufflelab.eventlog.model import (
    NS_PER_MS,
    EventLog,
    ExecutorRow,
    JobRow,
    SqlExecutionRow,
    StageRow,
    TaskRow,
    Totals,
    columns,
    records,
)
from shufflelab.eventlog.read import NotAnEventLog, ReadResult, parse, read_source

__all__ = [
    "NS_PER_MS",
    "CorruptLog",
    "EventLog",
    "ExecutorRow",
    "JobRow",
    "LogReadError",
    "NotAnEventLog",
    "Parser",
    "ReadResult",
    "SqlExecutionRow",
    "StageRow",
    "TaskRow",
    "Totals",
    "TruncatedLog",
    "UnknownCodec",
    "columns",
    "parse",
    "parse_lines",
    "read_source",
    "records",
]
