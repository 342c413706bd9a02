from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shufflelab import spec as S


def test_valid_spec_and_defaults(spec_dict: dict[str, Any]) -> None:
    sp = S.parse(spec_dict)
    assert sp.hosts_with("spark-worker") == ["w1", "w2"]
    assert sp.tcp.congestion_control == "cubic"
    assert sp.spark.shuffle_compress is False  # seed 000: every shuffle byte on the wire
    assert sp.traffic_endpoints() == ("tgen", "tsink")
    assert sp.workload_params().rows == 1000


def test_host_tcp_override(spec_dict: dict[str, Any]) -> None:
    spec_dict["tcp"] = {"congestion_control": "reno"}
    spec_dict["hosts"]["master"]["tcp"] = {
        "initcwnd": 850,
        "initrwnd": 1000,
        "slow_start_after_idle": False,
    }
    sp = S.parse(spec_dict)
    m = sp.tcp_for("master")
    assert (m.congestion_control, m.initcwnd, m.initrwnd, m.slow_start_after_idle) == (
        "reno",
        850,
        1000,
        False,
    )
    assert sp.tcp_for("w1").initcwnd is None


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (
            lambda d: d["topology"]["bottleneck"].update(rate_mbps=-1),
            "topology.bottleneck.rate_mbps",
        ),
        (
            lambda d: d["topology"]["bottleneck"].update(queue_packets=10),
            "queue_bytes or queue_packets",
        ),
        (lambda d: d["topology"].update(knd="star"), "topology.knd"),
        (
            lambda d: d["hosts"]["w1"].update(roles=["spark-master"]),
            "exactly one host needs role 'spark-master'",
        ),
        (lambda d: d["hosts"].update({"Bad_Name": {"roles": []}}), "host name 'Bad_Name'"),
        (lambda d: d["workload"]["params"].update(rows=0), "workload.params (sort-aggregate): rows"),
        (lambda d: d["workload"]["params"].update(colour="red"), "colour"),
        (lambda d: d.update(spark={"executor_memory": "lots"}), "spark.executor_memory"),
        (
            lambda d: d.update(spark={"conf": {"shuffle.compress": "true"}}),
            "must start with 'spark.'",
        ),
        (
            lambda d: d.update(cross_traffic={"udp_percent": 50, "source": "nohost"}),
            "no host named 'nohost'",
        ),
        (lambda d: d.update(tcp={"congestion_control": "vegas"}), "tcp.congestion_control"),
    ],
)
def test_bad_specs_name_the_field(spec_dict: dict[str, Any], mutate: Any, needle: str) -> None:
    mutate(spec_dict)
    with pytest.raises(S.SpecError) as exc:
        S.parse(spec_dict, "exp.toml")
    assert "exp.toml" in str(exc.value)
    assert needle in str(exc.value)


def test_cross_traffic_needs_endpoints(spec_dict: dict[str, Any]) -> None:
    del spec_dict["hosts"]["tgen"]
    spec_dict["cross_traffic"] = {"udp_percent": 50}
    with pytest.raises(S.SpecError, match="cross traffic needs a source and a sink"):
        S.parse(spec_dict)


def test_matrix_expansion_order_labels_and_ids(spec_dict: dict[str, Any]) -> None:
    spec_dict["matrix"] = {
        "tcp.congestion_control": ["cubic", "reno", "bbr"],
        "cross_traffic.udp_percent": [0, 50],
    }
    sp = S.parse(spec_dict)
    scs = S.expand(sp)
    assert [s.label for s in scs] == [
        "cc=cubic,udp=0", "cc=cubic,udp=50", "cc=reno,udp=0", "cc=reno,udp=50", "cc=bbr,udp=0", "cc=bbr,udp=50",
    ]  # fmt: skip
    assert scs[3].spec.tcp.congestion_control == "reno"
    assert scs[3].spec.cross_traffic.udp_percent == 50
    assert len({s.scenario_id for s in scs}) == 6
    # the id is a content hash: the same point gives the same id, repetitions do not matter
    spec_dict["experiment"]["repetitions"] = 7
    again = S.expand(S.parse(spec_dict))
    assert [s.scenario_id for s in again] == [s.scenario_id for s in scs]


def test_matrix_over_workload_params_and_hosts(spec_dict: dict[str, Any]) -> None:
    spec_dict["matrix"] = {
        "workload.params.partitions": [4, 8],
        "hosts.master.tcp.initcwnd": [10, 850],
    }
    scs = S.expand(S.parse(spec_dict))
    assert len(scs) == 4
    assert scs[-1].spec.workload_params().partitions == 8
    assert scs[-1].spec.tcp_for("master").initcwnd == 850


@pytest.mark.parametrize(
    ("matrix", "needle"),
    [
        ({"tcp.congestion_contrl": ["reno"]}, "tcp.congestion_contrl"),
        ({"topology.bottleneck.rate_mbps": [10, -5]}, "matrix point rate=-5"),
        ({"tcp.congestion_control": []}, "non-empty list"),
        ({"experiment.seed": [1, 2]}, "cannot be varied"),
    ],
)
def test_bad_matrix(spec_dict: dict[str, Any], matrix: dict[str, Any], needle: str) -> None:
    spec_dict["matrix"] = matrix
    with pytest.raises(S.SpecError) as exc:
        S.parse(spec_dict, "m.toml")
    assert needle in str(exc.value)


def test_load_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "broken.toml"
    p.write_text("[experiment\nname = 'x'")
    with pytest.raises(S.SpecError, match="broken.toml: not valid TOML"):
        S.load(p)
    with pytest.raises(S.SpecError, match="cannot read"):
        S.load(tmp_path / "missing.toml")


def test_shipped_experiments_are_valid() -> None:
    root = Path(__file__).resolve().parents[2] / "experiments"
    files = [f for f in root.glob("*.toml") if not f.name.startswith("sim-")]
    assert files, "no experiment files found"
    for f in files:
        if "[tune]" in f.read_text():  # a tune file: the base experiment plus the knobs to search
            from shufflelab import tune

            base, cfg = tune.load(f)
            assert cfg.knobs and S.expand(S.parse(base, str(f)))
            continue
        sp = S.load(f)
        assert S.expand(sp, str(f))


def test_default_queue_is_at_least_64k() -> None:
    assert S.Link(rate_mbps=10).effective_queue_bytes() == 65_536
    assert S.Link(rate_mbps=10_000).effective_queue_bytes() == 1_250_000
    assert S.Link(rate_mbps=10, queue_packets=50).effective_queue_bytes() is None


def test_named_cases_cross_the_matrix(spec_dict: dict[str, Any]) -> None:
    spec_dict["hosts"]["w3"] = {"roles": ["spark-worker"]}
    spec_dict["matrix"] = {"workload.apps": [1, 2]}
    spec_dict["cases"] = {
        "none": {},
        "shared": {"cross_traffic.udp_percent": 95, "cross_traffic.sink": "w1"},
        "control": {"cross_traffic.udp_percent": 95},
    }
    scs = S.expand(S.parse(spec_dict))
    assert [s.label for s in scs] == [
        "apps=1,case=none", "apps=1,case=shared", "apps=1,case=control",
        "apps=2,case=none", "apps=2,case=shared", "apps=2,case=control",
    ]  # fmt: skip
    shared = scs[1].spec
    assert shared.cross_traffic.udp_percent == 95 and shared.traffic_endpoints() == ("tgen", "w1")
    assert scs[2].spec.traffic_endpoints() == ("tgen", "tsink")
    assert scs[4].values == {"workload.apps": 2, "case": "shared"}


def test_case_only_limits_it_to_some_matrix_points(spec_dict: dict[str, Any]) -> None:
    spec_dict["hosts"]["w3"] = {"roles": ["spark-worker"]}
    spec_dict["matrix"] = {
        "workload": [
            {"name": "small-records", "params": {"records": 1000, "partitions": 8}},
            {"name": "groupby-test", "params": {"mappers": 2, "kv_pairs": 100, "reducers": 2}},
        ],
        "workload.apps": [1, 2],
    }
    spec_dict["cases"] = {
        "none": {},
        "control": {"only": {"workload.name": "small-records", "workload.apps": [1]}, "cross_traffic.udp_percent": 95},
    }
    labels = [s.label for s in S.expand(S.parse(spec_dict))]
    assert labels == [
        "workload=small-records,apps=1,case=none", "workload=small-records,apps=1,case=control",
        "workload=small-records,apps=2,case=none",
        "workload=groupby-test,apps=1,case=none", "workload=groupby-test,apps=2,case=none",
    ]  # fmt: skip
    spec_dict["cases"] = {"x": {"only": {"workload.name": "sort-aggregate"}}}
    with pytest.raises(S.SpecError, match="no scenario left"):
        S.parse(spec_dict, "c.toml")
    spec_dict["cases"] = {"x": {"only": 3}}
    with pytest.raises(S.SpecError, match="cases.x.only"):
        S.parse(spec_dict, "c.toml")


def test_bad_case_names_the_case(spec_dict: dict[str, Any]) -> None:
    spec_dict["cases"] = {"oops": {"cross_traffic.udp_prcent": 5}}
    with pytest.raises(S.SpecError, match="case=oops"):
        S.parse(spec_dict, "c.toml")


def test_matrix_over_whole_workloads(spec_dict: dict[str, Any]) -> None:
    spec_dict["matrix"] = {
        "workload": [
            {"name": "small-records", "params": {"records": 1000, "partitions": 8}},
            {"name": "groupby-test", "params": {"mappers": 2, "kv_pairs": 100, "reducers": 2}},
        ]
    }
    scs = S.expand(S.parse(spec_dict))
    assert [s.label for s in scs] == ["workload=small-records", "workload=groupby-test"]
    assert scs[1].spec.workload_params().partitions == 2


def test_too_many_apps_for_the_cores(spec_dict: dict[str, Any]) -> None:
    spec_dict["workload"]["apps"] = 3
    with pytest.raises(S.SpecError, match="needs at least as many worker cores"):
        S.parse(spec_dict)


def test_expansion_never_mutates_matrix_values(spec_dict: dict[str, Any]) -> None:
    spec_dict["hosts"]["w3"] = {"roles": ["spark-worker"]}
    wl = {"name": "small-records", "params": {"records": 1000, "partitions": 8}}
    spec_dict["matrix"] = {"workload": [wl], "workload.apps": [1, 2]}
    scs = S.expand(S.parse(spec_dict))
    assert [s.spec.workload.apps for s in scs] == [1, 2]
    assert scs[0].values["workload"] == wl and "apps" not in scs[0].values["workload"]


SEED_001_LINK: dict[str, Any] = {
    "rate_mbps": 50,
    "queue_bytes": 2_500_000,
    "delay_ms": 2,
    "discipline": "red",
    "red": {"min_bytes": 500_000, "max_bytes": 1_000_000},
}


def test_kernel_datapath_by_default_switch_when_asked_for(spec_dict: dict[str, Any]) -> None:
    assert S.parse(spec_dict).datapath() == "kernel"
    spec_dict["topology"]["bottleneck"] = SEED_001_LINK
    sp = S.parse(spec_dict)
    assert sp.datapath() == "switch"
    red = sp.topology.bottleneck.red
    assert red is not None and (red.min_bytes, red.max_bytes, red.max_p, red.ewma_weight, red.ecn) == (
        500_000, 1_000_000, 0.1, None, True,
    )  # fmt: skip
    spec_dict["topology"]["bottleneck"] = {"rate_mbps": 50, "delay_ms": 2}
    assert S.parse(spec_dict).datapath() == "switch"
    spec_dict["topology"]["bottleneck"] = {"rate_mbps": 50}
    spec_dict["hosts"]["w1"]["tcp"] = {"congestion_control": "dctcp"}
    assert S.parse(spec_dict).datapath() == "switch"
    spec_dict["hosts"]["w1"]["tcp"] = {"vcc": True}
    assert S.parse(spec_dict).datapath() == "switch"
    spec_dict["hosts"]["w1"]["tcp"] = {}
    spec_dict["topology"]["bottleneck"]["datapath"] = "switch"
    assert S.parse(spec_dict).datapath() == "switch"


def test_dctcp_runs_cubic_with_ecn_under_the_switch_and_vcc_is_a_legacy_host(spec_dict: dict[str, Any]) -> None:
    spec_dict["tcp"] = {"congestion_control": "dctcp"}
    spec_dict["hosts"]["tsink"]["tcp"] = {"congestion_control": "reno", "vcc": True}
    sp = S.parse(spec_dict)
    w1, tsink = sp.tcp_for("w1"), sp.tcp_for("tsink")
    assert (w1.switch_mode(), w1.kernel_congestion_control(), w1.kernel_ecn()) == ("dctcp", "cubic", 1)
    assert (tsink.switch_mode(), tsink.kernel_congestion_control(), tsink.kernel_ecn()) == ("vcc", "reno", 0)
    assert sp.switch_features() == [
        "tcp.congestion_control = 'dctcp' (hosts master, w1, w2, tgen)",
        "tcp.vcc = true (hosts tsink)",
    ]
    plain = S.parse({**spec_dict, "tcp": {}, "hosts": {**spec_dict["hosts"], "tsink": {"roles": ["traffic-sink"]}}})
    assert plain.tcp_for("w1").switch_mode() == "off" and plain.tcp_for("w1").kernel_ecn() == 2


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d["topology"]["bottleneck"].update(discipline="red"), "discipline = 'red' needs a red table"),
        (
            lambda d: d["topology"]["bottleneck"].update(SEED_001_LINK, queue_bytes=800_000),
            "topology.bottleneck: Value error, red.max_bytes (1000000) exceeds the queue limit queue_bytes (800000)",
        ),
        (
            lambda d: d["topology"]["bottleneck"].update(
                SEED_001_LINK, red={"min_bytes": 900_000, "max_bytes": 800_000}
            ),
            "topology.bottleneck.red: Value error, min_bytes (900000) must not exceed max_bytes (800000)",
        ),
        (
            lambda d: d["topology"]["bottleneck"].update(
                SEED_001_LINK, red={"min_bytes": 1, "max_bytes": 2, "max_p": 2}
            ),
            "topology.bottleneck.red.max_p",
        ),
        (lambda d: d["topology"]["bottleneck"].update(datapath="ovs"), "topology.bottleneck.datapath"),
        (
            lambda d: d["topology"]["bottleneck"].update(datapath="kernel", delay_ms=2),
            "topology.bottleneck.datapath = 'kernel', but topology.bottleneck.delay_ms = 2 only the userspace switch",
        ),
        (
            lambda d: (d["topology"]["bottleneck"].update(datapath="kernel"), d.update(tcp={"vcc": True})),
            "tcp.vcc = true (hosts master, w1, w2, tgen, tsink) only the userspace switch provides",
        ),
        (
            lambda d: d["topology"].update(offloads=True, bottleneck={"rate_mbps": 10, "delay_ms": 1}),
            "topology.offloads = true cannot be used with the userspace switch",
        ),
        (lambda d: d.update(telemetry={"queue_period_ms": 5}), "telemetry.queue_period_ms = 5: below 10 ms"),
        (lambda d: d.update(telemetry={"queue_period_ms": 0.5}), "telemetry.queue_period_ms"),
        (lambda d: d.update(tcp={"congestion_control": "dctcp", "vcc": True}), "tcp: Value error, vcc = true is for"),
        (lambda d: d.update(tcp={"vcc": True, "ecn": 1}), "ecn = 1 contradicts it"),
        (lambda d: d.update(tcp={"congestion_control": "dctcp", "ecn": 0}), "ecn = 0 contradicts it"),
        (
            lambda d: d["hosts"]["w2"].update(tcp={"vcc": True, "congestion_control": "dctcp"}),
            "hosts.w2.tcp: vcc = true is for legacy hosts",
        ),
        (
            lambda d: (d.update(tcp={"congestion_control": "dctcp"}), d["hosts"]["w2"].update(tcp={"ecn": 0})),
            "hosts.w2.tcp: congestion_control = 'dctcp' negotiates ECN",
        ),
    ],
)
def test_bad_switch_settings_name_the_field(spec_dict: dict[str, Any], mutate: Any, needle: str) -> None:
    mutate(spec_dict)
    with pytest.raises(S.SpecError) as exc:
        S.parse(spec_dict, "sw.toml")
    assert "sw.toml" in str(exc.value)
    assert needle in str(exc.value)


def test_queue_period_below_10ms_with_the_switch(spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["bottleneck"]["datapath"] = "switch"
    spec_dict["telemetry"] = {"queue_period_ms": 1}
    assert S.parse(spec_dict).telemetry.queue_period_ms == 1


def test_new_fields_at_their_defaults_keep_scenario_ids(spec_dict: dict[str, Any]) -> None:
    # ids recorded before the switch fields existed: finished runs must keep matching their scenarios
    assert S.spec_hash(S.parse(spec_dict)) == "ab6ae53ed0ab"
    root = Path(__file__).resolve().parents[2] / "experiments"
    assert [s.scenario_id for s in S.expand(S.load(root / "starvation.toml"))][:3] == [
        "92957db24d27", "e5cac06922e4", "eae73d37fa9d",
    ]  # fmt: skip
    spec_dict["topology"]["bottleneck"]["datapath"] = "auto"
    spec_dict["tcp"] = {"vcc": False}
    spec_dict["hosts"]["w1"]["tcp"] = {"initcwnd": 10}
    with_defaults = S.parse(spec_dict)
    spec_dict["hosts"]["w1"]["tcp"] = {"initcwnd": 10, "vcc": False}
    assert S.spec_hash(with_defaults) != S.spec_hash(S.parse(spec_dict))  # an explicit host value counts
    spec_dict["hosts"]["w1"]["tcp"] = {}
    assert S.spec_hash(S.parse(spec_dict)) == "ab6ae53ed0ab"
    spec_dict["topology"]["bottleneck"]["datapath"] = "switch"
    assert S.spec_hash(S.parse(spec_dict)) != "ab6ae53ed0ab"


def test_mapreduce_workload_needs_no_spark(spec_dict: dict[str, Any]) -> None:
    spec_dict["hosts"] = {"m1": {"roles": ["mapreduce"]}, "m2": {"roles": ["mapreduce"]}}
    spec_dict["workload"] = {"name": "mapreduce", "params": {"mappers": 2, "reducers": 2, "placement": "split"}}
    sp = S.parse(spec_dict)
    assert sp.workload_params().placement == "split" and sp.hosts_with("mapreduce") == ["m1", "m2"]
    spec_dict["hosts"] = {"m1": {"roles": ["mapreduce"]}}
    with pytest.raises(S.SpecError, match="at least two hosts with role 'mapreduce'"):
        S.parse(spec_dict)
    spec_dict["hosts"] = {"m1": {"roles": ["mapreduce"]}, "m2": {"roles": ["mapreduce"]}}
    spec_dict["workload"]["params"]["generator"] = "terasort"
    with pytest.raises(S.SpecError, match="generator"):
        S.parse(spec_dict)
