"""Fetch an application's event logs from a running Spark History Server.

``GET <url>/api/v1/applications/<app id>/logs`` answers with a zip of the application's logs (every
attempt; a rolling log as its directory), exactly the files of the History Server's log directory.
The zip is streamed to a temporary file and read from there like any zip of logs.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


class LocalHistoryServer:
    """A real Spark History Server from the installed pyspark's jars, on 127.0.0.1 only, over
    ``log_dir`` (for tests and the ingest benchmark). Use as a context manager: it is always
    stopped."""

    def __init__(
        self,
        log_dir: Path,
        work_dir: Path,
        heap: str = "1g",
        extra_conf: dict[str, str] | None = None,
        java_options: Sequence[str] = (),
    ):
        self.log_dir, self.work_dir, self.heap = Path(log_dir), Path(work_dir), heap
        self.extra_conf = extra_conf or {}
        self.java_options = list(java_options)  # e.g. the tests' quicker JVM (C1 only, the serial collector)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LocalHistoryServer:
        import pyspark

        home = Path(pyspark.__file__).resolve().parent
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        conf = {
            "spark.history.fs.logDirectory": self.log_dir.resolve().as_uri(),
            "spark.history.ui.port": str(self.port),
            "spark.history.fs.update.interval": "1s",
            **self.extra_conf,
        }
        cmd = ["java", f"-Xmx{self.heap}", *self.java_options, "-cp", f"{home}/jars/*",
               *(f"-D{k}={v}" for k, v in conf.items()), "org.apache.spark.deploy.history.HistoryServer"]  # fmt: skip
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(home)}
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.work_dir / "history-server.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.work_dir)
        try:
            self.wait(lambda: self.get("/api/v1/version") is not None, 180.0, "start")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def get(self, path: str) -> Any:
        """The JSON at ``path``, or None while the server does not answer."""
        import json

        if self.proc is not None and self.proc.poll() is not None:
            raise HistoryServerError(f"the History Server exited ({self.proc.returncode}); see {self.log_path}")
        try:
            with urllib.request.urlopen(self.url + path, timeout=30) as r:
                return json.load(r)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def wait(self, ready: Callable[[], bool], timeout_s: float, what: str) -> float:
        """Poll until ``ready()``; the seconds it took (bounded by ``timeout_s``)."""
        t0 = time.monotonic()
        while not ready():
            if time.monotonic() - t0 > timeout_s:
                raise HistoryServerError(
                    f"the History Server did not {what} within {timeout_s:.0f} s ({self.log_path})"
                )
            time.sleep(0.2)
        return time.monotonic() - t0

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
