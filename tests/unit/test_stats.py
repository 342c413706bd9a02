from __future__ import annotations

import math

import pytest

from shufflelab import stats


def test_summary_matches_textbook_values() -> None:
    s = stats.summarize([10.0, 12.0, 14.0])
    assert s.n == 3 and s.mean == 12.0 and s.sd == pytest.approx(2.0)
    # t(0.975, 2) = 4.3027; half width = 4.3027 * 2 / sqrt(3)
    assert s.half_width == pytest.approx(4.3027 * 2 / math.sqrt(3), rel=1e-4)


def test_summary_small_samples() -> None:
    assert math.isnan(stats.summarize([]).mean)
    one = stats.summarize([5.0])
    assert one.mean == 5.0 and math.isnan(one.ci_low)
    assert stats.summarize([1.0, float("nan"), 3.0]).n == 2


def test_compare_ratio_ci_and_p() -> None:
    base = [100.0, 102.0, 98.0, 101.0, 99.0]
    slow = [150.0, 155.0, 148.0, 152.0, 151.0]
    c = stats.compare(base, slow)
    assert c.ratio == pytest.approx(151.2 / 100.0)
    assert c.ratio_ci_low < c.ratio < c.ratio_ci_high
    assert c.ratio_ci_low > 1.4 and c.ratio_ci_high < 1.6
    assert c.p_value < 1e-5
    assert c.percent_change == pytest.approx(51.2)
    same = stats.compare(base, [101.0, 99.0, 100.0, 102.0, 98.0])
    assert same.ratio_ci_low < 1.0 < same.ratio_ci_high and same.p_value > 0.5


def test_compare_is_deterministic_for_a_seed() -> None:
    a, b = [1.0, 2.0, 3.0], [2.0, 4.0, 5.0]
    assert stats.compare(a, b, seed=3) == stats.compare(a, b, seed=3)
