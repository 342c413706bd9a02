"""Pure parts of the emulate backend: command construction, parsers, rates."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from conftest import FIXTURES
from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import fabric, traffic
from shufflelab.emulate.drivers.spark import cc_in_ss
from shufflelab.emulate.record import parse_cc_observed
from shufflelab.spec import Link, Tcp
from shufflelab.switch import Red, SwitchHost, SwitchPort


def test_shaping_commands_bfifo_and_pfifo() -> None:
    root, cls, leaf = netplan.shaping_commands("ns1", "sw", Link(rate_mbps=100, queue_bytes=250_000))
    assert root[:4] == ["tc", "-n", "ns1", "qdisc"] and "htb" in root
    assert cls[cls.index("rate") + 1] == "100000000bit" and cls[cls.index("ceil") + 1] == "100000000bit"
    assert leaf[-3:] == ["bfifo", "limit", "250000"]
    *_, leaf2 = netplan.shaping_commands("ns1", "sw", Link(rate_mbps=10, queue_packets=50))
    assert leaf2[-3:] == ["pfifo", "limit", "50"]


def test_shaping_changes_create_the_root_once_then_change_class_and_leaf_live() -> None:
    link = Link(rate_mbps=100, queue_bytes=250_000)
    root, cls, leaf = (argv[1:] for argv in netplan.shaping_commands(None, "sw", link))
    assert netplan.shaping_changes("qdisc noqueue 0: root refcnt 2\n", "sw", link) == (root, [cls, leaf])
    live = "qdisc htb 1: root refcnt 2 r2q 10 default 0x10\nqdisc bfifo 10: parent 1:10 limit 250000b\n"
    assert netplan.shaping_changes(live, "sw", link) == (None, [cls, leaf])
    # a leaf of another kind goes before the new one replaces it
    packets = Link(rate_mbps=100, queue_packets=50)
    _, cls2, leaf2 = (argv[1:] for argv in netplan.shaping_commands(None, "sw", packets))
    delete = ["qdisc", "del", "dev", "sw", "parent", "1:10", "handle", "10:"]
    assert netplan.shaping_changes(live, "sw", packets) == (None, [cls2, delete, leaf2])


def test_tcp_sysctls() -> None:
    s = netplan.tcp_sysctls(Tcp(congestion_control="reno", ecn=1, slow_start_after_idle=False))
    assert s == {
        "net.ipv4.tcp_congestion_control": "reno",
        "net.ipv4.tcp_ecn": "1",
        "net.ipv4.tcp_slow_start_after_idle": "0",
    }


def test_tcp_sysctls_for_dctcp_and_vcc() -> None:
    dctcp = netplan.tcp_sysctls(Tcp(congestion_control="dctcp"))
    assert dctcp["net.ipv4.tcp_congestion_control"] == "cubic" and dctcp["net.ipv4.tcp_ecn"] == "1"
    vcc = netplan.tcp_sysctls(Tcp(congestion_control="reno", vcc=True))
    assert vcc["net.ipv4.tcp_congestion_control"] == "reno" and vcc["net.ipv4.tcp_ecn"] == "0"


def _macs(hosts: dict[str, Any]) -> dict[str, str]:
    return {h: f"02:00:00:00:00:{i:02x}" for i, h in enumerate(hosts, start=1)}


def test_switch_config_star_with_seed_001_settings(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"] = {
        "kind": "star",
        "bottleneck": {
            "rate_mbps": 20, "queue_bytes": 5000, "delay_ms": 2, "discipline": "red",
            "red": {"min_bytes": 1000, "max_bytes": 2000, "max_p": 0.02, "ewma_weight": 0.5},
        },
    }  # fmt: skip
    spec_dict["tcp"] = {"congestion_control": "dctcp"}
    spec_dict["hosts"]["tsink"]["tcp"] = {"congestion_control": "cubic", "vcc": True}
    spec_dict["telemetry"] = {"queue_period_ms": 5}
    sp = S.parse(spec_dict)
    net = T.build(sp)
    cfg = netplan.switch_config(net, sp, _macs(sp.hosts))
    red = Red(1000, 2000, max_p=0.02, ewma_weight=0.5, ecn=True)
    assert cfg.ports == [SwitchPort(h, rate_mbps=20, delay_ms=2, queue_bytes=5000, red=red) for h in sp.hosts]
    assert cfg.hosts[0] == SwitchHost("10.77.1.1", "02:00:00:00:00:01", "master", "dctcp")
    assert [h.mode for h in cfg.hosts] == ["dctcp"] * 4 + ["vcc"]
    assert [h.port for h in cfg.hosts] == list(sp.hosts)
    assert cfg.telemetry_period_ms == 5


def test_switch_config_shared_is_one_armed(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["bottleneck"].update(delay_ms=1.5, queue_bytes=None, queue_packets=100)
    sp = S.parse(spec_dict)
    cfg = netplan.switch_config(T.build(sp), sp, _macs(sp.hosts))
    assert cfg.ports == [SwitchPort("sw", rate_mbps=50, delay_ms=1.5, queue_packets=100)]
    assert {h.port for h in cfg.hosts} == {"sw"} and {h.mode for h in cfg.hosts} == {"off"}
    assert [h.ip for h in cfg.hosts] == [f"10.77.{i}.1" for i in range(1, 6)]


def test_has_root_qdisc() -> None:
    assert not netplan.has_root_qdisc("qdisc noqueue 0: root refcnt 2 \n")
    assert not netplan.has_root_qdisc("")
    assert netplan.has_root_qdisc(
        "qdisc htb 1: root refcnt 2 r2q 10 default 0x10 direct_packets_stat 0\n"
        "qdisc bfifo 10: parent 1:10 limit 100000b\n"
    )


class _FakeLease:
    scratch = Path("/nonexistent")

    def ns(self, node: str) -> str:
        return f"slfake-{node}"


class _FakeSwitch:
    node = "r"

    def __init__(self, rows: dict[str, dict[str, float | str]]) -> None:
        self.rows = rows

    def last_telemetry(self) -> dict[str, dict[str, float | str]]:
        return self.rows


def test_counters_of_switch_ports_come_from_its_telemetry(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["bottleneck"]["delay_ms"] = 2
    net = T.build(S.parse(spec_dict))
    fab = fabric.NamespaceFabric(_FakeLease(), net)  # type: ignore[arg-type]
    row: dict[str, float | str] = {
        "t": 1.0, "dev": "sw", "backlog_bytes": 3000.0, "backlog_packets": 2.0, "drops": 4.0, "sent_bytes": 9000.0,
        "sent_packets": 6.0, "overlimits": 0.0, "tx_bytes": 8000.0, "rx_bytes": 7000.0, "marks": 5.0,
    }  # fmt: skip
    fab.switch = _FakeSwitch({"sw": row})  # type: ignore[assignment]
    port = net.bottlenecks[0]
    assert fab.counters(port) == netplan.PortCounters(9000, 6, 4, 3000, 2, marks=5)
    fab.switch = _FakeSwitch({})  # type: ignore[assignment]
    assert fab.counters(port) == netplan.PortCounters(0, 0, 0, 0, 0, marks=0)


def test_a_fabric_handed_no_userspace_switch_refuses_the_switch_datapath(spec_dict: dict[str, Any]) -> None:
    import pytest

    spec_dict["topology"]["bottleneck"]["delay_ms"] = 2  # the switch datapath
    sp = S.parse(spec_dict)
    net = T.build(sp)
    fab = fabric.NamespaceFabric(_FakeLease(), net)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="the switch datapath needs the userspace switch, and this fabric was given"):
        fab.configure(netplan.of(sp, net))  # before any command at its namespaces


def test_udp_rate_counts_headers_on_the_wire() -> None:
    bps = traffic.udp_payload_rate_bps(100, 50)
    assert bps == int(50e6 * 1400 / 1442)
    assert traffic.udp_payload_rate_bps(100, 0) == 0


def test_iperf3_summary_from_a_real_result(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "udp.json"
    with gzip.open(FIXTURES / "iperf3-udp-client.json.gz", "rt") as fh:
        p.write_text(fh.read())
    row = traffic.summarize("udp", p)
    assert row["bytes"] == 492_703_400
    assert 29e6 < row["bits_per_second"] < 29.3e6
    assert row["error"] is None  # stopping the client with SIGINT is how runs end, not an error
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert traffic.summarize("udp", bad)["error"] == "no JSON result"
    assert json.loads(p.read_text())["start"]["test_start"]["protocol"] == "UDP"


def test_cc_names_from_ss_output() -> None:
    text = (FIXTURES / "ss-tin-worker.txt").read_text()  # recorded in a worker: its link to the master
    assert cc_in_ss(text, skip_ports=()) == ["cubic"]
    assert cc_in_ss(text) == []  # daemon (port 7077) connections do not count
    executor = (
        "0 0 [::ffff:10.77.3.1]:41234 [::ffff:10.77.4.1]:39017\n"
        "\t reno wscale:10,10 rto:204 rtt:0.2/0.1 mss:1448 cwnd:10\n"
        "0 0 127.0.0.1:5000 127.0.0.1:5001\n\t bbr wscale:7,7\n"
    )
    assert cc_in_ss(text + executor) == ["reno"]  # loopback is not an inter-host connection
    assert parse_cc_observed("cubic:3,reno:1") == {"cubic": 3, "reno": 1}
    assert parse_cc_observed(None) == {}


def test_select_filters_scenarios_by_label_parts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    import pytest

    from shufflelab import spec as S
    from shufflelab.emulate.runner import EmulateRunner

    root = Path(__file__).resolve().parents[2]
    sp = S.load(root / "experiments" / "starvation.toml")
    r = EmulateRunner(sp, "starvation.toml", tmp_path, select=["workload=groupby-test", "case=shared"])
    assert [s.label for s in r.scenarios] == [
        "workload=groupby-test,apps=1,case=shared",
        "workload=groupby-test,apps=2,case=shared",
    ]
    assert len(r.plan()) == 2 * sp.experiment.repetitions
    with pytest.raises(S.SpecError, match="no scenario matches"):
        EmulateRunner(sp, "starvation.toml", tmp_path, select=["apps=3"])


def test_the_runner_finds_each_workloads_driver_by_its_name_among_the_kinds_it_is_handed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path
    from typing import get_args

    import pytest

    from shufflelab import spec as S
    from shufflelab.emulate import drivers
    from shufflelab.emulate.runner import EmulateRunner
    from shufflelab.kinds import DRIVERS, ReplayDriver, TpchDriver
    from shufflelab.spec.workload import WorkloadName

    root = Path(__file__).resolve().parents[2]
    files = {"tpch": "ndp-tpch.toml", "mapreduce": "vcc-mapreduce.toml"}
    loaded = {k: S.load(root / "experiments" / f) for k, f in files.items()}

    def spec(name: str) -> S.ExperimentSpec:
        base = loaded["tpch"]
        return base.model_copy(update={"workload": base.workload.model_copy(update={"name": name})})

    want = {"mapreduce": ReplayDriver, "tpch": TpchDriver}
    for name in get_args(WorkloadName):
        assert drivers.kind_of(spec(name), DRIVERS) is want.get(name, drivers.SparkDriver), name
    for name, sp in loaded.items():  # not handed the kinds' drivers: refused before anything starts
        with pytest.raises(S.SpecError, match=f"workload.name = '{name}': this runner was given no driver"):
            EmulateRunner(sp, "t.toml", tmp_path)
    assert EmulateRunner(loaded["tpch"], "t.toml", tmp_path, kinds=DRIVERS).kinds == DRIVERS


def test_shuffled_order_differs_per_rep_is_seeded_and_keeps_scenario_ids(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from shufflelab import spec as S
    from shufflelab.emulate.runner import EmulateRunner
    from shufflelab.kinds import DRIVERS

    root = Path(__file__).resolve().parents[2]
    base = S.load(root / "experiments" / "ndp-tpch.toml")
    grouped = base.model_copy(update={"experiment": base.experiment.model_copy(update={"order": "grouped"})})
    shuffled = base.model_copy(update={"experiment": base.experiment.model_copy(update={"order": "shuffled"})})
    sel = ["case=single", "query=q6"]
    g = EmulateRunner(grouped, "ndp-tpch.toml", tmp_path, select=sel, kinds=DRIVERS)
    s1 = EmulateRunner(shuffled, "ndp-tpch.toml", tmp_path, select=sel, kinds=DRIVERS)
    s2 = EmulateRunner(shuffled, "ndp-tpch.toml", tmp_path, select=sel, kinds=DRIVERS)
    # the order is not part of what a run is: finished runs stay valid when it changes
    assert [s.scenario_id for s in g.scenarios] == [s.scenario_id for s in s1.scenarios]
    reps = base.experiment.repetitions
    n = len(g.scenarios)
    plan_g, plan_s = g.plan(), s1.plan()
    assert plan_s == s2.plan()  # seeded: a resumed experiment keeps its order
    assert sorted((sc.scenario_id, r) for sc, r in plan_s) == sorted((sc.scenario_id, r) for sc, r in plan_g)
    by_rep = [[sc.scenario_id for sc, r in plan_s if r == rep] for rep in range(1, reps + 1)]
    assert all(len(ids) == n for ids in by_rep)  # reps still interleaved: all of rep 1, then rep 2 ...
    assert [sc.scenario_id for sc, r in plan_g if r == 1] != by_rep[0]
    assert by_rep[0] != by_rep[1]


def test_switch_spin_makes_the_switch_spin_and_needs_the_switch(spec_dict: dict[str, Any]) -> None:
    import pytest as _pytest

    from shufflelab.switch.config import SPIN_US

    spec_dict["topology"]["bottleneck"]["delay_ms"] = 1
    spec_dict["topology"]["switch_spin"] = True
    sp = S.parse(spec_dict)
    cfg = netplan.switch_config(T.build(sp), sp, _macs(sp.hosts))
    assert cfg.busy_poll_us == SPIN_US
    spec_dict["topology"]["bottleneck"]["delay_ms"] = 0
    with _pytest.raises(S.SpecError, match="switch_spin = true is for the userspace switch"):
        S.parse(spec_dict)
