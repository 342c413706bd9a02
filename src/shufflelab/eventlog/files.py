"""Where event logs are and how they are named: single files, rolling directories, directories of
many applications (a History Server's log directory) and zip files (the History Server's REST API).

Spark names a log after its application (and attempt): a single file
``<app>[_<attempt>][.<codec>][.inprogress]``, or with rolling enabled a directory
``eventlog_v2_<app>[_<attempt>]/`` holding ``events_<n>_<app>[.<codec>][.compact]`` files read in
index order (from the last compacted one) and an empty ``appstatus_<app>[.inprogress]`` that says
whether the application is still running. The codec in a name is checked against the file's magic
bytes; a file with no codec in its name is sniffed.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from shufflelab.eventlog.compression import SUFFIXES, UnknownCodec, sniff
from shufflelab.names import whole

IN_PROGRESS = ".inprogress"
COMPACT = ".compact"
ROLLING_DIR = "eventlog_v2_"
_EVENTS_RE = whole(r"events_(\d+)_(.+)")


@dataclass(frozen=True)
class Part:
    """One file of a log (a single log has one)."""

    name: str  # path, or zip!member, for messages
    size: int
    mtime: float
    index: int | None  # rolling file index
    codec_hint: str | None  # from the name ("" = none in the name)
    opener: Callable[[], BinaryIO] = field(compare=False, repr=False)

    def open(self) -> BinaryIO:
        return self.opener()


@dataclass
class LogSource:
    """One application attempt's log."""

    key: str  # its identity in the store: the path without .inprogress
    display: str
    kind: str  # "file" | "rolling"
    parts: list[Part]
    in_progress: bool
    app_hint: str  # the application (and attempt) id its name gives
    problems: list[str] = field(default_factory=list)  # what makes its data incomplete
    notes: list[str] = field(default_factory=list)  # worth saying, not a loss of data

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def mtime(self) -> float:
        return max((p.mtime for p in self.parts), default=0.0)

    @property
    def last_index(self) -> int | None:
        idx = [p.index for p in self.parts if p.index is not None]
        return max(idx) if idx else None


def split_name(name: str) -> tuple[str, str | None, bool, bool]:
    """``(stem, codec suffix or None, in progress, compacted)`` of a log file name."""
    in_progress = name.endswith(IN_PROGRESS)
    if in_progress:
        name = name[: -len(IN_PROGRESS)]
    compact = name.endswith(COMPACT)
    if compact:
        name = name[: -len(COMPACT)]
    stem, dot, suffix = name.rpartition(".")
    if dot and stem and re.fullmatch(r"[A-Za-z0-9]+", suffix):
        return stem, suffix, in_progress, compact
    return name, None, in_progress, compact


def codec_of(part: Part, head: bytes) -> str | None:
    """The codec to read ``part`` with: its name's suffix (checked against the magic bytes) or,
    without one, what the bytes say. Raises :class:`UnknownCodec` for a suffix Spark never writes
    whose bytes are no known format either."""
    sniffed = sniff(head)
    hint = part.codec_hint
    if hint:
        codec = SUFFIXES.get(hint.lower())
        if codec is None:
            if sniffed is not None:
                return sniffed
            if _is_text(head):
                return None  # a dotted name over text: read as an uncompressed log
            raise UnknownCodec(part.name, hint)
        return codec
    return sniffed


def _is_text(head: bytes) -> bool:
    """No control bytes (UTF-8's multibyte characters allowed): text, not a binary format."""
    return all(b >= 0x20 or b in (9, 10, 13) for b in head)


def _file_part(path: Path, index: int | None = None) -> Part:
    st = path.stat()
    _, suffix, _, _ = split_name(path.name)
    return Part(str(path), st.st_size, st.st_mtime, index, suffix, lambda p=path: p.open("rb"))  # type: ignore[misc]


def _rolling_parts(names: list[tuple[str, Part]], where: str) -> tuple[list[Part], bool | None, list[str]]:
    """The event files to read in order (from the last compacted one), whether the appstatus file
    says in progress (None: no appstatus file), and notes."""
    events: list[tuple[int, bool, Part]] = []
    status: bool | None = None
    problems: list[str] = []
    for name, part in names:
        if name.startswith("."):
            continue
        if name.startswith("appstatus_"):
            status = name.endswith(IN_PROGRESS)
            continue
        m = _EVENTS_RE.match(name)
        if not m:
            problems.append(f"{where}/{name}: not an event-log file of a rolling log (ignored)")
            continue
        _, _, _, compact = split_name(name)
        events.append((int(m.group(1)), compact, part))
    events.sort(key=lambda e: e[0])
    compacted = [i for i, (_, c, _) in enumerate(events) if c]
    if compacted:
        events = events[compacted[-1] :]
    if status is None:
        problems.append(f"{where}: no appstatus file (Spark writes one; the log may be incomplete)")
    return [p for _, _, p in events], status, problems


def rolling_source(path: Path) -> LogSource:
    named = []
    for f in sorted(path.iterdir()):
        if f.is_file():
            m = _EVENTS_RE.match(f.name)
            named.append((f.name, _file_part(f, int(m.group(1)) if m else None)))
    parts, status, problems = _rolling_parts(named, str(path))
    app = path.name[len(ROLLING_DIR) :]
    src = LogSource(str(path), str(path), "rolling", parts, bool(status), app, notes=problems)
    if not parts:
        src.problems.append(f"{path}: a rolling event-log directory with no events_ files")
    return src


def file_source(path: Path) -> LogSource:
    stem, _, in_progress, _ = split_name(path.name)
    key = str(path)[: -len(IN_PROGRESS)] if in_progress else str(path)
    return LogSource(key, str(path), "file", [_file_part(path)], in_progress, stem)


def zip_sources(path: Path, label: str | None = None) -> list[LogSource]:
    """The logs inside a zip (as the History Server's ``/logs`` endpoint returns them); ``label``
    names the zip in keys and messages instead of its path (e.g. the URL it came from)."""
    zf = zipfile.ZipFile(path)
    where = label or str(path)
    # a zip made on request (the History Server's) stamps its entries with the time it was made
    fixed_time = label is None
    groups: dict[str, list[tuple[str, Part]]] = {}
    singles: list[LogSource] = []
    for info in zf.infolist():
        if info.is_dir():
            continue
        inner = info.filename.strip("/")
        mtime = _zip_mtime(info) if fixed_time else 0.0
        dirname, _, base = inner.rpartition("/")
        m = _EVENTS_RE.match(base)
        _, suffix, in_progress, _ = split_name(base)
        part = Part(f"{where}!{inner}", info.file_size, mtime, int(m.group(1)) if m else None, suffix,
                    lambda n=info.filename: zf.open(n))  # type: ignore[misc,arg-type]  # fmt: skip
        if dirname.rpartition("/")[2].startswith(ROLLING_DIR):
            groups.setdefault(dirname, []).append((base, part))
        elif not base.startswith("."):
            stem = split_name(base)[0]
            key = f"{where}!{inner[: -len(IN_PROGRESS)] if in_progress else inner}"
            singles.append(LogSource(key, part.name, "file", [part], in_progress, stem))
    out = list(singles)
    for dirname, named in sorted(groups.items()):
        parts, status, problems = _rolling_parts(sorted(named), f"{where}!{dirname}")
        app = dirname.rpartition("/")[2][len(ROLLING_DIR) :]
        src = LogSource(f"{where}!{dirname}", f"{where}!{dirname}", "rolling", parts, bool(status), app, notes=problems)
        if not parts:
            src.problems.append(f"{where}!{dirname}: a rolling event-log directory with no events_ files")
        out.append(src)
    return out


def _zip_mtime(info: zipfile.ZipInfo) -> float:
    import datetime as dt

    try:
        return dt.datetime(*info.date_time).timestamp()
    except ValueError:
        return 0.0


def discover(paths: list[Path]) -> tuple[list[LogSource], list[str]]:
    """Every log under ``paths`` (files, rolling directories, directories of logs searched
    recursively, zip files), and problems naming what could not be used (a missing path, an
    empty directory). A path is a :class:`~pathlib.Path` or any object with the methods used here
    (:class:`shufflelab.eventlog.remote.RemotePath`: logs on HDFS)."""
    sources: list[LogSource] = []
    problems: list[str] = []
    for p in paths:
        if not p.exists():
            problems.append(f"{p}: no such file or directory")
        elif p.is_dir():
            if p.name.startswith(ROLLING_DIR):
                sources.append(rolling_source(p))
                continue
            found = _scan(p)
            if not found:
                problems.append(f"{p}: no event logs in this directory")
            sources += found
        elif _is_zip(p):
            try:
                found = zip_sources(p)
            except (zipfile.BadZipFile, OSError) as exc:
                problems.append(f"{p}: not a readable zip ({exc})")
                continue
            if not found:
                problems.append(f"{p}: the zip holds no event logs")
            sources += found
        else:
            sources.append(file_source(p))
    return sources, problems


def _is_zip(p: Path) -> bool:
    """A zip file on this machine's file system (reading one needs random access; a path of another
    kind, such as :class:`shufflelab.eventlog.remote.RemotePath`, is read as a log)."""
    return isinstance(p, Path) and zipfile.is_zipfile(p)


def _scan(d: Path) -> list[LogSource]:
    out: list[LogSource] = []
    for entry in sorted(d.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            out += [rolling_source(entry)] if entry.name.startswith(ROLLING_DIR) else _scan(entry)
        elif entry.is_file():
            if entry.suffix == ".zip" and _is_zip(entry):
                out += zip_sources(entry)
            else:
                out.append(file_source(entry))
    return out
