"""Placing a trace's tasks on hosts, planning one replay, and turning agents' results into a job.

``plan(trace, nodes)`` assigns maps and reduces to hosts round-robin (maps from the first host,
reduces from the last, so with as many reduces as hosts each host runs one; ``placement =
"split"`` puts maps on the first half of the hosts and reduces on the second half, so that on a
two-switch topology every fetch crosses the inter-switch link as in seed 002's cross-rack
shuffle). ``collect`` reads the agents' JSON into a :class:`JobResult`: job completion time
(last reducer end - t0), shuffle time, and one row per fetch with its flow completion time; a job
with an agent that was not listening when it was first needed is not ok (fetches waited for it).
``run_local`` runs a whole replay on the loopback interface (one agent process per node, each on
its own port) -- what the unit tests and a dry run use; :class:`FabricJob` does the same on a
fabric's hosts through the backend's process launcher, the agents' files where each host sees them
(the backend's :class:`~shufflelab.emulate.protocols.Staging`: on machines over SSH, the lease's
folder there, the plan shipped and the results fetched back with SFTP). Both start the job once
every agent listens (:func:`_release`): the agents get a plan without ``t0``, each says when it
listens, and the job's start instant goes to every place then -- however long the agents took.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from shufflelab.emulate.protocols import SharedFiles
from shufflelab.mapreduce.agent import START, listening_path, write_json
from shufflelab.mapreduce.trace import Trace

if TYPE_CHECKING:
    from shufflelab.emulate.protocols import Process, ProcessLauncher, Staging

AGENT_PORT = 7600
Placement = Literal["round-robin", "split"]
READY_S = 60.0  # how long the agents may take to listen before the job starts anyway
START_MARGIN_S = 0.2  # from the release to t0: every agent sees the start file by then (10 ms polls)


def plan(
    trace: Trace,
    nodes: dict[str, tuple[str, int]],
    *,
    t0: float | None,
    placement: Placement = "round-robin",
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    names = list(nodes)
    if not names:
        raise ValueError("a replay needs at least one node")
    if placement == "split":
        if len(names) < 2:
            raise ValueError("placement 'split' needs at least two nodes")
        half = len(names) // 2
        mappers, reducers = names[:half], names[half:]
    else:
        mappers, reducers = names, list(reversed(names))
    return {
        "t0": t0,
        "timeout_s": timeout_s,
        "nodes": {n: [a[0], a[1]] for n, a in nodes.items()},
        "map_node": [mappers[i % len(mappers)] for i in range(len(trace.maps))],
        "reduce_node": [reducers[j % len(reducers)] for j in range(len(trace.reduces))],
        "trace": trace.model_dump(mode="json"),
    }


@dataclass
class JobResult:
    ok: bool
    job_time_s: float | None
    shuffle_end_s: float | None
    fetches: pd.DataFrame
    reducers: pd.DataFrame
    errors: list[str]

    def summary(self) -> dict[str, Any]:
        f = self.fetches
        fct = f["fct_s"] if not f.empty else pd.Series(dtype=float)
        return {
            "ok": self.ok,
            "job_time_s": self.job_time_s,
            "shuffle_end_s": self.shuffle_end_s,
            "fetches": len(f),
            "shuffle_bytes": int(f["bytes"].sum()) if not f.empty else 0,
            "fct_p50_s": float(fct.median()) if len(fct) else None,
            "fct_p99_s": float(fct.quantile(0.99)) if len(fct) else None,
            "errors": self.errors[:5],
        }


def late_agents(plan_: dict[str, Any], trace: Trace, results: list[dict[str, Any]]) -> dict[str, float]:
    """The agents that were ready (listening, and knowing ``t0``) only after they were first needed
    -- the end of their first map (its output may be fetched from then on) or their reducers'
    slow-start instant -- each with how long after ``t0`` it was ready."""
    t0 = float(plan_["t0"])
    due: dict[str, float] = {}
    for m, node in enumerate(plan_["map_node"]):
        due[node] = min(due.get(node, math.inf), trace.map_end_s(m))
    for node in plan_["reduce_node"]:
        due[node] = min(due.get(node, math.inf), trace.slowstart_s())
    out = {}
    for r in results:
        node = str(r.get("node"))
        at = max((float(x) for x in (r.get("t_listening"), r.get("t_ready")) if x is not None), default=None)
        if at is not None and float(at) > t0 + due.get(node, math.inf):
            out[node] = float(at) - t0
    return out


def collect(plan_: dict[str, Any], results: list[dict[str, Any]]) -> JobResult:
    """One job from every agent's result (a missing agent result makes the job not ok)."""
    trace = Trace.model_validate(plan_["trace"])
    t0 = float(plan_["t0"])
    fetch_rows = [f for r in results for f in r.get("fetches", [])]
    red_rows = [x for r in results for x in r.get("reducers", [])]
    errors = [f"{r.get('node')}: {e}" for r in results for e in r.get("errors", [])]
    late = late_agents(plan_, trace, results)
    errors += [f"{n}: ready only {s:.2f} s after the job's start (t0), later than its first map output or "
               "reducer was due: the replay's times are not the trace's" for n, s in sorted(late.items())]  # fmt: skip
    fetches = pd.DataFrame(fetch_rows)
    if not fetches.empty:
        fetches["fct_s"] = fetches["t_end"] - fetches["t_request"]
        fetches["start_s"] = fetches["t_request"] - t0
    reducers = pd.DataFrame(red_rows)
    expected = len(trace.maps) * len(trace.reduces)
    ok = (
        not late
        and len(results) == len(set(plan_["nodes"]))
        and all(r.get("ok") for r in results)
        and len(fetches) == expected
        and len(reducers) == len(trace.reduces)
    )
    if len(fetches) != expected:
        errors.append(f"{len(fetches)} of {expected} fetches completed")
    job = float(reducers["t_end"].max() - t0) if not reducers.empty and ok else None
    shuffle = float(reducers["t_shuffle_end"].max() - t0) if not reducers.empty and ok else None
    return JobResult(ok, job, shuffle, fetches, reducers, errors)


def _release(
    nodes: list[str],
    listening: Callable[[str], bool],
    alive: Callable[[], bool],
    ready_s: float,
    margin: Callable[[float], float],
    send: Callable[[float], None],
) -> float:
    """Start a job: wait until every node's agent listens (``listening``), one of them has exited
    (``alive`` false: it never will) or ``ready_s`` has passed, then send the job's start instant
    ``t0`` -- ``margin(seconds one round of listening checks took)`` from now -- and return it. An
    agent that was not ready in time is late, and the job not ok (:func:`late_agents`)."""
    give_up = time.monotonic() + ready_s
    left, took = list(nodes), 0.0
    while left:
        began = time.monotonic()
        left = [n for n in left if not listening(n)]
        took = max(took, time.monotonic() - began)
        if not left or not alive() or time.monotonic() > give_up:
            break
        time.sleep(0.02)
    t0 = time.time() + margin(took)
    send(t0)
    return t0


def run_local(
    trace: Trace,
    n_nodes: int,
    workdir: Path,
    base_port: int = 17600,
    timeout_s: float = 120.0,
    ready_s: float = READY_S,
    start_margin_s: float = START_MARGIN_S,
) -> JobResult:
    """Replay on 127.0.0.1, one agent process per node on ports base_port + i; the job starts as
    soon as every agent listens (at most ``ready_s`` after they were started), ``start_margin_s``
    after that: the time every agent has to read the start instant (an agent that reads it later
    is late, and the job not ok)."""
    workdir.mkdir(parents=True, exist_ok=True)
    nodes = {f"n{i}": ("127.0.0.1", base_port + i) for i in range(n_nodes)}
    p = plan(trace, nodes, t0=None, timeout_s=timeout_s)
    plan_path = workdir / "plan.json"
    write_json(plan_path, p)
    procs = {
        n: subprocess.Popen(
            [sys.executable, "-m", "shufflelab.mapreduce.agent", str(plan_path), n, str(workdir / f"{n}.json")],
            stdout=subprocess.DEVNULL,
            stderr=open(workdir / f"{n}.log", "w"),  # noqa: SIM115 - closed with the process
        )
        for n in nodes
    }
    results = []
    try:
        p["t0"] = _release(
            list(nodes), lambda n: listening_path(workdir / f"{n}.json").exists(),
            lambda: all(x.poll() is None for x in procs.values()), ready_s, lambda _: start_margin_s,
            lambda t0: write_json(workdir / START, {"t0": t0}),
        )  # fmt: skip
        for n, proc in procs.items():
            proc.wait(timeout=timeout_s + 10)
            out = workdir / f"{n}.json"
            if out.exists():
                results.append(json.loads(out.read_text()))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return collect(p, results)


class FabricJob:
    """One replay on a fabric: an agent per node, each at its host's place, started through the
    backend's ``launch``, its files where that place sees them (``staging``).

    ``places`` and ``addresses`` map node names to the host's place and address. :meth:`start`
    makes a folder for the agents' files at each place, ships the plan (``plan.json``, kept in the
    run's ``mapreduce/`` folder with the job's ``t0``), starts the agents one after the other, and
    starts the job once every agent listens (at most ``ready_s`` later): ``t0`` is sent to every
    place (``start.json``) with a margin of ``start_margin_s`` plus twice one round of listening
    checks per place, as a copy to each place takes about one such check. :meth:`result` brings each
    agent's result back into that folder. An agent that was ready only after it was first needed makes the job not ok
    (:func:`late_agents`): fetches waited for it.
    """

    def __init__(
        self,
        trace: Trace,
        places: dict[str, str],
        addresses: dict[str, str],
        run_dir: Path,
        launch: ProcessLauncher,
        *,
        staging: Staging | None = None,
        placement: Placement = "round-robin",
        timeout_s: float = 600.0,
        ready_s: float = READY_S,
        port: int = AGENT_PORT,
        start_margin_s: float = START_MARGIN_S,
    ) -> None:
        self.run_dir = run_dir / "mapreduce"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.places, self.launch = places, launch
        self.staging: Staging = staging if staging is not None else SharedFiles()
        self.ready_s, self.start_margin_s = ready_s, start_margin_s
        nodes = {n: (addresses[n], port) for n in places}
        self.plan = plan(trace, nodes, t0=None, placement=placement, timeout_s=timeout_s)
        self.plan_path = self.run_dir / "plan.json"
        self.folders: dict[str, str] = {}  # place -> the folder of the agents' files there
        self.procs: dict[str, Process] = {}

    def start(self) -> None:
        for place in dict.fromkeys(self.places.values()):
            self.folders[place] = self.staging.folder(place, self.run_dir)
        write_json(self.plan_path, self.plan)
        for place, folder in self.folders.items():
            self.staging.put(place, self.plan_path, f"{folder}/plan.json")
        for n, place in self.places.items():
            python, env = self.staging.python(place)
            folder = self.folders[place]
            argv = [python, "-m", "shufflelab.mapreduce.agent", f"{folder}/plan.json", n, f"{folder}/{n}.json"]
            self.procs[n] = self.launch(place, argv, self.run_dir / f"{n}.log", env=env or None)
        self.plan["t0"] = _release(
            list(self.places), self._listening, lambda: all(p.poll() is None for p in self.procs.values()),
            self.ready_s, lambda took: self.start_margin_s + 2 * took / len(self.places) * len(self.folders),
            self._send_start,
        )  # fmt: skip
        write_json(self.plan_path, self.plan)  # the run's record of the plan, with its t0

    def _listening(self, n: str) -> bool:
        place = self.places[n]
        return self.staging.get(place, str(listening_path(Path(self.folders[place], f"{n}.json"))),
                                listening_path(self.run_dir / f"{n}.json"))  # fmt: skip

    def _send_start(self, t0: float) -> None:
        start = self.run_dir / START
        write_json(start, {"t0": t0})
        for place, folder in self.folders.items():
            self.staging.put(place, start, f"{folder}/{START}")

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs.values())

    def stop(self) -> None:
        for p in self.procs.values():
            p.stop()

    def result(self) -> JobResult:
        """The job from every agent's result, each fetched into the run's ``mapreduce/`` folder."""
        results = []
        for n, place in self.places.items():
            out = self.run_dir / f"{n}.json"
            folder = self.folders.get(place)
            if folder is not None and self.staging.get(place, f"{folder}/{n}.json", out):
                results.append(json.loads(out.read_text()))
        return collect(self.plan, results)
