"""Seed 002's comparison on synthetic runs: censored means, gap closure and its bounds."""

from __future__ import annotations

import copy

import pandas as pd
import pytest

from conftest import BASE_SPEC
from shufflelab import vcc
from shufflelab.spec import ExperimentSpec


def _spec(run_timeout_s: float) -> ExperimentSpec:
    d = copy.deepcopy(BASE_SPEC)
    d["experiment"]["run_timeout_s"] = run_timeout_s
    return ExperimentSpec.model_validate(d)


def _runs(rows: list[tuple[int, str, str, float | None]]) -> tuple[pd.DataFrame, dict[str, ExperimentSpec | None]]:
    df = pd.DataFrame(
        [
            {"label": f"tcp_pairs={p},case={c}", vcc.PAIRS_KEY: p, "case": c, "status": st, "job_time_s": t}
            for p, c, st, t in rows
        ]
    )
    timeouts = {"ecn": 180, "legacy": 60, "vcc": 180}
    specs: dict[str, ExperimentSpec | None] = {lbl: _spec(timeouts[lbl.split("case=")[1]]) for lbl in df["label"]}
    return df, specs


def test_timeouts_enter_at_their_timeout_and_make_a_lower_bound() -> None:
    df, specs = _runs(
        [(2, "ecn", "ok", 10.0), (2, "ecn", "ok", 12.0)]
        + [(2, "legacy", "timeout", None), (2, "legacy", "ok", 40.0)]
        + [(2, "vcc", "ok", 11.0), (2, "vcc", "ok", 13.0), (2, "vcc", "failed", None)]
    )
    assert vcc.applies([vcc.PAIRS_KEY, "case"], df)
    obs = vcc.observations(vcc.prepare(df, specs))
    assert len(obs) == 6  # the failed run says nothing about time and is left out
    assert obs[obs["censored"]]["time_s"].tolist() == [60.0]
    cells = {c.case: c for c in vcc.cells(obs)}
    assert cells["legacy"].mean_s == pytest.approx(50.0) and cells["legacy"].lower_bound
    assert cells["legacy"].text().startswith("≥ 50.0") and "1/2 timed out" in cells["legacy"].text()
    assert not cells["ecn"].lower_bound and cells["ecn"].ci_low_s <= 11.0 <= cells["ecn"].ci_high_s
    t = vcc.closure_table(obs).iloc[0]
    # (50 - 12) / (50 - 11)
    assert t["closure"] == pytest.approx(38 / 39)
    assert t["closure_bound"] == "lower" and t["legacy_censored"]
    assert t["closure_ci_low"] <= t["closure"] <= t["closure_ci_high"]


def test_vcc_no_better_than_legacy_closes_nothing() -> None:
    rows = [(4, c, "ok", v) for c, vals in {"ecn": [10, 11, 12], "legacy": [30, 31, 32], "vcc": [30, 32, 31]}.items()
            for v in vals]  # fmt: skip
    df, specs = _runs(rows)
    t = vcc.closure_table(vcc.observations(vcc.prepare(df, specs))).iloc[0]
    assert t["closure"] == pytest.approx(0.0) and t["closure_bound"] == "exact"
    assert t["closure_ci_low"] < 0.2


def test_needs_all_three_cases() -> None:
    df, _ = _runs([(0, "ecn", "ok", 1.0), (0, "vcc", "ok", 1.0)])
    assert not vcc.applies([vcc.PAIRS_KEY, "case"], df)
    assert not vcc.applies(["case"], df)


class _Store:
    """The one query ``fig_backlog`` makes: a run's backlog per sampling round."""

    def query(self, sql: str, params: list[object]) -> pd.DataFrame:
        return pd.DataFrame({"t": [0.0, 0.1, 0.2], "b": [1_000.0, 40_000.0, 20_000.0]})


def test_backlog_figure_draws_with_the_plan_of_the_spec(tmp_path) -> None:  # noqa: ANN001
    # the figure reads the bottleneck's RED thresholds from the network plan when it draws, not only
    # when types are checked (a NameError here stopped re-rendering seed 002's committed reports)
    runs = pd.DataFrame([{"run_id": f"r{c}", vcc.PAIRS_KEY: 4, "case": c, "status": "ok", "rep": 1} for c in vcc.CASES])
    out = vcc.fig_backlog(_Store(), runs, _spec(180), tmp_path / "backlog.png")
    assert out == tmp_path / "backlog.png" and out.stat().st_size > 0
