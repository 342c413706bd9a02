"""The SSH backend's inventory: every error names the file and the field; the mapping is checked
against a spec. Also the pure parts of safety and findings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import specs
from shufflelab import spec as specmod
from shufflelab.hosts import findings, inventory, safety
from shufflelab.hosts.probe import HostFacts, parse_facts, sections


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "id_test").write_text("not read here")
    (tmp_path / "known_hosts").write_text("")
    p = tmp_path / "inv.toml"
    p.write_text(text)
    return p


GOOD = """
[ssh]
known_hosts = "known_hosts"
[hosts.node1]
address = "192.0.2.10"
key_file = "id_test"
data_interface = "eth1"
[hosts.node2]
address = "192.0.2.11"
user = "lab"
port = 2222
agent = true
data_interface = "eth1"
[map]
master = "node1"
w1 = "node2"
"""


def test_good_inventory_resolves_paths(tmp_path: Path) -> None:
    inv = inventory.load(_write(tmp_path, GOOD))
    assert inv.hosts["node1"].key_file == str(tmp_path / "id_test")
    assert inv.ssh.known_hosts == str(tmp_path / "known_hosts")
    assert inv.hosts["node2"].needs_sudo and not inv.hosts["node1"].needs_sudo
    assert inv.addresses() == {"192.0.2.10", "192.0.2.11"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("192.0.2.10", "node1.example"), "hosts.node1.address: 'node1.example' is not an IP address"),
        (
            ('"192.0.2.11"\nuser = "lab"\nport = 2222', '"192.0.2.10"\nuser = "lab"\nport = 22'),
            "hosts.node2.address: 192.0.2.10 port 22 is also hosts.node1",
        ),
        (('key_file = "id_test"', 'key_file = "nope"'), "hosts.node1.key_file:"),
        (('key_file = "id_test"', 'key_file = "id_test"\nagent = true'), "hosts.node1: give exactly one of"),
        (('w1 = "node2"', 'w1 = "node3"'), "map.w1: no inventory host named 'node3'"),
        (("[ssh]", 'router = "node1"\n[ssh]'), "router: 'node1' runs spec host 'master'; the router host forwards"),
        (('data_interface = "eth1"\n[hosts.node2]', 'data_interface = "eth 1"\n[hosts.node2]'), "data_interface"),
        (("port = 2222", "port = 70000"), "hosts.node2.port"),
        (("port = 2222", "colour = 1"), "hosts.node2.colour: unknown field"),
    ],
)
def test_errors_name_file_and_field(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    p = _write(tmp_path, GOOD.replace(*change, 1))
    with pytest.raises(inventory.InventoryError) as e:
        inventory.load(p)
    assert str(e.value).startswith(str(p)), e.value
    assert message in str(e.value)


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(inventory.InventoryError, match="not valid TOML"):
        inventory.load(_write(tmp_path, "[hosts\n"))
    with pytest.raises(inventory.InventoryError, match="cannot read"):
        inventory.load(tmp_path / "absent.toml")
    with pytest.raises(inventory.InventoryError, match="hosts: missing"):
        inventory.load(_write(tmp_path, "[map]\n"))


def test_mapping_against_spec(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    inv = inventory.load(_write(tmp_path, GOOD))
    spec = specmod.parse(spec_dict)
    with pytest.raises(inventory.InventoryError) as e:
        inventory.check_mapping(inv, spec, "inv.toml")
    assert "spec hosts w2, tgen, tsink are not mapped" in str(e.value)
    for h in ("w2", "tgen", "tsink"):
        del spec_dict["hosts"][h]
    spec_dict["hosts"]["extra"] = {"roles": []}
    spec = specmod.parse(spec_dict)
    with pytest.raises(inventory.InventoryError, match="spec hosts extra are not mapped"):
        inventory.check_mapping(inv, spec)
    del spec_dict["hosts"]["extra"]
    assert inventory.check_mapping(inv, specmod.parse(spec_dict)) == {"master": "node1", "w1": "node2"}


def test_a_spark_master_may_share_its_machine_with_one_worker_and_nothing_else(spec_dict: dict[str, Any]) -> None:
    hosts = {f"node{i}": {"address": f"192.0.2.{i}", "agent": True, "data_interface": "eth1"} for i in range(1, 6)}

    def mapped(**onto: str) -> dict[str, str]:
        spec = specmod.parse(spec_dict)
        base = {"master": "node1", "w1": "node2", "w2": "node3", "tgen": "node4", "tsink": "node5"}
        inv = inventory.parse({"hosts": hosts, "map": {**base, **onto}})
        return inventory.check_mapping(inv, spec, "inv.toml")

    assert mapped(w1="node1")["w1"] == "node1"  # master + a worker: one machine
    with pytest.raises(inventory.InventoryError, match=r"inv.toml: map: w1 and w2 share machine 'node2', but w1, w2 "):
        mapped(w2="node2")
    with pytest.raises(
        inventory.InventoryError, match=r"master and tgen share .* tgen \(traffic-source\) needs one of"
    ):
        mapped(tgen="node1")
    with pytest.raises(inventory.InventoryError, match=r"w2 and tsink share .* tsink \(traffic-sink\) needs one"):
        mapped(tsink="node3")
    with pytest.raises(inventory.InventoryError, match=r"master, w1 and w2 share machine 'node1'"):
        mapped(w1="node1", w2="node1")
    assert inventory.machine_groups({"master": "n1", "w1": "n1", "w2": "n2"}) == [["master", "w1"]]
    # the switch makes the UDP: the traffic source and sink run nothing and may share any machine
    spec_dict["topology"]["bottleneck"]["delay_ms"] = 2
    spec_dict["cross_traffic"] = {"generator": "switch", "udp_percent": 50}
    assert set(mapped(w1="node1", tgen="node1", tsink="node1").values()) == {"node1", "node3"}
    with pytest.raises(inventory.InventoryError, match=r"but w1, w2 are Spark workers"):
        mapped(w1="node1", w2="node1", tgen="node1")


def test_targets_only_inventory_addresses(tmp_path: Path) -> None:
    inv = inventory.load(_write(tmp_path, GOOD))
    safety.check_target(inv, "192.0.2.10")
    with pytest.raises(safety.SafetyError, match="not an inventory host's address"):
        safety.check_target(inv, "192.0.2.99")
    with pytest.raises(safety.SafetyError, match="not an IP address"):
        safety.check_target(inv, "node1")


def test_control_interface_parsing() -> None:
    assert safety.controller_address("10.9.0.1 51234 10.9.0.10 22") == "10.9.0.1"
    with pytest.raises(ValueError):
        safety.controller_address("")
    assert safety.route_device('[{"dst":"10.9.0.1","dev":"ctl0","prefsrc":"10.9.0.10"}]') == "ctl0"


PROBE_OUTPUT = """==kernel
6.1.0
==uid
0
==sudo
no
==cc_available
reno cubic
==cc_loadable
bbr dctcp diag
==java
openjdk version "17.0.12" 2024-07-16
==python
3.11.2
==pyspark
missing
==iperf3
iperf 3.12 (cJSON 1.7.15)
==tc
/usr/sbin/tc
==listening
22 7077
==data_interface
[{"ifname":"data0","mtu":1500}]
==data_address
[{"ifname":"data0","addr_info":[{"family":"inet","local":"10.9.0.1","prefixlen":24}]}]
==cpus
8
==qdiscs
htb pfifo bfifo
"""


def _facts(host: str, **kw: Any) -> HostFacts:
    f = parse_facts(host, "192.0.2.10", "data0", PROBE_OUTPUT)
    f.control_interface = "ctl0"
    f.clock_offset_s, f.clock_uncertainty_s = 0.001, 0.0005
    for k, v in kw.items():
        setattr(f, k, v)
    return f


def test_probe_parsing() -> None:
    assert sections("==a\n1\n2\n==b\n")["a"] == "1\n2"
    f = _facts("node1")
    assert f.root and f.java == "17.0.12" and f.python == "3.11.2" and f.pyspark is None
    assert f.loadable_congestion_controls == ["bbr", "dctcp"]
    assert f.listening_ports == [22, 7077] and f.data_interface_mtu == 1500 and f.qdiscs == ["htb", "pfifo", "bfifo"]
    assert (f.data_address, f.cpus) == ("10.9.0.1", 8)


def test_a_storage_machine_without_the_cgroup_v1_cpu_controller_refuses_the_cells_that_cap_it() -> None:
    """TPC-H/NDP caps a storage machine's CPUs with a cgroup v1 ``cpu`` group where a cell's
    ``storage_cores x core_scale`` is below the machine's CPU count: doctor refuses those cells on a
    machine without that controller (the run would stop when the cap is set), not the others."""
    # the machines have 8 CPUs
    spec = specmod.parse(specs.tpch_on_a_dumbbell({"core_scale": 1}, {"workload.params.storage_cores": [2, 8]}))
    labels = [sc.label for sc in specmod.expand(spec)]  # storage_cores = 2, then 8
    mapping = {"master": "node1", "w1": "node2", "s1": "node3"}
    assert parse_facts("n", "192.0.2.10", "data0", PROBE_OUTPUT).cgroup_cpu is None  # not probed: nothing said
    probed = PROBE_OUTPUT.replace("==qdiscs", "==cgroup_cpu\nno\n==qdiscs")
    assert parse_facts("n", "192.0.2.10", "data0", probed).cgroup_cpu is False
    facts = {h: _facts(h, pyspark="4.3.0", cgroup_cpu=False, listening_ports=[]) for h in mapping.values()}

    found = findings.for_spec(spec, mapping, facts)
    rows = [f for f in found if f.check == "cpu cgroup"]
    assert len(rows) == 1 and rows[0].host == "node3" and rows[0].level == "refuse", rows
    assert rows[0].scenarios == (labels[0],)  # 8 CPUs of 8: no cap, no group
    assert "/sys/fs/cgroup/cpu" in rows[0].detail and "s1 at 2 CPUs" in rows[0].detail, rows[0].detail
    assert findings.cells(found, labels, list(mapping.values())).detail.startswith("1 of 2 cells")

    facts["node3"].cgroup_cpu = True
    rows = [f for f in findings.for_spec(spec, mapping, facts) if f.check == "cpu cgroup"]
    assert [(f.host, f.level) for f in rows] == [("node3", "ok")]
    facts["node3"].cgroup_cpu, facts["node3"].cpus = False, 2  # no cell's storage below 2 CPUs
    rows = [f for f in findings.for_spec(spec, mapping, facts) if f.check == "cpu cgroup"]
    assert [(f.host, f.level) for f in rows] == [("node3", "ok")] and "no cell caps" in rows[0].detail


def test_findings_for_a_spec(spec_dict: dict[str, Any]) -> None:
    for h in ("w2", "tgen", "tsink"):
        del spec_dict["hosts"][h]
    spec_dict["matrix"] = {"tcp.congestion_control": ["cubic", "dctcp"]}
    spec = specmod.parse(spec_dict)
    facts = {
        "node1": _facts("node1", pyspark="4.3.0"),
        "node2": _facts("node2", pyspark="4.3.0", loadable_congestion_controls=[], clock_offset_s=0.05),
    }
    found = findings.general(facts) + findings.for_spec(spec, {"master": "node1", "w1": "node2"}, facts)
    by = {(f.host, f.check): f for f in found}
    assert by[("node1", "ports")].level == "refuse" and "7077" in by[("node1", "ports")].detail
    assert by[("node2", "ports")].level == "ok"
    # dctcp is the switch's, over the hosts' cubic: the cell needs the switch on a router host
    assert (
        by[("*", "cell cc=dctcp")].level == "refuse"
        and "needs the userspace switch" in by[("*", "cell cc=dctcp")].detail
    )
    assert ("*", "cell cc=cubic") not in by
    # node1's ports are refused, and every cell runs on node1: none can run
    cells = findings.cells(found, ["cc=cubic", "cc=dctcp"], ["node1", "node2"])
    assert cells.detail.startswith("0 of 2 cells can run on these hosts (every cell needs what is refused for")
    assert "node1 ports" in cells.detail and cells.level == "refuse"
    free = [f for f in found if f.check != "ports"]
    assert findings.cells(free, ["cc=cubic", "cc=dctcp"], ["node1", "node2"]).detail == (
        "1 of 2 cells can run on these hosts"
    )
    assert by[("node2", "clock offset")].level == "warn" and by[("node1", "clock offset")].level == "ok"
    assert by[("*", "clock spread")].level == "warn"
    assert by[("*", "pyspark")].level == "ok"
    facts["node2"].java = "21.0.1"
    assert any(f.check == "java" and "versions differ" in f.detail for f in findings.general(facts))
    facts["node2"].data_interface_present = False
    assert any(f.host == "node2" and f.level == "refuse" for f in findings.general(facts))
