"""A real HDFS storage cluster inside the fabric: NameNode and DataNodes from Apache Hadoop's jars
(:mod:`~shufflelab.ndp.hadoop_jars`), started and stopped.

:class:`HdfsCluster` writes one configuration directory per host
(:mod:`~shufflelab.ndp.hdfs_config`), starts every daemon at its host's place through the
backend's process launcher (:class:`~shufflelab.emulate.protocols.ProcessLauncher`; a namespace of
the local fabric), bound to that host's address: the DataNodes first, then it formats and starts the
NameNode (the backend's command runner), and waits until every DataNode is live and reports free
space (NameNode JMX). Clients talk WebHDFS (plain HTTP): :meth:`HdfsCluster.put`,
:meth:`~HdfsCluster.get`, :meth:`~HdfsCluster.read` and :meth:`~HdfsCluster.block_locations` run
:func:`shufflelab.ndp.webhdfs.exchange` at the client host's place (this module's ``--http`` mode,
in the place's Python).

What the daemons and the client read and write is where their place sees it, through the
backend's :class:`~shufflelab.emulate.protocols.Staging` (namespaces see this machine's files; a
machine has its own): each host's configuration is written here and put into a folder at its
place, its name and data directories are folders there, Hadoop's jars are in the place's cache
(where ``shufflelab deploy`` brings them), and a file put into HDFS goes to the client's place
first (one read back comes from there).

Weak storage machines: :meth:`HdfsCluster.cpu_limit` puts a host's daemons into a cgroup
(v1 ``cpu`` controller, ``cpu.cfs_quota_us = cores x cpu.cfs_period_us``) through the backend's
:class:`~shufflelab.emulate.protocols.CpuCaps` -- this machine's (:mod:`shufflelab.cgroups`) for
namespaces, one on the machine under its lease over SSH; with a limit set before
:meth:`~HdfsCluster.start` each daemon starts inside the group (or joins it as it is spawned, where
the launcher cannot start it there) and its JVM sizes its GC and thread pools for that many CPUs
(``-XX:ActiveProcessorCount``). :meth:`~HdfsCluster.stop` kills the daemons and removes the cgroups.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath
from typing import TYPE_CHECKING, Any

from shufflelab import artifacts, cgroups
from shufflelab.emulate.protocols import (
    CommandRunner,
    CpuCaps,
    CpuGroup,
    Process,
    ProcessLauncher,
    SharedFiles,
    Staging,
)
from shufflelab.ndp.hadoop_jars import HadoopFetchError, ensure_jars
from shufflelab.ndp.hdfs_config import (
    CONF_FILES,
    DATANODE_CLASS,
    NAMENODE_CLASS,
    NN_HTTP_PORT,
    HdfsConfig,
    HdfsError,
    java_command,
    write_configs,
)
from shufflelab.ndp.webhdfs import BlockLocation, exchange, live_datanodes, parse_block_locations

if TYPE_CHECKING:
    from shufflelab.emulate.protocols import Fabric


# -- the cluster -------------------------------------------------------------------------------------
@dataclass
class HdfsCluster:
    """A NameNode and DataNodes on the fabric's hosts. Use as a context manager, or
    :meth:`start` / :meth:`stop`.

    ``places`` and ``addresses`` map hosts to their places and IPv4 addresses (a fabric's
    ``places`` and ``network.host_addresses``; see :meth:`on_fabric`); ``run`` and ``launch`` are the
    backend's seams that reach the places. ``client`` is the host WebHDFS requests are made from
    unless a call names another. ``replication`` defaults to the number of DataNodes, so every
    DataNode holds every block and can serve any pushdown."""

    places: Mapping[str, str]
    addresses: Mapping[str, str]
    namenode: str
    datanodes: Sequence[str]
    scratch: Path
    run: CommandRunner
    launch: ProcessLauncher
    replication: int | None = None
    block_bytes: int = 128 * 1024 * 1024
    client: str | None = None
    namenode_heap_mb: int = 384
    datanode_heap_mb: int = 256
    jars: Path | None = None  # Hadoop's jars here (default: :func:`~shufflelab.ndp.hadoop_jars.ensure_jars`)
    name: str = ""
    start_timeout_s: float = 120
    staging: Staging = field(default_factory=SharedFiles)  # the files at each place
    cpu_group: CpuCaps = cgroups.local_group  # CPU caps at the places
    config: HdfsConfig = field(init=False)
    daemons: dict[str, Process] = field(init=False, default_factory=dict)
    logs: dict[str, Path] = field(init=False, default_factory=dict)  # daemon -> its log
    cgroups: dict[str, CpuGroup] = field(init=False, default_factory=dict)
    timings: dict[str, float] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.config = HdfsConfig(
            namenode=self.namenode,
            datanodes=tuple(self.datanodes),
            addresses=dict(self.addresses),
            scratch=Path(self.scratch),
            replication=len(self.datanodes) if self.replication is None else self.replication,
            block_bytes=self.block_bytes,
            namenode_heap_mb=self.namenode_heap_mb,
            datanode_heap_mb=self.datanode_heap_mb,
            user=_user(),
        )
        for h in self.config.hosts():
            if h not in self.places:
                raise HdfsError(f"host {h!r} has no place on the fabric")
        if self.client is None:
            self.client = self.namenode
        if not self.name:
            self.name = hashlib.sha256(str(Path(self.scratch).resolve()).encode()).hexdigest()[:8]

    @classmethod
    def on_fabric(
        cls,
        fabric: Fabric,
        run: CommandRunner,
        launch: ProcessLauncher,
        namenode: str,
        datanodes: Sequence[str],
        scratch: Path,
        **kw: Any,
    ) -> HdfsCluster:
        """A cluster on a live fabric reached through ``run`` and ``launch``, named after its lease."""
        kw.setdefault("name", fabric.lease.lease_id)
        return cls(fabric.places, fabric.network.host_addresses, namenode, datanodes, scratch, run, launch, **kw)

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> HdfsCluster:
        self.start(self.start_timeout_s)  # stops what it started if it fails
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def default_fs(self) -> str:
        return self.config.default_fs

    def _lib(self, host: str) -> PurePath:
        """Hadoop's jars at ``host``'s place: the same path below the place's cache as below this
        machine's (a folder outside the cache: that path)."""
        assert self.jars is not None
        cache = artifacts.cache_root()
        if not self.jars.is_relative_to(cache):
            return self.jars
        return PurePosixPath(self.staging.cache(self.places[host])) / self.jars.relative_to(cache).as_posix()

    def _cmd(self, host: str, main: str, args: Sequence[str] = ()) -> list[str]:
        cg = self.cgroups.get(host)
        cpus = max(1, math.ceil(cg.cores)) if cg is not None else None
        return java_command(self.config, host, self._lib(host), main, args, active_cpus=cpus)

    def _stage_configs(self) -> None:
        """Each host's folders at its place, its configuration written here and put there."""
        cfg, scratch = self.config, Path(self.scratch)
        dirs = {h: self.staging.folder(self.places[h], scratch / h) for h in cfg.hosts()}
        confs = {h: self.staging.folder(self.places[h], cfg.local_conf_dir(h)) for h in cfg.hosts()}
        shared = all(dirs[h] == str(scratch / h) for h in dirs)  # the places see this machine's files
        names = {}
        for h in cfg.hosts():  # each daemon's machine resolves its own name to its host's address
            out = self.run(["uname", "-n"], place=self.places[h], timeout=30).strip()
            names[h] = out or socket.gethostname()
        self.config = cfg = dataclasses.replace(cfg, dirs=dirs, confs=confs, java=None if shared else "java")
        write_configs(cfg, names)
        for h in cfg.hosts():
            for f in CONF_FILES:
                self.staging.put(self.places[h], cfg.local_conf_dir(h) / f, f"{confs[h]}/{f}")

    def _daemon(self, name: str, host: str, main: str, log: Path) -> None:
        """Start one daemon; a CPU-limited host's daemon starts inside its cgroup where the launcher
        allows it (a machine's), else joins it at once (a namespace's, from outside: ``ip netns exec``
        mounts a fresh /sys without the cgroup hierarchies; the process is still ``ip`` or has just
        become the JVM, so every thread the JVM creates starts inside the group)."""
        cg = self.cgroups.get(host)
        argv = self._cmd(host, main)
        started = cg.starting(argv) if cg is not None else argv
        proc = self.launch(self.places[host], started, log)
        self.daemons[name], self.logs[name] = proc, log
        if cg is not None and started == argv:  # not started inside: moved in
            try:
                cg.add(proc.pid)
            except OSError as exc:
                proc.stop(grace_s=2)
                del self.daemons[name]
                raise HdfsError(f"cpu limit: could not move {host}'s daemon into {cg.path}: {exc}") from None

    def start(self, timeout_s: float | None = None) -> None:
        """Start the DataNodes, format and start the NameNode, wait until every DataNode is live.

        The DataNodes start first (they retry until the NameNode answers), so their JVM start-up
        overlaps the format. On failure everything started so far is stopped again."""
        t0 = time.monotonic()
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        if self.jars is None:
            self.jars = ensure_jars()
        self._stage_configs()
        cfg = self.config
        logs = cfg.log_dir()
        nn = cfg.namenode
        try:
            for d in cfg.datanodes:
                self._daemon(f"datanode-{d}", d, DATANODE_CLASS, logs / f"datanode-{d}.log")
            t1 = time.monotonic()
            fmt = ["-format", "-force", "-nonInteractive", "-clusterid", "shufflelab"]
            try:
                self.run(self._cmd(nn, NAMENODE_CLASS, fmt), place=self.places[nn], timeout=timeout_s)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                raise HdfsError(f"formatting the NameNode on {nn} failed: {str(exc)[-2000:]}") from None
            self.timings["format_s"] = time.monotonic() - t1
            self._daemon(f"namenode-{nn}", nn, NAMENODE_CLASS, logs / f"namenode-{nn}.log")
            self.wait_live(max(10.0, timeout_s - (time.monotonic() - t0)))
        except BaseException:
            self.stop()
            raise
        self.timings["start_s"] = time.monotonic() - t0

    def _check_daemons(self) -> None:
        for name, p in self.daemons.items():
            if p.poll() is not None:
                p.stop(grace_s=0)  # (a machine's log comes back once its process is stopped)
                log = self.logs[name]
                tail = log.read_text(errors="replace").strip().splitlines()[-20:] if log.exists() else []
                raise HdfsError(f"{name} exited ({p.poll()}); see {log}:\n" + "\n".join(tail))

    def wait_live(self, timeout_s: float = 120) -> None:
        """Wait until every DataNode is registered with free space and the NameNode is out of safe mode."""
        cfg = self.config
        want = {cfg.addresses[d]: d for d in cfg.datanodes}
        deadline = time.monotonic() + timeout_s
        last = "the NameNode's HTTP server did not answer yet"
        while True:
            self._check_daemons()
            r = self._request(
                cfg.namenode,
                "GET",
                f"http://{cfg.namenode_ip}:{NN_HTTP_PORT}/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo",
                timeout=5,
                check=False,
            )
            if r.get("status") == 200:
                doc = json.loads(r["body"])
                live = live_datanodes(doc)
                safemode = (doc.get("beans") or [{}])[0].get("Safemode", "")
                ready = [ip for ip in want if live.get(ip, 0) >= cfg.block_bytes]
                if len(ready) == len(want) and not safemode:
                    return
                missing = sorted(want[ip] for ip in want if ip not in ready)
                last = f"DataNodes not live with free space: {', '.join(missing) or 'none'}" + (
                    f"; safe mode: {safemode}" if safemode else ""
                )
            elif "error" in r:
                last = r["error"]
            if time.monotonic() > deadline:
                raise HdfsError(f"HDFS not ready after {timeout_s:.0f} s: {last} (logs in {cfg.log_dir()})")
            time.sleep(0.5)

    def stop(self) -> None:
        """Kill every daemon this cluster started (DataNodes first) and remove its cgroups
        (a later :meth:`start` needs :meth:`cpu_limit` again). Safe to call twice."""
        for name in sorted(self.daemons, key=lambda n: n.startswith("namenode-")):
            self.daemons.pop(name).stop(grace_s=10)
            self.logs.pop(name, None)
        errors = []
        for host in list(self.cgroups):
            try:
                self.cgroups.pop(host).remove()
            except cgroups.CgroupError as exc:
                errors.append(str(exc))
        if errors:
            raise HdfsError("; ".join(errors))

    def alive(self) -> bool:
        return bool(self.daemons) and all(p.poll() is None for p in self.daemons.values())

    def pids(self, host: str) -> list[int]:
        """Process ids of ``host``'s running daemons."""
        return [p.pid for n, p in self.daemons.items() if n.endswith(f"-{host}") and p.poll() is None]

    # -- weak storage hosts --------------------------------------------------------------------
    def cpu_limit(self, host: str, cores: float) -> PurePath:
        """Cap ``host``'s HDFS daemons at ``cores`` CPUs (cgroup v1 CFS quota); returns the cgroup.

        Before :meth:`start` the daemons start inside it and their JVMs are told they have
        ``ceil(cores)`` CPUs; on a running cluster they are moved into it (the quota applies at once,
        the JVMs keep the thread pools they sized at start-up). Calling it again changes the quota."""
        if host not in self.config.hosts():
            raise HdfsError(f"cpu limit: {host!r} runs no HDFS daemon (hosts: {', '.join(self.config.hosts())})")
        try:
            cgroups.cfs_quota_us(cores)  # validates
            cg = self.cgroups.get(host) or self.cpu_group(self.places[host], f"{self.name}-{host}", cores)
            cg.cores = cores
            cg.create()
        except cgroups.CgroupError as exc:
            raise HdfsError(str(exc)) from None
        self.cgroups[host] = cg
        for pid in self.pids(host):
            cg.add(pid)
        return cg.path

    def cpu_unlimit(self, host: str) -> None:
        """``host``'s daemons back on all their machine's CPUs: its cgroup removed (they go back to its
        parent first). Nothing to do without one."""
        cg = self.cgroups.pop(host, None)
        if cg is not None:
            try:
                cg.remove()
            except cgroups.CgroupError as exc:
                raise HdfsError(str(exc)) from None

    # -- WebHDFS ----------------------------------------------------------------------------------
    def _allowed(self) -> list[str]:
        return sorted({self.config.addresses[h] for h in self.config.hosts()})

    def _request(
        self,
        client: str,
        method: str,
        url: str,
        *,
        upload: PurePath | None = None,
        download: PurePath | None = None,
        timeout: float = 60,
        check: bool = True,
    ) -> dict[str, Any]:
        """Run one HTTP exchange at ``client``'s place (see :func:`~shufflelab.ndp.webhdfs.exchange`)."""
        if client not in self.places:
            raise HdfsError(f"client host {client!r} has no place on the fabric")
        req = {
            "method": method,
            "url": url,
            "allow": self._allowed(),
            "timeout": timeout,
            "upload": str(upload) if upload else None,
            "download": str(download) if download else None,
        }
        python, env = self.staging.python(self.places[client])
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), **env}
        helper = [python, "-m", "shufflelab.ndp.hdfs", "--http", json.dumps(req)]
        argv = ["env", *(f"{k}={v}" for k, v in env.items()), *helper]
        try:
            out = self.run(argv, place=self.places[client], timeout=timeout + 15)
            res: dict[str, Any] = json.loads(out)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
            res = {"error": f"HTTP helper on {client} failed: {exc}", "url": url}
        if check:
            if "error" in res:
                raise HdfsError(f"{method} {url} from {client}: {res['error']}")
            if not 200 <= int(res["status"]) < 300:
                raise HdfsError(f"{method} {url} from {client}: HTTP {res['status']}: {res.get('body', '')[:500]}")
        return res

    def _url(self, path: str, op: str, **params: Any) -> str:
        if not path.startswith("/"):
            raise HdfsError(f"HDFS path {path!r} must be absolute")
        q = urllib.parse.urlencode({"op": op, "user.name": self.config.user, **params})
        return f"{self.config.webhdfs}{urllib.parse.quote(path)}?{q}"

    def _there(self, client: str, local_path: Path) -> PurePath:
        """The file standing for ``local_path`` at ``client``'s place (in the folder standing for its folder)."""
        return PurePosixPath(self.staging.folder(self.places[client], local_path.parent)) / local_path.name

    def put(self, local_path: Path, hdfs_path: str, *, client: str | None = None, timeout_s: float = 300) -> None:
        """Write ``local_path`` to ``hdfs_path`` (overwriting) through WebHDFS from ``client`` (the
        file put at its place first, and removed there after unless the place sees this machine's)."""
        local_path = Path(local_path).resolve()
        if not local_path.is_file():
            raise HdfsError(f"put: {local_path} is not a file")
        c = client or str(self.client)
        if c not in self.places:
            raise HdfsError(f"client host {c!r} has no place on the fabric")
        there = self._there(c, local_path)
        self.staging.put(self.places[c], local_path, str(there))
        try:
            self._request(
                c,
                "PUT",
                self._url(hdfs_path, "CREATE", overwrite="true", replication=self.config.replication),
                upload=there,
                timeout=timeout_s,
            )
        finally:
            if there != local_path:
                self.run(["rm", "-f", "--", str(there)], place=self.places[c], check=False)

    def get(self, hdfs_path: str, local_path: Path, *, client: str | None = None, timeout_s: float = 300) -> int:
        """Read ``hdfs_path`` into ``local_path`` from ``client`` (fetched from its place); returns
        the byte count."""
        local_path = Path(local_path).resolve()
        local_path.parent.mkdir(parents=True, exist_ok=True)
        c = client or str(self.client)
        if c not in self.places:
            raise HdfsError(f"client host {c!r} has no place on the fabric")
        there = self._there(c, local_path)
        r = self._request(c, "GET", self._url(hdfs_path, "OPEN"), download=there, timeout=timeout_s)
        if there != local_path:
            try:
                if not self.staging.get(self.places[c], str(there), local_path):
                    raise HdfsError(f"GET {hdfs_path} from {c}: {there} is not at its place")
            finally:
                self.run(["rm", "-f", "--", str(there)], place=self.places[c], check=False)
        return int(r.get("bytes", 0))

    def read(self, hdfs_path: str, *, client: str | None = None, timeout_s: float = 300) -> bytes:
        """The contents of ``hdfs_path`` read from ``client``."""
        tmp_dir = self.config.scratch / "client-tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        tmp = tmp_dir / f"read-{os.getpid()}-{time.monotonic_ns()}"
        try:
            self.get(hdfs_path, tmp, client=client, timeout_s=timeout_s)
            return tmp.read_bytes()
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def mkdirs(self, hdfs_path: str, *, client: str | None = None) -> None:
        self._request(client or str(self.client), "PUT", self._url(hdfs_path, "MKDIRS"))

    def status(self, hdfs_path: str, *, client: str | None = None) -> dict[str, Any]:
        """WebHDFS ``FileStatus`` of ``hdfs_path``."""
        r = self._request(client or str(self.client), "GET", self._url(hdfs_path, "GETFILESTATUS"))
        return dict(json.loads(r["body"])["FileStatus"])

    def block_locations(self, hdfs_path: str, *, client: str | None = None) -> list[BlockLocation]:
        """Every block of ``hdfs_path`` with the hosts holding its replicas."""
        c = client or str(self.client)
        by_ip = {self.config.addresses[h]: h for h in self.config.datanodes}
        r = self._request(c, "GET", self._url(hdfs_path, "GETFILEBLOCKLOCATIONS"), check=False)
        if r.get("status") != 200:  # older WebHDFS: the internal LocatedBlocks form
            r = self._request(c, "GET", self._url(hdfs_path, "GET_BLOCK_LOCATIONS", offset=0, length=1 << 62))
        return parse_block_locations(json.loads(r["body"]), by_ip)


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "root"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shufflelab.ndp.hdfs", description="Hadoop jars and WebHDFS helper")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--fetch", action="store_true", help="fetch the Hadoop jars (make setup) and print their directory")
    g.add_argument("--http", metavar="JSON", help="one WebHDFS exchange (used inside a namespace)")
    a = ap.parse_args(argv)
    if a.fetch:
        try:
            print(ensure_jars())
        except HadoopFetchError as exc:
            print(f"shufflelab hadoop jars: {exc}", file=sys.stderr)
            return 1
        return 0
    print(json.dumps(exchange(json.loads(a.http))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
