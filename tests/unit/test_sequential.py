"""The sequential design of ``run --until-decided``: its boundaries against published values, and a
simulation of 10,000 null comparisons (vectorised) showing the family-wise false-positive rate of
the whole sequence of looks holds at alpha, where testing at 5 % at every look does not."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from shufflelab import sequential as Q
from shufflelab.stats import welch_t


def test_boundaries_match_the_published_lan_demets_values() -> None:
    """Five equally spaced looks, two-sided alpha = 0.05 (gsDesign's sfLDOF / sfLDPocock)."""
    t = [0.2, 0.4, 0.6, 0.8, 1.0]
    assert Q.boundaries(t, 0.05, "obf") == pytest.approx([4.8769, 3.3569, 2.6803, 2.2898, 2.0310], abs=2e-4)
    assert Q.boundaries(t, 0.05, "pocock") == pytest.approx([2.4380, 2.4268, 2.4101, 2.3966, 2.3859], abs=2e-4)


def test_a_design_refuses_a_cap_below_its_first_look() -> None:
    with pytest.raises(ValueError, match="--max-reps 2 is below the first look"):
        Q.Design(3, 2)


@pytest.mark.parametrize("spending", Q.SPENDING)
def test_ten_thousand_null_comparisons_keep_the_stated_false_positive_rate(spending: str) -> None:
    """Job times with no difference (normal, and lognormal like job times), n = 3..10 runs a side,
    Welch's test at every look at the design's nominal level: rejected at any look in at most
    alpha of them (+3 standard errors of the simulation); at 5 % every look, far more."""
    design = Q.Design(3, 10, 0.05, spending)
    alphas = design.nominal_alphas()
    rng = np.random.default_rng(20261128)
    m = 10_000
    se = (0.05 * 0.95 / m) ** 0.5
    for draw in (lambda: rng.normal(20.0, 2.0, (m, 10)), lambda: 20.0 * rng.lognormal(0.0, 0.15, (m, 10))):
        base, scen = draw(), draw()
        sequential, naive = np.zeros(m, bool), np.zeros(m, bool)
        for k, n in enumerate(design.looks):
            d, s, df = welch_t(base[:, :n], scen[:, :n])
            p = 2 * sps.t.sf(np.abs(d / s), df)
            sequential |= p < alphas[k]
            naive |= p < 0.05
        assert sequential.mean() <= 0.05 + 3 * se
        assert naive.mean() > 0.10  # peeking without a design: more than twice the stated rate
