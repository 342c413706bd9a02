"""The seams between the runner and the machines it runs on: commands, processes, fabric, cluster;
and between the fabrics and the userspace switch they run (:class:`UserspaceSwitch`, :class:`Switches`).

The runner and its workload drivers (:mod:`shufflelab.emulate.drivers`) reach the machines only
through these. Three implementations, none named as the protocol it implements:

- local, network namespaces on this machine (:mod:`shufflelab.emulate.local`):
  ``fabric.NamespaceFabric``, ``spark.SparkCluster``, ``netns.NamespaceProcess``,
  ``netns.NamespaceLease``;
- SSH, real hosts (:mod:`shufflelab.hosts`): ``HostsFabric``, ``HostsCluster``, ``SshProcess``,
  ``HostsLeaseInfo``;
- ``tests/fakes.py`` (the runner's control logic tested without root): ``FakeFabric``,
  ``FakeCluster``, ``FakeProcess``, ``FakeLease``.

(``make cycles`` fails on a class named as one of these protocols.)

Both fabrics run the userspace switch on the switch datapath as a :class:`UserspaceSwitch`, made by
the :class:`Switches` they are handed -- :class:`shufflelab.switch.controller.Switch` itself, given
by who builds the backend (the CLI: ``local.backend(switches=Switch)``, ``open_backend(...,
switches=Switch)``) -- so that neither backend imports ``switch/`` (``make cycles`` holds it).

A *place* is where the commands of one of the fabric's hosts run: a network namespace here, a
host's address on real hosts. The runner never looks inside it; it hands it back to the backend's
:class:`CommandRunner` and :class:`ProcessLauncher`.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Protocol

from shufflelab import cgroups

if TYPE_CHECKING:
    from shufflelab.emulate.spark import ClusterSpec
    from shufflelab.netplan import NetPlan, PortCounters
    from shufflelab.spec import ExperimentSpec
    from shufflelab.switch.config import SwitchConfig
    from shufflelab.topology import Network, Port


class MachineLost(RuntimeError):
    """A machine of the fabric cannot be reached any more (e.g. the SSH connection to a real host is
    gone). Nothing more can run on it: the runner records the run it happened in and ends the
    experiment (restoring the machines it still reaches) instead of starting clusters or runs."""


class Process(Protocol):
    """A long-running process the runner started (a driver, a sampler, an agent)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def stop(self, sig: int = ..., grace_s: float = ...) -> int | None: ...


class CommandRunner(Protocol):
    """Runs a short command at ``place`` (None: where the runner is) and returns its stdout;
    ``check``: a non-zero exit raises with the command and its stderr."""

    def __call__(
        self, argv: Sequence[str], *, place: str | None = None, check: bool = True, timeout: float = 60
    ) -> str: ...


class ProcessLauncher(Protocol):
    """Starts ``argv`` at ``place`` with its output in ``log``; the process lives until stopped."""

    def __call__(
        self, place: str, argv: Sequence[str], log: Path, /, env: Mapping[str, str] | None = None
    ) -> Process: ...


class Staging(Protocol):
    """A run's files where its processes run, and this checkout's Python there: what a process
    launched at a place reads and writes must be in a folder that place sees. Local namespaces see
    this machine's files (:class:`SharedFiles`: nothing to copy); a real host has its own (the
    hosts backend's copies them with SFTP into the lease's folder there)."""

    def folder(self, place: str, local: Path) -> str:
        """A folder at ``place`` standing for the local folder ``local`` (created, as empty as the
        run left it)."""
        ...

    def put(self, place: str, local: Path, remote: str) -> None:
        """The local file ``local`` copied to ``remote`` at ``place``."""
        ...

    def get(self, place: str, remote: str, local: Path) -> bool:
        """``remote`` at ``place`` copied to the local file ``local``; False when it is not there."""
        ...

    def python(self, place: str) -> tuple[str, dict[str, str]]:
        """The interpreter of this checkout at ``place`` and the environment it needs there."""
        ...

    def cache(self, place: str) -> str:
        """The folder at ``place`` holding this checkout's cache of built and fetched artifacts
        (:func:`shufflelab.artifacts.cache_root` here: the Hadoop jars, the NDP connector's jar)."""
        ...


class SharedFiles:
    """The places see this machine's files and Python (the local backend's namespaces, the fakes)."""

    def folder(self, place: str, local: Path) -> str:
        local.mkdir(parents=True, exist_ok=True)
        return str(local)

    def put(self, place: str, local: Path, remote: str) -> None:
        if Path(remote).resolve() != local.resolve():
            shutil.copyfile(local, remote)

    def get(self, place: str, remote: str, local: Path) -> bool:
        if Path(remote).resolve() != local.resolve() and Path(remote).exists():
            shutil.copyfile(remote, local)
        return local.exists()

    def python(self, place: str) -> tuple[str, dict[str, str]]:
        return sys.executable, {}

    def cache(self, place: str) -> str:
        from shufflelab import artifacts

        return str(artifacts.cache_root())


class CpuGroup(Protocol):
    """A group of processes at one place capped at ``cores`` CPUs (a cgroup v1 ``cpu`` group: the
    weak storage machines of TPC-H/NDP). :meth:`create` makes it or changes its cap to ``cores``."""

    cores: float

    @property
    def path(self) -> PurePath:
        """The group's folder where it is (this machine's, or the machine's)."""
        ...

    def create(self) -> None: ...

    def add(self, pid: int) -> None:
        """Move the running process ``pid`` of the place (all its threads) into the group."""
        ...

    def starting(self, argv: Sequence[str]) -> list[str]:
        """``argv`` made to start inside the group where the launcher allows it (else unchanged: then
        :meth:`add` moves it in once started)."""
        ...

    def remove(self) -> None:
        """The group removed, any process left in it moved back to its parent first."""
        ...


class CpuCaps(Protocol):
    """The group ``name`` at ``place`` capped at ``cores`` CPUs (not yet created): this machine's
    cgroups for its namespaces (:func:`shufflelab.cgroups.local_group`), a group on the machine
    under its lease over SSH."""

    def __call__(self, place: str, name: str, cores: float) -> CpuGroup: ...


class SwitchError(RuntimeError):
    """The userspace switch could not start, or died; the message carries its log's tail."""


class UserspaceSwitch(Protocol):
    """``shufflelab-switch`` at a place, as a fabric runs it on the switch datapath
    (:class:`shufflelab.switch.controller.Switch`, local and SSH alike); not started when made."""

    config: SwitchConfig
    process: Process | None  # while started

    def start(self, timeout_s: float = ...) -> None:
        """Until the switch is ready; :class:`SwitchError` (with its log's tail) if it does not become so."""
        ...

    def stop(self) -> dict[str, Any] | None:
        """Stop it; its final summary (per-port and flow counters)."""
        ...

    def alive(self) -> bool: ...

    def log_tail(self, chars: int = ...) -> str: ...

    def last_telemetry(self) -> dict[str, dict[str, float | str]]:
        """The latest telemetry row of every port (cumulative counters since this start)."""
        ...

    def save_telemetry(self, dest: Path, rename: Mapping[str, str] | None = ...) -> None:
        """Its telemetry CSV so far in ``dest``; ``rename``: a port's name in the switch -> the record's."""
        ...

    def save_status(self, dest: Path) -> None: ...

    def save_config_and_log(self, run_dir: Path) -> None: ...

    def start_cross(self) -> None:
        """Start its own cross-traffic sources (configured paused)."""
        ...


class Switches(Protocol):
    """The userspace switch with ``config`` at ``place``, reached through ``run`` and ``launch``, its
    files in the folder ``scratch`` there (``local``: a folder here for the launcher's log; ``binary``:
    where it is at the place, None: this machine's build): the class
    :class:`shufflelab.switch.controller.Switch`, which who builds a fabric hands it (the CLI does)."""

    def __call__(
        self,
        config: SwitchConfig,
        place: str,
        scratch: str,
        local: Path,
        run: CommandRunner,
        launch: ProcessLauncher,
        *,
        binary: str | None = None,
        name: str = "switch",
    ) -> UserspaceSwitch: ...


class Lease(Protocol):
    """A fabric's claim on the machines: its id and its scratch folder (removed with the fabric)."""

    @property
    def lease_id(self) -> str: ...

    @property
    def scratch(self) -> Path: ...


class Fabric(Protocol):
    """A live emulated network (see :class:`shufflelab.emulate.fabric.NamespaceFabric`)."""

    @property
    def network(self) -> Network: ...

    @property
    def lease(self) -> Lease: ...

    @property
    def places(self) -> Mapping[str, str]:
        """Host name -> its place."""
        ...

    def interface(self, host: str) -> str:
        """The interface at ``host``'s place that carries its traffic on the fabric (its link)."""
        ...

    def set_link(self, host: str, up: bool) -> None:
        """Take ``host``'s link down (a fault) or bring it up again with the routes the kernel removed
        with it; a link still down when the fabric is torn down comes up with it."""
        ...

    def configure(self, plan: NetPlan, restart_switch: bool = False) -> None:
        """Apply ``plan``'s datapath, shaping and TCP settings (idempotent); ``restart_switch``: fresh
        telemetry and counters for a new run."""
        ...

    def counters(self, port: Port) -> PortCounters: ...

    def switch_failure(self) -> str | None:
        """Why the datapath stopped forwarding (None: all is well)."""
        ...

    def selftest(self, plan: NetPlan, run_dir: Path) -> list[dict[str, Any]]:
        """The link self-test of ``plan``'s links (once per link configuration), in ``run_dir``."""
        ...

    def start_queue_sampler(self, spec: ExperimentSpec, out: Path, launch: ProcessLauncher) -> Process | None:
        """Start sampling the bottleneck queues into ``out`` (None: the datapath samples itself)."""
        ...

    def start_cross_traffic(self) -> None:
        """Start the datapath's own cross-traffic sources (``cross_traffic.generator = "switch"``)."""
        ...

    def save_telemetry(self, run_dir: Path) -> None:
        """Keep the datapath's own telemetry and configuration with the run (if it has any)."""
        ...


class Cluster(Protocol):
    """A Spark cluster on the fabric (see :class:`shufflelab.emulate.spark.SparkCluster`)."""

    @property
    def url(self) -> str: ...

    def start(self) -> None:
        """Until every daemon is ready; raises (and leaves the rest to :meth:`stop`) if one is not."""
        ...

    def stop(self) -> None: ...

    def alive(self) -> bool: ...

    def app_conf(
        self,
        spec: ExperimentSpec,
        event_dir: Path,
        partitions: int | None,
        cores_max: int | None = None,
        listener_out: Path | None = None,
    ) -> dict[str, str]:
        """The Spark conf of one application of ``spec`` on this cluster."""
        ...

    def driver(self, request_path: Path, log: Path) -> Process:
        """Start an application's driver (``shufflelab.workloads.driver`` on ``request_path``)."""
        ...

    def session_ready(self, result: Path) -> bool:
        """Whether the driver writing ``result`` has its SparkSession up (its ``.ready`` marker next to
        ``result``, wherever the driver runs)."""
        ...

    def log_marks(self) -> dict[str, int]: ...

    def copy_logs_since(self, marks: dict[str, int], dest: Path, app_ids: list[str]) -> None: ...

    def executor_cpu_ticks(self) -> tuple[int, int] | None:
        """Executors' user and system CPU so far in clock ticks (None: not known)."""
        ...


@dataclass(frozen=True)
class Backend:
    """How the runner reaches its machines (:func:`shufflelab.emulate.local.backend` by default)."""

    # a fabric for ``network`` (``offloads``: leave segmentation offloads on), torn down on exit
    open_fabric: Callable[[Network, bool], AbstractContextManager[Fabric]]
    # a (not yet started) cluster of ``ClusterSpec`` on the fabric: scratch folder, log folder
    new_cluster: Callable[[ClusterSpec, Fabric, Path, Path], Cluster]
    run: CommandRunner
    launch: ProcessLauncher
    clean: Callable[[], object] = lambda: None  # what crashed runs left behind
    # a run's files and Python at the places (default: the places see this machine's)
    staging: Staging = field(default_factory=SharedFiles)
    # CPU caps on groups of processes at the places (default: this machine's cgroups)
    cpu_group: CpuCaps = cgroups.local_group
    # the machines the spec's hosts run on, recorded in each run's environment ({}: this one)
    machines: Callable[[], dict[str, dict[str, Any]]] = dict
    clock: Callable[[], float] = field(default=time.monotonic)
    sleep: Callable[[float], None] = field(default=time.sleep)
