"""Repetitions until decided: a group-sequential design for the starvation verdict (pure functions).

``shufflelab run SPEC --until-decided --max-reps N`` looks at every comparison after each
interleaved repetition from n = 3 (or the spec's repetitions) to N runs a side. Looking after every
repetition and testing at 5 % each time would declare far more than 5 % of null comparisons
different; instead each look k tests at a *nominal* level alpha_k from an **alpha-spending
function** (Lan & DeMets 1983): the cumulative type-I error spent by information fraction
t = n / N is, each side spending alpha/2,

- Pocock type (default): alpha/2 * ln(1 + (e - 1) t) a side -- spends early, so a clear effect is decided
  at the first looks;
- O'Brien-Fleming type: 2 - 2 Phi(z_{1-alpha/4} / sqrt(t)) a side -- spends almost nothing
  early, the last look close to alpha.

The two-sided boundaries c_k on the z scale are found look by look by recursive numerical
integration over the continuation region (Armitage, McPherson & Rowe 1969; Jennison & Turnbull
2000, ch. 19): P(first crossing at look k | H0) = spend(t_k) - spend(t_{k-1}). Each look's tests
(Welch's intervals of the diagnosis and the attribution) then run at alpha_k = 2 (1 - Phi(c_k)),
Welch's t at its own degrees of freedom -- the usual nominal-level use of a z-scale design with
t-tests; ``tests/unit/test_sequential.py`` simulates 10,000 null comparisons and checks the
family-wise error of the whole sequence stays at alpha (and that naive peeking does not).

Which looks were taken is not stored: a comparison's decision at look n is recomputed from its
first n repetitions, so a resumed or re-run experiment reaches the same decisions (the design --
spending function, alpha, first and last look -- is stored with the results).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import optimize
from scipy import stats as sps

if TYPE_CHECKING:
    from shufflelab.diagnose import Diagnosis

SPENDING = ("pocock", "obf")
NAMES = {"pocock": "Pocock-type", "obf": "O'Brien-Fleming-type"}


def spent(t: float | np.ndarray, alpha: float, kind: str) -> np.ndarray:
    """Cumulative two-sided type-I error spent by information fraction ``t`` (0 < t <= 1): each side
    spends alpha/2 by the spending function (the convention of gsDesign and ldbounds)."""
    t = np.asarray(t, dtype=float)
    side = alpha / 2
    if kind == "pocock":
        return np.asarray(2 * side * np.log(1 + (math.e - 1) * t))
    if kind == "obf":
        return np.asarray(2 * (2 - 2 * sps.norm.cdf(sps.norm.ppf(1 - side / 2) / np.sqrt(t))))
    raise ValueError(f"spending function {kind!r}: expected one of {', '.join(SPENDING)}")


def boundaries(fractions: Sequence[float], alpha: float = 0.05, kind: str = "pocock", grid: int = 2001) -> np.ndarray:
    """Two-sided z boundaries c_1..c_K at increasing information ``fractions`` (the last 1)."""
    t = np.asarray(fractions, dtype=float)
    if t.size == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise ValueError("information fractions must increase within (0, 1]")
    cum = spent(t, alpha, kind)
    out = np.empty(t.size)
    out[0] = sps.norm.ppf(1 - cum[0] / 2)
    # density of the score S_1 = Z_1 sqrt(t_1) on the continuation region, as grid values
    lim = out[0] * math.sqrt(t[0])
    s = np.linspace(-lim, lim, grid)
    f = sps.norm.pdf(s, scale=math.sqrt(t[0]))
    for k in range(1, t.size):
        w = _weights(s)
        sd = math.sqrt(t[k] - t[k - 1])
        target = cum[k] - cum[k - 1]

        out[k] = optimize.brentq(_excess, 0.5, 12.0, args=(s, w * f, sd, math.sqrt(t[k]), target), xtol=1e-10)
        lim = out[k] * math.sqrt(t[k])
        s_new = np.linspace(-lim, lim, grid)
        f = (w * f) @ sps.norm.pdf((s_new[None, :] - s[:, None]) / sd) / sd
        s = s_new
    return out


def _excess(c: float, s: np.ndarray, mass: np.ndarray, sd: float, sqrt_t: float, target: float) -> float:
    """P(first crossing at this look with boundary c) - the error this look may spend."""
    b = c * sqrt_t
    p_out = sps.norm.sf((b - s) / sd) + sps.norm.cdf((-b - s) / sd)
    return float(np.sum(mass * p_out)) - target


def _weights(s: np.ndarray) -> np.ndarray:
    """Simpson's weights on an evenly spaced grid of odd length."""
    h = s[1] - s[0]
    w = np.ones(s.size)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w * h / 3


@dataclass(frozen=True)
class Design:
    """Looks at n = first_n, first_n + 1, ..., max_n runs a side; two-sided family-wise ``alpha``."""

    first_n: int
    max_n: int
    alpha: float = 0.05
    spending: str = "pocock"

    def __post_init__(self) -> None:
        if self.first_n < 2:
            raise ValueError(f"first look at n = {self.first_n}: a look needs at least 2 runs a side")
        if self.max_n < self.first_n:
            raise ValueError(f"--max-reps {self.max_n} is below the first look (n = {self.first_n})")
        if self.spending not in SPENDING:
            raise ValueError(f"spending function {self.spending!r}: expected one of {', '.join(SPENDING)}")

    @property
    def looks(self) -> list[int]:
        return list(range(self.first_n, self.max_n + 1))

    def nominal_alphas(self) -> np.ndarray:
        """Each look's two-sided nominal level, in the order of ``looks``."""
        return np.array(_nominal_alphas(self))

    def nominal_alpha(self, n: int) -> float:
        if n not in self.looks:
            raise ValueError(f"n = {n} is not a look of this design ({self.first_n}..{self.max_n})")
        return float(self.nominal_alphas()[n - self.first_n])

    def describe(self) -> str:
        return (
            f"group-sequential design, Lan-DeMets {NAMES[self.spending]} alpha spending, two-sided alpha = "
            f"{self.alpha:g} over looks at n = {self.first_n}..{self.max_n} runs a side (one look per repetition)"
        )


@functools.lru_cache(maxsize=64)
def _nominal_alphas(design: Design) -> tuple[float, ...]:
    """A design's nominal levels, computed once per design (the recursive integration takes about
    0.3 s, and every comparison at every look asks for them)."""
    c = boundaries([n / design.max_n for n in design.looks], design.alpha, design.spending)
    return tuple(float(a) for a in 2 * sps.norm.sf(c))


# -- over a results store -------------------------------------------------------------------------
DECIDED = ("starved", "not starved", "mixed")
TABLE = "sequential_design"


@dataclass
class Decision:
    """One comparison under the design: its verdict at the look where it was decided, or at the last
    look taken (``decided`` False: still open; ``look`` None: no look yet)."""

    scenario: str
    baseline: str
    look: int | None
    alpha: float
    verdict: str
    decided: bool
    diagnosis: Diagnosis | None  # at that look

    @property
    def labels(self) -> set[str]:
        """The scenarios whose repetitions this comparison needs."""
        return {self.scenario, self.baseline}


def decisions(db: object, design: Design) -> list[Decision]:
    """Each comparison's decision: looks n = first_n.. in order, each on the first n repetitions at the
    look's nominal level, stopping at the first decided verdict. A look is taken once both sides
    have n successful runs among their first n repetitions. The store is read through one
    connection (:func:`shufflelab.results.reading`)."""
    from shufflelab.results import reading

    with reading(db):  # type: ignore[arg-type]
        return _decisions(db, design)


def _decisions(db: object, design: Design) -> list[Decision]:
    from shufflelab import diagnose as dg

    alphas = design.nominal_alphas()
    out: dict[tuple[str, str], Decision] = {}
    for k, n in enumerate(design.looks):
        found = dg.diagnose_store(db, max_rep=n, alpha=float(alphas[k]), min_reps=design.first_n)
        if not out:
            out = {(d.scenario, d.baseline): Decision(d.scenario, d.baseline, None, float("nan"), "inconclusive",
                                                      False, None) for d in found}  # fmt: skip
        taken = False
        for d in found:
            cur = out[(d.scenario, d.baseline)]
            if cur.decided or min(d.n_baseline, d.n_scenario) < n:
                continue
            taken = True
            out[(d.scenario, d.baseline)] = Decision(
                d.scenario, d.baseline, n, float(alphas[k]), d.verdict, d.verdict in DECIDED, d
            )
        if not taken:
            # no open comparison has n successful runs among its first n repetitions: with fewer than
            # n among the first n, none can have n + 1 among the first n + 1 either
            break
    return list(out.values())


def read(db: object) -> tuple[list[Diagnosis], str | None]:
    """Every comparison's diagnosis as the report gives it: under a sequential design (``run
    --until-decided``) each at the look where it was decided, or the last look taken, at that look's
    nominal level, with the design's line; otherwise on all runs at 95 % (and no line). The store is
    read through one connection (:func:`shufflelab.results.reading`)."""
    from shufflelab.results import Store, reading

    with reading(db):  # type: ignore[arg-type]
        return _read(db, load(Store(db)))  # type: ignore[arg-type]


def _read(db: object, design: Design | None) -> tuple[list[Diagnosis], str | None]:
    from shufflelab import diagnose as dg

    if design is None:
        return dg.diagnose_store(db), None
    found = decisions(db, design)
    out = [d.diagnosis for d in found if d.diagnosis is not None]
    seen = {(x.scenario, x.baseline) for x in out}
    out += [x for x in dg.diagnose_store(db) if (x.scenario, x.baseline) not in seen]  # no look yet: all runs
    return out, summary(design, found)


def save(store: object, design: Design) -> None:
    """Record the design with the results (the report names it and judges at its looks)."""
    with store.connect() as con:  # type: ignore[attr-defined]
        con.execute(f"CREATE OR REPLACE TABLE {TABLE} (spending VARCHAR, alpha DOUBLE, first_n INTEGER, max_n INTEGER)")
        con.execute(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?)",
                    [design.spending, design.alpha, design.first_n, design.max_n])  # fmt: skip


def load(store: object) -> Design | None:
    """The design a store's runs were taken under, or None (a fixed number of repetitions)."""
    tables = store.query("SELECT table_name FROM information_schema.tables")  # type: ignore[attr-defined]
    if TABLE not in set(tables["table_name"]):
        return None
    rows = store.query(f"SELECT * FROM {TABLE}")  # type: ignore[attr-defined]
    if rows.empty:
        return None
    row = rows.iloc[0]
    return Design(int(row["first_n"]), int(row["max_n"]), float(row["alpha"]), str(row["spending"]))


def summary(design: Design, found: list[Decision]) -> str:
    """One line for the report: the design and where each comparison stands."""
    decided = [d for d in found if d.decided]
    open_ = [d for d in found if not d.decided]
    parts = [f"{len(decided)} decided" + (f" (at n = {', '.join(str(d.look) for d in decided)})" if decided else "")]
    if open_:
        capped = [d for d in open_ if d.look == design.max_n]
        parts.append(f"{len(open_)} open ({len(capped)} at the cap of {design.max_n} runs a side)")
    return (
        f"Repetitions until decided: {design.describe()}; each look's intervals at its nominal level "
        f"(from {design.nominal_alphas()[0]:.3g} at n = {design.first_n} to {design.nominal_alphas()[-1]:.3g} "
        f"at n = {design.max_n}), so the whole sequence keeps a {design.alpha:g} false-positive rate; "
        + ", ".join(parts)
        + "."
    )
