"""A SimPy reference of the simulator's model, written independently of the Rust core, used as
an oracle in tests and as the baseline of ``benchmarks/sim_speed.py``.

It reads the same configuration document as the core (``crates/simcore/src/model.rs``) and
supports what the seed-003 scenarios use: the ``fixed`` policy (each job's ``pushed_ops``), one
inter-cluster link (no storage NIC links) and no CPU jitter, in both network modes. Cores are
``simpy.Resource`` FIFO pools, one process per task walks storage → network → compute, as in the
SparkNDP paper's simulator. ``simpy`` is a development dependency (``pip install -e .[dev]``).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

_DUE_S = 1e-9


def _wire_bytes(net: dict[str, Any], payload: float) -> float:
    packets = max(1.0, math.ceil(payload / net["mss_bytes"]))
    return float(payload + net["header_bytes_per_flow"] + packets * net["header_bytes_per_packet"])


class _Job:
    def __init__(self, index: int, arrival_s: float, tasks: int) -> None:
        self.index = index
        self.arrival_s = arrival_s
        self.tasks_left = tasks
        self.finish_s = math.nan
        self.queue: deque[tuple[float, Any]] = deque()
        self.in_flight = 0
        self.state = "idle"  # idle | waiting | active


class _Network:
    """S_max admitted jobs share the transfer slots (a free one goes to the job with the fewest in
    flight, ties in turn; or to each job in turn); flows share the link fairly (``flow``) or take
    turns sending one chunk (``chunk``)."""

    def __init__(self, env: Any, cfg: dict[str, Any], max_flows: int) -> None:
        import simpy

        self.env = env
        self.mode = cfg["mode"]
        self.capacity = cfg["inter_cluster_bytes_per_s"]
        self.chunk = cfg["chunk_bytes"]
        self.s_max = cfg["max_concurrent_jobs"]
        self.max_flows = max_flows
        self.fair = cfg.get("slot_order", "fair") == "fair"
        self.active: list[_Job] = []
        self.turn = 0
        self.waiting: deque[_Job] = deque()
        self.in_flight = 0
        self.carried_bytes = 0.0
        # flow mode: remaining bytes per flow, last update time, timer version
        self.flows: dict[int, tuple[float, _Job, Any]] = {}
        self.next_id = 0
        self.updated_s = 0.0
        self.version = 0
        self.link = simpy.Resource(env, capacity=1)

    def transfer(self, job: _Job, wire: float) -> Any:
        done = self.env.event()
        job.queue.append((wire, done))
        if job.state == "idle":
            if len(self.active) < self.s_max:
                job.state = "active"
                self.active.append(job)
            else:
                job.state = "waiting"
                self.waiting.append(job)
        self._dispatch()
        return done

    def _dispatch(self) -> None:
        while self.in_flight < self.max_flows:
            n = len(self.active)
            ready = [(self.turn + i) % n for i in range(n) if self.active[(self.turn + i) % n].queue]
            if not ready:
                return
            # min() keeps the first of equals: the next in turn among the least served
            idx = min(ready, key=lambda i: self.active[i].in_flight) if self.fair else ready[0]
            job = self.active[idx]
            wire, done = job.queue.popleft()
            job.in_flight += 1
            self.in_flight += 1
            self.turn = idx + 1
            self._start(job, wire, done)

    def _finished(self, job: _Job, done: Any, dispatch: bool = True) -> None:
        self.in_flight -= 1
        job.in_flight -= 1
        if job.in_flight == 0 and not job.queue:
            job.state = "idle"
            idx = self.active.index(job)
            self.active.pop(idx)
            if self.turn > idx:
                self.turn -= 1
            if self.waiting:
                nxt = self.waiting.popleft()
                nxt.state = "active"
                self.active.append(nxt)
        if dispatch:
            self._dispatch()
        done.succeed()

    def _start(self, job: _Job, wire: float, done: Any) -> None:
        if self.mode == "chunk":
            self.env.process(self._chunks(job, wire, done))
            return
        self._advance()
        self.flows[self.next_id] = (wire, job, done)
        self.next_id += 1
        self._reschedule()

    def _chunks(self, job: _Job, wire: float, done: Any) -> Any:
        left = wire
        while left > 1e-9:
            size = min(self.chunk, left)
            with self.link.request() as req:
                yield req
                yield self.env.timeout(size / self.capacity)
            left -= size
            self.carried_bytes += size
        self._finished(job, done)

    # flow mode: every flow gets capacity / n
    def _rate(self) -> float:
        return self.capacity / len(self.flows) if self.flows else 0.0

    def _advance(self) -> None:
        dt = self.env.now - self.updated_s
        if dt > 0 and self.flows:
            rate = self._rate()
            self.carried_bytes += rate * dt * len(self.flows)
            self.flows = {k: (b - rate * dt, j, d) for k, (b, j, d) in self.flows.items()}
        self.updated_s = self.env.now

    def _reschedule(self) -> None:
        self.version += 1
        if not self.flows:
            return
        rate = self._rate()
        smallest = min(b for b, _, _ in self.flows.values())
        timer = self.env.timeout(max(0.0, smallest / rate))
        version = self.version
        timer.callbacks.append(lambda _ev: self._fire(version))

    def _fire(self, version: int) -> None:
        if version != self.version:
            return
        self._advance()
        rate = self._rate()
        due = [k for k, (b, _, _) in self.flows.items() if b <= rate * _DUE_S or b <= 1e-9]
        finished = [self.flows.pop(k) for k in due]
        # free every slot of the batch before handing any out again
        for _, job, done in finished:
            self._finished(job, done, dispatch=False)
        self._dispatch()
        self._reschedule()


def simulate(config: dict[str, Any]) -> dict[str, Any]:
    """Run a core configuration in SimPy; returns ``{"jobs": [...], "carried_bytes": ...}`` with
    the same per-job fields as the core (``duration_s``, ``finish_s``, ``pushed_ops``...)."""
    import simpy

    if config["policy"] != "fixed":
        raise ValueError("the SimPy reference runs the fixed policy only")
    net = config["network"]
    if net.get("storage_nic_bytes_per_s") is not None or config.get("cpu_jitter", 0) != 0:
        raise ValueError("the SimPy reference needs no storage NIC links and cpu_jitter = 0")
    env = simpy.Environment()
    cores = {name: config[name]["machines"] * config[name]["cores_per_machine"] for name in ("storage", "compute")}
    hz = {name: config[name]["core_hz"] * config[name].get("efficiency", 1.0) for name in ("storage", "compute")}
    pools = {name: simpy.Resource(env, capacity=n) for name, n in cores.items()}
    max_flows = net.get("max_concurrent_flows") or cores["compute"]
    network = _Network(env, net, max_flows)
    jobs: list[_Job] = []

    def task(job: _Job, s_cycles: float, wire: float, c_cycles: float) -> Any:
        if s_cycles > 0:
            with pools["storage"].request() as req:
                yield req
                yield env.timeout(s_cycles / hz["storage"])
        yield network.transfer(job, wire)
        if c_cycles > 0:
            with pools["compute"].request() as req:
                yield req
                yield env.timeout(c_cycles / hz["compute"])
        job.tasks_left -= 1
        if job.tasks_left == 0:
            job.finish_s = env.now

    def arrive(index: int, spec: dict[str, Any]) -> Any:
        yield env.timeout(spec["arrival_s"])
        k = spec["pushed_ops"]
        n = max(1, math.ceil(spec["input_bytes"] / spec["task_input_bytes"]))
        job = _Job(index, spec["arrival_s"], n)
        jobs.append(job)
        for i in range(n):
            size = min(spec["task_input_bytes"], spec["input_bytes"] - i * spec["task_input_bytes"])
            s_cyc = c_cyc = 0.0
            for o, op in enumerate(spec["operators"]):
                if o == k:
                    payload = size
                if o < k:
                    s_cyc += op["cycles_per_byte"] * size
                else:
                    c_cyc += op["cycles_per_byte"] * size
                size /= op["reduction_factor"]
            if k == len(spec["operators"]):
                payload = size
            env.process(task(job, s_cyc, _wire_bytes(net, payload), c_cyc))

    for index, spec in enumerate(config["jobs"]):
        env.process(arrive(index, spec))
    env.run()
    jobs.sort(key=lambda j: j.index)
    return {
        "jobs": [
            {
                "job": j.index,
                "arrival_s": j.arrival_s,
                "pushed_ops": config["jobs"][j.index]["pushed_ops"],
                "finish_s": j.finish_s,
                "duration_s": j.finish_s - j.arrival_s,
            }
            for j in jobs
        ],
        "carried_bytes": network.carried_bytes,
        "events": None,
    }
