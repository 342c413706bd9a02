"""``shufflelab analyze``: ingest event logs (files, directories, a History Server) into a store,
with a progress bar over the bytes to read and one line per application."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from shufflelab.eventlog.files import LogSource, discover
from shufflelab.eventlog.ingest import IngestReport, ingest


def run(
    paths: list[Path],
    db: Path,
    history_server: str | None,
    app_id: str | None,
    force: bool,
    console: Console,
    err: Console,
    shown: Path | None = None,
    workers: int | None = None,
) -> int:
    """Ingest and print what happened (naming the store ``shown``, default ``db``); the exit status:
    0 when something was read (or was already in the store), 1 when nothing could be read, 2 for a
    usage error."""
    if (history_server is None) != (app_id is None):
        err.print("[bold red]error:[/] --history-server and --app go together", highlight=False, soft_wrap=True)
        return 2
    if not paths and history_server is None:
        err.print(
            "[bold red]error:[/] name event logs or directories, or --history-server URL --app ID",
            highlight=False,
            soft_wrap=True,
        )
        return 2
    with contextlib.ExitStack() as stack:
        hs_sources: list[LogSource] = []
        fetch_problem = None
        if history_server is not None and app_id is not None:  # (urllib: imported only then)
            from shufflelab.eventlog.history import HistoryServerError, fetch_logs, temp_dir

            tmp = stack.enter_context(temp_dir())
            try:
                _, hs_sources = fetch_logs(history_server, app_id, Path(tmp))
            except HistoryServerError as exc:
                fetch_problem = str(exc)
        found, problems = discover(paths) if paths else ([], [])
        if fetch_problem:
            problems.append(fetch_problem)
        sources = found + hs_sources
        total = sum(s.size for s in sources)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task("reading event logs", total=total)
            report = ingest(
                [],
                db,
                sources=sources,
                force=force,
                on_source=lambda s: progress.update(task, description=_short(s.display)),
                on_bytes=lambda n: progress.advance(task, n),
                workers=workers,
            )
    report.problems[:0] = problems
    _print(report, shown or db, console, err)
    return 0 if report.anything_read else 1


def baseline_store(paths: list[Path], db: Path, console: Console, err: Console) -> Path | None:
    """Read baseline logs into ``<db>-baseline.duckdb``, holding exactly these logs (built aside and
    moved in place, so baselines of an earlier call never mix in); None when none could be read."""
    final = db.with_name(db.stem + "-baseline.duckdb")
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        code = run(paths, tmp, None, None, True, console, err, shown=final)
        if code:
            return None
        os.replace(tmp, final)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            leftover.unlink(missing_ok=True)
    return final


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else "..." + name[-(width - 3) :]


def _print(report: IngestReport, db: Path, console: Console, err: Console) -> None:
    for p in report.problems:
        err.print(f"[bold red]error:[/] {p}", highlight=False, soft_wrap=True)
    ingested = [o for o in report.outcomes if o.action == "ingested"]
    if ingested:
        t = Table(title=f"event logs -> {db}")
        t.add_column("application", overflow="fold")
        t.add_column("status")
        for col in ("tasks", "stages", "jobs", "executors", "SQL", "MB read"):
            t.add_column(col, justify="right")
        for o in ingested:
            c = o.counts
            t.add_row(
                str(o.run_id),
                str(o.status),
                *(str(c.get(k, 0)) for k in ("tasks", "stages", "jobs", "executors", "sql_executions")),
                f"{o.bytes_read / 1e6:.1f}",
            )
        console.print(t)
    for o in ingested:
        for what, seen in o.unknown.items():
            if seen:
                listed = ", ".join(f"{k} x{v}" for k, v in sorted(seen.items(), key=lambda kv: -kv[1])[:5])
                more = f" and {len(seen) - 5} more" if len(seen) > 5 else ""
                err.print(f"[yellow]{o.run_id}:[/] {what} this version does not know, ignored: {listed}{more}",
                          highlight=False, soft_wrap=True)  # fmt: skip
        for p in o.problems:
            style = "yellow" if o.status in ("ok", "failed", "incomplete") else "bold red"
            err.print(f"[{style}]{o.run_id}:[/] {p}", highlight=False, soft_wrap=True)
    for o in report.outcomes:
        if o.action == "unreadable":
            for p in o.problems or [f"{o.source}: nothing could be read"]:
                err.print(f"[bold red]error:[/] {p}", highlight=False, soft_wrap=True)
    skipped = sum(o.action == "skipped" for o in report.outcomes)
    bad = sum(o.action == "unreadable" for o in report.outcomes)
    partial = sum(o.status == "partial" for o in ingested)
    console.print(
        f"{len(ingested)} application(s) written to {db}"
        + (f" ({partial} partial)" if partial else "")
        + (f", {skipped} unchanged since the last run (skipped)" if skipped else "")
        + (f", {bad} unreadable" if bad else ""),
        highlight=False,
        soft_wrap=True,
    )
