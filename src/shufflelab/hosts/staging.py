"""A run's files on inventory hosts: the hosts backend's
:class:`~shufflelab.emulate.protocols.Staging`.

A process the runner starts on a machine reads and writes files there, not in the controller's run
folder (machines share no folder with it). A local folder of the run stands for a folder in the
lease's scratch folder on each machine (``<scratch>/files/<k>-<name>``, removed with the lease;
the same path on every machine, whose lease folders share one path);
files go there and come back with SFTP, as the SSH user. The interpreter and ``PYTHONPATH`` are the
machine's (:class:`~shufflelab.hosts.paths.HostPaths`: the controller's paths, or its
``deploy_dir``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import asyncssh

from shufflelab.hosts.control import HostError, Session
from shufflelab.hosts.paths import HostPaths, pythonpath

if TYPE_CHECKING:
    from shufflelab.hosts.fabric import HostsFabric
    from shufflelab.hosts.remote import Loop


class SftpStaging:
    """Files of the run on the machines of the live fabric (``fabric()``: None when none is up)."""

    def __init__(self, loop: Loop, fabric: Callable[[], HostsFabric | None]) -> None:
        self._loop, self._fabric = loop, fabric
        self._folders: dict[tuple[str, str, Path], str] = {}  # (lease, place, local folder) -> folder there
        self._names: dict[tuple[str, Path], str] = {}  # (lease, local folder) -> its folder's name on every machine

    def _live(self) -> HostsFabric:
        fabric = self._fabric()
        if fabric is None:
            raise RuntimeError("files reach inventory hosts only while a fabric (and its lease) is up")
        return fabric

    def _session(self, place: str) -> Session:
        return self._live().leases[place].session

    def folder(self, place: str, local: Path) -> str:
        fabric = self._live()
        key = (fabric.lease.lease_id, place, local.resolve())
        if key not in self._folders:
            # one name on every machine: a local folder stands for the same path at each place
            name = self._names.setdefault(key[::2], f"{len(self._names):04d}-{local.name}")
            remote = f"{fabric.remote_scratch[place]}/files/{name}"
            session = self._session(place)
            self._loop.call(session.run(f"make a folder for {local.name}", ["mkdir", "-p", remote]))
            self._folders[key] = remote
        return self._folders[key]

    def put(self, place: str, local: Path, remote: str) -> None:
        self._loop.call(self._session(place).put(f"copy {local.name} to the host", local, remote))

    def get(self, place: str, remote: str, local: Path) -> bool:
        session = self._session(place)
        step = f"fetch {Path(remote).name}"

        async def fetch() -> bool:
            session.check_alive(step)
            try:
                async with session.conn.start_sftp_client() as sftp:
                    if not await sftp.exists(remote):
                        return False
                    local.parent.mkdir(parents=True, exist_ok=True)
                    await sftp.get(remote, str(local))
            except (asyncssh.Error, OSError) as exc:
                session.check_alive(step)
                with contextlib.suppress(OSError):
                    local.unlink(missing_ok=True)  # no half a file
                raise HostError(session.name, session.host.address, step, f"SFTP get {remote}: {exc}") from None
            return True

        return self._loop.call(fetch())

    def python(self, place: str) -> tuple[str, dict[str, str]]:
        paths = HostPaths.of(self._session(place).host)
        return paths.python, {"PYTHONPATH": pythonpath(paths)}

    def cache(self, place: str) -> str:
        return HostPaths.of(self._session(place).host).cache
