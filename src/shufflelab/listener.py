"""shufflelab's Spark listener (``shufflelab.TaskFlowListener``): build, attach, parse.

The listener is ~150 lines of Java shipped with the package (``java/TaskFlowListener.java``),
compiled with ``javac`` against the very jars of the installed pyspark, so it always matches the
Spark that runs it. The jar is cached under ``~/.cache/shufflelab`` keyed by the source and the
Spark version; ``make setup`` builds it, and a run builds it on first use if it is missing.

What it adds to the event log (see docs/design.md, "Flow completion times"):

* ``progress`` lines: a running task's shuffle-read counters (remote bytes fetched so far, fetch
  wait so far) from every executor heartbeat -- the event log keeps only final values, so this is
  where a task's fetch progress over time, and thus its fetch throughput while the queue is full,
  becomes visible;
* ``end`` lines written and flushed as tasks finish, so a killed run keeps its finished tasks even
  though its event log was never closed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from shufflelab import artifacts, jvm, sparkconf

JAVA_DIR = Path(__file__).parent / "java"
SOURCE = JAVA_DIR / "TaskFlowListener.java"
SOURCES = sorted(JAVA_DIR.glob("*.java"))  # the listener and the executor plugin share one jar
CLASS_NAME = "shufflelab.TaskFlowListener"
PLUGIN_CLASS = "shufflelab.TaskCpuPlugin"
PLUGIN_FILE = "shufflelab-task-cpu.jsonl"  # written by each executor in its working directory
PATH_CONF = sparkconf.LISTENER_PATH

END_COLUMNS = [
    "task", "stage", "attempt", "index", "executor", "host", "launch_ms", "finish_ms", "successful",
    "run_ms", "cpu_ns", "deserialize_ms", "gc_ms", "remote_bytes", "local_bytes", "remote_blocks",
    "local_blocks", "fetch_wait_ms", "remote_reqs_ms", "records_read", "write_bytes", "write_ns",
    "records_written",
]  # fmt: skip
PROGRESS_COLUMNS = ["t_ms", "task", "stage", "executor", "remote_bytes", "fetch_wait_ms", "remote_reqs_ms"]


class ListenerBuildError(RuntimeError):
    pass


def jar_path() -> Path:
    """Where the jar for this source and this Spark lives (it may not exist yet)."""
    key = hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES) + jvm.spark_version().encode()).hexdigest()[:12]
    return artifacts.cache_root() / f"shufflelab-listener-{key}.jar"


def ensure_jar() -> Path:
    """Build the jar if it is missing; return its path. Raises ListenerBuildError naming what failed."""
    jar = jar_path()
    if jar.exists():
        return jar
    javac, jartool = shutil.which("javac"), shutil.which("jar")
    if not javac or not jartool:
        raise ListenerBuildError("javac/jar not found: install a JDK 17 (openjdk-17-jdk-headless)")
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="shufflelab-listener-") as tmp:
        classes = Path(tmp) / "classes"
        cmd = [javac, "-nowarn", "-d", str(classes), "-cp", f"{jvm.spark_jars()}/*", *map(str, SOURCES)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise ListenerBuildError(f"javac failed for {SOURCE}:\n{r.stderr[-2000:]}")
        partial = Path(tmp) / jar.name
        r = subprocess.run([jartool, "cf", str(partial), "-C", str(classes), "."], capture_output=True, text=True)
        if r.returncode != 0:
            raise ListenerBuildError(f"jar failed: {r.stderr[-2000:]}")
        artifacts.publish_file(partial, jar)  # whole file or nothing: a crash never leaves half a jar
    return jar


def spark_conf(jar: Path, out: Path, heartbeat_s: float = 1.0) -> dict[str, str]:
    """Conf entries that attach the listener to one application writing to ``out``.

    The heartbeat interval sets how often ``progress`` lines arrive (Spark's default is 10 s).
    """
    return {
        sparkconf.EXTRA_LISTENERS: CLASS_NAME,
        sparkconf.PLUGINS: PLUGIN_CLASS,
        sparkconf.DRIVER_CLASS_PATH: str(jar),
        sparkconf.EXECUTOR_CLASS_PATH: str(jar),
        PATH_CONF: str(out),
        "spark.executor.heartbeatInterval": f"{int(heartbeat_s * 1000)}ms",
    }


@dataclass
class ListenerLog:
    ends: pd.DataFrame
    progress: pd.DataFrame
    bad_lines: int


def parse(path: Path) -> ListenerLog:
    """Read one listener file. A torn last line (the driver was killed mid-write) is counted in
    ``bad_lines`` and skipped; every complete line is kept."""
    ends: list[dict[str, Any]] = []
    progress: list[dict[str, Any]] = []
    bad = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            kind = rec.get("kind")
            if kind == "end":
                ends.append({c: rec.get(c) for c in END_COLUMNS})
            elif kind == "progress":
                progress.append({c: rec.get(c) for c in PROGRESS_COLUMNS})
    return ListenerLog(pd.DataFrame(ends, columns=END_COLUMNS), pd.DataFrame(progress, columns=PROGRESS_COLUMNS), bad)


def task_cpu(files: list[Path]) -> pd.DataFrame:
    """The executor plugin's per-task lines (task, stage, user_ns, cpu_ns, ok) from every executor;
    torn lines are skipped."""
    rows = []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and "task" in rec:
                    rows.append({k: rec.get(k) for k in ("task", "stage", "user_ns", "cpu_ns", "ok")})
    return pd.DataFrame(rows, columns=["task", "stage", "user_ns", "cpu_ns", "ok"])


def fetch_rates(progress: pd.DataFrame) -> pd.DataFrame:
    """Per heartbeat interval of each running task: remote bytes fetched in the interval and the
    fetch rate (bytes/s). Intervals where nothing arrived while the task waited on fetches are the
    starvation signature; this turns the progress lines into those intervals."""
    cols = ["task", "stage", "executor", "t_ms", "dt_s", "bytes", "rate_Bps", "wait_ms"]
    if progress.empty:
        return pd.DataFrame(columns=cols)
    p = progress.sort_values(["task", "t_ms"]).copy()
    g = p.groupby("task", sort=False)
    p["dt_s"] = g["t_ms"].diff() / 1000.0
    p["bytes"] = g["remote_bytes"].diff()
    p["wait_ms"] = g["fetch_wait_ms"].diff()
    p = p.dropna(subset=["dt_s"])
    p = p[p["dt_s"] > 0]
    p["rate_Bps"] = p["bytes"] / p["dt_s"]
    return p[cols].reset_index(drop=True)


def main() -> None:  # ``python -m shufflelab.listener`` builds the jar (make setup calls it)
    try:
        print(ensure_jar())
    except ListenerBuildError as exc:
        raise SystemExit(f"shufflelab listener: {exc}") from None


if __name__ == "__main__":
    main()
