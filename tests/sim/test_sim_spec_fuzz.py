"""Simulation spec loading never ends in a traceback: malformed files, values the core cannot
take and matrices too large to expand give a SimSpecError naming the file and the field."""

from __future__ import annotations

import copy
import json
import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from shufflelab import spec as S
from shufflelab.sim import spec as simspec
from shufflelab.spec import matrix

BASE_TOML = """
[experiment]
name = "sim-fuzz"
policies = ["no-pushdown", "filter", "net-aware"]
seeds = 1

[cluster.compute]
machines = 4
cores_per_machine = 2
core_ghz = 2.0

[cluster.storage]
machines = 2
cores_per_machine = 1
core_ghz = 2.0

[network]
inter_cluster_gbps = 4

[workload]
jobs = 2
input_gib = 2
task_input_mib = 256

[[workload.operators]]
name = "filter"
cycles_per_byte = 20
reduction_factor = 60

[matrix]
"cluster.storage.cores_per_machine" = [1, 4]
"""
BASE: dict[str, Any] = tomllib.loads(BASE_TOML)


def _toml_value(v: Any) -> str:
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


def _refused(tmp_path: Path, text: str | bytes, *needles: str) -> str:
    p = tmp_path / "bad.toml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(simspec.SimSpecError) as exc:
        simspec.load(p)
    msg = str(exc.value)
    assert str(p) in msg
    for n in needles:
        assert n in msg, msg
    return msg


def test_a_sim_spec_error_is_a_spec_error() -> None:
    assert issubclass(simspec.SimSpecError, S.SpecError)


def test_undecodable_bytes_and_unreadable_files(tmp_path: Path) -> None:
    _refused(tmp_path, BASE_TOML.encode().replace(b'"sim-fuzz"', b'"sim-f\xfczz"'), "line 3, column 14", "not UTF-8")
    (tmp_path / "adir.toml").mkdir()
    with pytest.raises(simspec.SimSpecError, match="adir.toml: cannot read: is a directory"):
        simspec.load(tmp_path / "adir.toml")


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("[" * 5000 + "]" * 5000, "matrix.deep: arrays or inline tables nested too deeply"),
        ("{a = " * 3000 + "1" + "}" * 3000, "matrix.deep: arrays or inline tables nested too deeply"),
        ("[" * 40 + "]" * 40, "matrix.deep[0][0][0]"),
    ],
)
def test_deep_nesting_is_refused(tmp_path: Path, value: str, needle: str) -> None:
    _refused(tmp_path, BASE_TOML + f"deep = {value}\n", needle)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("reduction_factor = 60", "reduction_factor = inf", "workload.operators[0].reduction_factor"),
        ("inter_cluster_gbps = 4", "inter_cluster_gbps = 4\nheader_bytes_per_flow = inf", "header_bytes_per_flow"),
        ("inter_cluster_gbps = 4", "inter_cluster_gbps = 4\nstorage_nic_gbps = 1.8e299", "storage_nic_gbps"),
        ("input_gib = 2", "input_gib = 2e6", "2 jobs x 8,000,000 tasks"),
        ("task_input_mib = 256", "task_input_mib = 1e-9", "more than a run may simulate (10,000,000)"),
    ],
)
def test_values_the_core_cannot_simulate_are_refused(tmp_path: Path, old: str, new: str, needle: str) -> None:
    _refused(tmp_path, BASE_TOML.replace(old, new), needle)


def test_a_matrix_beyond_the_bound_is_refused_before_it_is_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: Any) -> None:
        raise AssertionError("a point was expanded")

    monkeypatch.setattr(matrix, "set_path", never)
    text = BASE_TOML + f'"network.inter_cluster_gbps" = {list(range(1, 201))}\n"workload.jobs" = {list(range(1, 51))}\n'
    _refused(
        tmp_path,
        text,
        "matrix: 20,000 points (2 cluster.storage.cores_per_machine x 200 network.inter_cluster_gbps"
        " x 50 workload.jobs) exceed the bound of 10,000 per experiment",
    )


def test_sim_run_reports_a_malformed_spec_without_a_traceback(tmp_path: Path) -> None:
    from shufflelab.sim.cli import app

    bad = tmp_path / "sim-bad.toml"
    bad.write_bytes(b"\xff" + BASE_TOML.encode())
    res = CliRunner().invoke(app, ["run", str(bad), "--results", str(tmp_path / "res")])
    assert res.exit_code == 2
    assert "sim-bad.toml: line 1, column 1: byte 0xff is not UTF-8" in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)


_KEYS = [
    "experiment", "name", "policies", "seeds", "x", "cluster", "compute", "storage", "machines",
    "cores_per_machine", "core_ghz", "efficiency", "network", "mode", "inter_cluster_gbps", "storage_nic_gbps",
    "mss_bytes", "chunk_kib", "max_concurrent_jobs", "workload", "jobs", "input_gib", "task_input_mib",
    "operators", "reduction_factor", "cycles_per_byte", "matrix", "0", "1",
]  # fmt: skip
_SMALL = st.integers(min_value=1, max_value=100) | st.floats(min_value=0.001, max_value=100)  # mostly valid
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)  # any text a UTF-8 file can hold
_NUMBERS = st.one_of(
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2**32, 2**64, 1e-9, 1e308, -0.0]),
)
_VALUES = st.recursive(
    st.one_of(_NUMBERS, st.booleans(), _TEXT, st.sampled_from(["flow", "chunk", "net-aware"])),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=3),
    max_leaves=8,
)
_FIELDS = st.sampled_from(
    [
        "cluster.compute.machines", "cluster.storage.cores_per_machine", "cluster.storage.efficiency",
        "network.inter_cluster_gbps", "network.storage_nic_gbps", "network.mss_bytes", "network.chunk_kib",
        "workload.jobs", "workload.input_gib", "workload.task_input_mib", "workload.cpu_jitter", "experiment.seeds",
        "network.header_bytes_per_flow", "workload.interarrival_s", "network.max_concurrent_jobs",
    ]
)  # fmt: skip
_PATHS = st.one_of(
    _FIELDS,
    _FIELDS,
    st.tuples(_FIELDS, st.sampled_from(_KEYS) | _TEXT).map(".".join),  # below a value: no table there
    st.lists(st.sampled_from(_KEYS) | _TEXT, min_size=1, max_size=4).map(".".join),
)
_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _mutated(edits: list[tuple[bool, str, Any]]) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for in_matrix, path, value in edits:
        if in_matrix:
            if not isinstance(data.get("matrix"), dict):
                data["matrix"] = {}
            data["matrix"][path] = value if isinstance(value, list) else [value]
            continue
        node = data
        parts = path.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value
    return data


@_FUZZ
@given(edits=st.lists(st.tuples(st.booleans(), _PATHS, st.one_of(_SMALL, _NUMBERS, _VALUES)), min_size=1, max_size=4))
def test_fuzz_structure_and_values_load_or_refuse(tmp_path: Path, edits: list[tuple[bool, str, Any]]) -> None:
    p = tmp_path / "sim-fuzz.toml"
    p.write_text(_toml_text(_mutated(edits)))
    try:
        sp = simspec.load(p)
    except simspec.SimSpecError as exc:
        assert str(p) in str(exc)
        event("refused")
        return
    event("accepted")
    for sc in simspec.expand(sp):  # what the core gets: finite numbers, a bounded number of tasks
        config = simspec.core_config(sc.spec, "net-aware", 0)
        assert "NaN" not in json.dumps(config) and "Infinity" not in json.dumps(config)
        w = sc.spec.workload
        assert w.jobs * max(1, math.ceil(w.input_gib * simspec.GIB / (w.task_input_mib * simspec.MIB))) <= 10_000_000


@_FUZZ
@given(data=st.binary(max_size=200), at=st.integers(min_value=0, max_value=10_000))
def test_fuzz_bytes_load_or_refuse(tmp_path: Path, data: bytes, at: int) -> None:
    valid = BASE_TOML.encode()
    at %= len(valid) + 1
    p = tmp_path / "sim-fuzz.toml"
    for text in (data, valid[:at] + data + valid[at:]):
        p.write_bytes(text)
        try:
            simspec.load(p)
        except simspec.SimSpecError as exc:
            assert str(p) in str(exc)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(min_value=1, max_value=4000), opener=st.sampled_from(["[", "{a = ", "[{a = "]))
def test_fuzz_nesting_depth_load_or_refuse(tmp_path: Path, depth: int, opener: str) -> None:
    closer = {"[": "]", "{a = ": "}", "[{a = ": "}]"}[opener]
    nested = opener * depth + ("1" if "a =" in opener else "") + closer * depth
    p = tmp_path / "sim-fuzz.toml"
    p.write_text(BASE_TOML + f"deep = {nested}\n")
    with pytest.raises(simspec.SimSpecError):  # a matrix value that is not a list of points, or too deep
        simspec.load(p)
