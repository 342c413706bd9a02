from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from shufflelab import shaping
from shufflelab import spec as S
from shufflelab.spec import scenarios


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


# -- malformed files and values the fabric cannot apply --------------------------------------------------


def _toml_value(v: Any) -> str:
    """``v`` as a TOML inline value (a test's writer: strings, numbers incl. nan/inf, tables, arrays)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):  # a TOML basic string: JSON's escapes, and DEL escaped too
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_value(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def _toml_text(data: dict[str, Any]) -> str:
    return "".join(f"{_toml_value(str(k))} = {_toml_value(v)}\n" for k, v in data.items())


def _load_text(tmp_path: Path, text: str | bytes, name: str = "spec.toml") -> S.ExperimentSpec:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return S.load(p)


def _assert_refused(tmp_path: Path, text: str | bytes, *needles: str) -> str:
    with pytest.raises(S.SpecError) as exc:
        _load_text(tmp_path, text, "bad.toml")
    msg = str(exc.value)
    assert "bad.toml" in msg
    for n in needles:
        assert n in msg, msg
    return msg


def test_undecodable_bytes_name_the_file_line_and_byte(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    text = _toml_text(spec_dict).encode()
    first, rest = text.split(b"\n", 1)
    _assert_refused(tmp_path, first + b"\n" + b'"x" = "caf\xe9"\n' + rest, "line 2, column 11", "0xe9", "not UTF-8")
    _assert_refused(tmp_path, b"\xff\xfe" + text, "line 1, column 1", "0xff")


@pytest.mark.parametrize(
    ("where", "path", "needle"),
    [
        ("matrix", "workload.params.rows.x", 'matrix."workload.params.rows.x": workload.params.rows is a value (1000)'),
        ("matrix", "hosts.master.roles.x", 'matrix."hosts.master.roles.x": hosts.master.roles is a list'),
        ("matrix", "topology.kind.x.y", 'matrix."topology.kind.x.y": topology.kind is a value'),
        ("cases", "hosts.w1.roles.x", 'cases.c."hosts.w1.roles.x": hosts.w1.roles is a list'),
        ("cases", "experiment.run_timeout_s.x", 'cases.c."experiment.run_timeout_s.x": this field cannot be varied'),
        (
            "cases",
            "cross_traffic.udp_percent.x",
            'cases.c."cross_traffic.udp_percent.x": cross_traffic.udp_percent is a',
        ),
    ],
)
def test_dotted_paths_into_a_value_or_a_list_name_the_field(
    tmp_path: Path, spec_dict: dict[str, Any], where: str, path: str, needle: str
) -> None:
    spec_dict[where] = {path: [1]} if where == "matrix" else {"c": {path: 1}}
    _assert_refused(tmp_path, _toml_text(spec_dict), needle)


def test_a_path_into_a_matrix_value_that_is_not_a_table(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    spec_dict["matrix"] = {"workload": [1], "workload.apps": [1]}
    _assert_refused(tmp_path, _toml_text(spec_dict), 'matrix."workload.apps": workload is a value (1)')
    spec_dict["matrix"] = {"workload.apps": [1]}
    spec_dict["cases"] = {"c": {"workload": [1, 2], "workload.apps": 2}}
    _assert_refused(tmp_path, _toml_text(spec_dict), 'cases.c."workload.apps": workload is a list')


@pytest.mark.parametrize(
    ("value", "needles"),
    [
        ("[" * 5000 + "]" * 5000, ("line 6, matrix.deep:", "nested too deeply")),
        ("{a = " * 3000 + "1" + "}" * 3000, ("line 6, matrix.deep:", "nested too deeply")),
        ("[" * 40 + "]" * 40, ("matrix.deep[0][0]", "nested more than 32 levels deep")),
    ],
)
def test_deep_nesting_is_refused_naming_where(
    tmp_path: Path, spec_dict: dict[str, Any], value: str, needles: Any
) -> None:
    text = _toml_text(spec_dict).replace('"matrix"', '"matrix_"') + "[matrix]\n" + f"deep = {value}\n"
    _assert_refused(tmp_path, text, *needles)


def test_deeply_nested_tables_are_refused(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    header = ".".join(["a"] * 5000)
    _assert_refused(tmp_path, _toml_text(spec_dict) + f"[cases.{header}]\nx = 1\n", "cases.a.a.a", "more than 32")
    with pytest.raises(S.SpecError, match="nested more than 32 levels deep"):  # parse() guards dicts too (tune)
        deep: dict[str, Any] = {"x": 1}
        for _ in range(3000):
            deep = {"a": deep}
        S.parse({**spec_dict, "cases": {"c": deep}}, "d.toml")


@pytest.mark.parametrize(
    ("rate", "needle"),
    [
        (1e-7, "0 bit/s, 0 whole bytes/s: tc refuses it"),
        (1e-6, "1 bit/s, 0 whole bytes/s"),
        (7e-6, "7 bit/s, 0 whole bytes/s"),
        (8e-6, "too slow for HTB"),
        (8.8e-5, "too slow for HTB"),
    ],
)
def test_rates_tc_and_htb_cannot_apply_are_refused(
    tmp_path: Path, spec_dict: dict[str, Any], rate: float, needle: str
) -> None:
    spec_dict["topology"]["bottleneck"]["rate_mbps"] = rate
    lowest = f"the lowest rate is {shaping.MIN_RATE_MBPS:g} Mbit/s"
    _assert_refused(tmp_path, _toml_text(spec_dict), "topology.bottleneck.rate_mbps", needle, lowest)


def test_the_lowest_and_highest_rates_are_applied(spec_dict: dict[str, Any]) -> None:
    from shufflelab import netplan

    for rate in (shaping.MIN_RATE_MBPS, 0.001, 100_000):
        spec_dict["topology"]["bottleneck"] = {"rate_mbps": rate}
        link = S.parse(spec_dict).topology.bottleneck
        _root, cls, _leaf = netplan.shaping_commands("ns", "dev", link)
        assert _tc_problem(cls) is None


@pytest.mark.parametrize(
    ("link", "needle"),
    [
        ({"queue_bytes": 10}, "smaller than one full-size frame (1514 bytes)"),
        ({"queue_bytes": 1513}, "smaller than one full-size frame"),
        ({"queue_bytes": 2**32}, "exceeds tc's 32-bit bfifo limit (4294967295)"),
        ({"queue_bytes": 10**30}, "exceeds tc's 32-bit bfifo limit"),
        ({"queue_packets": 2**32}, "outside tc's pfifo limit (1 to 4294967295)"),
        ({"discipline": "red", "queue_packets": 10, "red": {"min_bytes": 1, "max_bytes": 2**64}}, "red.max_bytes"),
    ],
)
def test_queue_limits_tc_rejects_are_refused(
    tmp_path: Path, spec_dict: dict[str, Any], link: dict[str, Any], needle: str
) -> None:
    spec_dict["topology"]["bottleneck"] = {"rate_mbps": 50, **link}
    _assert_refused(tmp_path, _toml_text(spec_dict), needle)


def test_queue_limits_at_the_bounds_are_accepted(spec_dict: dict[str, Any]) -> None:
    for link in ({"queue_bytes": 1514}, {"queue_bytes": 2**32 - 1}, {"queue_packets": 1}, {"queue_packets": 2**32 - 1}):
        spec_dict["topology"]["bottleneck"] = {"rate_mbps": 50, **link}
        assert S.parse(spec_dict).topology.bottleneck.model_dump(exclude_defaults=True) == {"rate_mbps": 50, **link}


def test_udp_rates_iperf3_would_take_as_unlimited_are_refused(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    spec_dict["topology"]["bottleneck"]["rate_mbps"] = 0.001  # 1000 bit/s: shaped fine
    spec_dict["cross_traffic"] = {"udp_percent": 0.05}  # 0.5 bit/s on the wire: iperf3 -b 0 = unlimited
    _assert_refused(
        tmp_path, _toml_text(spec_dict), "cross_traffic.udp_percent = 0.05", "iperf3 would take as unlimited"
    )
    spec_dict["cross_traffic"] = {"udp_percent": 50}
    assert S.parse(spec_dict).cross_traffic.udp_percent == 50
    spec_dict["topology"]["bottleneck"]["rate_mbps"] = 50
    spec_dict["faults"] = [{"kind": "udp-burst", "at_s": 1, "duration_s": 1, "rate_mbps": 1e-7}]
    _assert_refused(tmp_path, _toml_text(spec_dict), "faults[0].rate_mbps", "iperf3 would take as unlimited")


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(spark={"heartbeat_s": 0.0001}), "spark.heartbeat_s"),
        (lambda d: d["workload"]["params"].update(seed=2**63 - 1), "workload.params (sort-aggregate): seed"),
        (lambda d: d["workload"]["params"].update(groups=2**63), "workload.params (sort-aggregate): groups"),
        (
            lambda d: d.update(workload={"name": "groupby-test", "params": {"kv_pairs": 2**31}}),
            "workload.params (groupby-test): kv_pairs",
        ),
        (
            lambda d: d.update(
                hosts={"m1": {"roles": ["mapreduce"]}, "m2": {"roles": ["mapreduce"]}},
                workload={"name": "mapreduce", "params": {"input_mb_per_map": float("inf")}},
            ),
            "input_mb_per_map",
        ),
    ],
)
def test_values_no_command_can_take_are_refused(
    tmp_path: Path, spec_dict: dict[str, Any], mutate: Any, needle: str
) -> None:
    mutate(spec_dict)
    _assert_refused(tmp_path, _toml_text(spec_dict), needle)


def test_a_matrix_beyond_the_bound_is_refused_before_it_is_expanded(
    spec_dict: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: Any) -> None:
        raise AssertionError("a point was expanded")

    monkeypatch.setattr(scenarios, "set_path", never)  # where expand looks it up
    spec_dict["matrix"] = {
        "experiment.run_timeout_s": list(range(1, 101)),
        "telemetry.queue_period_ms": list(range(10, 110)),
    }
    spec_dict["cases"] = {"a": {}, "b": {}}
    with pytest.raises(S.SpecError) as exc:
        S.parse(spec_dict, "big.toml")
    assert str(exc.value) == (
        "big.toml: matrix: 20,000 scenarios (100 experiment.run_timeout_s x 100 telemetry.queue_period_ms x 2 cases) "
        "exceed the bound of 10,000 per experiment; vary fewer values or split the experiment"
    )
    spec_dict["matrix"] = {f"workload.params.x{i}": list(range(100)) for i in range(7)}  # 10^14 points
    with pytest.raises(S.SpecError, match="200,000,000,000,000 scenarios"):
        S.parse(spec_dict, "big.toml")


def _tc_problem(cmd: list[str]) -> str | None:
    """What iproute2 6.1's tc makes of an HTB class command (get_rate64, get_size, tc_calc_xmittime
    with /proc/net/psched's tick_in_usec = 1000/64), restated from its C code."""
    args = dict(zip(cmd[::2], cmd[1::2], strict=False)) | dict(zip(cmd[1::2], cmd[2::2], strict=False))
    rate = int(int(args["rate"].removesuffix("bit")) / 8)
    burst, quantum = int(args["burst"]), int(args["quantum"])
    if rate == 0:
        return '"rate" is required.'
    if burst > 2**32 - 1 or quantum > 2**32 - 1:
        return "Illegal burst/quantum"
    micros = int(1_000_000 * (burst / rate))
    if micros > 2**32 - 1 or int(micros * 1000 / 64) > 2**32 - 1:
        return "buffer overflows HTB's 32-bit tick count"
    return None


_KEYS = [
    "experiment", "name", "repetitions", "run_timeout_s", "topology", "kind", "bottleneck", "rate_mbps",
    "queue_bytes", "queue_packets", "delay_ms", "discipline", "red", "min_bytes", "max_bytes", "datapath", "hosts",
    "master", "w1", "roles", "tcp", "initcwnd", "congestion_control", "spark", "conf", "spark.eventLog.enabled",
    "heartbeat_s", "workload", "params", "rows", "partitions", "apps", "cross_traffic", "udp_percent", "faults",
    "matrix", "cases", "only", "telemetry", "queue_period_ms", "x",
]  # fmt: skip
_SMALL = st.integers(min_value=1, max_value=100) | st.floats(min_value=0.001, max_value=100)  # mostly valid
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)  # any text a UTF-8 file can hold
_NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2**31, 2**32, 2**63, 2**64, 1e-7, 8.8e-5, 9.6e-5, 1e308, -0.0]),
)


def _mostly(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Values near the limits most of the time, any number (huge, negative, nan, inf) otherwise."""
    return st.one_of(plausible, plausible, plausible, _NUMBERS)


_SCALARS = st.one_of(_NUMBERS, st.booleans(), _TEXT, st.sampled_from(["cubic", "red", "star", "1g"]))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=3),
    max_leaves=8,
)
_FIELDS = st.sampled_from(
    [
        "topology.bottleneck.rate_mbps", "topology.bottleneck.queue_bytes", "topology.bottleneck.queue_packets",
        "topology.bottleneck.delay_ms", "cross_traffic.udp_percent", "spark.heartbeat_s", "workload.params.rows",
        "workload.params.partitions", "workload.apps", "tcp.initcwnd", "hosts.w1.tcp.initcwnd",
        "experiment.run_timeout_s", "telemetry.queue_period_ms", "spark.conf", "faults",
    ]
)  # fmt: skip
_PATHS = st.one_of(
    _FIELDS,
    _FIELDS,
    st.tuples(_FIELDS, st.sampled_from(_KEYS) | _TEXT).map(".".join),  # below a value: no table there
    st.lists(st.sampled_from(_KEYS) | _TEXT, min_size=1, max_size=5).map(".".join),
)


def _mutated(base: dict[str, Any], edits: list[tuple[str, str, Any]]) -> dict[str, Any]:
    data = copy.deepcopy(base)
    for where, path, value in edits:
        if where == "matrix":
            if not isinstance(data.get("matrix"), dict):  # an earlier edit may have made it a value
                data["matrix"] = {}
            data["matrix"][path] = value if isinstance(value, list) else [value]
        elif where == "case":
            if not isinstance(data.get("cases"), dict):
                data["cases"] = {}
            if not isinstance(data["cases"].get("c"), dict):
                data["cases"]["c"] = {}
            data["cases"]["c"][path] = value
        else:  # anywhere in the spec, replacing whatever is on the way
            node = data
            parts = path.split(".")
            for part in parts[:-1]:
                if not isinstance(node.get(part), dict):
                    node[part] = {}
                node = node[part]
            node[parts[-1]] = value
    return data


_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _check_applicable(sp: S.ExperimentSpec) -> None:
    """An accepted spec's every scenario is one the fabric can apply (checked on the commands it builds)."""
    from shufflelab import netplan

    for sc in S.expand(sp):
        link = sc.spec.topology.bottleneck
        _root, cls, leaf = netplan.shaping_commands("ns", "dev", link)
        assert _tc_problem(cls) is None, (link, cls)
        assert 1 <= int(leaf[-1]) <= 2**32 - 1 and (leaf[-3] == "pfifo" or int(leaf[-1]) >= 1514)
        ct = sc.spec.cross_traffic
        if ct.udp_percent > 0:
            assert shaping.udp_payload_rate_bps(link.rate_mbps, ct.udp_percent) >= 1
        for f in sc.spec.faults:
            if f.kind == "udp-burst":
                assert shaping.udp_payload_rate_bps(f.rate_mbps or link.rate_mbps, 100.0) >= 1
        assert int(sc.spec.spark.heartbeat_s * 1000) >= 1  # whole milliseconds for Spark
        assert "NaN" not in sc.spec.model_dump_json() and "Infinity" not in sc.spec.model_dump_json()


@_FUZZ
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(["spec", "matrix", "case"]), _PATHS, st.one_of(_SMALL, _NUMBERS, _VALUES)),
        min_size=1,
        max_size=4,
    )
)
def test_fuzz_structure_and_values_load_or_refuse(
    tmp_path: Path, spec_dict: dict[str, Any], edits: list[tuple[str, str, Any]]
) -> None:
    """Random fields, dotted paths and values (huge, negative, nan, inf, nested) anywhere in a spec,
    its matrix or a case: loading gives a spec the fabric can apply, or a SpecError, never another exception."""
    text = _toml_text(_mutated(spec_dict, edits))
    try:
        sp = _load_text(tmp_path, text)
    except S.SpecError as exc:
        assert "spec.toml" in str(exc)
        event("refused")
        return
    event("accepted")
    _check_applicable(sp)


@_FUZZ
@given(
    rate=_mostly(st.floats(min_value=0, max_value=2e-4) | st.floats(min_value=1e-3, max_value=1.5e5)),
    limit=st.sampled_from(["queue_bytes", "queue_packets"]),
    queue=st.none() | _mostly(st.integers(min_value=1000, max_value=2**32 + 2)),
    udp=st.just(0) | _mostly(st.floats(min_value=0, max_value=100)),
)
def test_fuzz_link_values_are_applicable_or_refused(
    tmp_path: Path, spec_dict: dict[str, Any], rate: Any, limit: str, queue: Any, udp: Any
) -> None:
    """Rates, queue limits and UDP shares around and beyond the commands' limits: what is accepted,
    tc (as iproute2 computes it), the FIFOs and iperf3 can apply."""
    spec_dict["topology"]["bottleneck"] = {"rate_mbps": rate} | ({} if queue is None else {limit: queue})
    spec_dict["cross_traffic"] = {"udp_percent": udp}
    try:
        sp = _load_text(tmp_path, _toml_text(spec_dict))
    except S.SpecError:
        event("refused")
        return
    event("accepted")
    _check_applicable(sp)


@_FUZZ
@given(
    data=st.binary(max_size=200),
    at=st.integers(min_value=0, max_value=10_000),
)
def test_fuzz_bytes_load_or_refuse(tmp_path: Path, spec_dict: dict[str, Any], data: bytes, at: int) -> None:
    """Random bytes, alone or spliced into a valid spec: a spec or a SpecError naming the file."""
    valid = _toml_text(spec_dict).encode()
    at %= len(valid) + 1
    for text in (data, valid[:at] + data + valid[at:]):
        try:
            _load_text(tmp_path, text)
        except S.SpecError as exc:
            assert "spec.toml" in str(exc)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    depth=st.integers(min_value=1, max_value=4000),
    opener=st.sampled_from(["[", "{a = ", "[{a = "]),
    key=st.sampled_from(["matrix.x", "cases.c.x", "spark.conf", "x"]),
)
def test_fuzz_nesting_depth_load_or_refuse(
    tmp_path: Path, spec_dict: dict[str, Any], depth: int, opener: str, key: str
) -> None:
    closer = {"[": "]", "{a = ": "}", "[{a = ": "}]"}[opener]
    nested = opener * depth + ("1" if "a =" in opener else "") + closer * depth
    table, _, name = key.rpartition(".")
    text = _toml_text({k: v for k, v in spec_dict.items() if k not in ("matrix", "cases", "spark")})
    text += (f"[{table}]\n" if table else "") + f"{name} = {nested}\n"  # the base has no table headers
    try:
        _load_text(tmp_path, text)
    except S.SpecError as exc:
        assert "spec.toml" in str(exc)


# -- one value given twice in a matrix list (issue 31, item 8) -----------------------------------------


def _twin(v: int | float) -> int | float:
    """Another spelling of the same value: 0 as -0.0, an integer as a float and back."""
    if v == 0:
        return -0.0
    return float(v) if isinstance(v, int) else (int(v) if float(v).is_integer() else v)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.integers(0, 100) | st.integers(0, 1000).map(lambda i: i / 10), min_size=1, max_size=5),
    data=st.data(),
)
def test_a_matrix_value_given_twice_in_any_spelling_is_refused(
    spec_dict: dict[str, Any], values: list[int | float], data: st.DataObject
) -> None:
    distinct = list({float(v): v for v in values}.values())  # one spelling of each value
    spec_dict["matrix"] = {"cross_traffic.udp_percent": distinct}
    got = S.expand(S.parse(copy.deepcopy(spec_dict), "m.toml"))
    assert len(got) == len(distinct) == len({s.scenario_id for s in got})  # one scenario per configuration
    v = data.draw(st.sampled_from(distinct), label="given twice")
    twin = data.draw(st.sampled_from([v, _twin(v)]), label="as")
    spec_dict["matrix"] = {"cross_traffic.udp_percent": [*distinct, twin]}
    with pytest.raises(S.SpecError) as exc:
        S.parse(spec_dict, "m.toml")
    assert str(exc.value) == (
        f'm.toml: matrix."cross_traffic.udp_percent": {v!r} and {twin!r} are the same value: give each value once'
    )


def test_zero_and_minus_zero_are_one_configuration(spec_dict: dict[str, Any]) -> None:
    from shufflelab.spec.matrix import same_values

    spec_dict["matrix"] = {"cross_traffic.udp_percent": [0.0, -0.0]}
    with pytest.raises(S.SpecError, match=r"0\.0 and -0\.0 are the same value: give each value once"):
        S.parse(spec_dict, "m.toml")
    assert same_values([True, 1]) is None and same_values([{"a": 0.0}, {"a": -0.0}]) == ({"a": 0.0}, {"a": -0.0})
