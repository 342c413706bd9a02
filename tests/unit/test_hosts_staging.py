"""The hosts backend's staging (``hosts.staging.SftpStaging``), with a fake SSH connection whose SFTP
reaches a machine's own files (a dict): a local folder of the run stands for a folder in the lease's
scratch on each machine, made once per lease; files go there and come back only through SFTP; a
file the machine does not have comes back as False, not as an error; the machine's interpreter is
its own (its ``deploy_dir``'s when it has one); nothing reaches a machine without a live fabric."""

from __future__ import annotations

import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from shufflelab.hosts.control import Session, _Watch
from shufflelab.hosts.inventory import InventoryHost
from shufflelab.hosts.remote import Loop
from shufflelab.hosts.staging import SftpStaging


class _Sftp:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    async def __aenter__(self) -> _Sftp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def exists(self, path: str) -> bool:
        return path in self.files

    async def put(self, local: str, remote: str) -> None:
        self.files[remote] = Path(local).read_bytes()

    async def get(self, remote: str, local: str) -> None:
        Path(local).write_bytes(self.files[remote])


class _Conn:
    """A machine: the commands it ran and its own files (path -> bytes)."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.files: dict[str, bytes] = {}

    def is_closed(self) -> bool:
        return False

    async def run(self, command: str, input: str | None = None, check: bool = False) -> Any:
        self.ran.append(command)
        return SimpleNamespace(stdout="", stderr="", exit_status=0, exit_signal=None)

    def start_sftp_client(self) -> _Sftp:
        return _Sftp(self.files)


def _fabric(conns: dict[str, _Conn], lease_id: str = "abc123", deploy_dir: str | None = None) -> Any:
    def session(name: str, i: int) -> Session:
        host = InventoryHost(address=f"192.0.2.{i}", data_interface="eth1", agent=True, deploy_dir=deploy_dir)
        return Session(name, host, conns[name], 5.0, _Watch())  # type: ignore[arg-type]

    leases = {m: SimpleNamespace(session=session(m, i)) for i, m in enumerate(conns, start=1)}
    return SimpleNamespace(
        leases=leases,
        lease=SimpleNamespace(lease_id=lease_id),
        remote_scratch={m: f"/var/tmp/shufflelab-hosts/{lease_id}" for m in conns},
    )


def test_files_reach_a_machine_and_come_back_only_through_sftp(tmp_path: Path) -> None:
    conns = {"node1": _Conn(), "node2": _Conn()}
    fabric = _fabric(conns)
    loop = Loop()
    try:
        staging = SftpStaging(loop, lambda: fabric)
        local = tmp_path / "run-1" / "mapreduce"
        local.mkdir(parents=True)
        there = staging.folder("node1", local)
        assert there == "/var/tmp/shufflelab-hosts/abc123/files/0000-mapreduce"
        assert staging.folder("node1", local) == there  # made once
        assert staging.folder("node2", local) == there  # one path on every machine
        assert staging.folder("node2", tmp_path / "other") == "/var/tmp/shufflelab-hosts/abc123/files/0001-other"
        assert [shlex.split(c) for c in conns["node1"].ran] == [["mkdir", "-p", there]]
        (local / "plan.json").write_text('{"t0": 1}')
        staging.put("node1", local / "plan.json", f"{there}/plan.json")
        assert conns["node1"].files == {f"{there}/plan.json": b'{"t0": 1}'} and conns["node2"].files == {}
        # a result the agent wrote on its machine comes back; one it did not write does not
        conns["node1"].files[f"{there}/m1.json"] = b'{"ok": true}'
        assert staging.get("node1", f"{there}/m1.json", local / "m1.json")
        assert (local / "m1.json").read_text() == '{"ok": true}'
        assert not staging.get("node1", f"{there}/m2.json", local / "m2.json") and not (local / "m2.json").exists()
        # a new fabric (lease) gets folders of its own
        fabric2 = _fabric(conns, lease_id="def456")
        staging2 = SftpStaging(loop, lambda: fabric2)
        assert staging2.folder("node1", local) == "/var/tmp/shufflelab-hosts/def456/files/0000-mapreduce"
    finally:
        loop.close()


def test_the_machines_python_is_its_own(tmp_path: Path) -> None:
    loop = Loop()
    try:
        deployed = SftpStaging(loop, lambda: _fabric({"node1": _Conn()}, deploy_dir="/opt/sl"))
        python, env = deployed.python("node1")
        assert python.startswith("/opt/sl/venv/") and env == {"PYTHONPATH": "/opt/sl/src"}
        assert deployed.cache("node1") == "/opt/sl/cache"  # where deploy brings the jars
        none = SftpStaging(loop, lambda: None)
        with pytest.raises(RuntimeError, match="only while a fabric"):
            none.folder("node1", tmp_path)
    finally:
        loop.close()
