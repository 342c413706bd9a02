"""HDFS and the NDP proxies on places with files of their own (``fakes.Machines``, as machines over
SSH): each host's configuration is put into a folder at its place and names only folders there,
the daemons run the place's ``java`` on the jars in the place's cache, WebHDFS exchanges run in the
place's Python, a file put into HDFS goes to the client's place first (and is removed there after),
the proxies get their spool at their place and are ready once they answer HTTP asked from there,
and a storage host on a machine is capped by a CPU group there only below its machine's CPU count
(its processes then start inside it) and refused above it; the executors'
per-read statistics come back from every Spark machine."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fakes import Clock, FakeProcess, Machines
from shufflelab import artifacts
from shufflelab.ndp import hdfs_config
from shufflelab.ndp.hdfs import HdfsCluster
from shufflelab.ndp.storage import NdpStorage, StorageError

ADDR = {"s1": "10.77.2.1", "s2": "10.77.3.1"}
PLACES = {"s1": "m1", "s2": "m2"}


@dataclass
class Seams:
    """The backend's run and launch at fake places: what ran where, and answers as HDFS gives them."""

    cpus: int = 4
    ran: list[tuple[str | None, list[str]]] = field(default_factory=list)
    launched: list[tuple[str, list[str], dict[str, str]]] = field(default_factory=list)
    proxy_up: bool = True

    def run(self, argv: Sequence[str], *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
        argv = list(argv)
        self.ran.append((place, argv))
        if argv == ["uname", "-n"]:
            return f"machine-{place}\n"
        if argv == ["nproc"]:
            return f"{self.cpus}\n"
        if "shufflelab.ndp.hdfs" in argv:
            req = json.loads(argv[-1])
            if ":9870/jmx" in req["url"]:
                live = {f"{a}:9866": {"xferaddr": f"{a}:9866", "remaining": 1 << 40} for a in ADDR.values()}
                return json.dumps({"status": 200, "body": json.dumps({"beans": [{"LiveNodes": json.dumps(live)}]})})
            if ":9880/" in req["url"]:  # a proxy
                return json.dumps({"status": 501, "body": ""} if self.proxy_up else {"error": "refused"})
            return json.dumps({"status": 201, "body": ""})
        return ""

    def launch(self, place: str, argv: Sequence[str], log: Path, /, env: dict[str, str] | None = None) -> FakeProcess:
        self.launched.append((place, list(argv), dict(env or {})))
        return FakeProcess(Clock(), None)


def _props(path: Path) -> dict[str, str]:
    root = ET.fromstring(path.read_text())
    return {p.findtext("name") or "": p.findtext("value") or "" for p in root.findall("property")}


def _jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(artifacts, "cache_root", lambda: tmp_path / "cache")
    lib = tmp_path / "cache" / "hadoop-abc" / "lib"
    lib.mkdir(parents=True)
    return lib


def _helpers(seams: Seams) -> list[tuple[str | None, list[str]]]:
    return [(p, a) for p, a in seams.ran if "shufflelab.ndp.hdfs" in a]


def _cluster(tmp_path: Path, seams: Seams, lib: Path, machines: Machines, **kw: Any) -> HdfsCluster:
    """HDFS of s1 (the NameNode) and s2 on the machines m1 and m2 (``PLACES``), staged through ``machines``."""
    return HdfsCluster(
        PLACES,
        ADDR,
        "s1",
        ["s1", "s2"],
        tmp_path / "scratch",
        seams.run,
        seams.launch,
        jars=lib,
        staging=machines,
        **kw,
    )


def test_hdfs_on_machines_reads_and_writes_only_at_its_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _jars(tmp_path, monkeypatch)
    machines, seams = Machines(tmp_path / "machines"), Seams()
    cl = _cluster(tmp_path, seams, lib, machines)
    cl.start(timeout_s=10)
    places = {p: str(tmp_path / "machines" / p) for p in PLACES.values()}
    # every configuration file put at its place, naming only folders there
    for h, place in PLACES.items():
        conf = Path(cl.config.conf_dir(h))
        assert conf.is_relative_to(places[place]) and (place, str(conf / "core-site.xml")) in machines.puts
        core, site = _props(conf / "core-site.xml"), _props(conf / "hdfs-site.xml")
        assert Path(core["hadoop.tmp.dir"]).is_relative_to(places[place]), core
        assert Path(site["dfs.datanode.data.dir"].removeprefix("file://")).is_relative_to(places[place]), site
        # the JVM resolves its machine's own name to its host's address
        assert f"{ADDR[h]} machine-{place}" in (conf / "hosts").read_text()
    nn = _props(Path(cl.config.conf_dir("s1")) / "hdfs-site.xml")
    assert Path(nn["dfs.namenode.name.dir"].removeprefix("file://")).is_relative_to(places["m1"])
    # the daemons: the place's java, its configuration first, the jars in the place's cache
    assert sorted(p for p, _, _ in seams.launched) == ["m1", "m1", "m2"]  # DataNodes, then the NameNode
    for place, argv, _ in seams.launched:
        cp = argv[argv.index("-cp") + 1].split(":")
        assert argv[0] == "java" and Path(cp[0]).is_relative_to(places[place]), argv
        assert cp[1:] == [f"{machines.cache(place)}/hadoop-abc/web", f"{machines.cache(place)}/hadoop-abc/lib/*"]
        dir_opts = [a for a in argv if a.startswith(("-Dhadoop.home.dir=", "-Dhadoop.log.dir="))]
        assert all(Path(a.split("=", 1)[1]).is_relative_to(places[place]) for a in dir_opts), argv
    # readiness asked at the NameNode's place, in its Python
    helpers = _helpers(seams)
    assert helpers and all(p == "m1" and "SHUFFLELAB_PLACE=m1" in a for p, a in helpers)
    # a table file goes to the client's place first, is uploaded from there and removed there after
    table = tmp_path / "tables" / "lineitem" / "part-0.parquet"
    table.parent.mkdir(parents=True)
    table.write_bytes(b"PAR1")
    seams.ran.clear()
    cl.put(table, "/tpch/lineitem/part-0.parquet")
    (place, there), *_ = [(p, r) for p, r in machines.puts if r.endswith("part-0.parquet")]
    assert place == "m1" and Path(there).is_relative_to(places["m1"]) and Path(there).read_bytes() == b"PAR1"
    (_, helper), *_ = _helpers(seams)
    assert json.loads(helper[-1])["upload"] == there
    assert seams.ran[-1] == ("m1", ["rm", "-f", "--", there])


@dataclass
class Group:
    """A CPU group at a place that records what is done to it (the backend's ``cpu_group``)."""

    place: str
    name: str
    cores: float
    log: list[tuple[str, ...]]

    @property
    def path(self) -> Path:
        return Path(f"/cg/{self.place}/{self.name}")

    def create(self) -> None:
        self.log.append(("create", self.place, f"{self.cores:g}"))

    def add(self, pid: int) -> None:
        self.log.append(("add", self.place, str(pid)))

    def starting(self, argv: Sequence[str]) -> list[str]:
        return ["in-group", str(self.path), *argv]

    def remove(self) -> None:
        self.log.append(("remove", self.place))


def test_the_proxies_run_at_their_places_capped_only_below_the_machines_cpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = _jars(tmp_path, monkeypatch)
    machines, seams = Machines(tmp_path / "machines"), Seams(cpus=4)
    log: list[tuple[str, ...]] = []

    def cpu_group(place: str, name: str, cores: float) -> Group:
        return Group(place, name, cores, log)

    fabric = SimpleNamespace(places=PLACES, network=SimpleNamespace(host_addresses=ADDR))
    storage = NdpStorage(
        fabric,  # type: ignore[arg-type]
        seams.run,
        seams.launch,
        ["s1", "s2"],
        tmp_path / "scratch",
        0.01,
        staging=machines,
        cpu_group=cpu_group,
        machines=True,
    )
    storage.cluster = _cluster(tmp_path, seams, lib, machines, cpu_group=cpu_group)
    storage.set_cores(4, 1)  # the machines' 4 CPUs: no cap needed
    assert storage.cores == 4 and not storage.cluster.cgroups
    proxies = [(p, a, e) for p, a, e in seams.launched if "shufflelab.ndp.proxy" in a]
    assert [p for p, _, _ in proxies] == ["m1", "m2"]
    for place, argv, env in proxies:
        assert Path(argv[argv.index("--spool") + 1]).is_relative_to(tmp_path / "machines" / place)
        assert env["SHUFFLELAB_PLACE"] == place  # the place's Python's environment
    # each proxy asked for from its own place
    asked = [p for p, a in _helpers(seams) if ":9880/" in json.loads(a[-1])["url"]]
    assert asked == ["m1", "m2"]
    assert not log  # no group
    # below the machine's CPUs: a group at each storage place, the proxies (2 workers now) started inside
    seams.launched.clear()
    storage.set_cores(2, 1)
    assert storage.cores == 2 and sorted(storage.cluster.cgroups) == ["s1", "s2"]
    assert sorted(log) == [("create", "m1", "2"), ("create", "m2", "2")]  # no process moved: none runs
    proxies = [(p, a) for p, a, _ in seams.launched if "shufflelab.ndp.proxy" in a]
    assert [p for p, _ in proxies] == ["m1", "m2"]
    assert all(
        a[:2] == ["in-group", f"/cg/{p}/{storage.cluster.name}-{h}"]
        for (p, a), h in zip(proxies, ["s1", "s2"], strict=True)
    )
    # more than the machine has: refused, nothing changed
    log.clear()
    with pytest.raises(StorageError, match=r"storage_cores x core_scale = 8 CPUs, more than the 4 CPUs of s1's"):
        storage.set_cores(8, 1)
    assert not log and storage.cores == 2
    # the machine's own count again: the groups go (their processes back to the parent first)
    storage.set_cores(4, 1)
    assert sorted(log) == [("remove", "m1"), ("remove", "m2")] and not storage.cluster.cgroups
    assert seams.ran.count(("m1", ["nproc"])) == 1  # each machine's CPU count read once


def test_a_capped_machines_daemons_start_inside_its_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cap set before HDFS starts (the first run's, on machines): the capped host's daemons start
    through the group (nothing moved in after), their JVMs told its CPUs; the other host's do not."""
    lib = _jars(tmp_path, monkeypatch)
    machines, seams = Machines(tmp_path / "machines"), Seams()
    log: list[tuple[str, ...]] = []
    cl = _cluster(tmp_path, seams, lib, machines, cpu_group=lambda place, name, cores: Group(place, name, cores, log))
    cl.cpu_limit("s1", 0.5)
    cl.start(timeout_s=10)
    on = {p: [a for q, a, _ in seams.launched if q == p] for p in PLACES.values()}
    assert len(on["m1"]) == 2 and all(a[:2] == ["in-group", f"/cg/m1/{cl.name}-s1"] for a in on["m1"])
    assert all("-XX:ActiveProcessorCount=1" in a for a in on["m1"])
    assert len(on["m2"]) == 1 and on["m2"][0][0] == "java"
    assert log == [("create", "m1", "0.5")]  # no process moved in


def test_on_machines_the_first_runs_cap_is_set_before_the_storage_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The storage started with the first run's CPUs (half a CPU of machines of 4): each storage
    machine's group is made before any of its processes, and every daemon and proxy starts inside
    it (before, the storage started uncapped and its processes were moved in at the first run)."""
    lib = _jars(tmp_path, monkeypatch)
    # (the cluster calls the name it imported: patching it in hadoop_jars fetched the real jars with Maven)
    monkeypatch.setattr("shufflelab.ndp.hdfs.ensure_jars", lambda: lib)
    monkeypatch.setattr("shufflelab.ndp.tpch.prepare", lambda sf, mb: tmp_path / "tables")
    monkeypatch.setattr(NdpStorage, "_load", lambda self: None)  # (the tables: tested apart)
    machines, seams = Machines(tmp_path / "machines"), Seams(cpus=4)
    log: list[tuple[str, ...]] = []
    order: list[str] = []

    def cpu_group(place: str, name: str, cores: float) -> Group:
        order.append(f"group {place}")
        return Group(place, name, cores, log)

    def launch(place: str, argv: Sequence[str], log_path: Path, /, env: dict[str, str] | None = None) -> FakeProcess:
        order.append(f"launch {place}")
        return seams.launch(place, argv, log_path, env)

    fabric = SimpleNamespace(
        places=PLACES, network=SimpleNamespace(host_addresses=ADDR), lease=SimpleNamespace(lease_id="ab")
    )
    storage = NdpStorage(
        fabric,  # type: ignore[arg-type]
        seams.run,
        launch,
        ["s1", "s2"],
        tmp_path / "scratch",
        0.01,
        proxy_workers=2,  # the run's 2 emulated cores
        staging=machines,
        cpu_group=cpu_group,
        machines=True,
    )
    storage.start(0.5)
    assert storage.cores == 0.5 and sorted(log) == [("create", "m1", "0.5"), ("create", "m2", "0.5")]
    assert order[:2] == ["group m1", "group m2"] and all(o.startswith("launch") for o in order[2:])
    assert len(seams.launched) == 5  # 2 DataNodes, the NameNode, 2 proxies
    assert all(a[0] == "in-group" for _, a, _ in seams.launched), seams.launched
    daemons = [(p, a) for p, a, _ in seams.launched if "-cp" in a]
    assert len(daemons) == 3 and all(  # the jars given, not ones fetched
        a[a.index("-cp") + 1].endswith(f"{machines.cache(p)}/hadoop-abc/lib/*") for p, a in daemons
    ), daemons
    storage.set_cores(2, 0.25)  # the same CPUs: nothing changes
    assert len(log) == 2 and len(seams.launched) == 5


def test_write_configs_keeps_namespace_paths_by_default(tmp_path: Path) -> None:
    """Without folders at the places (namespaces), the files name this machine's folders as before."""
    cfg = hdfs_config.HdfsConfig("s1", ("s1",), ADDR, tmp_path, 1)
    assert cfg.conf_dir("s1") == tmp_path / "s1" / "conf" == cfg.local_conf_dir("s1")
    assert cfg.host_dir("s1") == tmp_path / "s1" and cfg.place_log_dir("s1") == tmp_path / "logs"
    argv = hdfs_config.java_command(cfg, "s1", tmp_path / "lib", hdfs_config.DATANODE_CLASS)
    assert f"-Dhadoop.log.dir={tmp_path / 'logs'}" in argv and f"{tmp_path / 's1' / 'conf'}:" in " ".join(argv)


@dataclass
class OnePath:
    """A staging whose places each have files of their own below ``root/<place>``, a local folder
    standing for one path at every place (as the lease's folders on machines)."""

    root: Path
    caches: dict[str, str] = field(default_factory=dict)

    def folder(self, place: str, local: Path) -> str:
        (self.root / place / "files" / local.name).mkdir(parents=True, exist_ok=True)
        return f"/files/{local.name}"

    def put(self, place: str, local: Path, remote: str) -> None:
        raise AssertionError("nothing is put")

    def get(self, place: str, remote: str, local: Path) -> bool:
        there = self.root / place / remote.lstrip("/")
        if not there.exists():
            return False
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(there.read_bytes())
        return True

    def python(self, place: str) -> tuple[str, dict[str, str]]:
        return "python3", {}

    def cache(self, place: str) -> str:
        return self.caches.get(place, "/opt/sl/cache")


SPARK_HOSTS = {"master": "m1", "w1": "m2", "w2": "m3"}


def _driver(tmp_path: Path, staging: object) -> Any:
    from shufflelab.kinds.tpch import TpchDriver
    from shufflelab.spec import parse

    spec = parse(
        {
            "experiment": {"name": "t"},
            "topology": {"kind": "star", "bottleneck": {"rate_mbps": 100}},
            "hosts": {
                "master": {"roles": ["spark-master"]},
                "w1": {"roles": ["spark-worker"]},
                "w2": {"roles": ["spark-worker"]},
                "s1": {"roles": ["storage"]},
            },
            "workload": {"name": "tpch"},
        }
    )
    d = TpchDriver.__new__(TpchDriver)
    d.ctx = SimpleNamespace(run_dir=tmp_path / "run", spec=spec)  # type: ignore[assignment]
    d.group = SimpleNamespace(fabric=SimpleNamespace(places={**SPARK_HOSTS, "s1": "m4"}))  # type: ignore[assignment]
    d.backend = SimpleNamespace(staging=staging)  # type: ignore[assignment]
    (tmp_path / "run").mkdir(parents=True)
    return d


def test_the_reads_of_every_spark_machine_come_back(tmp_path: Path) -> None:
    staging = OnePath(tmp_path / "machines")
    d = _driver(tmp_path, staging)
    stats = d._stats_file()
    assert stats == "/files/ndp-reads/ndp_reads.jsonl"  # one path the executors of every machine append to
    for place, line in (("m2", '{"path": "/tpch/lineitem/a"}\n'), ("m3", '{"path": "/tpch/lineitem/b"}')):
        (tmp_path / "machines" / place / "files" / "ndp-reads" / "ndp_reads.jsonl").write_text(line)
    d._fetch_stats()  # m1 (the driver's machine) ran no executor: nothing there
    lines = (tmp_path / "run" / "ndp_reads.jsonl").read_text().splitlines()
    assert [json.loads(x)["path"] for x in lines] == ["/tpch/lineitem/a", "/tpch/lineitem/b"]


def test_namespaces_write_the_runs_reads_file_themselves(tmp_path: Path) -> None:
    from shufflelab.emulate.protocols import SharedFiles

    d = _driver(tmp_path, SharedFiles())
    assert d._stats_file() == str(tmp_path / "run" / "ndp_reads.jsonl")
    (tmp_path / "run" / "ndp_reads.jsonl").write_text('{"path": "/x"}\n')
    d._fetch_stats()
    assert (tmp_path / "run" / "ndp_reads.jsonl").read_text() == '{"path": "/x"}\n'  # not read twice
    with pytest.raises(RuntimeError, match="folder of the per-read statistics is not at one path"):
        _driver(tmp_path / "other", Machines(tmp_path / "m"))._stats_file()
