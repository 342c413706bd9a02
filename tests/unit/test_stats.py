from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

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


def test_compare_is_deterministic() -> None:
    a, b = [1.0, 2.0, 3.0], [2.0, 4.0, 5.0]
    assert stats.compare(a, b) == stats.compare(a, b)


def test_interval_and_test_agree_on_a_small_sample() -> None:
    """Regression: with 3 runs a side the percentile bootstrap gave [1.006, 1.294] (excludes 1) next
    to Welch p = 0.20. One inference now: the interval is Welch's test inverted, so it contains 1."""
    c = stats.compare([10.4, 11.0, 9.9], [13.5, 10.5, 12.0])
    assert c.p_value == pytest.approx(sps.ttest_ind([13.5, 10.5, 12.0], [10.4, 11.0, 9.9], equal_var=False).pvalue)
    assert c.p_value > 0.05 and c.ratio_ci_low < 1.0 < c.ratio_ci_high
    assert not c.significant


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # scipy, on a side with no spread
@settings(max_examples=300, deadline=None)
@given(
    a=st.lists(st.floats(1.0, 1000.0), min_size=3, max_size=10),
    b=st.lists(st.floats(1.0, 1000.0), min_size=3, max_size=10),
)
def test_the_interval_is_the_welch_test_inverted(a: list[float], b: list[float]) -> None:
    """Property: the interval contains 1 exactly when Welch's p >= 0.05, the ratio lies inside it,
    and at each finite bound Welch's test of mean(b) = bound x mean(a) (scipy, on the scaled
    baseline) has p = 0.05."""
    assume(max(np.std(a), np.std(b)) > 1e-6 * max(np.mean(a), np.mean(b)))
    c = stats.compare(a, b)
    welch = sps.ttest_ind(b, a, equal_var=False).pvalue
    assert c.p_value == pytest.approx(welch, rel=1e-9, abs=1e-12)
    assert (c.ratio_ci_low <= 1.0 <= c.ratio_ci_high) == (c.p_value >= 0.05)
    assert c.ratio_ci_low <= c.ratio <= c.ratio_ci_high
    for bound in (c.ratio_ci_low, c.ratio_ci_high):
        if 0 < bound < math.inf:
            p = sps.ttest_ind(b, [bound * x for x in a], equal_var=False).pvalue
            assert p == pytest.approx(0.05, abs=1e-6)


def test_no_interval_below_the_minimum_n() -> None:
    """Regression: n = 1 gave a zero-length interval in the figure, n = 2 a bootstrap interval
    excluding 1 next to Welch p = 0.38. Below MIN_N (3) a side: the ratio only, and the text says why."""
    one = stats.compare([300.0], [600.0])
    assert one.ratio == 2.0 and math.isnan(one.ratio_ci_low) and math.isnan(one.p_value)
    assert one.ci_text() == "n = 1/1, no interval"
    two = stats.compare([300.0, 310.0], [290.0, 400.0])
    assert math.isnan(two.ratio_ci_low) and math.isnan(two.p_value) and not two.significant
    assert two.ci_text().startswith("too few runs for an interval (n = 2/2")
    assert stats.summarize([5.0]).ci_text() == "n = 1, no interval"
    assert stats.summarize([5.0, 6.0]).ci_text().startswith("too few runs for an interval (n = 2")
    assert stats.summarize([5.0, 6.0, 7.0]).ci_text() == "[3.5, 8.5]"


def test_compare_skips_missing_values() -> None:
    c = stats.compare([10.0, float("nan"), 11.0, 9.0, None], [20.0, 21.0, 19.0])  # type: ignore[list-item]
    assert c.n_baseline == 3 and c.ratio == pytest.approx(2.0) and c.significant
