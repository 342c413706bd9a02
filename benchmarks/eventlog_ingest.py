"""Benchmark: event-log ingestion throughput and memory, side by side with the Spark History Server.

The big log is made from a real one (default: the Spark 4.3 full-workload fixture): its job, stage,
task and SQL events are repeated with new ids (jobs, stages, tasks, SQL executions renumbered,
times shifted by the application's span per repetition) and every task is repeated ``--fan`` times
within its stage, until the log reaches ``--size-gb`` of uncompressed JSON -- a long application
with many tasks, the shape of a big production log. Then, in one run on the same file:

* ``shufflelab analyze`` in a subprocess (the whole command, interpreter start included): wall
  and CPU time (median of ``--repeat`` runs), MB/s of uncompressed log, peak RSS (from the kernel's
  rusage of the child), and the same for logs of a quarter and twice the size (how RSS grows);
* the Spark History Server from pyspark's jars on 127.0.0.1 over a directory holding only that log:
  the time until its REST API lists the application, and the time until it answers the
  application's ``/jobs`` (the whole log replayed into its store), the CPU time its JVM spent in
  between (all threads) and its peak RSS. On a shared machine wall time depends on what else runs;
  the CPU ratio depends less on it.

With ``--pairs K`` the full-size log is read K times by each side, alternating (shufflelab, then
the History Server, then shufflelab again...): on a shared machine each ratio is taken within a
pair measured together, and the load average is recorded with each pair. With ``--dir-apps N`` a
directory of N applications (copies of the quarter-size log with their own application ids) is
ingested with ``--workers 1`` and ``--workers 2``, alternating, ``--repeat`` times each: wall
time, CPU of the whole process tree and its peak memory (PSS summed over the tree, every 50 ms).

    .venv/bin/python benchmarks/eventlog_ingest.py --size-gb 0.116 --pairs 3 --dir-apps 8 \
        --out docs/benchmarks-eventlog-116mb.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT / "tests" / "fixtures" / "eventlogs" / "spark-4.3" / "zstd"

_SQL = "org.apache.spark.sql.execution.ui."
_SHIFTED = ("Submission Time", "Completion Time", "Launch Time", "Finish Time", "Getting Result Time")
_HEAD_ONLY = {
    "SparkListenerLogStart", "SparkListenerEnvironmentUpdate", "SparkListenerApplicationStart",
    "SparkListenerApplicationEnd", "SparkListenerResourceProfileAdded", "SparkListenerBlockManagerAdded",
    "SparkListenerBlockManagerRemoved", "SparkListenerExecutorAdded", "SparkListenerExecutorRemoved",
}  # fmt: skip


def _events(source: Path) -> list[dict[str, Any]]:
    from shufflelab.eventlog.compression import decompress
    from shufflelab.eventlog.files import discover

    src = discover([source])[0][0]
    text = b""
    for part in src.parts:
        with part.open() as fh:
            head = fh.read(16)
        from shufflelab.eventlog.files import codec_of

        with part.open() as fh:
            text += b"".join(decompress(fh, codec_of(part, head), part.name))
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def make_log(source: Path, dest: Path, size_bytes: int, fan: int) -> dict[str, Any]:
    """Write the big log; returns what it holds."""
    evs = _events(source)
    head = [e for e in evs if e["Event"] in _HEAD_ONLY and e["Event"] != "SparkListenerApplicationEnd"]
    body = [e for e in evs if e["Event"] not in _HEAD_ONLY]
    end = [e for e in evs if e["Event"] == "SparkListenerApplicationEnd"]
    jobs = 1 + max((e["Job ID"] for e in body if "Job ID" in e), default=0)
    stages = 1 + max((e["Stage Info"]["Stage ID"] for e in body if "Stage Info" in e), default=0)
    tasks = 1 + max((e["Task Info"]["Task ID"] for e in body if "Task Info" in e), default=0)
    sqls = 1 + max((e["executionId"] for e in body if "executionId" in e), default=0)
    times = [e["Submission Time"] for e in body if "Submission Time" in e]
    span = (max(times) - min(times) + 1000) if times else 1000
    n = {"tasks": 0, "jobs": 0, "stages": 0, "reps": 0}
    with open(dest, "wb") as out:
        for e in head:
            out.write(orjson.dumps(e) + b"\n")
        written = out.tell()
        rep = 0
        while written < size_bytes:
            for e in body:
                for copy in range(fan if "Task Info" in e else 1):
                    line = orjson.dumps(_renumber(e, rep, copy, fan, jobs, stages, tasks, sqls, span * rep))
                    out.write(line + b"\n")
                    written += len(line) + 1
                    kind = e["Event"]
                    n["tasks"] += kind == "SparkListenerTaskEnd"
                    n["jobs"] += kind == "SparkListenerJobEnd"
                    n["stages"] += kind == "SparkListenerStageCompleted"
            rep += 1
        for e in end:
            e = dict(e, Timestamp=e["Timestamp"] + span * rep)
            out.write(orjson.dumps(e) + b"\n")
        n["reps"] = rep
        n["bytes"] = out.tell()
    return n


def _renumber(e: dict[str, Any], rep: int, copy: int, fan: int, jobs: int, stages: int, tasks: int,
              sqls: int, shift: int) -> dict[str, Any]:  # fmt: skip
    if rep == 0 and copy == 0:
        return e
    e = orjson.loads(orjson.dumps(e))  # a deep copy
    so = rep * stages
    if "Job ID" in e:
        e["Job ID"] += rep * jobs
    if "Stage IDs" in e:
        e["Stage IDs"] = [s + so for s in e["Stage IDs"]]
    for info in [e.get("Stage Info"), *(e.get("Stage Infos") or [])]:
        if info:
            info["Stage ID"] += so
            info["Parent IDs"] = [p + so for p in info.get("Parent IDs", [])]
            for k in _SHIFTED:
                if info.get(k) is not None:
                    info[k] += shift
    if "Stage ID" in e:
        e["Stage ID"] += so
    ti = e.get("Task Info")
    if ti:
        ti["Task ID"] = (rep * fan + copy) * tasks + ti["Task ID"]
        ti["Index"] = ti["Index"] + copy * 1000
        for k in _SHIFTED:
            if ti.get(k):
                ti[k] += shift
    if "executionId" in e:
        e["executionId"] += rep * sqls
    props = e.get("Properties")
    if isinstance(props, dict) and "spark.sql.execution.id" in props:
        props["spark.sql.execution.id"] = str(int(props["spark.sql.execution.id"]) + rep * sqls)
    for k in (*_SHIFTED, "time"):
        if isinstance(e.get(k), int):
            e[k] += shift
    return e


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


class _TreeSampler:
    """Samples the process tree of ``pid`` every 50 ms: the peak of its summed PSS and each
    process's last CPU seconds (so the CPU of workers that are never waited for is counted)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kb, self.hwm_kb, self.cpu = pid, 0, 0, {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            total = 0
            for p in _tree(self.pid):
                try:
                    with open(f"/proc/{p}/smaps_rollup") as f:  # proportional: shared pages counted once
                        total += next((int(x.split()[1]) for x in f if x.startswith("Pss:")), 0)
                    self.cpu[p] = _cpu_s(p)
                except (OSError, ValueError):
                    pass
            self.peak_kb = max(self.peak_kb, total)
            try:  # the command's own peak RSS (its memory after exec, not the forked benchmark's)
                with open(f"/proc/{self.pid}/status") as f:
                    hwm = next((int(x.split()[1]) for x in f if x.startswith("VmHWM:")), 0)
                self.hwm_kb = max(self.hwm_kb, hwm)
            except (OSError, ValueError):
                pass
            self.done.wait(0.05)

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


def ingest(
    log: Path, work: Path, repeat: int = 1, workers: int | None = None, src: Path | None = None
) -> dict[str, Any]:
    """``shufflelab analyze`` (the whole command, interpreter start included) in a child process,
    ``repeat`` times into a new store: the median run's wall and CPU seconds, the highest peak RSS.
    CPU is the child's own and its waited-for children's (rusage) or, when higher, the sampled
    sum over its process tree (worker processes); memory is the higher of the child's peak RSS
    (VmHWM, sampled: the kernel's rusage of a child counts the benchmark's own RSS, which it had
    when forked) and the peak of the tree's summed PSS (shared pages counted once)."""
    env = {**os.environ, "PYTHONPATH": str(src or ROOT / "src")}
    extra = ["--workers", str(workers)] if workers else []
    runs = []
    for i in range(repeat):
        db = work / f"{log.name}-{i}.duckdb"
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "shufflelab.cli", "analyze", str(log), "--db", str(db), *extra],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
        sampler = _TreeSampler(p.pid)
        out = p.stdout.read() if p.stdout else b""
        sampler.stop()  # (the tree is sampled until the output closes, just before the exit)
        _, status, ru = os.wait4(p.pid, 0)
        secs = time.monotonic() - t0
        if status != 0:
            raise RuntimeError(f"analyze failed: {out.decode()[-2000:]}")
        db.unlink()
        cpu = max(ru.ru_utime + ru.ru_stime, sum(sampler.cpu.values()))
        runs.append((secs, cpu, max(sampler.hwm_kb, sampler.peak_kb) / 1024))
    secs, cpu, _ = sorted(runs)[len(runs) // 2]
    size = sum(f.stat().st_size for f in log.iterdir()) if log.is_dir() else log.stat().st_size
    return {
        "seconds": round(secs, 2),
        "cpu_seconds": round(cpu, 2),
        "mb_per_s": round(size / 1e6 / secs, 1),
        "peak_rss_mb": round(max(r[2] for r in runs), 1),
        "runs_seconds": [round(r[0], 2) for r in runs],
    }


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def history_server(log: Path, work: Path, app_id: str) -> dict[str, Any]:
    from shufflelab.eventlog.history import LocalHistoryServer

    logs = work / "hs-logs"
    logs.mkdir()
    with LocalHistoryServer(logs, work / "hs", heap="6g") as hs:
        assert hs.proc is not None
        cpu0 = _cpu_s(hs.proc.pid)
        os.link(log, logs / log.name)  # appears now: the History Server's clock starts here
        t0 = time.monotonic()
        listed = hs.wait(lambda: any(a["id"] == app_id for a in hs.get("/api/v1/applications") or []), 3600, "list")
        # the application's UI: the whole log replayed into the History Server's store
        replay = hs.wait(lambda: hs.get(f"/api/v1/applications/{app_id}/jobs") is not None, 3600, "replay")
        total = time.monotonic() - t0
        cpu = _cpu_s(hs.proc.pid) - cpu0
        with open(f"/proc/{hs.proc.pid}/status") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
        jobs = hs.get(f"/api/v1/applications/{app_id}/jobs") or []
    size = log.stat().st_size
    return {
        "listed_s": round(listed, 2),
        "replayed_s": round(total, 2),
        "replay_only_s": round(replay, 2),
        "cpu_seconds": round(cpu, 2),
        "mb_per_s": round(size / 1e6 / total, 1),
        "peak_rss_mb": round(hwm / 1024, 1),
        "jobs_listed": len(jobs),
    }


def pairs(log: Path, work: Path, app: str, n: int, hs: bool = True, before: Path | None = None) -> dict[str, Any]:
    """``shufflelab analyze`` and the History Server on the same log, alternating, ``n`` times: the
    ratios of each pair (History Server / shufflelab) and the load average when the pair began.
    With ``before`` (another checkout's ``src``), each pair also runs that checkout's ``analyze``
    right after this one's: its CPU time over this one's is ``before_cpu_ratio``."""
    out = []
    for i in range(n):
        load = os.getloadavg()[0]
        r = ingest(log, work)
        pair: dict[str, Any] = {"load_1min": round(load, 1), "shufflelab": r}
        line = f"  pair {i + 1}: load {load:.1f}, shufflelab {r['seconds']} s / {r['cpu_seconds']} CPU-s"
        if before is not None:
            b = ingest(log, work, src=before)
            pair |= {"before": b, "before_cpu_ratio": round(b["cpu_seconds"] / r["cpu_seconds"], 2)}
            line += f", before {b['seconds']} s / {b['cpu_seconds']} CPU-s ({pair['before_cpu_ratio']}x)"
        if hs:
            hs_work = work / f"hs-{i}"
            hs_work.mkdir()
            h = history_server(log, hs_work, app)
            pair |= {"history_server": h, "wall_ratio": round(h["replayed_s"] / r["seconds"], 1),
                     "cpu_ratio": round(h["cpu_seconds"] / r["cpu_seconds"], 1)}  # fmt: skip
            line += (f", History Server {h['replayed_s']} s / {h['cpu_seconds']} CPU-s: {pair['wall_ratio']}x wall, "
                     f"{pair['cpu_ratio']}x CPU")  # fmt: skip
        print(line, flush=True)
        out.append(pair)
    if not hs:
        return {"runs": out}
    med = sorted(p["cpu_ratio"] for p in out)[len(out) // 2]
    return {"runs": out, "median_cpu_ratio": med,
            "median_wall_ratio": sorted(p["wall_ratio"] for p in out)[len(out) // 2]}  # fmt: skip


def directory(log: Path, work: Path, app: str, n: int, repeat: int) -> dict[str, Any]:
    """``n`` copies of ``log``, each with its own application id, in one directory: ingested with
    1 and 2 worker processes, alternating, ``repeat`` times each (medians)."""
    d = work / "many"
    d.mkdir()
    body = log.read_bytes()
    old = f'"App ID":"{app}"'.encode()
    assert body.count(old) == 1, "the application id is written once"
    for i in range(n):
        new_id = f"{app}-copy{i:04d}"
        (d / new_id).write_bytes(body.replace(old, f'"App ID":"{new_id}"'.encode(), 1))
    del body
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for _ in range(repeat):
        for w in (1, 2):
            load = os.getloadavg()[0]
            r = ingest(d, work, workers=w)
            r["load_1min"] = round(load, 1)
            print(f"  {n} applications, --workers {w}: {r}", flush=True)
            runs[w].append(r)
    med = {w: sorted(rs, key=lambda r: r["seconds"])[len(rs) // 2] for w, rs in runs.items()}
    size = sum(f.stat().st_size for f in d.iterdir())
    return {
        "apps": n,
        "bytes": size,
        "runs": {str(w): rs for w, rs in runs.items()},
        "median_seconds": {str(w): med[w]["seconds"] for w in med},
        "speedup_1_to_2_workers": round(med[1]["seconds"] / med[2]["seconds"], 2),
        "speedup_per_pair": [round(a["seconds"] / b["seconds"], 2) for a, b in zip(runs[1], runs[2], strict=True)],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="a real event log to grow")
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--fan", type=int, default=20, help="copies of each task within its stage")
    ap.add_argument("--skip-history-server", action="store_true")
    ap.add_argument("--dir-only", action="store_true", help="only the --dir-apps directory")
    ap.add_argument("--repeat", type=int, default=3, help="runs of shufflelab on the full-size log (median)")
    ap.add_argument(
        "--pairs",
        type=int,
        default=0,
        help="alternate shufflelab and the History Server this many times on the full log (ratios per pair)",
    )
    ap.add_argument(
        "--before-src",
        type=Path,
        help="with --pairs: also run analyze from this src folder of another checkout in each pair "
        "(e.g. `git archive <commit> src | tar -x -C /tmp/before`)",
    )
    ap.add_argument(
        "--dir-apps",
        type=int,
        default=0,
        help="also a directory of this many applications: --workers 1 vs 2, alternating, --repeat times",
    )
    ap.add_argument("--out", type=Path)
    ap.add_argument("--work", type=Path, help="where the big logs go (default: a temporary directory)")
    a = ap.parse_args()
    source = a.source if a.source.name.startswith(("app", "local", "eventlog")) else next(a.source.iterdir())
    with tempfile.TemporaryDirectory(dir=a.work) as tmp:
        work = Path(tmp)
        app = next(e["App ID"] for e in _events(source) if e["Event"] == "SparkListenerApplicationStart")
        shown = source.relative_to(ROOT) if source.is_relative_to(ROOT) else source
        result: dict[str, Any] = {"source": str(shown), "fan": a.fan, "cpus": os.cpu_count()}
        sizes = (("quarter", 0.25),) if a.dir_only else (("quarter", 0.25), ("full", 1.0), ("double", 2.0))
        for label, frac in sizes:
            log = work / label / app
            log.parent.mkdir()
            t0 = time.monotonic()
            made = make_log(source, log, int(a.size_gb * frac * 1e9), a.fan)
            print(f"{label}: {made['bytes'] / 1e9:.2f} GB, {made['tasks']} tasks, {made['stages']} stages, "
                  f"{made['jobs']} jobs (made in {time.monotonic() - t0:.0f} s)", flush=True)  # fmt: skip
            r = ingest(log, work, repeat=a.repeat if label == "full" else 1)
            print(f"  shufflelab analyze: {r}", flush=True)
            result[label] = {"log": made, "shufflelab": r}
            if label == "full" and a.pairs and not (a.skip_history_server and a.before_src is None):
                result["pairs"] = pairs(log, work, app, a.pairs, not a.skip_history_server, a.before_src)
            elif label == "full" and not a.skip_history_server:
                h = history_server(log, work, app)
                print(f"  Spark History Server: {h}", flush=True)
                result[label]["history_server"] = h
                result["ratio_vs_history_server"] = round(h["replayed_s"] / r["seconds"], 1)
                result["cpu_ratio_vs_history_server"] = round(h["cpu_seconds"] / r["cpu_seconds"], 1)
            if label == "quarter" and a.dir_apps:
                result["directory"] = directory(log, work, app, a.dir_apps, a.repeat)
            log.unlink()
        result["peak_rss_mb_by_size"] = {label: result[label]["shufflelab"]["peak_rss_mb"] for label, _ in sizes}
        result["self_rusage_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(result, indent=1))
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
