"""The hosts backend: the runner's :class:`~shufflelab.emulate.protocols.Backend` on inventory
hosts, reached only over SSH (asyncssh sessions on :class:`~shufflelab.hosts.remote.Loop`).

``with HostsBackend(inventory) as hb: EmulateRunner(..., backend=hb.backend()).run()``: the
sessions open on entry and close on exit. Each fabric takes a lease on every host it uses (a
lease file there records each change before it is made); leaving the fabric -- normally, on an
error, on Ctrl-C or SIGTERM -- stops the processes, removes the scratch folders and restores the
qdiscs and sysctls on every host. After a SIGKILL, ``shufflelab clean --hosts`` does the same
from the lease files.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from shufflelab.emulate.protocols import Backend, Fabric, Switches
from shufflelab.emulate.spark import ClusterSpec
from shufflelab.hosts import lease
from shufflelab.hosts.cluster import HostsCluster
from shufflelab.hosts.control import Session, connect
from shufflelab.hosts.fabric import HostsFabric, HostsLeaseInfo, data_address, settled
from shufflelab.hosts.inventory import Inventory
from shufflelab.hosts.probe import cpu_count, line_rate_mbps
from shufflelab.hosts.remote import Loop, SshProcess, run_local, run_remote
from shufflelab.hosts.safety import check_traffic
from shufflelab.hosts.staging import SftpStaging
from shufflelab.spec import SpecError
from shufflelab.topology import Network

RouterLine = tuple[str, float | None]  # the router host's data interface, its line rate (None: unknown)


class HostsBackend:
    def __init__(
        self,
        inv: Inventory,
        refuse: Callable[[RouterLine | None, Mapping[str, int | None]], str | None] | None = None,
        switches: Switches | None = None,
    ) -> None:
        """``refuse``: what the run cannot do once the router host's line rate and each inventory
        host's CPU count are known (a message: refused on entry, before anything is changed; None:
        it runs); given, the line rate is read on entry. ``switches``: makes the router host's
        userspace switch (:class:`shufflelab.switch.Switch`; None: the kernel datapath only)."""
        self.inv = inv
        self._refuse = refuse
        self._switches = switches
        self.router_line: RouterLine | None = None  # read on entry when the inventory names a router host
        self.loop = Loop()
        self.sessions: dict[str, Session] = {}
        self.fabric: HostsFabric | None = None
        self._connection: Any = None
        self._launched = 0
        self.cpus: dict[str, int | None] = {}  # inventory host -> its CPU count, read on entry
        self.staging = SftpStaging(self.loop, lambda: self.fabric)  # the run's files on the machines

    # -- lifetime ------------------------------------------------------------------------------
    def __enter__(self) -> HostsBackend:
        names = sorted(set(self.inv.map.values()) | ({self.inv.router} if self.inv.router else set()))
        self._connection = connect(self.inv, names)
        try:
            self.sessions = self.loop.call(self._connection.__aenter__())
            counted = self.loop.call(settled(*(cpu_count(s) for s in self.sessions.values())))
            router = self.sessions.get(self.inv.router) if self.inv.router else None
            if router is not None and self._refuse is not None:
                self.router_line = (router.host.data_interface, self.loop.call(line_rate_mbps(router)))
            cpus = dict(zip(self.sessions, counted, strict=True))
            refused = self._refuse(self.router_line, cpus) if self._refuse is not None else None
            if refused:  # read, nothing changed yet
                raise SpecError(refused)
        except BaseException:
            if self.sessions:
                self.loop.call(self._connection.__aexit__(None, None, None), timeout=30)
            self.loop.close()
            raise
        self.cpus = dict(zip(self.sessions, counted, strict=True))
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if self._connection is not None:
                self.loop.call(self._connection.__aexit__(None, None, None), timeout=30)
        finally:
            self.loop.close()

    def backend(self) -> Backend:
        return Backend(
            open_fabric=self.open_fabric,
            new_cluster=self.new_cluster,
            run=self.run,
            launch=self.launch,
            clean=self.clean,
            machines=self.machines,
            staging=self.staging,
            cpu_group=self.cpu_group,
        )

    def machines(self) -> dict[str, dict[str, Any]]:
        """Each spec host's machine (inventory name, SSH address, data interface, CPU count as read
        on entry), and the router host as ``"(router)"``: what a run's environment records."""
        placed = dict(self.inv.map)
        if self.inv.router:
            placed["(router)"] = self.inv.router
        return {
            spec_host: {"machine": name, "address": self.inv.hosts[name].address,
                        "data_interface": self.inv.hosts[name].data_interface, "cpus": self.cpus.get(name)}
            for spec_host, name in sorted(placed.items())
        }  # fmt: skip

    # -- the seams -------------------------------------------------------------------------------
    def run(self, argv: Sequence[str], *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
        """``argv`` on inventory host ``place`` over SSH (None: here, on the controller)."""
        if place is None:
            return run_local(argv, check, timeout)
        check_traffic(argv, self.fabric.data_addresses if self.fabric is not None else frozenset())
        return self.loop.call(run_remote(self.sessions[place], argv, check, timeout))

    def launch(
        self,
        place: str,
        argv: Sequence[str],
        log: Path,
        /,
        env: Mapping[str, str] | None = None,
        *,
        privileged: bool = False,
    ) -> SshProcess:
        """Start ``argv`` on inventory host ``place`` under the live fabric's lease; its log is kept
        on the host and fetched to ``log`` when it stops. ``privileged``: as root (``sudo -n`` for
        another user, the lease's tag passed on through ``env``), and stopped as root."""
        if self.fabric is None:
            raise RuntimeError("processes start on inventory hosts only while a fabric (and its lease) is up")
        check_traffic(argv, self.fabric.data_addresses)
        hl = self.fabric.leases[place]
        if privileged and hl.session.host.needs_sudo:
            argv = ["sudo", "-n", "--", "env", f"{lease.TAG_VAR}={hl.lease_id}", *argv]
        self._launched += 1
        remote_log = f"{self.fabric.remote_scratch[place]}/logs/{self._launched:04d}-{log.name}"
        proc = SshProcess(self.loop, self.sessions[place], argv, log, remote_log, privileged)

        async def start() -> None:
            tag = await hl.track_processes()
            await proc.start(tag, env or {})

        self.loop.call(start())
        return proc

    def cpu_group(self, place: str, name: str, cores: float) -> lease.LeasedCgroup:
        """A CPU group on inventory host ``place`` under the live fabric's lease (created by its
        ``create``, recorded in the lease first, removed with it)."""
        if self.fabric is None:
            raise RuntimeError("CPU groups are made on inventory hosts only while a fabric (and its lease) is up")
        return lease.LeasedCgroup(self.loop, self.fabric.leases[place], name, cores)

    def new_cluster(self, spec: ClusterSpec, fabric: Fabric, scratch: Path, log_dir: Path) -> HostsCluster:
        assert isinstance(fabric, HostsFabric)
        return HostsCluster(spec, fabric, self, log_dir)

    def clean(self) -> None:
        """Leftovers of crashed earlier runs on every host (leases of live controllers are kept)."""

        async def work() -> list[lease.CleanReport]:
            return list(
                await asyncio.gather(*(lease.clean_host(s, self.inv.ssh.lease_dir) for s in self.sessions.values()))
            )

        reports = self.loop.call(work())
        problems = [p for r in reports for p in r.problems]
        if problems:
            raise lease.RestoreError(problems)

    @contextlib.contextmanager
    def open_fabric(self, network: Network, offloads: bool) -> Iterator[HostsFabric]:
        """A fabric on the hosts the spec's hosts map to, under a fresh lease on each; everything
        it changed restored on exit (the lease files stay if something could not be)."""
        if self.fabric is not None:
            raise RuntimeError("one fabric at a time on the inventory hosts")
        places = {h: self.inv.map[h] for h in network.host_addresses}
        shared = any(p.ifname not in network.host_addresses for p in network.bottlenecks)
        router = self.inv.router if shared else None
        lid = lease.new_lease_id()
        machines = set(places.values()) | ({router} if router else set())
        leases = {n: lease.HostLease(self.sessions[n], lid, self.inv.ssh.lease_dir) for n in machines}
        local = Path(tempfile.mkdtemp(prefix=lease.local_folder_prefix(lid)))

        async def up() -> tuple[dict[str, str], dict[str, str]]:
            await settled(*(hl.open() for hl in leases.values()))
            scratch = await settled(*(hl.make_scratch() for hl in leases.values()))
            addrs = await settled(*(data_address(hl.session) for hl in leases.values()))
            return dict(zip(leases, addrs, strict=True)), dict(zip(leases, scratch, strict=True))

        async def down() -> None:
            results = await asyncio.gather(*(hl.restore() for hl in leases.values()), return_exceptions=True)
            problems = [p for r in results if isinstance(r, list) for p in r]
            problems += [str(r) for r in results if isinstance(r, BaseException)]
            if problems:
                raise lease.RestoreError(problems)

        try:
            addresses, scratch = self.loop.call(up())
            self.fabric = HostsFabric(
                self.loop,
                network,
                places,
                leases,
                addresses,
                HostsLeaseInfo(lid, local),
                scratch,
                router,
                seams=(self.run, self.launch),
                router_line=self.router_line,
                switches=self._switches,
            )
            yield self.fabric
        finally:
            try:
                if self.fabric is not None:
                    self.fabric.close()
            finally:
                self.fabric = None
                shutil.rmtree(local, ignore_errors=True)
            self.loop.call(down())
