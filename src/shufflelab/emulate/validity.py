"""Is a finished run what its scenario promised? A job that succeeded is not enough.

A scenario promises conditions, and a run counts (``status = 'ok'``) only when they held during
its job: the cross traffic ran through the whole job at its configured rate, every fault was
injected, and the link self-test passed where the spec refuses runs without it. A run that broke a
promise is stored as failed with the reason (so reports leave it out and a resumed experiment runs
it again).

The UDP promise is checked on the sender: ``udp_percent`` is the load *offered* to the
bottleneck, and at 100 % and above the bottleneck legitimately drops part of it, so the bytes
received or carried by the bottleneck are recorded but not held against the configured rate. The
bytes iperf3 sent during the job, divided by the job's duration, must be within
``UDP_RATE_TOLERANCE`` of the rate it was asked for. TCP flows are elastic (no configured rate):
they must run through the job and carry data during it.

The switch's own source (``cross_traffic.generator = "switch"``) is held to the same rule on what it
offered to the port's queue during the job (frame bytes, from the switch's status samples), with the
tolerance widened only by what its pattern makes random or lumpy (:func:`switch_tolerance`); it must
still be running at the end of the run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shufflelab.emulate.traffic import udp_payload_rate_bps
from shufflelab.spec import CrossTraffic, Fault

# iperf3's UDP sender during healthy Spark runs on this 2-core host, shared with other work
# (docs/design.md, "Run validity"): offered / configured over the job 0.9993-1.007 (15 runs at
# 50-100 % of 20 and 40 Mbit/s, jobs of 18-133 s; the window's edges cut pro rata from 1 s
# intervals). Under CPU contention single seconds dip to 0.78 and the sender catches up at 1.2 the
# next second, so a short job whose edge falls between the two is off by a percent or two. A client
# stalled or dead for 1 s of a 10 s job is off by 10 %; 5 % keeps every healthy run inside.
UDP_RATE_TOLERANCE = 0.05
# how far (s) the traffic's recorded start may lie after the job's start: the test's start is placed
# from the moment it was stopped and its duration (both to a few ms)
START_SLACK_S = 0.5


@dataclass(frozen=True)
class Window:
    """The job's span on the wall clock (epoch seconds)."""

    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


def traffic_problems(
    ct: CrossTraffic, rate_mbps: float, rows: Sequence[dict[str, Any]], window: Window | None
) -> list[str]:
    """What the cross traffic ``ct`` over a bottleneck of ``rate_mbps`` failed to deliver. ``rows``
    are the runner's cross-traffic rows (:meth:`~shufflelab.emulate.traffic.CrossTraffic.stop` plus
    ``job_bytes``/``job_seconds``: what the client sent within ``window``). Without a window (no job
    span known) only the client's survival and errors are judged."""
    if not ct.active:
        return []
    expected = [k for k, on in (("udp", ct.udp_percent > 0), ("tcp", ct.tcp_pairs > 0)) if on]
    problems = []
    in_switch = ct.generator == "switch"
    who = "the switch's source" if in_switch else "iperf3"
    for kind in expected:
        name = f"{kind.upper()} cross traffic" + (" (in the switch)" if in_switch else "")
        row = next((r for r in rows if r.get("kind") == kind), None)
        if row is None:
            problems.append(f"{name}: no {who} result")
            continue
        if row.get("error"):
            problems.append(f"{name}: {who} failed: {row['error']}")
        if row.get("alive_at_end") is False:
            gone = "stopped sending" if in_switch else "the iperf3 client exited"
            problems.append(f"{name}: {gone} before the run ended")
        if window is None or window.seconds <= 0:
            continue
        started = row.get("started_at")
        if started is not None and started > window.start + START_SLACK_S:
            problems.append(f"{name}: started {started - window.start:.1f} s after the job")
        sent, covered = row.get("job_bytes"), row.get("job_seconds")
        if sent is None or not covered:
            problems.append(f"{name}: no {'status samples' if in_switch else 'iperf3 intervals'} during the job")
            continue
        if kind == "tcp":
            if sent <= 0:
                problems.append(f"{name}: sent nothing during the job")
            continue
        configured = (
            switch_rate_bps(rate_mbps, ct.udp_percent) if in_switch else udp_payload_rate_bps(rate_mbps, ct.udp_percent)
        )
        tol = switch_tolerance(ct, configured, window.seconds) if in_switch else UDP_RATE_TOLERANCE
        # over the whole job: seconds the client did not report count as seconds it sent nothing
        ratio = sent * 8 / window.seconds / configured
        if abs(ratio - 1) > tol:
            problems.append(
                f"{name}: {'offered' if in_switch else 'sent'} {sent * 8 / window.seconds / 1e6:.2f} Mbit/s "
                f"during the job, configured {configured / 1e6:.2f} Mbit/s (ratio {ratio:.3f}, allowed "
                f"1 ± {tol:.3g}; {sent / 1e6:.1f} MB in {window.seconds:.1f} s)"
            )
    return problems


# the in-switch source's frames: a 1472-byte UDP datagram's full Ethernet frame (the switch's default)
SWITCH_FRAME_BYTES = 1514


def switch_rate_bps(rate_mbps: float, percent: float) -> float:
    """The in-switch source's mean rate in frame bits per second: ``percent`` % of the link (the same
    wire rate iperf3's ``udp_percent`` asks for)."""
    return rate_mbps * 1e6 * percent / 100.0


def switch_tolerance(ct: CrossTraffic, rate_bps: float, seconds: float) -> float:
    """How far the in-switch source's offered rate over ``seconds`` may lie from its mean. Its
    arrivals are computed, not sent by a process that can lag, so only its pattern makes it vary:
    ``UDP_RATE_TOLERANCE`` plus, for Poisson arrivals, 4 standard deviations of the count over the
    window (a Poisson count of mean N has sd sqrt(N); a healthy run is outside with probability
    < 1e-4) and, for on/off, one on-period at the peak rate (a window may cut one burst short or
    catch one more)."""
    n = rate_bps * seconds / 8 / SWITCH_FRAME_BYTES
    extra = 0.0
    if ct.pattern == "poisson" and n > 0:
        extra = 4 / math.sqrt(n)
    elif ct.pattern == "onoff" and seconds > 0:
        extra = (ct.on_ms + ct.off_ms) / 1000 / seconds
    return UDP_RATE_TOLERANCE + extra


def fault_problems(faults: Sequence[Fault], events: Sequence[Any]) -> list[str]:
    """Faults of the spec that were not carried out. ``events`` are
    :class:`~shufflelab.emulate.faults.FaultEvent` (or dicts with the same fields)."""
    problems = []
    by_index = {_get(e, "index"): e for e in events}
    for i, f in enumerate(faults):
        name = f"fault {i} ({f.kind}{' on ' + f.host if f.host else ''} at {f.at_s:g} s)"
        e = by_index.get(i)
        if e is None or _get(e, "started_at") is None:
            detail = _get(e, "detail") if e is not None else None
            problems.append(f"{name}: not injected" + (f" ({detail})" if detail else ""))
        elif _get(e, "error"):
            problems.append(f"{name}: {_get(e, 'error')}")
    return problems


def selftest_problems(mode: str, rows: Sequence[dict[str, Any]]) -> list[str]:
    """With ``telemetry.selftest = "refuse"`` every checked link must have passed."""
    if mode != "refuse":
        return []
    if not rows:
        return ["link self-test: no result (telemetry.selftest = 'refuse')"]
    return [f"link self-test: {r.get('port')}: {r.get('problem')}" for r in rows if not r.get("ok")]


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def verdict(status: str, cause: str | None, problems: Sequence[str]) -> tuple[str, str | None]:
    """A run's final status and cause: an ok run with broken promises becomes failed."""
    if status != "ok" or not problems:
        return status, cause
    return "failed", ("scenario not delivered: " + "; ".join(problems))[:500]
