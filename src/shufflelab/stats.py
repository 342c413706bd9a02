"""Statistics for repeated runs: mean, standard deviation, 95 % confidence intervals, comparisons.

Pure functions over sequences of floats. Confidence intervals of a mean use Student's t. A
comparison of two sets of runs (e.g. job time with / without cross traffic) is ONE inference:
Welch's t-test (unequal variances) of "treatment mean = rho x baseline mean", whose p-value at
rho = 1 is the reported p, and whose inversion over rho (Fieller's method with the Welch-
Satterthwaite degrees of freedom) is the reported interval of the ratio of means. The interval
excludes 1 exactly when p < 1 - confidence. Below ``MIN_N`` runs on either side neither an
interval nor a p-value is given (see docs/design.md, "Statistics and reports").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

MIN_N = 3  # fewer runs than this on a side: no interval, no test, no verdict


def _finite(values: Sequence[float | None]) -> np.ndarray:
    xs = np.asarray([np.nan if v is None else v for v in values], dtype=float)
    kept: np.ndarray = xs[np.isfinite(xs)]
    return kept


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

    def has_interval(self, min_n: int = MIN_N) -> bool:
        """Whether the interval is worth showing: at least ``min_n`` runs and a finite interval."""
        return self.n >= min_n and math.isfinite(self.ci_low) and math.isfinite(self.ci_high)

    def ci_text(self, digits: int = 1, min_n: int = MIN_N) -> str:
        """The 95 % interval as text, or why there is none."""
        if self.n == 0:
            return "no runs"
        if self.n == 1:
            return "n = 1, no interval"
        if self.n < min_n:
            return f"too few runs for an interval (n = {self.n}, need {min_n})"
        if not self.has_interval(min_n):
            return "no interval"
        return f"[{self.ci_low:.{digits}f}, {self.ci_high:.{digits}f}]"


def summarize(values: Sequence[float | None], confidence: float = 0.95) -> Summary:
    """n, mean, sample σ and the t-based confidence interval of the mean (None and NaN are skipped)."""
    xs = _finite(values)
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
    """``treatment`` relative to ``baseline``: ratio of means, its Welch/Fieller interval, Welch's p."""

    n_baseline: int
    n_treatment: int
    ratio: float
    ratio_ci_low: float  # nan when either side has fewer than min_n runs (or no spread at all)
    ratio_ci_high: float  # inf when the data cannot bound the ratio from above
    p_value: float  # Welch's two-sided t-test of equal means; nan like the interval
    confidence: float = 0.95
    min_n: int = MIN_N

    @property
    def percent_change(self) -> float:
        return (self.ratio - 1.0) * 100.0

    @property
    def too_few(self) -> bool:
        return min(self.n_baseline, self.n_treatment) < self.min_n

    @property
    def has_interval(self) -> bool:
        return not self.too_few and not math.isnan(self.ratio_ci_low)

    @property
    def constant(self) -> bool:
        """Enough runs a side, but none varies from another on either side: Welch's test is
        undefined and more runs of the same would not change that (a deterministic measurement)."""
        return not self.too_few and math.isfinite(self.ratio) and math.isnan(self.ratio_ci_low)

    @property
    def significant(self) -> bool:
        """The ratio differs from 1 at level 1 - confidence (the interval excludes 1, p < alpha)."""
        return self.has_interval and self.p_value < 1 - self.confidence

    def ci_text(self, digits: int = 2) -> str:
        """The interval as text, or why there is none."""
        n = f"{self.n_baseline}/{self.n_treatment}"
        if min(self.n_baseline, self.n_treatment) == 0:
            return f"no runs on a side (n = {n})"
        if min(self.n_baseline, self.n_treatment) == 1:
            return f"n = {n}, no interval"
        if self.too_few:
            return f"too few runs for an interval (n = {n}, need {self.min_n} per side)"
        if math.isnan(self.ratio_ci_low):
            return "no interval (no run-to-run variation)"
        hi = "unbounded" if math.isinf(self.ratio_ci_high) else f"{self.ratio_ci_high:.{digits}f}"
        return f"[{self.ratio_ci_low:.{digits}f}, {hi}]"


def _welch_p(ma: float, va: float, na: int, mb: float, vb: float, nb: int, rho: float) -> float:
    """Two-sided p of Welch's test of mean_b = rho * mean_a (va, vb: squared standard errors)."""
    se2 = vb + rho * rho * va
    diff = mb - rho * ma
    if se2 <= 0:
        return 1.0 if diff == 0 else 0.0
    den = (vb * vb / (nb - 1) if vb > 0 else 0.0) + (rho**4 * va * va / (na - 1) if va > 0 else 0.0)
    df = se2 * se2 / den
    return float(2 * sps.t.sf(abs(diff) / math.sqrt(se2), df))


def compare(
    baseline: Sequence[float | None],
    treatment: Sequence[float | None],
    confidence: float = 0.95,
    min_n: int = MIN_N,
) -> Comparison:
    """Ratio mean(treatment) / mean(baseline) with the interval of the Welch test inverted over
    the ratio, and Welch's p (module doc). None/NaN values are skipped; fewer than ``min_n``
    (at least 2) runs on either side give the ratio only."""
    a, b = _finite(baseline), _finite(treatment)
    na, nb = int(a.size), int(b.size)
    min_n = max(2, min_n)
    nan = float("nan")
    if na == 0 or nb == 0 or a.mean() <= 0 or b.mean() < 0:
        return Comparison(na, nb, nan, nan, nan, nan, confidence, min_n)
    ma, mb = float(a.mean()), float(b.mean())
    ratio = mb / ma
    if min(na, nb) < min_n:
        return Comparison(na, nb, ratio, nan, nan, nan, confidence, min_n)
    va, vb = float(a.var(ddof=1)) / na, float(b.var(ddof=1)) / nb
    if va == 0 and vb == 0:
        return Comparison(na, nb, ratio, nan, nan, nan, confidence, min_n)
    alpha = 1 - confidence

    def f(rho: float) -> float:  # >= 0: rho is not rejected (inside the interval)
        return _welch_p(ma, va, na, mb, vb, nb, rho) - alpha

    def root(inside: float, outside: float) -> float:
        return float(optimize.brentq(f, min(inside, outside), max(inside, outside), xtol=1e-12, rtol=1e-10))

    p = f(1.0) + alpha
    # Each bound is searched between a point inside and a point outside the interval; 1 is used as
    # one of them whenever it lies on that side of the ratio, so "1 inside" and "p >= alpha" agree.
    inside = ratio
    if ratio < 1.0 and f(1.0) < 0:
        hi = root(ratio, 1.0)
    else:
        if ratio < 1.0:
            inside = 1.0
        hi = math.inf
        step = max(inside, 1e-9)
        for _ in range(80):
            step *= 2
            if f(step) < 0:
                hi = root(inside, step)
                break
            inside = step
    inside = ratio
    if ratio > 1.0 and f(1.0) < 0:
        lo = root(ratio, 1.0)
    else:
        if ratio > 1.0:
            inside = 1.0
        lo = root(inside, 0.0) if f(0.0) < 0 else 0.0
    return Comparison(na, nb, ratio, lo, hi, p, confidence, min_n)


@dataclass(frozen=True)
class Difference:
    """``treatment`` minus ``baseline``: difference of means with Welch's t interval (unequal variances,
    Welch-Satterthwaite degrees of freedom); the interval is nan below ``min_n`` runs a side."""

    n_baseline: int
    n_treatment: int
    delta: float
    ci_low: float
    ci_high: float
    se: float  # standard error of the difference
    df: float  # Welch-Satterthwaite degrees of freedom
    confidence: float = 0.95

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.ci_low) and math.isfinite(self.ci_high)

    @property
    def above_zero(self) -> bool:
        """Significantly positive at level 1 - confidence (two-sided)."""
        return self.has_interval and self.ci_low > 0

    @property
    def below_zero(self) -> bool:
        return self.has_interval and self.ci_high < 0

    def text(self, digits: int = 1, unit: str = " s") -> str:
        if not self.has_interval:
            return f"{self.delta:+.{digits}f}{unit} (no interval)"
        return f"{self.delta:+.{digits}f}{unit} [{self.ci_low:+.{digits}f}, {self.ci_high:+.{digits}f}]"


def welch_t(baseline: np.ndarray, treatment: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Welch's statistic over the last axis (so 10,000 simulated comparisons are one call): the
    difference of means, its standard error and the Welch-Satterthwaite degrees of freedom."""
    na, nb = baseline.shape[-1], treatment.shape[-1]
    va = baseline.var(axis=-1, ddof=1) / na
    vb = treatment.var(axis=-1, ddof=1) / nb
    se2 = va + vb
    with np.errstate(divide="ignore", invalid="ignore"):
        df = se2 * se2 / (va * va / (na - 1) + vb * vb / (nb - 1))
    return treatment.mean(axis=-1) - baseline.mean(axis=-1), np.sqrt(se2), df


def difference(
    baseline: Sequence[float | None], treatment: Sequence[float | None], confidence: float = 0.95, min_n: int = MIN_N
) -> Difference:
    """Difference of means (treatment - baseline) and Welch's t interval at ``confidence``; None/NaN
    skipped; fewer than ``min_n`` runs a side, or no spread at all: the difference without interval."""
    a, b = _finite(baseline), _finite(treatment)
    na, nb = int(a.size), int(b.size)
    nan = float("nan")
    if na == 0 or nb == 0:
        return Difference(na, nb, nan, nan, nan, nan, nan, confidence)
    if min(na, nb) < max(2, min_n):
        return Difference(na, nb, float(b.mean() - a.mean()), nan, nan, nan, nan, confidence)
    d, se, df = (float(x) for x in welch_t(a, b))
    if not se > 0:
        return Difference(na, nb, d, nan, nan, 0.0, nan, confidence)
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * se
    return Difference(na, nb, d, d - half, d + half, se, df, confidence)
