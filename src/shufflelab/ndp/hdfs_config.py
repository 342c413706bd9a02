"""An HDFS cluster's configuration, rendered: one directory per host (``core-site.xml``,
``hdfs-site.xml``, ``log4j.properties`` and a ``hosts`` file the JVM resolves names from, so no
daemon ever asks a DNS server) and the ``java`` command line of each daemon
(``java -cp <conf>:<web>:<lib>/* <main class>``: no Hadoop distribution, no Hadoop shell scripts).
Pure: nothing here starts a process.

The files are written below the local ``scratch`` folder; the paths they and the command lines
name are the folders at each host's place (``dirs``, ``confs``: a machine's own, where the backend's
:class:`~shufflelab.emulate.protocols.Staging` puts them; by default the local ones, which
namespaces on this machine see).
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath
from xml.sax.saxutils import escape

from shufflelab.ndp.hadoop_jars import web_root

NN_RPC_PORT = 9000
NN_HTTP_PORT = 9870
DN_XFER_PORT = 9866
DN_HTTP_PORT = 9864
DN_IPC_PORT = 9867

NAMENODE_CLASS = "org.apache.hadoop.hdfs.server.namenode.NameNode"
DATANODE_CLASS = "org.apache.hadoop.hdfs.server.datanode.DataNode"

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


class HdfsError(RuntimeError):
    """The HDFS cluster could not be configured, started or used; the message names the host or field."""


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
    dirs: Mapping[str, str] = field(default_factory=dict)  # host -> its folder at its place (default: scratch/host)
    confs: Mapping[str, str] = field(default_factory=dict)  # host -> its configuration folder there
    java: str | None = None  # the ``java`` at the places (None: this machine's, found on PATH)

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

    def host_dir(self, host: str) -> PurePath:
        """``host``'s folder at its place (name and data directories, ``hadoop.home.dir``)."""
        return PurePosixPath(self.dirs[host]) if host in self.dirs else self.scratch / host

    def conf_dir(self, host: str) -> PurePath:
        """``host``'s configuration folder at its place (first on its daemons' class path)."""
        return PurePosixPath(self.confs[host]) if host in self.confs else self.local_conf_dir(host)

    def local_conf_dir(self, host: str) -> Path:
        """Where :func:`write_configs` writes ``host``'s configuration on this machine."""
        return self.scratch / host / "conf"

    def log_dir(self) -> Path:
        """The daemons' logs on this machine."""
        return self.scratch / "logs"

    def place_log_dir(self, host: str) -> PurePath:
        """``hadoop.log.dir`` of ``host``'s daemons at its place."""
        return self.host_dir(host) / "logs" if host in self.dirs else self.log_dir()


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
    lib: PurePath,
    main: str,
    args: Sequence[str] = (),
    active_cpus: int | None = None,
) -> list[str]:
    """``java`` argv running ``main`` with ``host``'s configuration first on the class path;
    ``active_cpus`` makes the JVM size its GC and thread pools for that many CPUs (a CPU-limited host)."""
    nn = main == NAMENODE_CLASS
    heap = cfg.namenode_heap_mb if nn else cfg.datanode_heap_mb
    java = cfg.java or shutil.which("java") or "java"
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
        f"-Dhadoop.log.dir={cfg.place_log_dir(host)}",
        f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
        *JPMS_OPTS,
        "-cp",
        f"{conf}:{web_root(lib)}:{lib}/*",
        main,
        *args,
    ]


CONF_FILES = ("core-site.xml", "hdfs-site.xml", "log4j.properties", "hosts")


def write_configs(cfg: HdfsConfig, machine_names: Mapping[str, str] | None = None) -> None:
    """Every host's configuration files (:data:`CONF_FILES`) in its local configuration folder;
    ``machine_names``: each host's machine's own name (default: this machine's)."""
    names = machine_names or {}
    for h in cfg.hosts():
        conf = cfg.local_conf_dir(h)
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "core-site.xml").write_text(site_xml(core_site(cfg, h)))
        (conf / "hdfs-site.xml").write_text(site_xml(hdfs_site(cfg, h)))
        (conf / "log4j.properties").write_text(LOG4J)
        (conf / "hosts").write_text(hosts_file(cfg, h, names.get(h)))
    cfg.log_dir().mkdir(parents=True, exist_ok=True)
