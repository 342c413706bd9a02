"""``shufflelab deploy --hosts``: each stand-in host gets a deploy_dir of its own, empty at first, and
sees neither the controller's checkout nor its virtual environment nor its cache (an empty tmpfs over
each in the stand-in's mount namespace), as a machine of its own would. Deploy fills it over SFTP, a
second deploy copies nothing, a short real run (``run --deploy``) uses what is there (the driver's
interpreter, its byte-code caches, the executors' class paths, the queue samplers' libraries), and
``deploy --remove`` leaves the folders as they were and the hosts without the manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from shufflelab import artifacts

from .conftest import LEASE_PARENT, Lab, sh, stand_in_hosts
from .test_hosts_run import ENV, REPO, cli, host_state, job_times, quickstart

pytestmark = [pytest.mark.root, pytest.mark.spark]

# what a machine without the controller's checkout lacks
HIDDEN = [REPO, Path(sys.prefix), artifacts.cache_root()]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Three stand-in hosts that do not see :data:`HIDDEN`."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    # (a folder inside another hidden one is gone with it)
    hide = [p for p in HIDDEN if p.is_dir() and not any(q != p and p.is_relative_to(q) for q in HIDDEN)]
    with stand_in_hosts(tmp_path_factory.mktemp("slsshdep"), 3, hide=hide) as lab:
        for h in lab.hosts:  # the stand-in's own view of the file system
            assert not (Path(f"/proc/{h.server_pid()}/root") / REPO.relative_to("/") / "pyproject.toml").exists()
        yield lab


def _route_while_running(lab: Lab, runner: subprocess.Popen[str]) -> dict[str, object]:
    """host1's route to host2's data address while ``runner`` runs, once it carries metrics."""
    h2_data = json.loads(sh("ip", "-j", "-4", "addr", "show", "dev", "data0", ns=lab.hosts[1].ns))[0]
    h2_address = h2_data["addr_info"][0]["local"]
    deadline = time.monotonic() + 600
    while runner.poll() is None and time.monotonic() < deadline:
        for route in json.loads(sh("ip", "-j", "route", "show", ns=lab.hosts[0].ns)):
            if route.get("dst") == h2_address and route.get("metrics"):
                return dict(route)
        time.sleep(0.5)
    return {}


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

    # the run on the deployed hosts is also the test of per-host links, cross traffic, queue sampling,
    # initcwnd/initrwnd and the link self-test over SSH (what test_hosts_traffic ran on a run of its own)
    spec = quickstart(tmp_path / "quickstart.toml", reps=1, cross={"source": "h2", "sink": "h3", "udp_percent": 75})
    text = spec.read_text().replace("[tcp]\n", "[tcp]\ninitcwnd = 20\ninitrwnd = 30\n")
    spec.write_text(text.replace('selftest = "off"', 'selftest = "warn"'))
    res = tmp_path / "res"
    state, routes = host_state(lab), [sh("ip", "-j", "route", "show", ns=h.ns) for h in lab.hosts]
    runner = subprocess.Popen(
        [sys.executable, "-m", "shufflelab.cli", "run", str(spec), "--hosts", str(inv), "--deploy",
         "--results", str(res), "--no-report"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True,
    )  # fmt: skip
    seen = _route_while_running(lab, runner)
    out, err = runner.communicate(timeout=600)
    assert runner.returncode == 0, out[-3000:] + err[-3000:]
    assert "nothing to copy" in out, out
    # h1's route to h2's data address carried the spec's initcwnd/initrwnd while the run was on
    assert seen.get("metrics") == [{"initcwnd": 20, "initrwnd": 30}] and seen.get("dev") == "data0", seen
    db = res / "quickstart-hosts.duckdb"
    assert len(job_times(db)) == 1  # one run, ok
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT status, cause FROM runs").fetchall() == [("ok", None)]
        udp = con.execute("SELECT run_id, kind, bytes, bits_per_second, error FROM cross_traffic").fetchall()
        # each host's queue sampler ran from the deployed environment
        samples = con.execute(
            "SELECT dev, count(*), max(backlog_bytes), max(sent_bytes) FROM queue_samples GROUP BY dev ORDER BY dev"
        ).fetchall()
        (env_json,) = con.execute("SELECT environment_json FROM runs").fetchone() or (None,)
    print(f"cross traffic {udp}; queue samples {samples}")
    # the iperf3 client on h2 sent to h3's data address, its JSON came back over SSH
    assert len(udp) == 1 and udp[0][1] == "udp" and udp[0][2] > 0 and udp[0][4] is None, udp
    # the run sampled each host's shaped data interface (named as the spec's ports)
    assert [s[0] for s in samples] == ["h1", "h2", "h3"] and all(s[1] > 0 and s[3] > 0 for s in samples), samples
    # the link self-test over SSH: each host's shaped egress measured
    (run,) = sorted((res / "quickstart-hosts" / "runs").iterdir())
    checks = json.loads((run / "selftest.json").read_text())
    print("self-test:", [(c["port"], c["src"], c["dst"], c["goodput_mbps"], c["rtt_ms"]) for c in checks])
    assert sorted(c["src"] for c in checks) == ["h1", "h2", "h3"], checks
    assert all(c["goodput_mbps"] and c["rtt_ms"] is not None for c in checks), checks
    # every host as before (shaping, sysctls, processes, routes), nothing for clean to restore
    assert host_state(lab) == state
    assert [sh("ip", "-j", "route", "show", ns=h.ns) for h in lab.hosts] == routes
    r = cli("clean", "--hosts", str(inv))
    assert r.returncode == 0 and "restored 0 leases" in r.stdout, r.stdout + r.stderr
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
