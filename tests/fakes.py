"""Fakes of the runner's seams (shufflelab.emulate.protocols) for unit tests of its control logic
without root: a clock that moves only when something sleeps, a fabric whose switch may die, a Spark
cluster that may fail to start, driver processes that end (or not) when told. Never used by the product.

A fake driver that succeeds leaves what a real one leaves: its result file and a real Spark event
log (a fixture), so the run's record is assembled by the product's own code."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shufflelab.emulate import netns
from shufflelab.emulate import selftest as link_selftest
from shufflelab.emulate.protocols import Backend as BackendSeams
from shufflelab.emulate.protocols import MachineLost, ProcessLauncher
from shufflelab.emulate.spark import ClusterError, ClusterSpec
from shufflelab.netplan import NetPlan, PortCounters
from shufflelab.spec import ExperimentSpec
from shufflelab.spec import Link as SpecLink
from shufflelab.topology import Network, Port

EVENT_LOG = Path(__file__).parent / "fixtures" / "eventlogs" / "spark-3.5" / "plain" / "app-20261124133740-0000"


@dataclass
class Clock:
    """A monotonic clock that moves only when something sleeps; ``interrupt_at``: the sleep that
    reaches that time raises KeyboardInterrupt (Ctrl-C), once."""

    now: float = 0.0
    interrupt_at: float | None = None

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s
        if self.interrupt_at is not None and self.now >= self.interrupt_at:
            self.interrupt_at = None
            raise KeyboardInterrupt


@dataclass
class Job:
    """A job that ends by itself at ``ends_at`` (never when None); records how it was stopped."""

    clock: Clock
    ends_at: float | None
    stopped_with: list[float] = field(default_factory=list)

    def running(self) -> bool:
        if self.stopped_with:
            return False
        return self.ends_at is None or self.clock() < self.ends_at

    def stop(self, grace_s: float) -> None:
        self.stopped_with.append(grace_s)


@dataclass
class FakeLease:
    lease_id: str
    scratch: Path


@dataclass
class FakeFabric:
    """A fabric whose switch dies at ``dies_at`` (never when None); records what was asked of it."""

    clock: Clock
    dies_at: float | None = None
    why: str = "switch exited with status 1: port r:sw1 gone"
    network: Network | None = None
    lease: FakeLease | None = None
    configured: list[NetPlan] = field(default_factory=list)
    closed: bool = False
    lost_at: float | None = None  # a machine of the fabric is gone from then on (as a real host dropping off)
    lost_why: str = "host w1 (192.0.2.2) dropped off during the run: connection lost"
    cross_started: bool = False
    selftest_cache: dict[str, Any] = field(default_factory=dict)
    links: list[tuple[str, bool]] = field(default_factory=list)  # set_link calls: (host, up)

    def lost(self) -> bool:
        return self.lost_at is not None and self.clock() >= self.lost_at

    def switch_failure(self) -> str | None:
        if self.lost():
            return self.lost_why
        return self.why if self.dies_at is not None and self.clock() >= self.dies_at else None

    @property
    def places(self) -> Mapping[str, str]:
        assert self.network is not None
        return {n: f"place-{n}" for n in self.network.nodes}

    def interface(self, host: str) -> str:
        return "eth0"

    def set_link(self, host: str, up: bool) -> None:
        self.links.append((host, up))

    def configure(self, plan: NetPlan, restart_switch: bool = False) -> None:
        if self.lost():
            raise MachineLost(f"configure: {self.lost_why}")
        self.configured.append(plan)

    def counters(self, port: Port) -> PortCounters:
        return PortCounters(tx_bytes=0, tx_packets=0, drops=0, backlog_bytes=0, backlog_packets=0)

    def selftest(self, plan: NetPlan, run_dir: Path) -> list[dict[str, Any]]:
        """The product's self-test (:func:`shufflelab.emulate.selftest.for_run` and ``check``) over a
        link that delivers what the last :meth:`configure` shaped it to (see :class:`Link`)."""
        link = Link(self)

        def measure(log_dir: Path, links: Mapping[str, SpecLink]) -> list[link_selftest.LinkCheck]:
            assert self.network is not None
            return link_selftest.check(self.places, self.network, log_dir, links, run=link.run, launch=link.launch)

        return link_selftest.for_run(plan, self, run_dir, self.selftest_cache, measure=measure)

    def start_queue_sampler(self, spec: ExperimentSpec, out: Path, launch: ProcessLauncher) -> FakeProcess | None:
        return None  # as the userspace switch: it samples itself

    def start_cross_traffic(self) -> None:
        self.cross_started = True

    def save_telemetry(self, run_dir: Path) -> None:
        pass


@dataclass
class Link:
    """The commands of a link self-test on a fake fabric: ping answers with the configured delay, and
    iperf3 receives the payload of a perfect link shaped at the rate the fabric was last configured
    with (the payload share of the rate, as a real HTB class delivers)."""

    fabric: FakeFabric

    def run(self, argv: Sequence[str], *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
        link = self.fabric.configured[-1].link  # what the fabric was last told to shape
        if argv[0] == "ping":
            rtt = 2 * link.delay_ms + 0.1
            return f"rtt min/avg/max/mdev = {rtt:.3f}/{rtt:.3f}/{rtt:.3f}/0.000 ms\n"
        if argv[0] == "ss":
            return f"LISTEN 0 5 0.0.0.0:{link_selftest.IPERF_PORT}"
        if argv[0] == "iperf3":  # the UDP probe, offered above the rate: the link delivers its rate
            bps = min(float(argv[argv.index("-b") + 1]), link.rate_mbps * 1e6 * link_selftest.PAYLOAD_SHARE)
            return json.dumps({"end": {"sum_received": {"bits_per_second": bps}}})
        raise AssertionError(f"unexpected self-test command {argv}")

    def launch(
        self, place: str, argv: Sequence[str], log: Path, /, env: Mapping[str, str] | None = None
    ) -> FakeProcess:
        return FakeProcess(self.fabric.clock, None)


@dataclass
class Behaviour:
    """What a fake driver process does: ends ``ends_after`` s after it started (never when None) and
    then leaves ``result`` ("ok": a result and the fixture event log; "error": a result saying the
    job failed; "none": no result at all, as a driver that crashed)."""

    ends_after: float | None = 3.0
    result: str = "ok"


@dataclass
class FakeProcess:
    """A process that ends at ``ends_at`` on ``clock`` (never when None), calling ``on_end`` once."""

    clock: Clock
    ends_at: float | None
    on_end: Any = None
    pid: int = 4242
    stopped_with: list[float] = field(default_factory=list)
    code: int | None = None

    def poll(self) -> int | None:
        if self.code is None and self.ends_at is not None and self.clock() >= self.ends_at:
            self.code = 0
            if self.on_end is not None:
                self.on_end()
        return self.code

    def stop(self, sig: int = 15, grace_s: float = 5.0) -> int | None:
        self.stopped_with.append(grace_s)
        if self.poll() is None:
            self.code = -sig
        return self.code


class FakeCluster:
    """A Spark cluster whose drivers behave as ``behaviours`` says (in launch order; the last one
    repeats); its start fails while ``backend.start_failures`` is positive."""

    def __init__(self, backend: Backend, spec: ClusterSpec, scratch: Path) -> None:
        self.backend, self.spec, self.scratch = backend, spec, scratch
        self.started = self.stopped = False
        self.dies = False  # alive() says False from now on (a daemon died between runs)
        self.found_leftovers = False

    @property
    def url(self) -> str:
        return "spark://10.77.1.1:7077"

    def start(self) -> None:
        left = self.scratch / "w1" / "work" / "app-1"  # state a start leaves behind
        self.found_leftovers = left.exists()
        left.mkdir(parents=True, exist_ok=True)
        if self.backend.start_failures > 0:
            self.backend.start_failures -= 1
            raise ClusterError("Spark daemon on w1 exited (-9); see worker-w1.log")
        self.started = True

    def stop(self) -> None:
        self.stopped = True

    def alive(self) -> bool:
        return self.started and not self.stopped and not self.dies

    def app_conf(self, spec: ExperimentSpec, event_dir: Path, partitions: int | None, **kw: Any) -> dict[str, str]:
        return {"spark.eventLog.dir": f"file://{event_dir}"}

    def driver(self, request_path: Path, log: Path) -> FakeProcess:
        b = self.backend
        k = len(b.drivers)
        how = b.behaviours[min(k, len(b.behaviours) - 1)]
        request = json.loads(request_path.read_text())
        result = Path(request["result"])
        event_dir = Path(request["conf"]["spark.eventLog.dir"].removeprefix("file://"))

        def end() -> None:
            app_id = f"app-fake-{k:04d}"
            if how.result == "ok":
                shutil.copyfile(EVENT_LOG, event_dir / app_id)
                result.write_text(json.dumps({"ok": True, "app_id": app_id}))
            elif how.result == "error":
                result.write_text(json.dumps({"ok": False, "app_id": None, "error": "Py4JJavaError: boom\n\tat x"}))

        ends = None if how.ends_after is None else b.clock() + how.ends_after
        proc = FakeProcess(b.clock, ends, on_end=end)
        b.drivers.append(proc)
        return proc

    def session_ready(self, result: Path) -> bool:
        return result.with_suffix(".ready").exists()

    def log_marks(self) -> dict[str, int]:
        return {}

    def copy_logs_since(self, marks: dict[str, int], dest: Path, app_ids: list[str]) -> None:
        if self.backend.logs_error is not None:
            raise self.backend.logs_error

    def executor_cpu_ticks(self) -> tuple[int, int] | None:
        return None


@dataclass
class Backend:
    """Every seam faked; keeps what was made so that tests can look at it."""

    scratch: Path
    clock: Clock = field(default_factory=Clock)
    behaviours: list[Behaviour] = field(default_factory=lambda: [Behaviour()])
    start_failures: int = 0
    switch_dies_at: float | None = None
    machine_lost_at: float | None = None
    logs_error: Exception | None = None  # what copying a run's logs raises (None: it works)
    fabrics: list[FakeFabric] = field(default_factory=list)
    clusters: list[FakeCluster] = field(default_factory=list)
    drivers: list[FakeProcess] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)

    def seams(self) -> BackendSeams:
        return BackendSeams(
            open_fabric=self.open_fabric, new_cluster=self.new_cluster, run=self.run, launch=self.launch,
            clock=self.clock, sleep=self.clock.sleep,
        )  # fmt: skip

    @contextlib.contextmanager
    def open_fabric(self, network: Network, offloads: bool) -> Iterator[FakeFabric]:
        lease = FakeLease(f"f{len(self.fabrics)}", self.scratch / f"lease{len(self.fabrics)}")
        lease.scratch.mkdir(parents=True)
        fabric = FakeFabric(self.clock, dies_at=self.switch_dies_at, network=network, lease=lease)
        fabric.lost_at = self.machine_lost_at
        self.fabrics.append(fabric)
        try:
            yield fabric
        finally:
            fabric.closed = True

    def new_cluster(self, spec: ClusterSpec, fabric: Any, scratch: Path, log_dir: Path) -> FakeCluster:
        cluster = FakeCluster(self, spec, scratch)
        self.clusters.append(cluster)
        return cluster

    def run(self, argv: Sequence[str], *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
        self.commands.append(list(argv))
        return ""

    def launch(
        self, place: str, argv: Sequence[str], log: Path, /, env: Mapping[str, str] | None = None
    ) -> FakeProcess:
        return FakeProcess(self.clock, None)


class HereProcess:
    """A real process on this machine (its own session), as a launcher's process (``protocols.Process``)."""

    def __init__(self, argv: Sequence[str], log: Path, env: Mapping[str, str] | None) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as fh:
            self.popen = subprocess.Popen(
                list(argv), stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})}, start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 5.0) -> int | None:
        return netns.stop_group(self.popen, sig, grace_s)  # the product's own stop of a process group


@dataclass
class Here:
    """A command runner and a process launcher that run everything on this machine, whatever the
    place (a place is only a name here; no root): the seams for product code that needs real
    processes but no fabric. Records the places it was asked to act at and what it started."""

    places: set[str | None] = field(default_factory=set)
    procs: list[HereProcess] = field(default_factory=list)

    def run(self, argv: Sequence[str], *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
        self.places.add(place)
        return netns.run(argv, check=check, timeout=timeout)  # no namespace: here, as it is

    def launch(
        self, place: str, argv: Sequence[str], log: Path, /, env: Mapping[str, str] | None = None
    ) -> HereProcess:
        self.places.add(place)
        self.procs.append(HereProcess(argv, log, env))
        return self.procs[-1]

    def stop_all(self) -> None:
        for p in self.procs:
            p.stop(grace_s=2)


@dataclass
class Machines:
    """A staging (``protocols.Staging``) whose places each have files of their own, as machines do:
    place P's folders are below ``root/P``, which nothing else reads; files get there and back only
    through :meth:`put` and :meth:`get`, which record what they copied."""

    root: Path
    puts: list[tuple[str, str]] = field(default_factory=list)  # (place, path there)
    gets: list[tuple[str, str]] = field(default_factory=list)
    folders: list[tuple[str, str]] = field(default_factory=list)  # (place, folder there)

    def folder(self, place: str, local: Path) -> str:
        there = self.root / place / f"{len(self.folders):04d}-{local.name}"
        there.mkdir(parents=True)
        self.folders.append((place, str(there)))
        return str(there)

    def put(self, place: str, local: Path, remote: str) -> None:
        assert Path(remote).is_relative_to(self.root / place), (place, remote)
        shutil.copyfile(local, remote)
        self.puts.append((place, remote))

    def get(self, place: str, remote: str, local: Path) -> bool:
        assert Path(remote).is_relative_to(self.root / place), (place, remote)
        self.gets.append((place, remote))
        if not Path(remote).exists():
            return False
        shutil.copyfile(remote, local)
        return True

    def python(self, place: str) -> tuple[str, dict[str, str]]:
        return sys.executable, {"SHUFFLELAB_PLACE": place}

    def cache(self, place: str) -> str:
        return str(self.root / place / "cache")
