"""A real HDFS storage cluster inside the fabric: NameNode and DataNodes from Apache Hadoop's jars.

The jars come from Maven Central: ``hadoop/pom.xml`` declares ``hadoop-common``, ``hadoop-hdfs``
and ``hadoop-hdfs-client`` at one version and :func:`ensure_jars` has Maven copy them and their
runtime dependencies into ``~/.cache/shufflelab/hadoop-<hash of the pom>/lib`` (offline first,
then online; ``make setup`` does it once). The HTTP servers' ``webapps/`` skeletons ship only in
hadoop-hdfs's ``tests`` jar, so they are unpacked from it into ``<cache>/web`` and that jar is
dropped. No Hadoop distribution, no Hadoop shell scripts: every daemon is
``java -cp <conf>:<web>:<lib>/* <main class>`` started with :class:`~shufflelab.emulate.netns.Process`
inside its host's namespace, bound to that host's address.

:class:`HdfsCluster` writes one configuration directory per host (``core-site.xml``,
``hdfs-site.xml``, ``log4j.properties`` and a ``hosts`` file the JVM resolves names from, so no
daemon ever asks a DNS server), starts the DataNodes, formats and starts the NameNode, and waits
until every DataNode is live and reports free space (NameNode JMX). Clients talk WebHDFS (plain HTTP):
:meth:`HdfsCluster.put`, :meth:`~HdfsCluster.get`, :meth:`~HdfsCluster.read` and
:meth:`~HdfsCluster.block_locations` run a small HTTP helper (this module's ``--http`` mode) inside
the client host's namespace, which follows redirects only to the cluster's own addresses.

Weak storage machines: :meth:`HdfsCluster.cpu_limit` puts a host's daemons into a cgroup (v1
``cpu`` controller) with ``cpu.cfs_quota_us = cores x cpu.cfs_period_us``; with a limit set before
:meth:`~HdfsCluster.start` each daemon joins the group as it is spawned and its JVM sizes its GC
and thread pools for that many CPUs (``-XX:ActiveProcessorCount``). :meth:`~HdfsCluster.stop`
kills the daemons and removes the cgroups.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from shufflelab.emulate.netns import CommandError, Process, run

HADOOP_DIR = Path(__file__).parent / "hadoop"
POM = HADOOP_DIR / "pom.xml"

NN_RPC_PORT = 9000
NN_HTTP_PORT = 9870
DN_XFER_PORT = 9866
DN_HTTP_PORT = 9864
DN_IPC_PORT = 9867

NAMENODE_CLASS = "org.apache.hadoop.hdfs.server.namenode.NameNode"
DATANODE_CLASS = "org.apache.hadoop.hdfs.server.datanode.DataNode"

CGROUP_CPU_ROOT = Path(os.environ.get("SHUFFLELAB_CGROUP_CPU", "/sys/fs/cgroup/cpu"))
CGROUP_PREFIX = "shufflelab-hdfs-"
CFS_PERIOD_US = 100_000

# What Hadoop reflects into on Java 17 (HADOOP-19310 adds the same kind of list to Hadoop's scripts).
JPMS_OPTS = [
    f"--add-opens=java.base/{p}=ALL-UNNAMED"
    for p in (
        "java.io", "java.lang", "java.lang.reflect", "java.math", "java.net", "java.nio", "java.text",
        "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.regex",
        "java.util.zip", "sun.net.dns", "sun.net.util", "sun.nio.ch", "sun.nio.cs", "sun.security.util",
        "sun.security.x509", "jdk.internal.misc", "jdk.internal.ref",
    )
] + ["--add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED"]  # fmt: skip

MIN_BLOCK_BYTES = 64 * 1024
BYTES_PER_CHECKSUM = 512


class HadoopFetchError(RuntimeError):
    """Maven could not fetch the Hadoop jars; the message says which step failed and why."""


class HdfsError(RuntimeError):
    """The HDFS cluster could not be configured, started or used; the message names the host or field."""


# -- the jars ------------------------------------------------------------------------------------
def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "shufflelab"


def jars_dir(pom: Path = POM) -> Path:
    """Where the jars of ``pom`` live (``<dir>/lib``; it may not exist yet)."""
    key = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    return cache_root() / f"hadoop-{key}"


def hadoop_version(pom: Path = POM) -> str:
    import xml.etree.ElementTree as ET

    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    v = ET.parse(pom).getroot().find("m:properties/m:hadoop.version", ns)
    if v is None or not (v.text or "").strip():
        raise HadoopFetchError(f"{pom}: properties/hadoop.version is missing")
    return (v.text or "").strip()


def ensure_jars(pom: Path = POM, timeout_s: float = 1800) -> Path:
    """The directory holding Hadoop's jars, fetched by Maven on first use (offline first, then from
    Maven Central). Cached by the pom's hash; the directory appears whole or not at all."""
    target = jars_dir(pom)
    lib = target / "lib"
    if (target / "complete").exists() and lib.is_dir() and web_root(lib).is_dir():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise HadoopFetchError("mvn not found: install Maven (apt-get install maven; make setup does it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    errors: list[str] = []
    try:
        for mode in (["-o"], []):
            cmd = [
                mvn, "-B", "-q", "-Dstyle.color=never", *mode, "-f", str(pom),
                "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={tmp / 'lib'}",
            ]  # fmt: skip
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=pom.parent)
            except subprocess.TimeoutExpired:
                errors.append(f"`{' '.join(cmd)}` timed out after {timeout_s:.0f} s")
                continue
            jars = list((tmp / "lib").glob("hadoop-hdfs-*.jar")) if (tmp / "lib").is_dir() else []
            if r.returncode == 0 and jars:
                _extract_webapps(tmp / "lib", tmp / "web")
                (tmp / "complete").write_text(hadoop_version(pom) + "\n")
                shutil.rmtree(target, ignore_errors=True)  # an incomplete earlier attempt
                try:
                    tmp.rename(target)
                except OSError:
                    if not (target / "complete").exists():  # not a concurrent fetch that finished first
                        raise
                return lib
            out = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr).strip()  # Maven colours even with -B
            tail = "\n".join(out.splitlines()[-15:])
            what = "offline (local Maven repository)" if mode else "online (Maven Central)"
            errors.append(f"{what}: `{' '.join(cmd)}` exited {r.returncode}:\n{tail}")
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        # Maven may leave an empty target/ next to the pom; the source tree stays clean
        with contextlib.suppress(OSError):
            (pom.parent / "target").rmdir()
    raise HadoopFetchError(f"could not fetch the Hadoop jars of {pom}:\n" + "\n".join(errors))


def _extract_webapps(lib: Path, web: Path) -> None:
    """Unpack ``webapps/`` (the HTTP servers' web-application skeletons) from hadoop-hdfs's
    ``tests`` jar into ``web`` and remove that jar from ``lib``."""
    tests = sorted(lib.glob("hadoop-hdfs-*-tests.jar"))
    if not tests:
        raise HadoopFetchError(f"{POM.name} must declare hadoop-hdfs with classifier 'tests' (it holds webapps/)")
    with zipfile.ZipFile(tests[0]) as z:
        members = [m for m in z.namelist() if m.startswith("webapps/") and ".." not in m]
        if not any(m.startswith("webapps/hdfs/") for m in members):
            raise HadoopFetchError(f"{tests[0].name} has no webapps/hdfs")
        z.extractall(web, members)
    for t in tests:
        t.unlink()


def web_root(lib: Path) -> Path:
    """The class-path directory holding ``webapps/`` next to the jars ``lib``."""
    return lib.parent / "web"


def jars_available(pom: Path = POM) -> bool:
    """Whether :func:`ensure_jars` would return without running Maven."""
    target = jars_dir(pom)
    return (target / "complete").exists() and (target / "lib").is_dir()


# -- configuration (pure) --------------------------------------------------------------------------
@dataclass(frozen=True)
class HdfsConfig:
    """Everything the configuration files depend on. Validated on construction."""

    namenode: str
    datanodes: tuple[str, ...]
    addresses: Mapping[str, str]  # host -> IPv4 address (the fabric's host_addresses)
    scratch: Path
    replication: int
    block_bytes: int = 128 * 1024 * 1024
    namenode_heap_mb: int = 384
    datanode_heap_mb: int = 256
    user: str = "root"

    def __post_init__(self) -> None:
        if not self.datanodes:
            raise HdfsError("datanodes: at least one DataNode host is needed")
        dup = sorted({d for d in self.datanodes if self.datanodes.count(d) > 1})
        if dup:
            raise HdfsError(f"datanodes: {', '.join(dup)} listed more than once")
        for h in (self.namenode, *self.datanodes):
            if h not in self.addresses:
                raise HdfsError(f"host {h!r} has no address (known hosts: {', '.join(sorted(self.addresses))})")
        if not 1 <= self.replication <= len(self.datanodes):
            raise HdfsError(
                f"replication: {self.replication} must be between 1 and the number of DataNodes ({len(self.datanodes)})"
            )
        if self.block_bytes < MIN_BLOCK_BYTES or self.block_bytes % BYTES_PER_CHECKSUM:
            raise HdfsError(
                f"block_bytes: {self.block_bytes} must be at least {MIN_BLOCK_BYTES} and a multiple of "
                f"{BYTES_PER_CHECKSUM} (the checksum chunk)"
            )
        for name in ("namenode_heap_mb", "datanode_heap_mb"):
            if getattr(self, name) < 64:
                raise HdfsError(f"{name}: {getattr(self, name)} MB is too small for a Hadoop daemon (at least 64)")

    @property
    def namenode_ip(self) -> str:
        return self.addresses[self.namenode]

    @property
    def default_fs(self) -> str:
        return f"hdfs://{self.namenode_ip}:{NN_RPC_PORT}"

    @property
    def webhdfs(self) -> str:
        return f"http://{self.namenode_ip}:{NN_HTTP_PORT}/webhdfs/v1"

    def hosts(self) -> list[str]:
        """The cluster's hosts, NameNode first, each once (a NameNode host may also be a DataNode)."""
        return list(dict.fromkeys([self.namenode, *self.datanodes]))

    def host_dir(self, host: str) -> Path:
        return self.scratch / host

    def conf_dir(self, host: str) -> Path:
        return self.scratch / host / "conf"

    def log_dir(self) -> Path:
        return self.scratch / "logs"


def core_site(cfg: HdfsConfig, host: str) -> dict[str, str]:
    return {
        "fs.defaultFS": cfg.default_fs,
        "hadoop.tmp.dir": str(cfg.host_dir(host) / "tmp"),
        "hadoop.security.authentication": "simple",
        "hadoop.http.authentication.simple.anonymous.allowed": "true",
        "hadoop.http.staticuser.user": cfg.user,
        # a daemon that loses its peer gives up quickly instead of retrying for minutes
        "ipc.client.connect.max.retries": "10",
        "ipc.client.connect.retry.interval": "500",
        "ipc.client.connect.timeout": "5000",
    }


def hdfs_site(cfg: HdfsConfig, host: str) -> dict[str, str]:
    """``hdfs-site.xml`` of ``host``: the NameNode's and every DataNode's keys, bound to this host."""
    nn = cfg.namenode_ip
    ip = cfg.addresses[host]
    min_block = min(cfg.block_bytes, 1024 * 1024)
    props = {
        "dfs.replication": str(cfg.replication),
        "dfs.blocksize": str(cfg.block_bytes),
        "dfs.namenode.fs-limits.min-block-size": str(min_block),
        "dfs.permissions.enabled": "false",
        "dfs.webhdfs.enabled": "true",
        # NameNode
        "dfs.namenode.rpc-address": f"{nn}:{NN_RPC_PORT}",
        "dfs.namenode.rpc-bind-host": nn,
        "dfs.namenode.http-address": f"{nn}:{NN_HTTP_PORT}",
        "dfs.namenode.http-bind-host": nn,
        "dfs.namenode.name.dir": f"file://{cfg.host_dir(cfg.namenode) / 'name'}",
        "dfs.namenode.safemode.threshold-pct": "0",
        "dfs.namenode.safemode.extension": "0",
        "dfs.namenode.safemode.min.datanodes": "0",
        # DataNodes register by address: every namespace shares the machine's host name
        "dfs.namenode.datanode.registration.ip-hostname-check": "false",
        "dfs.client.use.datanode.hostname": "false",
        "dfs.datanode.use.datanode.hostname": "false",
        "dfs.namenode.handler.count": "10",
        # with as many replicas as DataNodes there is no spare node to swap into a failed pipeline
        "dfs.client.block.write.replace-datanode-on-failure.enable": "false",
        "dfs.heartbeat.interval": "1",
    }
    if host in cfg.datanodes:
        props.update(
            {
                "dfs.datanode.hostname": ip,
                "dfs.datanode.address": f"{ip}:{DN_XFER_PORT}",
                "dfs.datanode.http.address": f"{ip}:{DN_HTTP_PORT}",
                "dfs.datanode.ipc.address": f"{ip}:{DN_IPC_PORT}",
                "dfs.datanode.data.dir": f"file://{cfg.host_dir(host) / 'data'}",
                "dfs.datanode.handler.count": "5",
            }
        )
    return props


def site_xml(props: Mapping[str, str]) -> str:
    """A Hadoop ``*-site.xml`` document with ``props`` (values XML-escaped, keys in order)."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<configuration>"]
    for k, v in props.items():
        lines.append(f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value></property>")
    lines.append("</configuration>")
    return "\n".join(lines) + "\n"


LOG4J = """\
log4j.rootLogger=INFO,console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.out
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.logger.org.apache.hadoop.hdfs.StateChange=WARN
log4j.logger.org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=WARN
log4j.logger.org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace=WARN
log4j.logger.org.apache.hadoop.security.authentication.server.AuthenticationFilter=ERROR
"""


def hosts_file(cfg: HdfsConfig, host: str, machine_name: str | None = None) -> str:
    """The name table a daemon of ``host`` resolves from (``-Djdk.net.hosts.file``): the machine's
    name is this host's address (all namespaces share one host name), every cluster host by name."""
    me = machine_name or socket.gethostname()
    lines = ["127.0.0.1 localhost", f"{cfg.addresses[host]} {me}"]
    lines += [f"{cfg.addresses[h]} {h}" for h in cfg.hosts() if h != me]
    return "\n".join(lines) + "\n"


def java_command(
    cfg: HdfsConfig,
    host: str,
    lib: Path,
    main: str,
    args: Sequence[str] = (),
    active_cpus: int | None = None,
) -> list[str]:
    """``java`` argv running ``main`` with ``host``'s configuration first on the class path;
    ``active_cpus`` makes the JVM size its GC and thread pools for that many CPUs (a CPU-limited host)."""
    nn = main == NAMENODE_CLASS
    heap = cfg.namenode_heap_mb if nn else cfg.datanode_heap_mb
    java = shutil.which("java") or "java"
    conf = cfg.conf_dir(host)
    # the NameNode handles metadata only: the quick C1 compiler starts it sooner; DataNodes move the
    # bytes and keep the optimising compiler
    jit = ["-XX:TieredStopAtLevel=1"] if nn else []
    if active_cpus is not None:
        jit.append(f"-XX:ActiveProcessorCount={active_cpus}")
    return [
        java,
        f"-Xmx{heap}m",
        "-XX:+UseSerialGC",
        *jit,
        "-Djava.net.preferIPv4Stack=true",
        f"-Djdk.net.hosts.file={conf / 'hosts'}",
        f"-Dhadoop.home.dir={cfg.host_dir(host)}",
        f"-Dhadoop.log.dir={cfg.log_dir()}",
        f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
        *JPMS_OPTS,
        "-cp",
        f"{conf}:{web_root(lib)}:{lib}/*",
        main,
        *args,
    ]


def write_configs(cfg: HdfsConfig) -> None:
    for h in cfg.hosts():
        conf = cfg.conf_dir(h)
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "core-site.xml").write_text(site_xml(core_site(cfg, h)))
        (conf / "hdfs-site.xml").write_text(site_xml(hdfs_site(cfg, h)))
        (conf / "log4j.properties").write_text(LOG4J)
        (conf / "hosts").write_text(hosts_file(cfg, h))
    cfg.log_dir().mkdir(parents=True, exist_ok=True)


# -- cgroups ----------------------------------------------------------------------------------------
def cfs_quota_us(cores: float, period_us: int = CFS_PERIOD_US) -> int:
    """``cpu.cfs_quota_us`` granting ``cores`` CPUs' worth of time per period (the kernel's minimum is 1 ms)."""
    if not cores > 0:
        raise HdfsError(f"cores: {cores} must be positive")
    return max(1000, round(cores * period_us))


@dataclass
class CpuCgroup:
    """One cgroup v1 ``cpu`` group capping a host's daemons at ``cores`` CPUs."""

    path: Path
    cores: float

    def create(self) -> None:
        if not (self.path.parent / "cpu.cfs_quota_us").exists():
            raise HdfsError(f"cpu limit: no cgroup v1 cpu controller at {self.path.parent} (cpu.cfs_quota_us missing)")
        self.path.mkdir(exist_ok=True)
        (self.path / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        (self.path / "cpu.cfs_quota_us").write_text(str(cfs_quota_us(self.cores)))

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into the group."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def remove(self, timeout_s: float = 5.0) -> None:
        """Remove the group once its processes are gone (moving stragglers to the root group)."""
        deadline = time.monotonic() + timeout_s
        while self.path.exists():
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    (self.path.parent / "cgroup.procs").write_text(str(pid))
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise HdfsError(f"cpu limit: could not remove cgroup {self.path}: {exc}") from None
                time.sleep(0.1)


def stale_cgroups(root: Path = CGROUP_CPU_ROOT) -> list[Path]:
    """shufflelab's HDFS cgroups with no process left (a killed run's leftovers)."""
    if not root.is_dir():
        return []
    return [p for p in root.glob(f"{CGROUP_PREFIX}*") if p.is_dir() and not CpuCgroup(p, 1).pids()]


# -- block locations ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class BlockLocation:
    """One block of a file: its byte range and the DataNodes holding a replica."""

    offset: int
    length: int
    hosts: tuple[str, ...]  # fabric host names (an address outside the cluster is kept as is)
    addresses: tuple[str, ...]  # the DataNodes' transfer addresses, ip:port


def parse_block_locations(doc: Mapping[str, Any], by_ip: Mapping[str, str]) -> list[BlockLocation]:
    """Blocks from a WebHDFS ``GETFILEBLOCKLOCATIONS`` answer (or ``GET_BLOCK_LOCATIONS``'s
    ``LocatedBlocks``), DataNode addresses mapped to host names with ``by_ip``."""
    out: list[BlockLocation] = []
    if "BlockLocations" in doc:
        for b in (doc["BlockLocations"] or {}).get("BlockLocation", []) or []:
            names = tuple(b.get("names") or [])
            ips = [n.rsplit(":", 1)[0] for n in names] or list(b.get("hosts") or [])
            out.append(BlockLocation(int(b["offset"]), int(b["length"]), tuple(by_ip.get(i, i) for i in ips), names))
    elif "LocatedBlocks" in doc:
        for b in (doc["LocatedBlocks"] or {}).get("locatedBlocks", []) or []:
            locs = b.get("locations") or []
            names = tuple(f"{loc['ipAddr']}:{loc['xferPort']}" for loc in locs)
            hosts = tuple(by_ip.get(loc["ipAddr"], loc["ipAddr"]) for loc in locs)
            out.append(BlockLocation(int(b["startOffset"]), int(b["block"]["numBytes"]), hosts, names))
    else:
        raise HdfsError(f"unexpected block-location answer: {json.dumps(doc)[:300]}")
    return sorted(out, key=lambda b: b.offset)


def live_datanodes(jmx: Mapping[str, Any]) -> dict[str, int]:
    """DataNode address -> remaining bytes, from the NameNode's ``NameNodeInfo`` JMX bean."""
    beans = jmx.get("beans") or []
    if not beans:
        return {}
    raw = beans[0].get("LiveNodes") or "{}"
    nodes = json.loads(raw) if isinstance(raw, str) else raw
    out: dict[str, int] = {}
    for info in nodes.values():
        addr = str(info.get("xferaddr", "")).rsplit(":", 1)[0]
        if addr:
            out[addr] = int(info.get("remaining", 0) or 0)
    return out


# -- the HTTP helper (runs inside a namespace) ------------------------------------------------------
def _http(req: Mapping[str, Any]) -> dict[str, Any]:
    """One WebHDFS exchange: ``method`` on ``url`` with an optional file ``upload`` as the body,
    following up to 3 redirects to ``allow``-ed addresses only (307 keeps the method and body);
    the answer body goes to ``download`` (a path) or, as text, into the result."""
    method = str(req["method"])
    url = str(req["url"])
    allow = set(req.get("allow") or [])
    timeout = float(req.get("timeout", 60))
    upload = req.get("upload")
    download = req.get("download")
    for _ in range(4):
        u = urllib.parse.urlsplit(url)
        host = u.hostname or ""
        if u.scheme != "http" or host not in allow:
            return {"error": f"refusing to contact {u.scheme}://{host} (not a cluster address)", "url": url}
        conn = http.client.HTTPConnection(host, u.port or 80, timeout=timeout)
        try:
            path = u.path + (f"?{u.query}" if u.query else "")
            headers = {"Connection": "close"}
            if upload is not None and method in ("PUT", "POST"):
                size = os.path.getsize(upload)
                headers["Content-Length"] = str(size)
                headers["Content-Type"] = "application/octet-stream"
                conn.putrequest(method, path)
                for k, v in headers.items():
                    conn.putheader(k, v)
                conn.endheaders()
                with open(upload, "rb") as f:
                    while chunk := f.read(1 << 20):
                        conn.send(chunk)
            else:
                conn.request(method, path, headers={**headers, "Content-Length": "0"} if method == "PUT" else headers)
            resp = conn.getresponse()
            if resp.status in (301, 302, 303, 307) and resp.getheader("Location"):
                resp.read()
                url = urllib.parse.urljoin(url, resp.getheader("Location") or "")
                if resp.status == 303:
                    method, upload = "GET", None
                continue
            if download is not None and resp.status == 200:
                n = 0
                with open(download, "wb") as f:
                    while chunk := resp.read(1 << 20):
                        f.write(chunk)
                        n += len(chunk)
                return {"status": resp.status, "bytes": n, "url": url}
            return {"status": resp.status, "body": resp.read().decode("utf-8", "replace"), "url": url}
        except OSError as exc:
            return {"error": f"{method} {url}: {exc}", "url": url}
        finally:
            conn.close()
    return {"error": f"too many redirects (last {url})", "url": url}


# -- the cluster -------------------------------------------------------------------------------------
@dataclass
class HdfsCluster:
    """A NameNode and DataNodes in the fabric's namespaces. Use as a context manager, or
    :meth:`start` / :meth:`stop`.

    ``ns`` and ``addresses`` map hosts to namespace names and IPv4 addresses (a fabric's ``ns`` and
    ``network.host_addresses``; see :meth:`on_fabric`). ``client`` is the host WebHDFS requests are
    made from unless a call names another. ``replication`` defaults to the number of DataNodes, so
    every DataNode holds every block and can serve any pushdown."""

    ns: Mapping[str, str]
    addresses: Mapping[str, str]
    namenode: str
    datanodes: Sequence[str]
    scratch: Path
    replication: int | None = None
    block_bytes: int = 128 * 1024 * 1024
    client: str | None = None
    namenode_heap_mb: int = 384
    datanode_heap_mb: int = 256
    jars: Path | None = None
    name: str = ""
    start_timeout_s: float = 120
    config: HdfsConfig = field(init=False)
    daemons: dict[str, Process] = field(init=False, default_factory=dict)
    cgroups: dict[str, CpuCgroup] = field(init=False, default_factory=dict)
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
            if h not in self.ns:
                raise HdfsError(f"host {h!r} has no namespace")
        if self.client is None:
            self.client = self.namenode
        if not self.name:
            self.name = hashlib.sha256(str(Path(self.scratch).resolve()).encode()).hexdigest()[:8]

    @classmethod
    def on_fabric(cls, fabric: Any, namenode: str, datanodes: Sequence[str], scratch: Path, **kw: Any) -> HdfsCluster:
        """A cluster on a live :class:`~shufflelab.emulate.fabric.Fabric`, named after its lease."""
        kw.setdefault("name", getattr(getattr(fabric, "lease", None), "lease_id", ""))
        return cls(fabric.ns, fabric.network.host_addresses, namenode, datanodes, scratch, **kw)

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> HdfsCluster:
        self.start(self.start_timeout_s)  # stops what it started if it fails
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def default_fs(self) -> str:
        return self.config.default_fs

    def _cmd(self, host: str, main: str, args: Sequence[str] = ()) -> list[str]:
        assert self.jars is not None
        cg = self.cgroups.get(host)
        cpus = max(1, math.ceil(cg.cores)) if cg is not None else None
        return java_command(self.config, host, self.jars, main, args, active_cpus=cpus)

    def _daemon(self, host: str, main: str, log: Path) -> Process:
        """Start one daemon; a CPU-limited host's daemon joins its cgroup at once. (Only from outside:
        ``ip netns exec`` mounts a fresh /sys without the cgroup hierarchies.) The process is still
        ``ip`` or has just become the JVM, so every thread the JVM creates starts inside the group."""
        proc = Process(self.ns[host], self._cmd(host, main), log)
        cg = self.cgroups.get(host)
        if cg is not None:
            try:
                cg.add(proc.pid)
            except OSError as exc:
                proc.stop(grace_s=2)
                raise HdfsError(f"cpu limit: could not move {host}'s daemon into {cg.path}: {exc}") from None
        return proc

    def start(self, timeout_s: float | None = None) -> None:
        """Start the DataNodes, format and start the NameNode, wait until every DataNode is live.

        The DataNodes start first (they retry until the NameNode answers), so their JVM start-up
        overlaps the format. On failure everything started so far is stopped again."""
        t0 = time.monotonic()
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        if self.jars is None:
            self.jars = ensure_jars()
        cfg = self.config
        write_configs(cfg)
        logs = cfg.log_dir()
        nn = cfg.namenode
        try:
            for d in cfg.datanodes:
                self.daemons[f"datanode-{d}"] = self._daemon(d, DATANODE_CLASS, logs / f"datanode-{d}.log")
            t1 = time.monotonic()
            fmt = ["-format", "-force", "-nonInteractive", "-clusterid", "shufflelab"]
            try:
                run(self._cmd(nn, NAMENODE_CLASS, fmt), ns=self.ns[nn], timeout=timeout_s)
            except (CommandError, subprocess.TimeoutExpired) as exc:
                raise HdfsError(f"formatting the NameNode on {nn} failed: {str(exc)[-2000:]}") from None
            self.timings["format_s"] = time.monotonic() - t1
            self.daemons[f"namenode-{nn}"] = self._daemon(nn, NAMENODE_CLASS, logs / f"namenode-{nn}.log")
            self.wait_live(max(10.0, timeout_s - (time.monotonic() - t0)))
        except BaseException:
            self.stop()
            raise
        self.timings["start_s"] = time.monotonic() - t0

    def _check_daemons(self) -> None:
        for name, p in self.daemons.items():
            if p.poll() is not None:
                tail = p.log.read_text(errors="replace").strip().splitlines()[-20:] if p.log.exists() else []
                raise HdfsError(f"{name} exited ({p.poll()}); see {p.log}:\n" + "\n".join(tail))

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
        errors = []
        for host in list(self.cgroups):
            try:
                self.cgroups.pop(host).remove()
            except HdfsError as exc:
                errors.append(str(exc))
        if errors:
            raise HdfsError("; ".join(errors))

    def alive(self) -> bool:
        return bool(self.daemons) and all(p.poll() is None for p in self.daemons.values())

    def pids(self, host: str) -> list[int]:
        """Process ids of ``host``'s running daemons."""
        return [p.pid for n, p in self.daemons.items() if n.endswith(f"-{host}") and p.poll() is None]

    # -- weak storage hosts --------------------------------------------------------------------
    def cpu_limit(self, host: str, cores: float) -> Path:
        """Cap ``host``'s HDFS daemons at ``cores`` CPUs (cgroup v1 CFS quota); returns the cgroup.

        Before :meth:`start` the daemons start inside it and their JVMs are told they have
        ``ceil(cores)`` CPUs; on a running cluster they are moved into it (the quota applies at once,
        the JVMs keep the thread pools they sized at start-up). Calling it again changes the quota."""
        if host not in self.config.hosts():
            raise HdfsError(f"cpu limit: {host!r} runs no HDFS daemon (hosts: {', '.join(self.config.hosts())})")
        cfs_quota_us(cores)  # validates
        cg = self.cgroups.get(host) or CpuCgroup(CGROUP_CPU_ROOT / f"{CGROUP_PREFIX}{self.name}-{host}", cores)
        cg.cores = cores
        cg.create()
        self.cgroups[host] = cg
        for pid in self.pids(host):
            cg.add(pid)
        return cg.path

    # -- WebHDFS ----------------------------------------------------------------------------------
    def _allowed(self) -> list[str]:
        return sorted({self.config.addresses[h] for h in self.config.hosts()})

    def _request(
        self,
        client: str,
        method: str,
        url: str,
        *,
        upload: Path | None = None,
        download: Path | None = None,
        timeout: float = 60,
        check: bool = True,
    ) -> dict[str, Any]:
        """Run one HTTP exchange from ``client``'s namespace (see :func:`_http`)."""
        if client not in self.ns:
            raise HdfsError(f"client host {client!r} has no namespace")
        req = {
            "method": method,
            "url": url,
            "allow": self._allowed(),
            "timeout": timeout,
            "upload": str(upload) if upload else None,
            "download": str(download) if download else None,
        }
        pythonpath = os.pathsep.join(p for p in sys.path if p)
        helper = [sys.executable, "-m", "shufflelab.ndp.hdfs", "--http", json.dumps(req)]
        argv = ["env", f"PYTHONPATH={pythonpath}", *helper]
        try:
            out = run(argv, ns=self.ns[client], timeout=timeout + 15)
            res: dict[str, Any] = json.loads(out)
        except (CommandError, subprocess.TimeoutExpired, ValueError) as exc:
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

    def put(self, local_path: Path, hdfs_path: str, *, client: str | None = None, timeout_s: float = 300) -> None:
        """Write ``local_path`` to ``hdfs_path`` (overwriting) through WebHDFS from ``client``."""
        if not Path(local_path).is_file():
            raise HdfsError(f"put: {local_path} is not a file")
        self._request(
            client or str(self.client),
            "PUT",
            self._url(hdfs_path, "CREATE", overwrite="true", replication=self.config.replication),
            upload=Path(local_path).resolve(),
            timeout=timeout_s,
        )

    def get(self, hdfs_path: str, local_path: Path, *, client: str | None = None, timeout_s: float = 300) -> int:
        """Read ``hdfs_path`` into ``local_path`` from ``client``; returns the byte count."""
        local_path = Path(local_path).resolve()
        local_path.parent.mkdir(parents=True, exist_ok=True)
        r = self._request(
            client or str(self.client), "GET", self._url(hdfs_path, "OPEN"), download=local_path, timeout=timeout_s
        )
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
    print(json.dumps(_http(json.loads(a.http))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
