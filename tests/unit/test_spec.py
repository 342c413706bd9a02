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
