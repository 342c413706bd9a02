"""Statistics for repeated runs: mean, standard deviation, 95 % confidence intervals, comparisons.

Pure functions over sequences of floats. Confidence intervals of a mean use Student's t; the
ratio of two means (e.g. job time with / without cross traffic) uses a seeded percentile bootstrap,
and the difference is tested with Welch's t-test (unequal variances).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    sd: float  # sample standard deviation (ddof=1); nan for n < 2
    ci_low: float  # 95 % CI of the mean; nan for n < 2
    ci_high: float

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2


def summarize(values: Sequence[float], confidence: float = 0.95) -> Summary:
    """n, mean, sample σ and the t-based confidence interval of the mean."""
    xs = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    n = int(xs.size)
    if n == 0:
        nan = float("nan")
        return Summary(0, nan, nan, nan, nan)
    mean = float(xs.mean())
    if n < 2:
        return Summary(1, mean, float("nan"), float("nan"), float("nan"))
    sd = float(xs.std(ddof=1))
    half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return Summary(n, mean, sd, mean - half, mean + half)


@dataclass(frozen=True)
class Comparison:
    """``treatment`` relative to ``baseline``: ratio of means with a bootstrap CI, Welch p-value."""

    n_baseline: int
    n_treatment: int
    ratio: float
    ratio_ci_low: float
    ratio_ci_high: float
    p_value: float  # Welch's two-sided t-test; nan when either side has n < 2

    @property
    def percent_change(self) -> float:
        return (self.ratio - 1.0) * 100.0


def compare(
    baseline: Sequence[float],
    treatment: Sequence[float],
    confidence: float = 0.95,
    n_boot: int = 10_000,
    seed: int = 0,
) -> Comparison:
    """Ratio mean(treatment)/mean(baseline) with a seeded percentile-bootstrap CI."""
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(treatment, dtype=float)
    if a.size == 0 or b.size == 0 or a.mean() == 0:
        nan = float("nan")
        return Comparison(int(a.size), int(b.size), nan, nan, nan, nan)
    ratio = float(b.mean() / a.mean())
    lo = hi = float("nan")
    if a.size >= 2 and b.size >= 2:
        rng = np.random.default_rng(seed)
        ra = rng.choice(a, size=(n_boot, a.size), replace=True).mean(axis=1)
        rb = rng.choice(b, size=(n_boot, b.size), replace=True).mean(axis=1)
        ratios = rb / ra
        alpha = (1 - confidence) / 2
        lo, hi = (float(x) for x in np.quantile(ratios, [alpha, 1 - alpha]))
    p = float("nan")
    if a.size >= 2 and b.size >= 2 and (a.std() > 0 or b.std() > 0):
        p = float(sps.ttest_ind(b, a, equal_var=False).pvalue)
    return Comparison(int(a.size), int(b.size), ratio, lo, hi, p)
