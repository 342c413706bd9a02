"""``shufflelab deploy``'s planning with a fake controller and fake hosts: what is copied, what is
there, what is refused (naming the item), where things go, the manifest, and the inventory fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shufflelab.hosts import inventory
from shufflelab.hosts.deploy_plan import (
    Controller,
    Entry,
    Item,
    LocalFile,
    Manifest,
    Remote,
    java_feature,
    parse_java_version,
    parse_probe,
    plan_host,
    remote_root,
    resolve_unsure,
    roots,
)
from shufflelab.hosts.paths import HostPaths

PY = "/usr/bin/python3.11"
GOOD_PYTHON = {PY: ((3, 11, 2), "x86_64", "glibc", "2.36")}


def _ctl(tmp: str = "/ctl") -> Controller:
    files = (LocalFile(f"{tmp}/src/shufflelab/a.py", "shufflelab/a.py", 10, 100),
             LocalFile(f"{tmp}/src/shufflelab/sub/b.py", "shufflelab/sub/b.py", 20, 100))  # fmt: skip
    pkgs = (LocalFile(f"{tmp}/site/pyspark/__init__.py", "pyspark/__init__.py", 30, 100),)
    items = (
        Item("source", f"{tmp}/src", files),
        Item("python packages", f"{tmp}/site", pkgs),
        Item("python environment", f"{tmp}/venv", links=(("bin/python", "{python}"),),
             texts=(("pyvenv.cfg", "home = {home}\n"),)),
        Item("listener jar", f"{tmp}/cache", (LocalFile(f"{tmp}/cache/l.jar", "l.jar", 5, 100),)),
        Item("class-data archive", f"{tmp}/cache", (LocalFile(f"{tmp}/cache/a.jsa", "a.jsa", 50, 100),)),
        Item("switch", f"{tmp}/bin", (LocalFile(f"{tmp}/bin/shufflelab-switch", "shufflelab-switch", 7, 100),)),
    )  # fmt: skip
    return Controller((3, 11, 7), "x86_64", ("glibc", "2.36"), "17.0.15", items, "/opt/py/bin/python3.11")


DEPLOYED = HostPaths.for_dir("/opt/lab")


def _remote(entries: dict[str, Entry] | None = None, **kw: object) -> Remote:
    args: dict[str, object] = {"java": "17.0.2", "pythons": GOOD_PYTHON, "entries": entries or {}}
    args["manifest"] = Manifest()
    args.update(kw)
    return Remote(**args)  # type: ignore[arg-type]


def _all_there(ctl: Controller, paths: HostPaths, python: str = PY) -> dict[str, Entry]:
    out = {}
    for item in ctl.items:
        root = remote_root(item, paths, ctl)
        for f in item.files:
            out[f"{root}/{f.rel}"] = Entry("f", f.size, f.mtime)
        for rel, _ in item.links:
            out[f"{root}/{rel}"] = Entry("l", target=python)
        for rel, _ in item.texts:
            out[f"{root}/{rel}"] = Entry("f", 1, 1)
    return out


def test_empty_deploy_dir_gets_everything_but_the_archive_and_the_switch() -> None:
    ctl = _ctl()
    plan = plan_host("h1", DEPLOYED, ctl, _remote({"/opt": Entry("d")}), router=False)
    assert not plan.refusals
    by = {i.name: i for i in plan.items}
    assert "switch" not in by  # not the router host
    assert by["class-data archive"].skip and "class path" in by["class-data archive"].skip
    src = "/opt/lab/src/shufflelab"
    assert [c.remote for c in by["source"].copies] == [f"{src}/a.py", f"{src}/sub/b.py"]
    assert by["python packages"].copies[0].remote == "/opt/lab/venv/lib/python3.11/site-packages/pyspark/__init__.py"
    assert by["python environment"].links == [("/opt/lab/venv/bin/python", PY)]
    assert by["python environment"].texts == [("/opt/lab/venv/pyvenv.cfg", "home = /usr/bin\n")]
    assert by["listener jar"].copies[0].remote == "/opt/lab/cache/l.jar"
    # every folder that does not exist, parents first; /opt existed
    assert plan.mkdirs[:2] == ["/opt/lab", "/opt/lab/cache"]
    assert "/opt" not in plan.mkdirs and "/opt/lab/src/shufflelab/sub" in plan.mkdirs
    assert plan.files == 4 and plan.bytes == 65


def test_router_gets_the_switch() -> None:
    plan = plan_host("r", DEPLOYED, _ctl(), _remote(), router=True)
    sw = next(i for i in plan.items if i.name == "switch")
    assert [c.remote for c in sw.copies] == ["/opt/lab/bin/shufflelab-switch"] == [DEPLOYED.switch]


def test_second_deploy_copies_nothing() -> None:
    ctl = _ctl()
    plan = plan_host("h1", DEPLOYED, ctl, _remote(_all_there(ctl, DEPLOYED)), router=True)
    assert not plan.refusals and plan.nothing and plan.mkdirs == []
    assert all("there" in i.summary() or i.skip for i in plan.items)


def test_changed_file_deploy_put_there_is_copied_again() -> None:
    ctl = _ctl()
    entries = _all_there(ctl, DEPLOYED)
    changed = "/opt/lab/src/shufflelab/a.py"
    entries[changed] = Entry("f", 10, 99)  # older
    plan = plan_host("h1", DEPLOYED, ctl, _remote(entries, manifest=Manifest(files={changed: [10, 99]})), False)
    assert not plan.refusals
    assert [c.remote for i in plan.items for c in i.copies] == [changed]


def test_files_deploy_did_not_put_there_are_never_overwritten() -> None:
    ctl = _ctl()
    entries = _all_there(ctl, DEPLOYED)
    entries["/opt/lab/src/shufflelab/a.py"] = Entry("f", 11, 100)  # another size: differs
    plan = plan_host("h1", DEPLOYED, ctl, _remote(entries), False)
    assert plan.refusals == [
        "source: 1 files differ from the controller's and were not put there by deploy "
        "(/opt/lab/src/shufflelab/a.py); update them, or give the host a deploy_dir"
    ]
    # same size, another time: the hashes decide
    entries["/opt/lab/src/shufflelab/a.py"] = Entry("f", 10, 5)
    plan = plan_host("h1", DEPLOYED, ctl, _remote(entries), False)
    assert not plan.refusals and list(plan.unsure) == ["/opt/lab/src/shufflelab/a.py"]
    resolve_unsure(plan, {"/opt/lab/src/shufflelab/a.py": "x"}, lambda p: "x")
    assert not plan.refusals and plan.nothing
    plan = plan_host("h1", DEPLOYED, ctl, _remote(entries), False)
    resolve_unsure(plan, {"/opt/lab/src/shufflelab/a.py": "x"}, lambda p: "y")
    assert "1 files differ" in plan.refusals[0]


def test_same_paths_as_the_controller() -> None:
    ctl = _ctl()
    same = HostPaths.for_dir(None)
    assert not same.deployed and same.pythonpath is None
    plan = plan_host("h1", same, ctl, _remote(_all_there(ctl, same), java="17.0.15"), False)
    assert plan.nothing and not plan.refusals
    # the archive is reused at the same path with the same JDK, skipped with another
    plan = plan_host("h1", same, ctl, _remote(java="17.0.15"), False)
    assert next(i for i in plan.items if i.name == "class-data archive").copies
    plan = plan_host("h1", same, ctl, _remote(java="17.0.2"), False)
    assert "17.0.2" in (next(i for i in plan.items if i.name == "class-data archive").skip or "")
    # an existing interpreter link of the host's own is left alone
    entries = _all_there(ctl, same, python="/somewhere/else")
    assert plan_host("h1", same, ctl, _remote(entries, java="17.0.15"), False).nothing


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"java": None}, "java: not found on the host's PATH (deploy does not bring Java"),
        ({"java": "11.0.20"}, "java: 11.0.20 on the host, 17.0.15 on the controller"),
        ({"pythons": {PY: ((3, 9, 2), "x86_64", "glibc", "2.31")}}, "python: no Python 3.11 on the host (found: "),
        ({"pythons": {}}, "python: no Python 3.11 on the host (found: none)"),
        ({"pythons": {PY: ((3, 11, 2), "aarch64", "glibc", "2.36")}}, "cpu architecture: aarch64 on the host"),
        ({"pythons": {PY: ((3, 11, 2), "x86_64", "", "")}}, "libc: not glibc on the host, glibc on the controller"),
        ({"pythons": {PY: ((3, 11, 2), "x86_64", "glibc", "2.31")}}, "libc: glibc 2.31 on the host, older"),
    ],
)
def test_refusals_name_the_item(change: dict[str, object], refusal: str) -> None:
    plan = plan_host("h1", DEPLOYED, _ctl(), _remote(**change), False)
    assert any(r.startswith(refusal) for r in plan.refusals), plan.refusals
    assert plan.mkdirs == []  # nothing is made on a refused host


def test_first_matching_python_is_used() -> None:
    pythons = {"/usr/bin/python3": ((3, 9, 2), "x86_64", "glibc", "2.36"), **GOOD_PYTHON}
    plan = plan_host("h1", DEPLOYED, _ctl(), _remote(pythons=pythons), False)
    assert plan.python == PY and not plan.refusals


def test_roots_listed() -> None:
    ctl = _ctl()
    assert roots(ctl, DEPLOYED, router=False) == [
        "/opt/lab/cache", "/opt/lab/src/shufflelab", "/opt/lab/venv", "/opt/lab/venv/lib/python3.11/site-packages"
    ]  # fmt: skip
    assert "/opt/lab/bin" in roots(ctl, DEPLOYED, router=True)


def test_probe_output_parsed() -> None:
    manifest = Manifest(files={"/opt/lab/src/x.py": [1, 2]}, dirs=["/opt/lab"])
    text = (
        "==java\nopenjdk version \"17.0.15\" 2025-04-15\n==python\n"
        f"{PY}\t3.11.2\tx86_64\tglibc\t2.36\n/usr/bin/python3\t\n"
        f"==manifest\n{manifest.to_json()}==texts\n@@/opt/lab/venv/pyvenv.cfg\nhome = /usr/bin\n"
        "==entries\nd\t0\t0\t/opt\t\nf\t10\t100.75\t/opt/lab/src/x.py\t\nl\t7\t1.0\t/opt/lab/venv/bin/python\t/usr/bin/python3.11\n"
    )  # fmt: skip
    r = parse_probe(text)
    assert r.java == "17.0.15"
    assert r.pythons == GOOD_PYTHON
    assert r.manifest == manifest and r.manifest.owns("/opt/lab/src/x.py")
    assert r.texts == {"/opt/lab/venv/pyvenv.cfg": "home = /usr/bin\n"}
    assert r.entries["/opt/lab/src/x.py"] == Entry("f", 10, 100)
    assert r.entries["/opt/lab/venv/bin/python"].target == "/usr/bin/python3.11"
    assert parse_probe("==java\n==python\n==manifest\n==entries\n").java is None


def test_manifest_round_trip_and_damage() -> None:
    m = Manifest(files={"/a": [1, 2]}, links={"/b": "/c"}, texts={"/d": 3}, dirs=["/x", "/x/y"])
    assert Manifest.parse(m.to_json()) == m and json.loads(m.to_json())["format"] == 1
    assert Manifest.parse("").empty
    with pytest.raises(Exception, match="deploy manifest cannot be read"):
        Manifest.parse("{not json")


def test_java_versions() -> None:
    assert parse_java_version('openjdk version "17.0.15" 2025-04-15') == "17.0.15"
    assert java_feature("17.0.15") == 17 and java_feature("1.8.0_392") == 8 and java_feature("21") == 21
    assert java_feature(None) is None


def test_deployed_paths() -> None:
    assert DEPLOYED.python == "/opt/lab/venv/bin/python"
    assert DEPLOYED.pythonpath == "/opt/lab/src"
    assert DEPLOYED.spark_home == "/opt/lab/venv/lib/python3.11/site-packages/pyspark"
    assert DEPLOYED.cache == "/opt/lab/cache" and DEPLOYED.switch == "/opt/lab/bin/shufflelab-switch"


def _inv(tmp_path: Path, ssh: str = "", host: str = "") -> Path:
    (tmp_path / "k").write_text("")
    p = tmp_path / "inv.toml"
    p.write_text(
        f'[ssh]\nknown_hosts = "k"\n{ssh}\n[hosts.a]\naddress = "192.0.2.1"\nkey_file = "k"\n'
        f'data_interface = "eth1"\n{host}\n[hosts.b]\naddress = "192.0.2.2"\nkey_file = "k"\ndata_interface = "eth1"\n'
    )
    return p


def test_inventory_deploy_dir(tmp_path: Path) -> None:
    inv = inventory.load(_inv(tmp_path))
    assert inv.hosts["a"].deploy_dir is None
    inv = inventory.load(_inv(tmp_path, ssh='deploy_dir = "/opt/lab/"', host='deploy_dir = "/srv/own"'))
    assert inv.hosts["a"].deploy_dir == "/srv/own" and inv.hosts["b"].deploy_dir == "/opt/lab"
    for bad, field in (('"relative/x"', "ssh.deploy_dir"), ('"/"', "ssh.deploy_dir"), ('"/opt"', "ssh.deploy_dir")):
        p = _inv(tmp_path, ssh=f"deploy_dir = {bad}")
        with pytest.raises(inventory.InventoryError, match=f"{p}: {field}: "):
            inventory.load(p)
    p = _inv(tmp_path, host='deploy_dir = "/opt/a b"')
    with pytest.raises(inventory.InventoryError, match=r"hosts\.a\.deploy_dir: an absolute path without"):
        inventory.load(p)


def test_deploy_brings_what_the_queue_sampler_and_the_ndp_proxy_import() -> None:
    """The sampler imports its netlink library only when it starts sampling: without it on a deployed
    host the sampler ends at once and the run has no queue samples. A storage host's NDP proxy runs
    its pushdowns in DuckDB and serves them with aiohttp: without them it never listens."""
    from shufflelab.hosts.deploy import needed_distributions

    needed = needed_distributions()
    assert "pyroute2" in needed and {"duckdb", "aiohttp"} <= set(needed), needed


def test_the_ndp_jars_go_to_the_hosts_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TPC-H/NDP's jars -- Hadoop's (jars, web skeletons, the completeness mark) and the connector's --
    go below the host's cache as they are below this one, where the storage and Spark read them."""
    from shufflelab import artifacts
    from shufflelab.hosts import deploy
    from shufflelab.ndp import connector, hadoop_jars

    cache = tmp_path / "cache"
    hadoop = cache / "hadoop-abc"
    for rel in ("lib/hadoop-hdfs-3.jar", "web/webapps/hdfs/index.html", "complete"):
        (hadoop / rel).parent.mkdir(parents=True, exist_ok=True)
        (hadoop / rel).write_text(rel)
    (cache / "ndp-connector-1.jar").write_text("jar")
    monkeypatch.setattr(artifacts, "cache_root", lambda: cache)
    monkeypatch.setattr(hadoop_jars, "jars_dir", lambda pom=hadoop_jars.POM: hadoop)
    monkeypatch.setattr(connector, "jar_path", lambda: cache / "ndp-connector-1.jar")
    items = {i.name: i for i in deploy.cached_items(cache, [hadoop_jars.cached(), connector.cached()])}
    assert sorted(f.rel for f in items["hadoop jars"].files) == [
        "hadoop-abc/complete", "hadoop-abc/lib/hadoop-hdfs-3.jar", "hadoop-abc/web/webapps/hdfs/index.html"
    ]  # fmt: skip
    assert [f.rel for f in items["ndp connector jar"].files] == ["ndp-connector-1.jar"]
    ctl = _ctl()
    ctl = Controller(ctl.python, ctl.machine, ctl.libc, ctl.java, (*ctl.items, *items.values()), ctl.base_python)
    plan = plan_host("h1", DEPLOYED, ctl, _remote({"/opt": Entry("d")}), router=False)
    by = {i.name: i for i in plan.items}
    assert [c.remote for c in by["ndp connector jar"].copies] == ["/opt/lab/cache/ndp-connector-1.jar"]
    assert "/opt/lab/cache/hadoop-abc/lib/hadoop-hdfs-3.jar" in [c.remote for c in by["hadoop jars"].copies]
    # not fetched or built here: said, not brought
    (hadoop / "complete").unlink()
    (cache / "ndp-connector-1.jar").unlink()
    skipped = {i.name: i.skip for i in deploy.cached_items(cache, [hadoop_jars.cached(), connector.cached()])}
    assert skipped["hadoop jars"] and "make setup" in skipped["hadoop jars"] and skipped["ndp connector jar"]
