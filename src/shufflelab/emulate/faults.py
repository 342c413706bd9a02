"""Fault injection during a run (seed 004's fault escape): a link down, an executor killed, a burst
of cross traffic, each timed from the moment the application's SparkSession is up, i.e. when its
first job is submitted (spec table ``[[faults]]``).

The runner calls :meth:`Injector.tick` from its wait loop (every 0.25 s) and :meth:`Injector.close`
in its ``finally``: whatever happens to the run, a downed link comes back up with its routes and a
burst's iperf3 processes are stopped, so nothing outlives the run. Every action is recorded with its
wall-clock times in ``faults.json`` next to the run (and in the results store's ``faults`` table):
what was done, to which host, when it started and ended, and what failed if it did.

What Spark did about it (failed tasks, fetch failures, stage re-attempts) is read from the run's
event log afterwards (:func:`recovery`).
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from shufflelab.emulate.protocols import CommandRunner, Fabric, ProcessLauncher
from shufflelab.emulate.traffic import CrossTraffic, udp_payload_rate_bps
from shufflelab.netplan import NetPlan
from shufflelab.spec import Fault


@dataclass
class FaultEvent:
    index: int
    kind: str
    host: str | None
    planned_at_s: float
    started_at: float | None = None  # wall clock (s)
    ended_at: float | None = None
    detail: str = ""
    error: str | None = None


@dataclass
class _Active:
    fault: Fault
    event: FaultEvent
    end_mono: float
    traffic: CrossTraffic | None = None


def executor_pids(ps_output: str) -> list[int]:
    """The live processes in ``ps -o pid=,stat= --ppid WORKER`` output: a worker's executors (a
    zombie, already dead, is left out). Pure."""
    out = []
    for line in ps_output.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].isdigit() and not words[1].startswith("Z"):
            out.append(int(words[0]))
    return out


class Injector:
    """Carries out the faults of ``plan``'s scenario on ``fabric`` for ``cluster`` (a
    :class:`~shufflelab.emulate.spark.SparkCluster` or the hosts backend's, for executor kills),
    through the backend's ``run`` and ``launch``: the same on namespaces and on machines over SSH
    (a host's link goes down and up through :meth:`~shufflelab.emulate.protocols.Fabric.set_link`)."""

    def __init__(
        self, plan: NetPlan, fabric: Fabric, cluster: Any, run_dir: Path, run: CommandRunner, launch: ProcessLauncher
    ) -> None:
        spec = plan.spec
        self.plan, self.spec, self.fabric, self.cluster, self.run_dir = plan, spec, fabric, cluster, run_dir
        self.run, self.launch = run, launch
        self.pending = sorted(enumerate(spec.faults), key=lambda p: p[1].at_s)
        self.active: list[_Active] = []
        self.events: list[FaultEvent] = []
        self.t0: float | None = None

    def tick(self) -> None:
        """Start the faults that are due, end the ones whose time is up. Fault times count from the
        moment the first application's SparkSession is up (its driver writes ``*.ready``; the
        workload's first job is submitted right after)."""
        if self.t0 is None:
            if not self.pending or not self.cluster.session_ready(self.run_dir / "driver_result_0.json"):
                return
            self.t0 = time.monotonic()
        now = time.monotonic()
        for a in [a for a in self.active if now >= a.end_mono]:
            self._end(a)
        while self.pending and now - self.t0 >= self.pending[0][1].at_s:
            i, f = self.pending.pop(0)
            self._begin(i, f)

    def close(self) -> list[FaultEvent]:
        """End every fault still in progress, write ``faults.json``; never raises."""
        for a in list(self.active):
            self._end(a)
        for i, f in self.pending:  # the job ended before these were due
            self.events.append(FaultEvent(i, f.kind, f.host, f.at_s, detail="not injected: the job ended first"))
        self.pending.clear()
        if self.spec.faults:
            with contextlib.suppress(OSError):
                (self.run_dir / "faults.json").write_text(json.dumps([asdict(e) for e in self.events], indent=1))
        return self.events

    # --- one fault ---------------------------------------------------------------------------

    def _begin(self, i: int, f: Fault) -> None:
        ev = FaultEvent(i, f.kind, f.host, f.at_s, started_at=time.time())
        self.events.append(ev)
        a = _Active(f, ev, time.monotonic() + f.duration_s)
        try:
            if f.kind == "link-down":
                assert f.host is not None
                self.fabric.set_link(f.host, up=False)
                ev.detail = f"{f.host}: {self.fabric.interface(f.host)} down for {f.duration_s:g} s"
                self.active.append(a)
            elif f.kind == "executor-kill":
                assert f.host is not None
                place, pid = self.fabric.places[f.host], self.cluster.daemons[f.host].pid
                kids = executor_pids(self.run(["ps", "-o", "pid=,stat=", "--ppid", str(pid)], place=place, check=False))
                if not kids:
                    raise RuntimeError(f"no executor process under {f.host}'s worker (pid {pid})")
                self.run(["kill", "-KILL", *map(str, kids)], place=place, check=False)
                ev.ended_at = time.time()
                ev.detail = f"{f.host}: SIGKILL to executor pid(s) {', '.join(map(str, kids))}"
            else:  # udp-burst
                src = f.host or self.spec.traffic_endpoints()[0]
                dst = self.spec.traffic_endpoints()[1]
                assert src is not None and dst is not None
                rate = f.rate_mbps or self.plan.link.rate_mbps
                tr = CrossTraffic(
                    self.fabric.places[src], self.fabric.places[dst], self.fabric.network.host_addresses[dst],
                    self.run_dir / f"fault{i}-traffic", f.duration_s + 5, launch=self.launch, run=self.run,
                )  # fmt: skip
                a.traffic = tr
                self.active.append(a)
                # its own port, so it never collides with the run's steady cross traffic
                tr._start("udp", 5301 + i, ["-u", "-b", str(udp_payload_rate_bps(rate, 100.0)), "-l", "1400"])
                ev.detail = f"UDP {rate:g} Mbit/s {src} -> {dst} for {f.duration_s:g} s"
        except Exception as exc:  # noqa: BLE001 - recorded; the run goes on
            ev.error = f"{type(exc).__name__}: {exc}"[:500]
            if a in self.active:
                self._end(a)
            ev.ended_at = ev.ended_at or time.time()

    def _end(self, a: _Active) -> None:
        if a in self.active:
            self.active.remove(a)
        f, ev = a.fault, a.event
        try:
            if f.kind == "link-down":
                assert f.host is not None
                self.fabric.set_link(f.host, up=True)  # with the routes down removed (the default route ...)
            elif a.traffic is not None:
                rows = a.traffic.stop()
                if rows and rows[0].get("bytes") is not None:
                    ev.detail += f"; sent {rows[0]['bytes'] / 1e6:.1f} MB"
                if not ev.error and rows and (rows[0].get("error") or rows[0].get("alive_at_end") is False):
                    # the burst's client died before its end: the burst did not happen as specified
                    why = rows[0].get("error") or "its iperf3 client exited before the burst's end"
                    ev.error = f"burst traffic: {why}"[:500]
        except Exception as exc:  # noqa: BLE001
            ev.error = (ev.error or "") + f" ending: {type(exc).__name__}: {exc}"[:500]
        ev.ended_at = time.time()


def recovery(tasks: pd.DataFrame | None, stages: pd.DataFrame | None = None) -> dict[str, Any]:
    """What Spark did to recover, from a run's task (and stage) tables: failed task attempts (with
    their reasons), fetch failures, and stage attempts beyond the first."""
    out: dict[str, Any] = {"failed_tasks": 0, "fetch_failures": 0, "stage_reattempts": 0, "reasons": {}}
    if tasks is not None and len(tasks) and "successful" in tasks:
        failed = ~tasks["successful"].fillna(False).astype(bool)
        reason = tasks["end_reason"].fillna("") if "end_reason" in tasks else pd.Series([""] * len(tasks))
        out["failed_tasks"] = int(failed.sum())
        out["fetch_failures"] = int((reason == "FetchFailed").sum())
        out["reasons"] = {str(k): int(v) for k, v in reason[failed].value_counts().items()}
    if stages is not None and len(stages) and "stage_attempt" in stages:
        out["stage_reattempts"] = int((stages["stage_attempt"] > 0).sum())
    return out
