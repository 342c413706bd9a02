"""The HDFS storage cluster's pure parts: configuration files, validation, commands, parsing."""

from __future__ import annotations

import json
import os
import stat
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from shufflelab import cgroups
from shufflelab.ndp import hadoop_jars, hdfs_config, webhdfs
from shufflelab.ndp.hdfs import HdfsCluster
from shufflelab.ndp.hdfs_config import HdfsConfig, HdfsError

ADDR = {"nn": "10.77.1.1", "s1": "10.77.2.1", "s2": "10.77.3.1", "client": "10.77.4.1"}


def _cfg(tmp_path: Path, **kw: Any) -> HdfsConfig:
    args: dict[str, Any] = dict(namenode="nn", datanodes=("s1", "s2"), addresses=ADDR, scratch=tmp_path, replication=2)
    args.update(kw)
    return HdfsConfig(**args)


def _props(xml: str) -> dict[str, str]:
    root = ET.fromstring(xml)
    assert root.tag == "configuration"
    return {p.findtext("name") or "": p.findtext("value") or "" for p in root.findall("property")}


def test_site_files_bind_each_daemon_to_its_host(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, block_bytes=1 << 20)
    core = hdfs_config.core_site(cfg, "nn")
    assert core["fs.defaultFS"] == "hdfs://10.77.1.1:9000"
    assert core["hadoop.tmp.dir"] == str(tmp_path / "nn" / "tmp")
    nn = hdfs_config.hdfs_site(cfg, "nn")
    assert nn["dfs.replication"] == "2" and nn["dfs.blocksize"] == str(1 << 20)
    assert nn["dfs.namenode.rpc-address"] == "10.77.1.1:9000"
    assert nn["dfs.namenode.rpc-bind-host"] == "10.77.1.1"
    assert nn["dfs.namenode.http-address"] == "10.77.1.1:9870"
    assert nn["dfs.webhdfs.enabled"] == "true"
    assert nn["dfs.namenode.name.dir"] == f"file://{tmp_path / 'nn' / 'name'}"
    assert nn["dfs.namenode.safemode.threshold-pct"] == "0" and nn["dfs.namenode.safemode.extension"] == "0"
    assert nn["dfs.namenode.datanode.registration.ip-hostname-check"] == "false"
    assert nn["dfs.client.use.datanode.hostname"] == "false"
    assert "dfs.datanode.address" not in nn  # the NameNode host is no DataNode here
    s2 = hdfs_config.hdfs_site(cfg, "s2")
    assert s2["dfs.datanode.hostname"] == "10.77.3.1"
    assert s2["dfs.datanode.address"] == "10.77.3.1:9866"
    assert s2["dfs.datanode.http.address"] == "10.77.3.1:9864"
    assert s2["dfs.datanode.ipc.address"] == "10.77.3.1:9867"
    assert s2["dfs.datanode.data.dir"] == f"file://{tmp_path / 's2' / 'data'}"
    assert s2["dfs.namenode.rpc-address"] == "10.77.1.1:9000"  # every daemon knows where the NameNode is


def test_site_xml_round_trips_and_escapes() -> None:
    props = {"a.b": "x<y&z", "c": "1"}
    xml = hdfs_config.site_xml(props)
    assert _props(xml) == props
    assert "x&lt;y&amp;z" in xml


def test_write_configs_creates_one_directory_per_host(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, namenode="s1")  # a NameNode may share its host with a DataNode
    hdfs_config.write_configs(cfg)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "logs") == ["s1", "s2"]
    for h in ("s1", "s2"):
        conf = tmp_path / h / "conf"
        assert {p.name for p in conf.iterdir()} == {"core-site.xml", "hdfs-site.xml", "log4j.properties", "hosts"}
        props = _props((conf / "hdfs-site.xml").read_text())
        assert props["dfs.datanode.address"] == f"{ADDR[h]}:9866"
    assert (tmp_path / "logs").is_dir()


def test_hosts_file_maps_the_machine_name_to_the_hosts_address(tmp_path: Path) -> None:
    text = hdfs_config.hosts_file(_cfg(tmp_path), "s1", machine_name="box")
    lines = text.splitlines()
    assert lines[0] == "127.0.0.1 localhost"
    assert "10.77.2.1 box" in lines
    assert {"10.77.1.1 nn", "10.77.2.1 s1", "10.77.3.1 s2"} <= set(lines)
    assert "client" not in text  # only the cluster's hosts


def test_java_command(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, namenode_heap_mb=320, datanode_heap_mb=200)
    lib = tmp_path / "cache" / "lib"
    nn = hdfs_config.java_command(cfg, "nn", lib, hdfs_config.NAMENODE_CLASS, ["-format"])
    assert "-Xmx320m" in nn and nn[-2:] == [hdfs_config.NAMENODE_CLASS, "-format"]
    cp = nn[nn.index("-cp") + 1].split(":")
    assert cp == [str(tmp_path / "nn" / "conf"), str(tmp_path / "cache" / "web"), f"{lib}/*"]
    assert f"-Djdk.net.hosts.file={tmp_path / 'nn' / 'conf' / 'hosts'}" in nn
    assert "--add-opens=java.base/java.lang=ALL-UNNAMED" in nn
    dn = hdfs_config.java_command(cfg, "s1", lib, hdfs_config.DATANODE_CLASS)
    assert "-Xmx200m" in dn and dn[-1] == hdfs_config.DATANODE_CLASS
    assert "-XX:TieredStopAtLevel=1" not in dn  # the data path keeps the optimising compiler


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"replication": 3}, "replication: 3 must be between 1 and the number of DataNodes (2)"),
        ({"replication": 0}, "replication"),
        ({"datanodes": ()}, "datanodes: at least one"),
        ({"datanodes": ("s1", "s1")}, "datanodes: s1 listed more than once"),
        ({"datanodes": ("s1", "s9")}, "host 's9' has no address"),
        ({"namenode": "nx"}, "host 'nx' has no address"),
        ({"block_bytes": 1000}, "block_bytes: 1000"),
        ({"block_bytes": (1 << 20) + 1}, "multiple of 512"),
        ({"datanode_heap_mb": 16}, "datanode_heap_mb"),
    ],
)
def test_config_errors_name_the_field(tmp_path: Path, kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(HdfsError) as exc:
        _cfg(tmp_path, **kw)
    assert needle in str(exc.value)


def _no_command(*args: Any, **kw: Any) -> Any:
    raise AssertionError("nothing runs while the cluster is only described")


def test_cluster_checks_places_and_defaults(tmp_path: Path) -> None:
    places = {h: f"sl000000-{h}" for h in ADDR}
    cl = HdfsCluster(places, ADDR, "nn", ["s1", "s2"], tmp_path, _no_command, _no_command)
    assert cl.config.replication == 2  # every DataNode holds every block
    assert cl.client == "nn" and cl.default_fs == "hdfs://10.77.1.1:9000"
    with pytest.raises(HdfsError, match="host 's2' has no place on the fabric"):
        HdfsCluster({"nn": "a", "s1": "b"}, ADDR, "nn", ["s1", "s2"], tmp_path, _no_command, _no_command)
    with pytest.raises(HdfsError, match="cpu limit: 'client' runs no HDFS daemon"):
        cl.cpu_limit("client", 1)
    with pytest.raises(HdfsError, match="cores: 0 must be positive"):
        cl.cpu_limit("s1", 0)
    with pytest.raises(HdfsError, match="must be absolute"):
        cl._url("relative/path", "OPEN")
    url = cl._url("/d/a b", "OPEN")
    assert url.startswith("http://10.77.1.1:9870/webhdfs/v1/d/a%20b?op=OPEN&user.name=")


def test_cfs_quota() -> None:
    assert cgroups.cfs_quota_us(1) == 100_000
    assert cgroups.cfs_quota_us(2) == 200_000
    assert cgroups.cfs_quota_us(0.5) == 50_000
    assert cgroups.cfs_quota_us(0.001) == 1000  # the kernel's minimum
    with pytest.raises(cgroups.CgroupError, match="cores"):
        cgroups.cfs_quota_us(-1)


def test_cpu_cgroup_on_a_fake_hierarchy(tmp_path: Path) -> None:
    root = tmp_path / "cpu"
    root.mkdir()
    with pytest.raises(cgroups.CgroupError, match="no cgroup v1 cpu controller"):
        cgroups.CpuCgroup(root / "g", 1).create()
    (root / "cpu.cfs_quota_us").write_text("-1")
    (root / "cgroup.procs").write_text("")
    cg = cgroups.CpuCgroup(root / f"{cgroups.PREFIX}x-s1", 1.5)
    cg.create()
    assert (cg.path / "cpu.cfs_quota_us").read_text() == "150000"
    assert (cg.path / "cpu.cfs_period_us").read_text() == "100000"
    (cg.path / "cgroup.procs").write_text("")
    # empty but just made: a run beside clean may be about to move its daemon in
    assert cgroups.stale(root) == []
    os.utime(cg.path, (time.time() - cgroups.STALE_AFTER_S - 1,) * 2)
    assert cgroups.stale(root) == [cg.path]
    (cg.path / "cgroup.procs").write_text("4242")  # a process in it: never stale
    assert cgroups.stale(root) == []
    (cg.path / "cgroup.procs").write_text("")
    for f in cg.path.iterdir():  # a real cgroup's files vanish with it; a plain directory needs emptying
        f.unlink()
    cg.remove()
    assert not cg.path.exists()


def test_parse_block_locations_both_forms() -> None:
    by_ip = {"10.77.2.1": "s1", "10.77.3.1": "s2"}
    doc = {
        "BlockLocations": {
            "BlockLocation": [
                {"offset": 1048576, "length": 10, "hosts": ["10.77.3.1"], "names": ["10.77.3.1:9866"]},
                {
                    "offset": 0,
                    "length": 1048576,
                    "hosts": ["10.77.2.1", "10.77.3.1"],
                    "names": ["10.77.2.1:9866", "10.77.3.1:9866"],
                },
            ]
        }
    }
    blocks = webhdfs.parse_block_locations(doc, by_ip)
    assert [(b.offset, b.length, b.hosts) for b in blocks] == [(0, 1048576, ("s1", "s2")), (1048576, 10, ("s2",))]
    assert blocks[0].addresses == ("10.77.2.1:9866", "10.77.3.1:9866")
    located = {
        "LocatedBlocks": {
            "locatedBlocks": [
                {
                    "startOffset": 0,
                    "block": {"numBytes": 7},
                    "locations": [{"ipAddr": "10.77.3.1", "xferPort": 9866}, {"ipAddr": "10.9.9.9", "xferPort": 1}],
                }
            ]
        }
    }
    (b,) = webhdfs.parse_block_locations(located, by_ip)
    assert b.hosts == ("s2", "10.9.9.9") and b.length == 7
    with pytest.raises(HdfsError, match="unexpected block-location answer"):
        webhdfs.parse_block_locations({"RemoteException": {}}, by_ip)


def test_live_datanodes_from_jmx() -> None:
    live = {
        "10.77.2.1:9866": {"xferaddr": "10.77.2.1:9866", "remaining": 5000},
        "10.77.3.1:9866": {"xferaddr": "10.77.3.1:9866", "remaining": 0},
    }
    jmx = {"beans": [{"name": "Hadoop:service=NameNode,name=NameNodeInfo", "LiveNodes": json.dumps(live)}]}
    assert webhdfs.live_datanodes(jmx) == {"10.77.2.1": 5000, "10.77.3.1": 0}
    assert webhdfs.live_datanodes({"beans": []}) == {}


def test_http_helper_refuses_addresses_outside_the_cluster() -> None:
    r = webhdfs.exchange({"method": "GET", "url": "http://192.0.2.1:9870/x", "allow": ["10.77.1.1"], "timeout": 1})
    assert "refusing to contact" in r["error"]
    r = webhdfs.exchange({"method": "GET", "url": "https://10.77.1.1/x", "allow": ["10.77.1.1"], "timeout": 1})
    assert "refusing" in r["error"]


def test_an_upload_sends_its_data_only_where_the_namenode_redirects(tmp_path: Path) -> None:
    """WebHDFS's two-step create: the NameNode answers 307 without reading a body and closes; a body
    sent to it raced that close (a broken pipe on a loaded machine). The data goes to the DataNode."""
    import http.server
    import threading

    got: dict[str, object] = {}

    class DataNode(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # noqa: N802 - http.server's naming
            got["data"] = self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(201)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass

    dn = http.server.HTTPServer(("127.0.0.1", 0), DataNode)

    class NameNode(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # noqa: N802
            got["nn_length"] = self.headers["Content-Length"]
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{dn.server_port}/webhdfs/v1/f?op=CREATE")
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.close_connection = True  # and never reads a body

        def log_message(self, *a: object) -> None:
            pass

    nn = http.server.HTTPServer(("127.0.0.1", 0), NameNode)
    for srv in (dn, nn):
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        data = bytes(range(256)) * 4000  # 1 MB
        f = tmp_path / "up.bin"
        f.write_bytes(data)
        url = f"http://127.0.0.1:{nn.server_port}/webhdfs/v1/f?op=CREATE"
        r = webhdfs.exchange({"method": "PUT", "url": url, "allow": ["127.0.0.1"], "upload": str(f), "timeout": 10})
        assert r.get("status") == 201, r
        assert got["nn_length"] == "0" and got["data"] == data
        # a server that answers the data-less first step without redirecting: nothing is uploaded, said so
        r = webhdfs.exchange({"method": "PUT", "url": f"http://127.0.0.1:{dn.server_port}/x", "allow": ["127.0.0.1"],
                              "upload": str(f), "timeout": 10})  # fmt: skip
        assert "nothing was uploaded" in r["error"]
    finally:
        for srv in (dn, nn):
            srv.shutdown()
            srv.server_close()


def test_jars_dir_is_keyed_by_the_pom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert hadoop_jars.hadoop_version().startswith("3.")
    a = hadoop_jars.jars_dir()
    assert a.parent == tmp_path / "shufflelab" and a.name.startswith("hadoop-")
    pom = tmp_path / "pom.xml"
    pom.write_text(hadoop_jars.POM.read_text().replace(hadoop_jars.hadoop_version(), "3.4.0"))
    assert hadoop_jars.jars_dir(pom) != a
    assert hadoop_jars.hadoop_version(pom) == "3.4.0"
    assert not hadoop_jars.jars_available(pom)


def test_ensure_jars_errors_name_what_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pom = tmp_path / "pom.xml"
    pom.write_text(hadoop_jars.POM.read_text())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(hadoop_jars.HadoopFetchError, match="mvn not found"):
        hadoop_jars.ensure_jars(pom)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "mvn"
    fake.write_text("#!/bin/sh\nprintf '\\033[0m[ERROR] Could not resolve dependencies\\n' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    with pytest.raises(hadoop_jars.HadoopFetchError) as exc:
        hadoop_jars.ensure_jars(pom)
    msg = str(exc.value)
    assert "offline (local Maven repository)" in msg and "online (Maven Central)" in msg
    assert "[ERROR] Could not resolve dependencies" in msg and "\x1b" not in msg  # colour codes stripped
    assert not list((tmp_path / "cache" / "shufflelab").iterdir())  # nothing half-made is left
