"""The NDP report's policy table: the Oracle and Net-Aware's gap, from synthetic runs."""

from __future__ import annotations

import pandas as pd
import pytest

from shufflelab.ndp.report import policy_table


def runs(times: dict[str, list[float]], cond: str = "1") -> pd.DataFrame:
    rows = [{"storage_cores": cond, "policy": p, "query_s": t} for p, ts in times.items() for t in ts]
    return pd.DataFrame(rows)


def test_oracle_is_the_best_static_mean_and_gap_is_relative_to_it() -> None:
    t = policy_table(
        runs(
            {"none": [30, 34], "filter": [20, 22], "filter+project": [12, 15], "full": [13, 13], "net-aware": [13.65]}
        ),
        ["storage_cores"],
    )
    row = t.iloc[0]
    assert row["oracle"] == "full"  # 13.0 s beats filter+project (13.5 s) though one f+p run was faster
    assert row["gap_pct"] == pytest.approx(5.0)
    assert row["n"] == 1


def test_no_oracle_until_every_static_policy_is_measured() -> None:
    t = policy_table(runs({"none": [30], "filter": [20], "net-aware": [10]}), ["storage_cores"])
    assert "oracle" not in t.columns or pd.isna(t.iloc[0].get("oracle"))
    assert "gap_pct" not in t.columns or pd.isna(t.iloc[0].get("gap_pct"))


def test_choice_gap_prices_the_decision_not_the_noise() -> None:
    times = {"none": [30.0], "filter": [20.0], "filter+project": [12.0], "full": [13.0], "net-aware": [11.0]}
    t = policy_table(runs(times), ["storage_cores"], {("1",): "full"})
    row = t.iloc[0]
    assert row["oracle"] == "filter+project"
    assert row["gap_pct"] == pytest.approx(100 * (11 / 12 - 1), abs=0.05)  # lucky run: looks better
    assert row["na_chose"] == "full"
    assert row["choice_gap_pct"] == pytest.approx(100 * (13 / 12 - 1), abs=0.05)  # the choice cost 8 %


def test_policies_that_push_the_same_operators_are_one_plan_for_the_choice_gap() -> None:
    # Q19: full cannot push the aggregate above the join, so it pushes what filter+project pushes
    times = {"none": [30.0], "filter": [20.0], "filter+project": [10.0, 12.0], "full": [13.0], "net-aware": [12.0]}
    df = runs(times)
    df["plan"] = df["policy"].map(
        {"none": "", "filter": "filter", "filter+project": "filter,project", "full": "filter,project"}
    )
    row = policy_table(df, ["storage_cores"], {("1",): "full"}).iloc[0]
    assert row["oracle"] == "filter+project"
    assert row["same_plan"] == "full=filter+project"
    assert row["choice_gap_pct"] == pytest.approx(0.0)  # the same plan: no decision cost
    assert row["gap_plan_pct"] == pytest.approx(100 * (12 / (35 / 3) - 1), abs=0.05)  # vs 10, 12, 13 pooled
