"""Fetch an application's event logs from a running Spark History Server.

``GET <url>/api/v1/applications/<app id>/logs`` answers with a zip of the application's logs (every
attempt; a rolling log as its directory), exactly the files of the History Server's log directory.
The zip is streamed to a temporary file and read from there like any zip of logs.
"""

from __future__ import annotations

import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from shufflelab.eventlog.files import LogSource, zip_sources


class HistoryServerError(RuntimeError):
    """The History Server could not be reached or has no such application (names the URL)."""


def logs_url(url: str, app_id: str) -> str:
    base = url.rstrip("/")
    if "://" not in base:
        base = "http://" + base
    return f"{base}/api/v1/applications/{urllib.parse.quote(app_id, safe='')}/logs"


def fetch_logs(url: str, app_id: str, dest_dir: Path, timeout_s: float = 60.0) -> tuple[Path, list[LogSource]]:
    """Download the application's logs into ``dest_dir`` and list them as sources whose keys name
    the History Server (so re-fetching an unchanged log is skipped like a file)."""
    target = logs_url(url, app_id)
    dest = dest_dir / f"{app_id}.zip"
    try:
        with urllib.request.urlopen(target, timeout=timeout_s) as resp, open(dest, "wb") as out:
            shutil.copyfileobj(resp, out, 1 << 20)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise HistoryServerError(f"{target}: the History Server has no application {app_id!r} (HTTP 404)") from None
        raise HistoryServerError(f"{target}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise HistoryServerError(f"{target}: the History Server cannot be reached ({reason})") from None
    if not zipfile.is_zipfile(dest):
        raise HistoryServerError(f"{target}: the answer is not a zip of event logs")
    sources = zip_sources(dest, label=target)
    if not sources:
        raise HistoryServerError(f"{target}: the zip holds no event logs")
    return dest, sources


def temp_dir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="shufflelab-hs-")
