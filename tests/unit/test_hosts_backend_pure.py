"""The hosts backend's pure parts: what it refuses (naming the spec field), the counters it reads
from ``tc -s -j``, the shaping commands without a namespace, the thread that runs its event loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from shufflelab import spec as specmod
from shufflelab.emulate.drivers import cc_in_ss
from shufflelab.hosts import inventory, lease
from shufflelab.hosts.commands import backend_refusals, open_backend
from shufflelab.hosts.fabric import _counters, refusals
from shufflelab.hosts.remote import Loop
from shufflelab.hosts.safety import SafetyError, check_traffic
from shufflelab.netplan import route_attributes, shaping_commands

BASE: dict[str, Any] = {
    "experiment": {"name": "t"},
    "topology": {"kind": "star", "bottleneck": {"rate_mbps": 40, "queue_bytes": 100_000}},
    "telemetry": {"selftest": "off"},
    "hosts": {"h1": {"roles": ["spark-master"]}, "h2": {"roles": ["spark-worker"]}},
    "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 4}},
}


def _spec(**changes: Any) -> specmod.ExperimentSpec:
    data = json.loads(json.dumps(BASE))
    for dotted, value in changes.items():
        *path, last = dotted.split("__")
        node = data
        for p in path:
            node = node.setdefault(p, {})
        node[last] = value
    return specmod.parse(data)


def test_a_star_spark_spec_runs() -> None:
    assert refusals(_spec()) == []


def test_cross_traffic_between_inventory_hosts_runs() -> None:
    spec = _spec(
        cross_traffic__udp_percent=50,
        hosts__h1__roles=["spark-master", "traffic-sink"],
        hosts__h2__roles=["spark-worker", "traffic-source"],
    )
    assert refusals(spec) == []


def test_initcwnd_and_initrwnd_become_route_attributes() -> None:
    spec = _spec(tcp__initcwnd=10, tcp__initrwnd=20)
    assert refusals(spec) == []
    assert route_attributes(spec.tcp_for("h1")) == ["initcwnd", "10", "initrwnd", "20"]
    assert route_attributes(_spec().tcp_for("h1")) == []


def test_iperf3_may_only_target_data_addresses() -> None:
    data = {"10.0.0.1", "10.0.0.2"}
    check_traffic(["iperf3", "-c", "10.0.0.2", "-p", "5201"], data)
    check_traffic(["iperf3", "-s", "-B", "192.0.2.9"], data)  # a server targets nothing
    check_traffic(["java", "-c", "192.0.2.9"], data)  # not iperf3
    with pytest.raises(SafetyError, match=r"iperf3 cross traffic to '192.0.2.9'.*10.0.0.1, 10.0.0.2"):
        check_traffic(["/usr/bin/iperf3", "-c", "192.0.2.9"], data)


def test_host_samples_are_renamed_to_their_ports(tmp_path: Path) -> None:
    from shufflelab.emulate.sampler import HEADER
    from shufflelab.hosts.sampling import _rows

    f = tmp_path / "s.csv"
    f.write_text(HEADER + "\n2.0,data0,5,1,0,10,1,0,20,30\n3.0,data0,6,1,0,11,2,0,21,31\n3.5,data0,7\n")
    assert _rows(f, {"data0": "h2"}) == [
        ["2.0", "h2", "5", "1", "0", "10", "1", "0", "20", "30"],
        ["3.0", "h2", "6", "1", "0", "11", "2", "0", "21", "31"],
    ]  # a row cut short by the stop is left out
    assert _rows(tmp_path / "missing.csv", {"data0": "h2"}) == []


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"topology__kind": "shared"}, "topology.kind = 'shared'"),
        ({"topology__bottleneck__delay_ms": 5}, "topology.bottleneck.delay_ms"),
    ],
)  # fmt: skip
def test_refusals_name_the_field(changes: dict[str, Any], field: str) -> None:
    found = refusals(_spec(**changes))
    assert any(p.startswith(field) for p in found), found


def test_faults_run_on_machines() -> None:
    """Fault injection reaches the hosts through the backend's seams (was: refused over SSH)."""
    faults = [
        {"kind": "link-down", "at_s": 1, "host": "h2", "duration_s": 2},
        {"kind": "executor-kill", "at_s": 1, "host": "h2"},
    ]
    assert refusals(_spec(faults=faults)) == []


def two_hosts(tmp_path: Path) -> Path:
    """An inventory of two documentation-range hosts for spec hosts h1 and h2 (never contacted)."""
    (tmp_path / "key").write_text("not read")
    (tmp_path / "known_hosts").write_text("")
    inv = tmp_path / "inv.toml"
    inv.write_text(
        '[ssh]\nknown_hosts = "known_hosts"\n'
        '[hosts.a]\naddress = "192.0.2.1"\nkey_file = "key"\ndata_interface = "eth1"\n'
        '[hosts.b]\naddress = "192.0.2.2"\nkey_file = "key"\ndata_interface = "eth1"\n'
        '[map]\nh1 = "a"\nh2 = "b"\n'
    )
    return inv


def test_run_hosts_refuses_before_connecting(tmp_path: Path) -> None:
    inv = two_hosts(tmp_path)
    with pytest.raises(specmod.SpecError, match=r"spec.toml: .*\n  - topology.kind = 'shared'"):
        open_backend(inv, _spec(topology__kind="shared"), "spec.toml")
    with pytest.raises(specmod.SpecError, match="map: spec hosts h3"):
        open_backend(inv, _spec(hosts__h3={"roles": []}), "spec.toml")


def test_backend_refusals_name_the_scenarios_that_have_each_problem(tmp_path: Path) -> None:
    inv = inventory.load(two_hosts(tmp_path))
    spec = _spec(matrix={"topology.bottleneck.delay_ms": [0, 5]})
    found = backend_refusals(inv, spec, "spec.toml")
    # one problem, naming the field, held only by the scenario that has it
    assert len(found) == 1 and next(iter(found)).startswith("topology.bottleneck.delay_ms"), found
    assert list(found.values()) == [["delay_ms=5"]]
    assert backend_refusals(inv, _spec(), "spec.toml") == {}


def test_only_the_selected_scenarios_are_checked(tmp_path: Path) -> None:
    """``run --hosts --select case=none`` of a spec whose other case the hosts cannot run (here the
    switch's delay on per-host links): the selected scenario runs on hosts, so it is not refused for
    the cases it did not select (was: refused, naming the other cases)."""
    inv = two_hosts(tmp_path)
    spec = _spec(cases={"none": {}, "delay": {"topology.bottleneck.delay_ms": 5}})
    with pytest.raises(specmod.SpecError, match=r"delay_ms = 5 .*\(scenarios: case=delay\)"):
        open_backend(inv, spec, "spec.toml")
    open_backend(inv, spec, "spec.toml", select=["case=none"])  # not refused (nothing connects before entry)
    with pytest.raises(specmod.SpecError, match=r"delay_ms = 5 .*\(scenarios: case=delay\)"):
        open_backend(inv, spec, "spec.toml", select=["case=delay"])
    with pytest.raises(specmod.SpecError, match="no scenario matches --select case=other"):
        open_backend(inv, spec, "spec.toml", select=["case=other"])


def test_counters_from_tc_json() -> None:
    text = json.dumps(
        [{"kind": "htb", "handle": "1:", "bytes": 1200, "packets": 3, "drops": 1, "backlog": 0, "qlen": 2}]
    )
    c = _counters(text)
    assert (c.tx_bytes, c.tx_packets, c.drops, c.backlog_packets, c.marks) == (1200, 3, 1, 2, None)
    assert _counters("[]").tx_bytes == 0


def test_shaping_commands_without_a_namespace() -> None:
    link = _spec().topology.bottleneck
    with_ns = shaping_commands("ns1", "data0", link)
    here = shaping_commands(None, "data0", link)
    assert [c[3:] for c in with_ns] == [c[1:] for c in here]
    assert all(c[0] == "tc" and "-n" not in c for c in here)


def test_cc_in_ss_with_the_fabric_addresses() -> None:
    text = (
        "ESTAB 0 0 10.214.5.10:40000 10.214.5.11:38000\n\t cubic wscale:7,7\n"
        "ESTAB 0 0 10.214.5.10:40001 10.214.5.110:38001\n\t reno wscale:7,7\n"
    )
    assert cc_in_ss(text) == []  # not the emulated fabric's addresses
    assert cc_in_ss(text, addresses=("10.214.5.11",)) == ["cubic"]  # not 10.214.5.110
    # the JVM's dual-stack sockets: ss shows the IPv4-mapped form
    mapped = "ESTAB 0 0 [::ffff:10.214.5.10]:40002 [::ffff:10.214.5.11]:38002\n\t bbr wscale:7,7\n"
    assert cc_in_ss(mapped, addresses=("10.214.5.11",)) == ["bbr"]


def test_scratch_is_only_the_leases_own_folder() -> None:
    assert lease.scratch_path("0123456789ab") == f"{lease.SCRATCH_ROOT}/0123456789ab"
    with pytest.raises(ValueError):
        lease.scratch_path("../etc")


def test_loop_runs_coroutines_from_this_thread() -> None:
    loop = Loop()
    try:

        async def twice(x: int) -> int:
            await asyncio.sleep(0)
            return 2 * x

        assert loop.call(twice(21)) == 42
    finally:
        loop.close()


def test_a_shared_bottleneck_needs_a_router_host() -> None:
    assert any("router = 'NAME'" in p for p in refusals(_spec(topology__kind="shared")))
    assert refusals(_spec(topology__kind="shared"), router=True) == []
    # a dumbbell too: the link between its racks, a queue per direction, on the router host
    dumbbell = _spec(topology__kind="dumbbell", hosts__h1__rack=1, hosts__h2__rack=2)
    assert any(p.startswith("topology.kind = 'dumbbell'") and "router = 'NAME'" in p for p in refusals(dumbbell))
    assert refusals(dumbbell, router=True) == []


def _inventory(tmp_path: Path, router: str) -> dict[str, Any]:
    (tmp_path / "key").write_text("not read")
    return {
        "router": router,
        "hosts": {
            n: {"address": f"192.0.2.{i}", "key_file": "key", "data_interface": "eth1"}
            for i, n in enumerate(("a", "b", "r"), start=1)
        },
        "map": {"h1": "a", "h2": "b"},
    }


def test_the_router_is_an_inventory_host_of_its_own(tmp_path: Path) -> None:
    from shufflelab.hosts import inventory

    assert inventory.parse(_inventory(tmp_path, "r"), "inv.toml", tmp_path).router == "r"
    with pytest.raises(inventory.InventoryError, match="router: no inventory host named 'x'"):
        inventory.parse(_inventory(tmp_path, "x"), "inv.toml", tmp_path)
    with pytest.raises(inventory.InventoryError, match="router: 'a' runs spec host 'h1'"):
        inventory.parse(_inventory(tmp_path, "a"), "inv.toml", tmp_path)


def test_runs_record_the_machine_of_each_spec_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each spec host's machine with its CPUs, counted (nproc) when the backend connects: the report
    names them (was: the machines without their CPUs, and the report said "one host")."""
    from shufflelab.hosts import backend as backendmod

    nproc = {"a": "8\n", "b": "4\n", "r": "2\n"}
    asked: list[tuple[str, list[str]]] = []

    class Session:
        def __init__(self, name: str) -> None:
            self.name = name

        async def run(self, step: str, argv: list[str], **kw: Any) -> Any:
            asked.append((self.name, argv))
            return SimpleNamespace(stdout=nproc[self.name], stderr="", exit_status=0)

    @contextlib.asynccontextmanager
    async def connect(inv: Any, names: Any) -> AsyncIterator[dict[str, Any]]:
        yield {n: Session(n) for n in names}

    monkeypatch.setattr(backendmod, "connect", connect)
    with backendmod.HostsBackend(inventory.parse(_inventory(tmp_path, "r"), "inv.toml", tmp_path)) as hb:
        assert hb.backend().machines() == {
            "(router)": {"machine": "r", "address": "192.0.2.3", "data_interface": "eth1", "cpus": 2},
            "h1": {"machine": "a", "address": "192.0.2.1", "data_interface": "eth1", "cpus": 8},
            "h2": {"machine": "b", "address": "192.0.2.2", "data_interface": "eth1", "cpus": 4},
        }
    assert sorted(asked) == [(n, ["nproc"]) for n in ("a", "b", "r")]


def test_clean_removes_only_the_controllers_folders_of_the_restored_leases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed controller leaves its own folder of each lease (``shufflelab-hosts-<lease>-*`` in the
    temporary folder); ``clean`` removes those of the leases it restored and nothing else."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = tmp_path / f"{lease.local_folder_prefix('0123456789ab')}x1"
    other = tmp_path / f"{lease.local_folder_prefix('ba9876543210')}x2"
    for d in (mine, other):
        (d / "sub").mkdir(parents=True)
    (tmp_path / "shufflelab-hosts-0123456789ab").write_text("a file, not a lease's folder")
    assert lease.remove_local_folders(["0123456789ab", "0123456789ab"]) == [mine]
    assert not mine.exists() and other.is_dir() and (tmp_path / "shufflelab-hosts-0123456789ab").is_file()
