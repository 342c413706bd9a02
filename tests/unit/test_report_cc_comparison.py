"""The report's comparison of congestion controls at each level of the other varied values: ratios,
Holm-adjusted p, and a ranking that says which differences the runs support."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
import synthetic_store

from shufflelab import report
from shufflelab.report.data import CC_KEY, UDP_KEY, _holm, cc_comparison_table


def _data(times: dict[tuple[str, int], list[float]], failed: int = 0) -> Any:
    rows = [{CC_KEY: cc, UDP_KEY: udp, "status": "ok", "job_time_s": t} for (cc, udp), ts in times.items() for t in ts]
    rows += [{CC_KEY: "reno", UDP_KEY: 0, "status": "failed", "job_time_s": 1.0}] * failed
    return SimpleNamespace(keys=[CC_KEY, UDP_KEY], runs=pd.DataFrame(rows))


def test_holm_adjusts_step_down_and_keeps_nan() -> None:
    assert _holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    out = _holm([0.2, float("nan"), 0.01])
    assert out[0] == pytest.approx(0.2) and out[2] == pytest.approx(0.02) and out[1] != out[1]


def test_ranking_per_level_with_significance() -> None:
    fast, mid, slow = [10.0, 10.2, 9.9, 10.1, 10.0], [10.1, 10.3, 9.8, 10.0, 10.2], [20.0, 21.0, 19.5, 20.5, 20.2]
    d = _data(
        {
            ("cubic", 0): mid,
            ("reno", 0): slow,
            ("dctcp", 0): fast,
            ("cubic", 100): slow,
            ("reno", 100): slow,
            ("dctcp", 100): slow,
        },
        failed=2,  # a run that did not finish is not a job time
    )
    t = cc_comparison_table(d)
    assert t is not None and list(t.columns[:3]) == [UDP_KEY, "faster", "slower"]
    at0 = t[t[UDP_KEY] == 0]
    assert len(at0) == 3 and set(at0["ranking"]) == {"dctcp ≈ cubic < reno"}
    pair = at0[(at0["faster"] == "cubic") & (at0["slower"] == "reno")].iloc[0]
    assert pair["verdict"] == "differs" and pair["job_ratio"] == pytest.approx(sum(slow) / sum(mid))
    assert pair["n"] == "5/5" and float(pair["p_holm"]) >= float(pair["p_welch"])
    at100 = t[t[UDP_KEY] == 100]
    assert (at100["verdict"] == "no significant difference").all()
    assert at100["ranking"].iloc[0].count(" ≈ ") == 2


def test_a_pair_apart_is_named_when_the_chain_hides_it() -> None:
    d = _data({("a", 0): [10, 10.4, 9.8, 10.2], ("b", 0): [11, 12.5, 10.2, 11.8], ("c", 0): [12.4, 12.8, 12.1, 12.6]})
    t = cc_comparison_table(d)
    assert t is not None
    ranking = t["ranking"].iloc[0]
    assert ranking.startswith("a ") and ranking.endswith("(a < c)") and "a ≈ b" in ranking, ranking


def test_too_few_runs_give_no_verdict_and_one_cc_no_table() -> None:
    t = cc_comparison_table(_data({("cubic", 0): [10.0, 11.0], ("reno", 0): [12.0, 12.5]}))
    assert t is not None and t["verdict"].iloc[0] == "too few runs for a verdict" and t["p_holm"].iloc[0] == "–"
    assert t["ranking"].iloc[0] == "cubic, reno by mean; too few runs to test"
    assert cc_comparison_table(_data({("cubic", 0): [10.0, 11.0, 12.0]})) is None


@pytest.mark.parametrize("n", [1, 3])
def test_the_section_in_a_whole_report(tmp_path: Path, n: int) -> None:
    db = synthetic_store.build(tmp_path / "s.duckdb", n, ccs=("cubic", "reno"))
    md = report.write(db, tmp_path / "out").markdown.read_text()
    section = md.split("## Congestion controls compared at each level", 1)[1].split("\n## ", 1)[0]
    assert not re.search(r"\b(nan|inf)\b", section, re.IGNORECASE), section
    if n == 1:
        assert "n = 1/1, no interval" in section and "by mean; too few runs to test" in section
        assert "≈" not in section.split("Below 3 runs", 1)[1]  # no untested '≈' in the table
    else:
        assert re.search(r"\[\d\.\d\d, \d\.\d\d\]", section) and "too few" not in section.split("Below 3", 1)[1]
