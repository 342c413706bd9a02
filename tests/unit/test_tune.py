"""The tuner's logic with a synthetic objective (real trials are emulated runs; see experiments/)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from shufflelab import spec as S
from shufflelab import tune

KNOBS = """
[tune]
trials = 14
reps = 2
patience = 20
seed = 3
[tune.knobs]
"tcp.initcwnd" = { low = 10, high = 400, log = true, int = true }
"spark.conf.spark.reducer.maxSizeInFlight" = { choices = ["12m", "48m", "96m"] }
"tcp.congestion_control" = { choices = ["cubic", "reno"] }
"""


def _file(tmp_path: Path, spec_dict: dict[str, Any], extra: str = KNOBS) -> Path:
    import json

    lines = []
    for table, body in spec_dict.items():  # the conftest spec as TOML via JSON inline tables
        if table == "hosts":
            for h, v in body.items():
                lines.append(f"[hosts.{h}]\nroles = {json.dumps(v['roles'])}")
        else:
            lines.append(f"[{table}]")
            for k, v in body.items():
                lines.append(f"{k} = {_toml(v)}")
    p = tmp_path / "t.toml"
    p.write_text("\n".join(lines) + "\n" + extra)
    return p


def _toml(v: Any) -> str:
    import json

    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def _objective(data: dict[str, Any]) -> float:
    """Job time: best at initcwnd ~ 100 with 48m in flight and reno (a made-up landscape)."""
    import math

    sp = S.parse(data)
    w = math.log((sp.tcp.initcwnd or 10) / 100) ** 2 * 5
    w += {"12m": 4, "48m": 0, "96m": 1}[sp.spark.conf.get("spark.reducer.maxSizeInFlight", "48m")]
    w += 0 if sp.tcp.congestion_control == "reno" else 0.5
    return 20 + w


def test_load_validates_knobs_against_the_spec(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    base, cfg = tune.load(_file(tmp_path, spec_dict))
    assert cfg.trials == 14 and set(cfg.knobs) == {"tcp.initcwnd", "spark.conf.spark.reducer.maxSizeInFlight",
                                                   "tcp.congestion_control"}  # fmt: skip
    bad = KNOBS.replace('["cubic", "reno"]', '["cubic", "dctcpx"]')
    with pytest.raises(S.SpecError, match=r"tune.knobs.tcp.congestion_control = 'dctcpx'"):
        tune.load(_file(tmp_path, spec_dict, bad))
    with pytest.raises(S.SpecError, match="tune.knobs.tcp.initcwnd: Value error, low"):
        tune.load(_file(tmp_path, spec_dict, KNOBS.replace("low = 10, high = 400", "low = 400, high = 10")))
    with pytest.raises(S.SpecError, match="no \\[tune\\] table"):
        tune.load(_file(tmp_path, spec_dict, ""))


def test_apply_and_overrides(spec_dict: dict[str, Any]) -> None:
    params = {"tcp.initcwnd": 50, "spark.conf.spark.reducer.maxSizeInFlight": "96m"}
    d = tune.apply(spec_dict, params)
    sp = S.parse(d)
    assert sp.tcp.initcwnd == 50 and sp.spark.conf["spark.reducer.maxSizeInFlight"] == "96m"
    assert "conf" not in spec_dict.get("spark", {})  # the base is not mutated
    ov = tune.overrides(spec_dict, params)
    assert ov == {"tcp.initcwnd": 50, "spark.conf": {"spark.reducer.maxSizeInFlight": "96m"}}
    case = copy.deepcopy(spec_dict)
    case["cases"] = {"best": ov, "default": {}}
    labels = {s.label: s.spec for s in S.expand(S.parse(case))}
    assert labels["case=best"].spark.conf["spark.reducer.maxSizeInFlight"] == "96m"


def test_search_finds_a_better_configuration_and_ranks_knobs(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    base, cfg = tune.load(_file(tmp_path, spec_dict))
    calls: list[tuple[str, int]] = []

    def evaluate(case: str, data: dict[str, Any], reps: int) -> list[float]:
        calls.append((case, reps))
        return [_objective(data)] * reps

    res = tune.search(base, cfg, evaluate)
    assert calls[0] == ("default", 2) and len(calls) == 1 + cfg.trials
    default_value = res.trials[0]["value"]
    assert res.best_value is not None and res.best_value < default_value
    assert set(res.importance) <= set(cfg.knobs) and res.importance
    md = tune.write(res, tmp_path / "out", cfg)
    assert "Best (search)" in md.read_text() and (tmp_path / "out" / "history.png").exists()


def test_search_stops_early_without_improvement(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    base, cfg = tune.load(_file(tmp_path, spec_dict))
    cfg = cfg.model_copy(update={"patience": 3})
    res = tune.search(base, cfg, lambda case, data, reps: [10.0] * reps)  # nothing ever beats the default
    assert res.stopped_early and len(res.trials) == 1 + 3


def test_failed_trials_are_recorded(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    base, cfg = tune.load(_file(tmp_path, spec_dict))
    cfg = cfg.model_copy(update={"trials": 3, "patience": 10})
    res = tune.search(base, cfg, lambda case, data, reps: [] if case != "default" else [5.0])
    assert [t["value"] for t in res.trials] == [5.0, None, None, None] and res.best_value is None


def test_confirm_gain_with_ci() -> None:
    c = tune.confirm([10.0, 10.5, 9.8, 10.2, 10.1], [8.0, 8.3, 7.9, 8.1, 8.2])
    assert c["significant"] and 15 < c["gain_percent"] < 25 and c["ratio_ci"][1] < 1
    same = tune.confirm([10.0, 10.5, 9.8], [10.1, 9.9, 10.4])
    assert not same["significant"]


def test_confirm_with_two_runs_a_side_gives_no_interval() -> None:
    """Two runs a side: no interval, no p, not significant; the JSON has no NaN."""
    import json

    c = tune.confirm([10.0, 10.5], [8.0, 8.3])
    assert c["ratio_ci"] is None and c["p_value"] is None and not c["significant"]
    assert c["ratio_ci_text"].startswith("too few runs for an interval (n = 2/2")
    assert "NaN" not in json.dumps(c)


def _inventory(tmp_path: Path, spec_hosts: list[str], share: tuple[str, str] | None = None) -> Path:
    """Documentation-range machines (never contacted): one per spec host, ``share`` = (host, with)
    on one, and a router host."""
    (tmp_path / "key").write_text("not read")
    (tmp_path / "known_hosts").write_text("")
    machines = {h: f"n{i}" for i, h in enumerate(spec_hosts)}
    if share is not None:
        machines[share[0]] = machines[share[1]]
    hosts = "".join(
        f'[hosts.n{i}]\naddress = "192.0.2.{i + 1}"\nkey_file = "key"\ndata_interface = "eth1"\n'
        for i in range(len(spec_hosts) + 1)
    )
    where = "".join(f'{h} = "{m}"\n' for h, m in machines.items())
    inv = tmp_path / "inv.toml"
    inv.write_text(f'router = "n{len(spec_hosts)}"\n[ssh]\nknown_hosts = "known_hosts"\n{hosts}[map]\n{where}')
    return inv


def test_the_shipped_tune_file_fits_five_machines() -> None:
    """tune --hosts checks the default configuration and every knob's extremes against what the
    machines can do before connecting: experiments/tune-shuffle.toml runs on five (the master with
    w1, three more workers, a router host)."""
    from shufflelab.hosts import inventory
    from shufflelab.hosts.commands import backend_refusals

    path = Path(__file__).resolve().parents[2] / "experiments" / "tune-shuffle.toml"
    base, cfg = tune.load(path)
    probe = tune.extremes_spec(base, cfg, str(path))
    # the default and each knob's extremes other than the default's own value
    assert 1 + sum(len(k.choices or [0, 1]) for k in cfg.knobs.values()) - len(cfg.knobs) <= len(S.expand(probe))
    machines = {f"n{i}": {"address": f"192.0.2.{i}", "agent": True, "data_interface": "eth1"} for i in range(5)}
    mapping = {"master": "n0", "w1": "n0", "w2": "n1", "w3": "n2", "w4": "n3"}
    inv = inventory.parse({"router": "n4", "hosts": machines, "map": mapping})
    assert backend_refusals(inv, probe, str(path)) == {}


def test_tune_hosts_refuses_a_knob_the_machines_cannot_run_before_connecting(
    tmp_path: Path, spec_dict: dict[str, Any]
) -> None:
    from typer.testing import CliRunner

    from shufflelab.cli import app

    spec_dict["topology"]["kind"] = "star"
    knobs = '\n[tune]\ntrials = 4\n[tune.knobs]\n"topology.bottleneck.delay_ms" = { choices = [0, 5] }\n'
    path = _file(tmp_path, spec_dict, knobs)
    inv = _inventory(tmp_path, list(spec_dict["hosts"]))
    r = CliRunner().invoke(app, ["tune", str(path), "--hosts", str(inv), "--results", str(tmp_path / "res")])
    assert r.exit_code != 0
    out = " ".join(r.output.split())
    assert "the hosts backend cannot run this experiment" in out and "topology.bottleneck.delay_ms = 5" in out, out
    assert not (tmp_path / "res").exists()  # nothing ran, nothing was written
