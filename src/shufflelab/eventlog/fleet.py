"""A synthetic fleet of Spark applications made from real event logs, with a known truth.

``generate(out, n, seed)`` writes ``n`` event logs to ``out/logs`` (and ``out/fleet.json``, the truth) from the real
logs in ``tests/fixtures`` (Spark 3.5 and 4.3 runs, and a lab run under 75 % UDP): each log is a
real one with a new application id, name and start time, and its time line *warped* -- a monotone
map of every time stamp -- so that the job takes longer, and the time it gained in the shuffle
stages is added to those tasks' fetch wait and run time (what a slower network does to a task's
record). Nothing else of the recorded log changes, so every log is a valid Spark 3.x/4.x log.

The fleet holds:

* **daily jobs** (names recurring once a day): each a time series whose job time drifts by its
  own rate per run, with log-normal noise (3 %); series 0 (``daily-000``) gains a **regression** at
  a known run (its longest shuffle-reading stage slows down: fetch wait), series 1 is **flat**
  (noise only), series 2 drifts +1.5 % a run;
* **ad hoc applications** (a name each);
* **network-bound** applications (about 15 % of the names, and series 3): their shuffle stages
  dilated so that the job gains 0.6-1.5x its span, the gain being fetch wait; and every
  application made from the lab's 75 %-UDP run, whose fetch wait is 2/3 of its core time;
* a few **failed** (a real failed log), **killed** (a real log of an application killed while it
  ran: no end) and **in-progress** (a finished log cut in the middle, named ``.inprogress``).

Deterministic for a seed. Used by the fleet report's unit tests and ``benchmarks/fleet_report.py``.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
TIME_KEYS = frozenset(
    {"Timestamp", "Submission Time", "Completion Time", "Launch Time", "Finish Time", "Getting Result Time", "time"}
)
# task metrics that are durations of the task (ms, or ns for the CPU ones), scaled with the time line
MS_METRICS = ("Executor Run Time", "Executor Deserialize Time", "Result Serialization Time", "JVM GC Time")
NS_METRICS = ("Executor CPU Time", "Executor Deserialize CPU Time")
DAY_MS = 86_400_000
START_MS = 1_798_761_600_000  # 2027-01-01T00:00Z
NOISE = 0.03  # log-normal sigma of a run's job time
NATIVELY_NETWORK_BOUND = ("udp75",)  # the lab's run under 75 % UDP: fetch wait is 2/3 of its core time
REGRESSION = 0.4  # the regressed series' job time grows by this share from its regression run on


@dataclass(frozen=True)
class Template:
    """One real log, parsed once."""

    name: str
    events: list[dict[str, Any]]
    app_id: str
    t0: int  # the application's start
    shuffle_stages: dict[int, tuple[int, int]]  # stage id -> (submitted, completed) of stages reading shuffle data
    span_ms: int  # first job submitted to last job end


@dataclass
class TruthApp:
    app_id: str
    name: str
    file: str
    kind: str  # daily | adhoc
    run: int  # its index in its name's series
    status: str  # ok | failed | killed | in-progress
    network_bound: bool
    template: str
    stretch: float  # the time line's overall factor


@dataclass
class Truth:
    seed: int
    apps: list[TruthApp] = field(default_factory=list)
    regressions: dict[str, int] = field(default_factory=dict)  # name -> first regressed run
    regressed_stage: dict[str, int] = field(default_factory=dict)  # name -> the stage that slowed
    flat: list[str] = field(default_factory=list)  # series with noise only
    drifting: dict[str, float] = field(default_factory=dict)  # name -> drift per run
    network_bound: list[str] = field(default_factory=list)  # app ids

    def to_json(self) -> str:
        d = asdict(self)
        return json.dumps(d, indent=1)


def _read(path: Path) -> list[dict[str, Any]]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [json.loads(line) for line in raw.decode().splitlines() if line.strip()]


def _template(name: str, path: Path) -> Template:
    events = _read(path)
    start = next(e for e in events if e["Event"] == "SparkListenerApplicationStart")
    reading: set[int] = set()
    for e in events:
        if e["Event"] == "SparkListenerTaskEnd":
            sr = (e.get("Task Metrics") or {}).get("Shuffle Read Metrics") or {}
            if sr.get("Remote Bytes Read", 0) + sr.get("Local Bytes Read", 0) > 0:
                reading.add(int(e["Stage ID"]))
    windows: dict[int, tuple[int, int]] = {}
    for e in events:
        if e["Event"] == "SparkListenerStageCompleted":
            si = e["Stage Info"]
            sid = int(si["Stage ID"])
            if sid in reading and si.get("Submission Time") and si.get("Completion Time"):
                windows[sid] = (int(si["Submission Time"]), int(si["Completion Time"]))
    subs = [int(e["Submission Time"]) for e in events if e["Event"] == "SparkListenerJobStart"]
    ends = [int(e["Completion Time"]) for e in events if e["Event"] == "SparkListenerJobEnd"]
    span = max(ends) - min(subs) if subs and ends else 0
    return Template(name, events, str(start["App ID"]), int(start["Timestamp"]), windows, span)


def templates() -> dict[str, Template]:
    """The real logs the fleet is made of: ``ok`` templates, ``failed`` and ``killed``."""
    logs = FIXTURES / "eventlogs"
    found = {
        "spark-3.5": logs / "spark-3.5" / "plain" / "app-20261124133740-0000",
        "spark-4.3": logs / "spark-4.3" / "plain" / "app-20261124131230-0000",
        "udp75": FIXTURES / "eventlog-sort-aggregate-udp75.jsonl.gz",
        "failed": logs / "spark-3.5" / "failed" / "app-20261124135157-0007",
        "killed": logs / "spark-3.5" / "killed" / "app-20261124135128-0006.inprogress",
    }
    for k, p in found.items():
        if not p.exists():
            raise FileNotFoundError(f"fleet template {k}: {p} is missing (the fleet is made from the test fixtures)")
    return {k: _template(k, p) for k, p in found.items()}


class _Warp:
    """t -> new start + stretch x (t - t0) + the extra time of dilated windows before t."""

    def __init__(self, t0: int, new_t0: int, stretch: float, windows: list[tuple[int, int, float]]):
        self.t0, self.new_t0, self.s, self.windows = t0, new_t0, stretch, windows

    def extra(self, t: float) -> float:
        return sum((g - 1) * max(0.0, min(t, b) - a) for a, b, g in self.windows if t > a)

    def __call__(self, t: int) -> int:
        return int(round(self.new_t0 + self.s * (t - self.t0 + self.extra(t))))


def _retime(node: Any, warp: _Warp) -> Any:
    if isinstance(node, dict):
        for k, v in node.items():
            if k in TIME_KEYS and isinstance(v, int) and v > 10**12:
                node[k] = warp(v)
            elif isinstance(v, dict | list):
                _retime(v, warp)
    elif isinstance(node, list):
        for v in node:
            _retime(v, warp)
    return node


def render(
    t: Template, app_id: str, name: str, new_t0: int, stretch: float, dilate: dict[int, float], cut: float | None = None
) -> list[str]:
    """The template's events as log lines for a new application: ids, name and times changed, the
    stages in ``dilate`` (stage id -> factor) slowed by that factor with the extra time as fetch
    wait (and run time) of their tasks; ``cut``: keep only this share of the lines (in progress)."""
    windows = [(a, b, g) for sid, (a, b) in t.shuffle_stages.items() if (g := dilate.get(sid, 1.0)) != 1.0]
    warp = _Warp(t.t0, new_t0, stretch, windows)
    lines = []
    for e0 in t.events:
        e = copy.deepcopy(e0)
        if e["Event"] == "SparkListenerTaskEnd":
            info, metrics = e.get("Task Info") or {}, e.get("Task Metrics") or {}
            launch, finish = info.get("Launch Time"), info.get("Finish Time")
            for k in MS_METRICS:
                if isinstance(metrics.get(k), int):
                    metrics[k] = int(round(metrics[k] * stretch))
            for k in NS_METRICS:
                if isinstance(metrics.get(k), int):
                    metrics[k] = int(round(metrics[k] * stretch))
            sr = metrics.get("Shuffle Read Metrics")
            if isinstance(sr, dict) and isinstance(sr.get("Fetch Wait Time"), int):
                sr["Fetch Wait Time"] = int(round(sr["Fetch Wait Time"] * stretch))
                if int(e["Stage ID"]) in dilate and launch and finish:
                    gained = int(round(stretch * (warp.extra(finish) - warp.extra(launch))))
                    sr["Fetch Wait Time"] += gained
                    if isinstance(metrics.get("Executor Run Time"), int):
                        metrics["Executor Run Time"] += gained
        elif e["Event"] == "SparkListenerApplicationStart":
            e["App Name"] = name
        _retime(e, warp)
        lines.append(json.dumps(e, separators=(",", ":")).replace(t.app_id, app_id))
    if cut is not None:
        lines = lines[: max(1, int(len(lines) * cut))]
    return lines


def _app_id(t_ms: int, i: int) -> str:
    return "app-" + datetime.fromtimestamp(t_ms / 1000, UTC).strftime("%Y%m%d%H%M%S") + f"-{i:04d}"


def generate(out: Path, n: int, seed: int = 0, runs: int = 15, network_share: float = 0.15) -> Truth:
    """Write ``n`` event logs in ``out/logs`` and ``out/fleet.json`` (the truth); see the module doc."""
    if n < 1:
        raise ValueError(f"n must be at least 1, not {n}")
    if runs < 6:
        raise ValueError(f"runs must be at least 6 (a series needs runs on both sides of a change), not {runs}")
    tpl = templates()
    ok_names = ("spark-3.5", "spark-4.3", "udp75")
    rng = np.random.default_rng(seed)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    truth = Truth(seed)
    n_daily = (n * 6 // 10) // runs  # ~60 % of the applications are daily jobs
    plan: list[tuple[str, str, int, int]] = []  # (name, kind, run, start)
    for d in range(n_daily):
        hour = int(rng.integers(0, 24 * 60)) * 60_000
        plan += [(f"daily-{d:03d}", "daily", r, START_MS + r * DAY_MS + hour) for r in range(runs)]
    span = runs * DAY_MS
    while len(plan) < n:
        plan.append((f"adhoc-{len(plan):05d}", "adhoc", 0, START_MS + int(rng.integers(0, span))))
    series: dict[str, dict[str, Any]] = {}
    for d in range(n_daily):
        name = f"daily-{d:03d}"
        template = ok_names[d % 2] if d < 4 else ok_names[int(rng.integers(0, 3))]
        drift = {0: 0.0, 1: 0.0, 2: 0.015}.get(d, float(rng.uniform(-0.005, 0.005)))
        net = d == 3 or (d >= 4 and rng.random() < network_share)
        series[name] = {"template": template, "drift": drift, "net": net, "g": float(rng.uniform(1.6, 2.5))}
        if d == 0:
            reg = int(runs * 0.6)
            t = tpl[template]
            stage, (a, b) = max(t.shuffle_stages.items(), key=lambda kv: kv[1][1] - kv[1][0])
            series[name]["regression"] = (reg, stage, 1 + REGRESSION * t.span_ms / max(1, b - a))
            truth.regressions[name], truth.regressed_stage[name] = reg, stage
        if d == 1:
            truth.flat.append(name)
        if drift and d == 2:
            truth.drifting[name] = drift
    for i, (name, kind, run, start) in enumerate(plan):
        u = rng.random()
        status = "ok"
        if kind == "adhoc" or run not in (0, runs - 1):  # a series keeps runs at both ends
            status = "failed" if u < 0.03 else "killed" if u < 0.05 else "in-progress" if u < 0.06 else "ok"
        if name in truth.regressions or name in truth.flat or name in truth.drifting:
            status = "ok"  # the known-truth series stay complete
        s = series.get(name) or {
            "template": ok_names[int(rng.integers(0, 3))],
            "drift": 0.0,
            "net": bool(rng.random() < network_share),
            "g": float(rng.uniform(1.6, 2.5)),
        }
        tname = {"failed": "failed", "killed": "killed"}.get(status, s["template"])
        t = tpl[tname]
        stretch = float((1 + s["drift"]) ** run * math.exp(rng.normal(0, NOISE)))
        dilate = {}
        if s["net"] and t.shuffle_stages:  # the shuffle stages gain f x the job's span, f = s["g"] - 1
            windows = sum(b - a for a, b in t.shuffle_stages.values())
            dilate = {sid: 1 + (s["g"] - 1) * t.span_ms / max(1, windows) for sid in t.shuffle_stages}
        if "regression" in s and run >= s["regression"][0]:
            _, stage, g = s["regression"]
            dilate[stage] = dilate.get(stage, 1.0) * g
        app_id = _app_id(start, i)
        lines = render(t, app_id, name, start, stretch, dilate, cut=0.5 if status == "in-progress" else None)
        fname = app_id + (".inprogress" if status in ("killed", "in-progress") else "")
        (logs / fname).write_text("\n".join(lines) + "\n")
        net_bound = (bool(s["net"]) or tname in NATIVELY_NETWORK_BOUND) and status == "ok"
        truth.apps.append(TruthApp(app_id, name, fname, kind, run, status, net_bound, tname, stretch))
        if net_bound:
            truth.network_bound.append(app_id)
    (out / "fleet.json").write_text(truth.to_json())
    return truth
