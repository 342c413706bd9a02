"""A Spark application on a small cluster, as the calibration model of the ``sim`` backend.

This is the model behind ``shufflelab calibrate``: the same experiment spec the
emulation backend runs, simulated from a workload fitted to one real run's event log. It is a
fluid discrete-event model in virtual time, pure (no clock, no I/O) and deterministic. The
document it reads and writes is plain JSON (units in the names), the format of the Rust core's
``run_spark`` (``crates/simcore/src/sparkjob.rs``); this module is its independent Python twin,
the oracle the tests compare the core against, and the engine used where the core is not built.

Model (a *job* here is the whole Spark application between its first job's submission and its
last job's end, which is how the lab measures ``runs.job_time_s``):

- **Stages** run one after another (true of the lab's workloads: each Spark job is a chain and the
  driver runs them in sequence). Stage *i* is submitted ``gap_s`` after stage *i−1* ended (driver
  time: planning, job boundaries); the application ends ``tail_s`` after the last stage.
- **Tasks** of a stage start in list order on free executor task slots (Spark's FIFO scheduler). A
  task may be pinned to an ``executor`` (slots ``e·slots_per_executor …``): a free slot takes the
  first pending task pinned to its executor, else the first unpinned one. This is Spark's delay
  scheduling for tasks whose input is cached on one executor (``spark.locality.wait`` = 3 s is
  longer than the waits here, so they wait for it). A task has two phases, holding its slot:
  1. *control*: ``latency_s`` (driver scheduling, launch and status RPCs, result delivery: not
     CPU in this model) plus ``control_round_trips`` × the bottleneck's current queueing round
     trip (two crossings of a full FIFO, since data and acknowledgements both cross the one shared
     port in topology ``shared``; zero while the queue is not standing);
  2. *work*: the fetch and the CPU work overlap, as in Spark's reducers, which process blocks as
     they arrive. The fetch is one fluid flow per remote source (``fetch_bytes``, wire bytes), all
     started at once. The CPU work is ``cpu_s`` core-seconds under **processor sharing** of the
     host's physical cores: with *n* tasks computing and *b* cores taken by other load, each
     progresses at ``min(1, (cores − b) / n)``. This is how several executors on fewer cores are
     modelled (3 one-core executors on 2 cores: each runs at 2/3 while all three compute). Only
     the work whose input is there can be done: ``cpu_s × (local_fraction + (1 − local_fraction)
     × fetched / fetch total)``; a task that has caught up with its data is *blocked* (Spark's
     fetch wait): it follows the arrivals and does not count in *n*. The task ends when both are
     done.
- **Network**: every inter-host flow crosses one bottleneck link (topology ``shared``) of wire
  capacity ``C``; flows share it equally (max-min on one link). Cross traffic is an assumption,
  not a packet model: constant-rate UDP of wire rate ``U`` reduces the capacity TCP can use to
  - loss-based TCP (cubic, reno): ``C − U``, but never less than each flow's *minimum-window rate*
    ``mss_wire_bytes / RTT_q`` (one segment per queueing round trip, the regime of a connection
    whose every window is cut by drops at a permanently full queue), so that ``U ≥ C`` does not
    starve the job for ever;
  - BBR: it ignores loss and paces at its max-filtered delivery rate, probing at gain 1.25; against
    an unresponsive flow in a FIFO the estimate settles at ``b = C − U/1.25`` (a probe at 1.25·b
    is delivered at ``C·1.25b/(U+1.25b)``, which equals ``b`` there) and it is delivered
    ``C·b/(U+b)`` while cruising;
  ``cross_tcp_flows`` long-lived TCP flows take their equal share like shuffle flows and never end.
- **Queueing delay**: the bottleneck's FIFO stands full (``RTT_q = 2 × queue_bytes / C``) while
  UDP alone fills it (``U ≥ C``) or while shuffle flows are active and either the TCP is
  loss-based (it fills the buffer) or there is UDP (BBR + UDP overloads the link); otherwise 0.
  Plus ``base_rtt_s`` (the propagation delay of the switch's ports) for every round trip.
- **RED/ECN or DCTCP** (the userspace switch's ports, ``red`` / ``tcp = "dctcp"``): no fluid
  formula says where such a queue settles, so a packet-level probe does (Rust
  ``simcore::bottleneck``, run per flow count and cached): the switch's own queue (token bucket,
  limit, RED marking/dropping, crate ``switchcore``) and its DCTCP window arithmetic on virtual
  window-limited senders with an ACK clock of ``base_rtt_s`` next to constant-rate non-ECT cross
  traffic. Its time-averaged backlog gives ``RTT_q = 2 × backlog / C`` and its TCP goodput the
  capacity the flows share (RED drops part of the UDP where the shuffle's marks keep the queue,
  so TCP may get more than ``C − U``).
- **CPU of cross traffic**: ``background_cores`` (the caller sets it from the UDP rate and the
  host's measured cost of forwarding it).

- **Losses of control messages**: while the cross traffic alone keeps the droptail FIFO full
  (``U ≥ C``), a control message meets drops, and a short message cannot recover by fast
  retransmit: each control round trip then costs ``control_loss_s`` more (the mean loss recovery,
  retransmission timeouts of ≥ 200 ms for a share of the exchanges), a platform input measured on
  the fabric without Spark (``benchmarks/control_latency.py``).

Not modelled: losses of control messages while only TCP fills the queue, TCP slow start and RTT
unfairness, disk, memory, stragglers beyond what the fitted per-task costs carry, stages running
in parallel.
"""

from __future__ import annotations

import math
from typing import Any

_EPS = 1e-9


def _validate(config: dict[str, Any]) -> None:
    p = config["platform"]
    if p["slots"] < 1:
        raise ValueError("platform.slots: at least one executor task slot")
    if p["host_cores"] <= 0:
        raise ValueError("platform.host_cores: must be > 0")
    if p["link_bytes_per_s"] <= 0:
        raise ValueError("platform.link_bytes_per_s: must be > 0")
    if p["tcp"] not in ("loss", "bbr", "dctcp"):
        raise ValueError("platform.tcp: 'loss' (cubic, reno), 'bbr' or 'dctcp'")
    if not p.get("base_rtt_s", 0.0) >= 0:
        raise ValueError("platform.base_rtt_s: must be >= 0")
    if not 0 <= p.get("control_loss_s", 0.0) < math.inf:
        raise ValueError("platform.control_loss_s: must be >= 0")
    red = p.get("red")
    if red is not None and not 0 <= red["min_bytes"] <= red["max_bytes"] <= p["queue_bytes"]:
        raise ValueError("platform.red: need 0 <= min_bytes <= max_bytes <= queue_bytes")
    for s in config["stages"]:
        for t in s["tasks"]:
            if t["cpu_s"] < 0 or t["latency_s"] < 0 or any(b < 0 for b in t["fetch_bytes"]):
                raise ValueError(f"stage {s['stage_id']}: negative task cost")
            if not 0.0 <= t.get("local_fraction", 0.0) <= 1.0:
                raise ValueError(f"stage {s['stage_id']}: local_fraction outside [0, 1]")


def queue_round_trip_s(platform: dict[str, Any], flows: int) -> float:
    """Round trip through the bottleneck's FIFO when it stands full, else 0."""
    c = platform["link_bytes_per_s"]
    u = platform.get("cross_bytes_per_s", 0.0)
    standing = u >= c or (flows > 0 and (platform["tcp"] == "loss" or u > 0))
    return 2.0 * platform["queue_bytes"] / c if standing else 0.0


def control_loss_s(platform: dict[str, Any]) -> float:
    """Loss recovery a control round trip adds: only while unresponsive cross traffic alone keeps a
    droptail FIFO full (the regime the fabric's control-latency benchmark measures)."""
    full = platform.get("red") is None and platform.get("cross_bytes_per_s", 0.0) >= platform["link_bytes_per_s"]
    return float(platform.get("control_loss_s", 0.0)) if full else 0.0


def tcp_capacity_bytes_per_s(platform: dict[str, Any], flows: int) -> float:
    """Capacity of the bottleneck left to ``flows`` TCP flows next to the cross traffic."""
    c = platform["link_bytes_per_s"]
    u = platform.get("cross_bytes_per_s", 0.0)
    if u <= 0:
        return float(c)
    rtt = queue_round_trip_s(platform, flows)
    segments = platform.get("min_window_segments", 1.5)
    floor = flows * segments * platform.get("mss_wire_bytes", 1514.0) / rtt if rtt > 0 else 0.0
    if platform["tcp"] == "bbr":
        b = c - u / 1.25
        share = c * b / (u + b) if b > 0 else 0.0
    else:
        share = c - u
    return float(min(c, max(share, floor)))


def packet_bottleneck(platform: dict[str, Any]) -> bool:
    """A RED/ECN queue or DCTCP senders: the operating point comes from the packet-level probe."""
    return platform.get("red") is not None or platform["tcp"] == "dctcp"


def probe(platform: dict[str, Any], flows: int) -> dict[str, Any]:
    """The packet-level probe of the bottleneck with ``flows`` TCP flows (Rust ``Platform::probe``)."""
    return {
        "link_bytes_per_s": platform["link_bytes_per_s"],
        "queue_bytes": platform["queue_bytes"],
        "red": platform.get("red"),
        "base_rtt_s": platform.get("base_rtt_s", 0.0),
        "flows": flows,
        "sender": "dctcp" if platform["tcp"] == "dctcp" else "loss",
        "ecn_capable": platform.get("ecn_capable", False),
        "growth": platform.get("growth", "reno"),
        "cross_bytes_per_s": platform.get("cross_bytes_per_s", 0.0),
        "mss_wire_bytes": platform.get("mss_wire_bytes", 1514.0),
        "min_window_segments": 2.0,
        "warmup_packets": 4_000,
        "measure_packets": 16_000,
        "seed": 1,
    }


def operating_point(probe_config: dict[str, Any]) -> dict[str, Any]:
    """Where a RED/ECN (or droptail) queue settles: the Rust core's packet-level model built on the
    userspace switch's own queue and DCTCP window logic (crate ``switchcore``). There is no Python
    copy of it: the twin shares it, as the switch and the simulator do."""
    import json

    import shufflelab_simcore as core

    return json.loads(core.bottleneck_operating_point(json.dumps(probe_config)))


class _Bottleneck:
    """The bottleneck as the model sees it (Rust ``Bottleneck``): fluid formulas for a droptail FIFO,
    the packet-level operating point (cached per flow count) for RED/ECN or DCTCP."""

    def __init__(self, platform: dict[str, Any]) -> None:
        self.p = platform
        self.ops: dict[int, dict[str, Any]] = {}

    def _op(self, flows: int) -> dict[str, Any]:
        if flows not in self.ops:
            self.ops[flows] = operating_point(probe(self.p, flows))
        return self.ops[flows]

    def round_trip_s(self, flows: int) -> float:
        base = self.p.get("base_rtt_s", 0.0)
        if not packet_bottleneck(self.p):
            return base + queue_round_trip_s(self.p, flows)
        return base + 2.0 * self._op(flows)["mean_backlog_bytes"] / self.p["link_bytes_per_s"]

    def tcp_capacity(self, flows: int) -> float:
        if not packet_bottleneck(self.p):
            return tcp_capacity_bytes_per_s(self.p, flows)
        if flows == 0:
            return 0.0
        rtt = self.round_trip_s(flows)
        segments = self.p.get("min_window_segments", 1.5)
        floor = flows * segments * self.p.get("mss_wire_bytes", 1514.0) / rtt if rtt > 0 else 0.0
        return float(min(self.p["link_bytes_per_s"], max(self._op(flows)["tcp_bytes_per_s"], floor)))


class _Task:
    __slots__ = (
        "stage", "index", "spec", "phase", "control_end", "flows", "fetch_total", "fetched",
        "work", "done", "local", "start_s", "work_at_s", "blocked_s", "slot",
    )  # fmt: skip

    def __init__(self, stage: int, index: int, spec: dict[str, Any]) -> None:
        self.stage = stage
        self.index = index
        self.spec = spec
        self.phase = "pending"  # pending | control | work | done
        self.control_end = 0.0
        self.flows: list[float] = []  # wire bytes left per flow
        self.fetch_total = float(sum(b for b in spec["fetch_bytes"] if b > 0))
        self.fetched = 0.0
        self.work = float(spec["cpu_s"])
        self.done = 0.0
        self.local = float(spec.get("local_fraction", 0.0)) if self.fetch_total > 0 else 1.0
        self.start_s = math.nan
        self.work_at_s = math.nan
        self.blocked_s = 0.0
        self.slot = -1

    def available(self) -> float:
        """CPU work whose input has arrived."""
        if self.fetch_total <= 0:
            return self.work
        return self.work * (self.local + (1.0 - self.local) * min(1.0, self.fetched / self.fetch_total))

    def live_flows(self) -> int:
        return sum(1 for b in self.flows if b > 0)


def simulate(config: dict[str, Any]) -> dict[str, Any]:
    """Run one configuration; return job time, per-stage spans and per-task spans (seconds)."""
    _validate(config)
    p = config["platform"]
    stages = config["stages"]
    cpu_avail = max(p["host_cores"] - p.get("background_cores", 0.0), 1e-3 * p["host_cores"])
    cross_flows = int(p.get("cross_tcp_flows", 0))
    net = _Bottleneck(p)
    per_executor = max(1, int(p.get("slots_per_executor", 1)))
    n_executors = max(1, p["slots"] // per_executor)
    now = 0.0
    free_slots = list(range(p["slots"]))
    running: list[_Task] = []
    pending: list[_Task] = []
    stage_rows: list[dict[str, Any]] = []
    task_rows: list[dict[str, Any]] = []
    network_bytes = 0.0
    si = -1  # index of the current (or last finished) stage
    active = False  # a stage has tasks not yet done
    left = 0  # its tasks not yet done
    stage_start = 0.0
    next_stage_at = stages[0]["gap_s"] if stages else 0.0

    def pinned(t: _Task) -> int:
        ex = int(t.spec.get("executor", -1))
        return ex if 0 <= ex < n_executors else -1

    def next_start() -> tuple[_Task, int] | None:
        """The next (task, slot) to start: a free slot takes the first pending task pinned to its
        executor, else the first unpinned one (tasks with cached input stay where it is)."""
        for slot in free_slots:
            ex = slot // per_executor
            for t in pending:
                if pinned(t) == ex:
                    return t, slot
            for t in pending:
                if pinned(t) < 0:
                    return t, slot
        return None

    def n_flows() -> int:
        return sum(t.live_flows() for t in running if t.phase == "work")

    def start_task(t: _Task, slot: int) -> None:
        pending.remove(t)
        free_slots.remove(slot)
        t.slot = slot
        t.start_s = now
        t.phase = "control"
        rtt = net.round_trip_s(n_flows() + cross_flows) + control_loss_s(p)
        t.control_end = now + t.spec["latency_s"] + t.spec.get("control_round_trips", 0.0) * rtt
        running.append(t)

    def step(t: _Task) -> bool:
        """Move ``t`` past what is over at ``now``; True if its phase changed."""
        if t.phase == "control" and t.control_end <= now + _EPS:
            t.phase, t.work_at_s = "work", now
            t.flows = [float(b) for b in t.spec["fetch_bytes"] if b > 0]
            if not t.flows:
                t.fetched = t.fetch_total
            step(t)
            return True
        if t.phase == "work" and t.live_flows() == 0 and t.done >= t.work - _EPS:
            t.phase = "done"
            return True
        return False

    while True:
        # Settle everything that happens at `now` without time passing.
        changed = True
        while changed:
            changed = False
            if not active and now >= next_stage_at - _EPS and si + 1 < len(stages):
                si += 1
                stage_start = now
                pending = [_Task(stages[si]["stage_id"], i, spec) for i, spec in enumerate(stages[si]["tasks"])]
                left = len(pending)
                active = True
                changed = True
            while (nxt := next_start()) is not None:
                start_task(*nxt)
                changed = True
            for t in list(running):
                if step(t):
                    changed = True
                if t.phase == "done":
                    running.remove(t)
                    free_slots.append(t.slot)
                    free_slots.sort()
                    task_rows.append(
                        {
                            "stage_id": t.stage,
                            "index": t.index,
                            "slot": t.slot,
                            "start_s": t.start_s,
                            "work_at_s": t.work_at_s,
                            "blocked_s": t.blocked_s,
                            "end_s": now,
                        }
                    )
                    left -= 1
            if active and left == 0:
                stage_rows.append(
                    {
                        "stage_id": stages[si]["stage_id"],
                        "start_s": stage_start,
                        "end_s": now,
                        "tasks": len(stages[si]["tasks"]),
                    }
                )
                active = False
                next_stage_at = now + (stages[si + 1]["gap_s"] if si + 1 < len(stages) else 0.0)
                changed = True
        if not active and si + 1 >= len(stages):
            break
        # Network rates at this instant: equal shares of what TCP gets of the bottleneck.
        flows = n_flows()
        flow_rate = net.tcp_capacity(flows + cross_flows) / (flows + cross_flows) if flows else 0.0
        # CPU: who computes (n) and who is blocked on its data.
        working = [t for t in running if t.phase == "work" and t.done < t.work - _EPS]
        supply = {}  # work per second arriving for each working task
        for t in working:
            lf = t.live_flows()
            supply[id(t)] = t.work * (1.0 - t.local) * lf * flow_rate / t.fetch_total if lf else 0.0
        computing = list(working)
        blocked: list[_Task] = []
        while True:
            rate = min(1.0, cpu_avail / len(computing)) if computing else 0.0
            caught = [t for t in computing if t.done >= t.available() - _EPS and supply[id(t)] < rate]
            if not caught:
                break
            for t in caught:
                computing.remove(t)
                blocked.append(t)
        cpu_rate = min(1.0, cpu_avail / len(computing)) if computing else 0.0
        # Time to the next event.
        dt = next_stage_at - now if not active else math.inf
        for t in running:
            if t.phase == "control":
                dt = min(dt, t.control_end - now)
            elif t.phase == "work" and t.live_flows():
                dt = min(dt, min(b for b in t.flows if b > 0) / flow_rate)
        for t in computing:
            dt = min(dt, (t.work - t.done) / cpu_rate)
            gap = t.available() - t.done
            if t.available() < t.work and cpu_rate > supply[id(t)] and gap > _EPS:
                dt = min(dt, gap / (cpu_rate - supply[id(t)]))
        if not math.isfinite(dt):  # pragma: no cover - every phase ends
            raise RuntimeError("simulation stalled (no event ahead)")
        dt = max(dt, 0.0)
        # Advance the fluid to the event.
        for t in running:
            if t.phase == "work" and t.flows:
                for k, b in enumerate(t.flows):
                    if b > 0:
                        moved = min(b, flow_rate * dt)
                        network_bytes += moved
                        t.fetched += moved
                        t.flows[k] = b - moved if b - moved > 1e-6 else 0.0
                if not t.live_flows():
                    t.fetched = t.fetch_total
        for t in computing:
            t.done = min(t.work, t.done + cpu_rate * dt, max(t.available(), t.done))
        for t in blocked:
            t.done = min(t.work, max(t.done, t.available()))
            t.blocked_s += dt
        now += dt

    end = now + config.get("tail_s", 0.0)
    return {"job_time_s": end, "stages": stage_rows, "tasks": task_rows, "network_bytes": network_bytes}
