"""``shufflelab deploy --hosts``: each stand-in host gets a deploy_dir of its own (the stand-ins share
this machine's file system, so the controller's own paths would prove nothing), empty at first.
Deploy fills it over SFTP, a second deploy copies nothing, a short real run (``run --deploy``) uses
what is there (the driver's interpreter, its byte-code caches, the executors' class paths), and
``deploy --remove`` leaves the folders as they were and the hosts without the manifest."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import duckdb
import pytest

from .conftest import LEASE_PARENT, Lab
from .test_hosts_run import cli, quickstart

pytestmark = [pytest.mark.root, pytest.mark.spark]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_deploy_run_and_remove(lab: Lab, tmp_path: Path) -> None:
    dirs = {h.name: tmp_path / f"deployed-{h.name}" for h in lab.hosts}
    for d in dirs.values():
        d.mkdir()
    (dirs["host1"] / "keep.txt").write_text("not deploy's\n")  # something of the host's own
    extra = {f"{name}.deploy_dir": f'"{d}"' for name, d in dirs.items()}
    inv = lab.inventory(tmp_path / "inv.toml", extra=extra)
    before = {name: _tree(d) for name, d in dirs.items()}
    others = _tree(tmp_path)

    t0 = time.monotonic()
    r = cli("deploy", "--hosts", str(inv), timeout=600)
    print(f"deploy: {time.monotonic() - t0:.1f} s\n{r.stdout}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "class-data archive" in r.stdout  # not reusable with another class path: said, skipped
    for h in lab.hosts:
        d = dirs[h.name]
        assert (d / "src/shufflelab/workloads/driver.py").is_file()
        assert os.readlink(d / "venv/bin/python")  # the host's own Python behind the environment
        assert (d / "venv/pyvenv.cfg").is_file()
        assert list((d / "venv/lib").glob("python3.*/site-packages/pyspark/jars/spark-core_*.jar"))
        assert list((d / "cache").glob("shufflelab-listener-*.jar"))
        manifest = Path(f"/proc/{h.server_pid()}/root") / LEASE_PARENT.relative_to("/") / "deploy.json"
        assert manifest.is_file()

    t0 = time.monotonic()
    r = cli("deploy", "--hosts", str(inv), timeout=300)
    print(f"second deploy: {time.monotonic() - t0:.1f} s")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nothing to copy" in r.stdout, r.stdout
    # doctor probes the deployed interpreter and says deploy has nothing to bring
    r = cli("doctor", "--hosts", str(inv), "--json", timeout=300)
    doc = json.loads(r.stdout)
    rows = {(f["host"], f["check"]): f for f in doc["findings"]}
    for h in lab.hosts:
        assert rows[(h.name, "deploy")]["level"] == "ok", rows[(h.name, "deploy")]
    assert rows[("*", "python")]["level"] == "ok" and rows[("*", "pyspark")]["level"] == "ok", doc["findings"]

    spec = quickstart(tmp_path / "quickstart.toml", reps=1)
    res = tmp_path / "res"
    r = cli("run", str(spec), "--hosts", str(inv), "--deploy", "--results", str(res), "--no-report", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nothing to copy" in r.stdout, r.stdout
    with duckdb.connect(str(res / "quickstart-hosts.duckdb"), read_only=True) as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("ok",)]
        (env_json,) = con.execute("SELECT environment_json FROM runs").fetchone() or (None,)
    # the run records the machine each spec host ran on
    assert {m["machine"] for m in json.loads(env_json)["machines"].values()} == {h.name for h in lab.hosts}
    # the driver ran on host1 from its deployed tree; the executors of host2/host3 from theirs
    assert list((dirs["host1"] / "src/shufflelab/workloads/__pycache__").glob("driver.*.pyc"))
    stderrs = "".join(p.read_text(errors="replace") for p in res.rglob("executors-*/*/stderr"))
    for name in ("host2", "host3"):
        assert f"{dirs[name]}/venv/lib/" in stderrs, stderrs[:3000]
    assert "deployed-cache/shufflelab-listener-" in stderrs

    r = cli("deploy", "--hosts", str(inv), "--remove", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for h in lab.hosts:
        assert _tree(dirs[h.name]) == before[h.name], h.name
        assert not (Path(f"/proc/{h.server_pid()}/root") / LEASE_PARENT.relative_to("/") / "deploy.json").exists()
    assert (dirs["host1"] / "keep.txt").read_text() == "not deploy's\n"
    assert others <= _tree(tmp_path)  # nothing else removed
    r = cli("deploy", "--hosts", str(inv), "--remove", timeout=120)
    assert r.returncode == 0 and r.stdout.count("nothing deployed here") == 3, r.stdout
