"""The shipped experiments the hosts backend does not run (docs/hosts.md's table: starvation-red,
whose RED/ECN, delay and DCTCP need the userspace switch, on per-host links) are refused by
``shufflelab run --hosts`` before anything connects, naming each spec field, the scenarios and why
-- here with an inventory of documentation-range machines (never contacted: connecting fails the
test); seed 002's MapReduce replay specs, with the userspace switch on their dumbbell, and seed
003's ndp-costs.toml and ndp-tpch.toml (storage below its machines' CPUs capped by a CPU cgroup
there) are not. Their dumbbell itself runs on machines; a dumbbell whose two directions do not fit
the router host's line rate, and TPC-H storage of more CPUs than its machines have, are refused
once read, before anything is changed (exit 2). starvation.toml's ``shared`` case -- UDP from a host
outside the job into a worker's ``star`` link, which on machines is that worker's egress -- is refused
before anything connects."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

import specs
from shufflelab import spec as specmod
from shufflelab.cli import app
from shufflelab.hosts import backend as backendmod
from shufflelab.hosts import commands, inventory

ROOT = Path(__file__).resolve().parents[2]
REFUSED = ["starvation-red.toml"]
RUN = ["vcc-mapreduce.toml", "vcc-mapreduce-red.toml", "ndp-costs.toml", "ndp-tpch.toml"]


def _inventory(tmp_path: Path, spec: specmod.ExperimentSpec) -> Path:
    """A machine of its own for every spec host, and a router host."""
    (tmp_path / "key").write_text("not read")
    (tmp_path / "known_hosts").write_text("")
    names = [*spec.hosts, "router"]
    lines = ['router = "m-router"', "[ssh]", 'known_hosts = "known_hosts"']
    for i, name in enumerate(names, start=1):
        lines += [f"[hosts.m-{name}]", f'address = "192.0.2.{i}"', 'key_file = "key"', 'data_interface = "eth1"']
    lines += ["[map]", *(f'{h} = "m-{h}"' for h in spec.hosts)]
    inv = tmp_path / "inv.toml"
    inv.write_text("\n".join(lines) + "\n")
    return inv


@pytest.mark.parametrize("name", REFUSED)
def test_refused_before_anything_connects_naming_the_fields(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_connection(*args: Any, **kw: Any) -> Any:
        raise AssertionError("connected to a machine")

    monkeypatch.setattr("shufflelab.hosts.backend.connect", no_connection)
    monkeypatch.setattr("asyncssh.connect", no_connection)
    path = ROOT / "experiments" / name
    inv = _inventory(tmp_path, specmod.load(path))
    r = CliRunner().invoke(app, ["run", str(path), "--hosts", str(inv), "--results", str(tmp_path / "results")])
    out = " ".join(r.output.split())  # the console wraps long lines
    assert r.exit_code == 2, r.output
    assert "the hosts backend cannot run this experiment" in out
    # the switch's features on per-host links: the router host's switch is not in their path
    assert "with topology.kind = 'star': on machines the userspace switch runs on the router host" in out, out
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.duckdb"))


@pytest.mark.parametrize("name", RUN)
def test_the_mapreduce_replay_and_tpch_are_not_refused(name: str, tmp_path: Path) -> None:
    """Seed 002's specs: the replay's agents on machines (their files shipped), the switch's RED/ECN,
    DCTCP and VCC on the router host with a queue per rack; every cell passes the backend's checks
    (before, each was refused for the replay's files and for the switch's one queue). ndp-costs.toml:
    HDFS, the proxies and the tables reach the machines through the backend's staging (before,
    refused: its set-up read the controller's own files). ndp-tpch.toml: its storage of 0.05-1 CPU
    is capped by a CPU cgroup on the machine (before, refused below one CPU: the lease could not
    undo such a group)."""
    path = ROOT / "experiments" / name
    spec = specmod.load(path)
    inv = inventory.load(_inventory(tmp_path, spec))
    assert commands.backend_refusals(inv, spec, str(path)) == {}
    # a router host of 10 Gbit/s holds both directions of their link (100 Mbit/s; ndp-costs's 1,000)
    assert commands.backend_refusals(inv, spec, str(path), router_line=("eth1", 10_000.0)) == {}


def _machines_that_answer_reads(
    monkeypatch: pytest.MonkeyPatch, speed_mbps: int
) -> tuple[list[tuple[str, list[str]]], dict[str, Any]]:
    """The SSH backend's connections replaced by machines that answer reads only: 4 CPUs (nproc) and
    a data interface of ``speed_mbps``. Returns every command run (machine, argv) and the inventory's
    router as the backend saw it."""
    ran: list[tuple[str, list[str]]] = []
    inv_doc: dict[str, Any] = {}

    class Session:
        def __init__(self, name: str, host: Any) -> None:
            self.name, self.host = name, host

        async def run(self, step: str, argv: list[str], **kw: Any) -> Any:
            ran.append((self.name, list(argv)))
            out = f"{speed_mbps}\n" if argv[0] == "cat" and argv[1].endswith("/speed") else "4\n"
            return SimpleNamespace(stdout=out, stderr="", exit_status=0)

    @contextlib.asynccontextmanager
    async def connect(inv: Any, names: Any) -> AsyncIterator[dict[str, Any]]:
        inv_doc["router"] = inv.router
        yield {n: Session(n, inv.hosts[n]) for n in names}

    monkeypatch.setattr(backendmod, "connect", connect)
    return ran, inv_doc


def test_a_dumbbell_beyond_the_router_hosts_line_rate_is_refused_once_read_before_any_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The router host's data interface says it runs at 1000 Mbit/s; a 1000 Mbit/s dumbbell needs
    2000 through it: refused with exit 2, naming the field, after only reads (nproc, its line rate)."""
    ran, inv_doc = _machines_that_answer_reads(monkeypatch, speed_mbps=1000)
    path = tmp_path / "db.toml"
    path.write_text(
        "[experiment]\nname = 'db'\nrepetitions = 1\n[topology]\nkind = 'dumbbell'\n"
        "bottleneck = { rate_mbps = 1000, queue_bytes = 250_000 }\n[hosts]\n"
        "master = { roles = ['spark-master'], rack = 1 }\nw1 = { roles = ['spark-worker'], rack = 1 }\n"
        "w2 = { roles = ['spark-worker'], rack = 2 }\n"
        "[workload]\nname = 'sort-aggregate'\nparams = { rows = 1000, partitions = 4 }\n"
    )
    inv = _inventory(tmp_path, specmod.load(path))
    r = CliRunner().invoke(app, ["run", str(path), "--hosts", str(inv), "--results", str(tmp_path / "results")])
    out = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    assert "topology.bottleneck.rate_mbps = 1000: on machines a dumbbell's 2 directions" in out, out
    assert "2 x 1000 = 2000 Mbit/s together, more than its line rate of 1000 Mbit/s" in out, out
    # only reads ran: the CPU counts and the router host's line rate
    assert {tuple(argv) for _, argv in ran} == {("nproc",), ("cat", "/sys/class/net/eth1/speed")}
    assert [name for name, argv in ran if argv[0] == "cat"] == [inv_doc["router"]]
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.duckdb"))


def test_tpch_storage_above_its_machines_cpus_is_refused_once_read_before_any_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TPC-H/NDP with eight CPUs of storage (storage_cores x core_scale) passes before connecting;
    the machines report 4 CPUs, and a cap can only lower what a machine has: refused with exit 2,
    naming the field and the machine, after only reads. One CPU, below the machines' 4, runs (a CPU
    cgroup on the machine caps it; before, it was refused)."""
    ran, _ = _machines_that_answer_reads(monkeypatch, speed_mbps=10_000)
    path = tmp_path / "tpch.toml"
    body = (
        "[experiment]\nname = 'tpch'\nrepetitions = 1\n[topology]\nkind = 'dumbbell'\n"
        "bottleneck = { rate_mbps = 100, queue_bytes = 250_000 }\n[hosts]\n"
        "master = { roles = ['spark-master'], rack = 1 }\nw1 = { roles = ['spark-worker'], rack = 1 }\n"
        "s1 = { roles = ['storage'], rack = 2 }\n"
        "[workload]\nname = 'tpch'\nparams = { storage_cores = 8, core_scale = 1 }\n"
    )
    path.write_text(body)
    spec = specmod.load(path)
    inv = _inventory(tmp_path, spec)
    assert commands.backend_refusals(inventory.load(inv), spec, str(path)) == {}  # before connecting
    r = CliRunner().invoke(app, ["run", str(path), "--hosts", str(inv), "--results", str(tmp_path / "results")])
    out = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    assert "workload.params.storage_cores x core_scale = 8 CPU, more than its machines have (4 of s1's" in out, out
    assert "m-s1" in out and "which a cap (a CPU cgroup there) can only lower" in out, out
    assert {tuple(argv) for _, argv in ran} == {("nproc",), ("cat", "/sys/class/net/eth1/speed")}  # only reads
    # machines of eight CPUs: it runs
    assert commands.backend_refusals(inventory.load(inv), spec, str(path), cpus={"m-s1": 8}) == {}


def test_tpch_storage_below_its_machines_cpus_runs_capped() -> None:
    """One CPU of storage on machines of 4 is not refused once their CPU counts are read: the storage
    runs in a CPU cgroup on its machine (regression: refused before, the lease could not undo one)."""
    spec = specmod.parse(specs.tpch_on_a_dumbbell({"storage_cores": 1, "core_scale": 0.25}))
    from shufflelab.hosts.fabric import refusals

    machines = {"master": ("m1", 4), "w1": ("m2", 4), "s1": ("m3", 4)}
    assert refusals(spec, router=True, machine_cpus=machines) == []


def test_cross_traffic_into_a_job_hosts_star_link_from_outside_the_job_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """starvation.toml's ``shared`` case sends UDP from tgen, which runs none of the job, into worker
    w1's link. The emulation shapes each host's port from the router (its ingress): the UDP and the
    shuffle towards w1 share that queue. On machines a ``star`` host's link is its data interface's
    egress, so they would share none: refused before anything connects (exit 2), naming the field;
    the case whose UDP goes to a host outside the job (``control``) and the one without it are not."""

    def no_connection(*args: Any, **kw: Any) -> Any:
        raise AssertionError("connected to a machine")

    monkeypatch.setattr("shufflelab.hosts.backend.connect", no_connection)
    monkeypatch.setattr("asyncssh.connect", no_connection)
    path = ROOT / "experiments" / "starvation.toml"
    spec = specmod.load(path)
    inv_path = _inventory(tmp_path, spec)
    argv = ["run", str(path), "--hosts", str(inv_path), "--results", str(tmp_path / "results"), "--select"]
    r = CliRunner().invoke(app, [*argv, "case=shared"])
    out = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    assert "cross_traffic.sink = 'w1' with topology.kind = 'star'" in out, out
    assert "would share no queue with it" in out, out
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.duckdb"))
    refused = commands.backend_refusals(inventory.load(inv_path), spec, str(path))
    labels = [label for problem in refused.values() for label in problem]
    assert labels and all(label.endswith("case=shared") for label in labels), refused
    assert len(labels) == 4, refused  # each workload, with one or two applications
