"""Where a comparison's added job time went: waiting for data, or busy executors (CPU work and CPU
taken by others); the starvation verdict that follows from it (pure functions over the runs table).

**The split (critical path, at the tasks' mix).** Per run, with R the executors' task run time
(``executor_run_s``), F the tasks' fetch wait and U the tasks' CPU time (the diagnosis' CPU
measure), the job time J is split as

    J = J * F/R  (waiting)  +  J * (R - F)/R  (busy),   of which CPU work = J * U/R.

That is the critical path taken to look like the average task: a share F/R of it is blocked on
fetches, the rest runs. Idle executor slots and scheduler gaps (stage barriers waiting for the
slowest task, the driver's gaps) are charged to waiting and busy in the same proportion -- a slot
idles because the tasks it waits for were slow, and they were slow in that mix. "Busy" holds more
CPU work *and* CPU taken from the tasks by other processes (descheduled time, interrupt and system
time, GC): on one emulation host cross traffic costs the executors CPU whether or not it shares
their queue, and that cost is not starvation. Per executor slot instead (the slot-seconds of each
kind divided by the cores) would charge every idle slot to waiting, and idle slots also grow when
tasks are slowed by CPU contention (measured: starvation-preliminary's control, idle +5.2 s a
slot with fetch wait unchanged).

**Intervals.** Each part's added time (scenario mean - baseline mean) has Welch's t interval
(``stats.difference``). What more CPU work could explain at most is read from the CPU ratio's
upper bound (Welch's test inverted over the ratio, Fieller: ``stats.compare``) times the
baseline's CPU work on the critical path. The verdict's test is one Welch test of the per-run
difference waiting - busy (its added time = added waiting - added busy time).

**Verdict** (at level alpha, two-sided; at least ``min_reps`` runs a side):

- *not starved*: the job is shown less than ``tolerance`` slower (its ratio's interval ends below
  1 + tolerance: a non-inferiority bound, not a mere failure to find a slowdown); or it is
  slower and busy time is significantly the larger part (waiting - busy below 0), or the added
  waiting is shown smaller than ``tolerance`` x the baseline job time (its interval's upper end);
- *starved*: slower, waiting grew and waiting is significantly the larger part;
- *mixed*: slower, both parts grew significantly and neither is significantly the larger one;
- *inconclusive*: otherwise, with what would decide it (which measure, about how many more runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from shufflelab.document import signed
from shufflelab.stats import Comparison, Difference, compare, difference

VERDICTS = ("starved", "not starved", "mixed", "inconclusive")


@dataclass
class Attribution:
    """One comparison's added job time, split; every part in seconds of job time (scenario - baseline)."""

    verdict: str
    reasons: list[str]
    added: Difference  # job time
    waiting: Difference  # J * F/R
    busy: Difference  # J * (R - F)/R
    dominance: Difference  # waiting - busy, per run
    cpu: Comparison  # ratio of the CPU work on the critical path (J * U/R)
    cpu_base_s: float  # the baseline's mean CPU work on the critical path
    decide: str = ""  # inconclusive: what would decide it
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def cpu_at_most_s(self) -> float:
        """What more CPU work could explain at most: (the CPU ratio's upper bound - 1) x baseline CPU work."""
        if not self.cpu.has_interval:
            return float("nan")
        return max(0.0, self.cpu.ratio_ci_high - 1.0) * self.cpu_base_s

    @property
    def waiting_share(self) -> float:
        return self.waiting.delta / self.added.delta if self.added.delta > 0 else float("nan")

    @property
    def busy_share(self) -> float:
        return self.busy.delta / self.added.delta if self.added.delta > 0 else float("nan")

    def shares_text(self) -> str:
        if not math.isfinite(self.waiting_share):
            return "–"
        return f"waiting {self.waiting_share:.0%}, busy {self.busy_share:.0%}"


def split(runs: pd.DataFrame, cpu_col: str) -> pd.DataFrame | None:
    """Per run: job time, waiting, busy and CPU work on the critical path (seconds); None without
    the executors' run time (older stores or logs that lack it)."""
    need = ("job_time_s", "executor_run_s", "fetch_wait_s", cpu_col)
    if any(c not in runs.columns for c in need):
        return None
    j, r, f, u = (pd.to_numeric(runs[c], errors="coerce").to_numpy(dtype=float) for c in need)
    if not np.isfinite(r).all() or not (r > 0).all() or not np.isfinite(f).all():
        return None
    phi = np.clip(f / r, 0.0, 1.0)  # Spark counts fetch wait inside run time; clip rounding
    return pd.DataFrame({"job": j, "waiting": j * phi, "busy": j * (1 - phi), "cpu": j * np.clip(u / r, 0.0, None)})


def runs_needed(d: Difference, confidence: float) -> int | None:
    """Runs a side for ``d``'s interval to exclude 0 if the difference and spread stay as measured."""
    if not (math.isfinite(d.delta) and d.delta != 0 and math.isfinite(d.se) and d.se > 0):
        return None
    n = max(d.n_baseline, d.n_treatment)
    var_sum = d.se**2 * n  # s_b^2 + s_s^2 at equal n
    for m in range(n, 10_000):
        t = float(sps.t.ppf(0.5 + confidence / 2, max(1.0, d.df * (m - 1) / max(1, n - 1))))
        if t * math.sqrt(var_sum / m) < abs(d.delta):
            return m
    return None


def runs_to_bound(d: Difference, margin: float, confidence: float) -> int | None:
    """Runs a side for ``d``'s interval to end below ``margin`` (a non-inferiority bound, in the
    difference's unit) if the difference and spread stay as measured."""
    room = margin - d.delta
    if not (math.isfinite(room) and room > 0 and math.isfinite(d.se) and d.se > 0):
        return None
    n = max(d.n_baseline, d.n_treatment)
    var_sum = d.se**2 * n
    for m in range(n, 10_000):
        t = float(sps.t.ppf(0.5 + confidence / 2, max(1.0, d.df * (m - 1) / max(1, n - 1))))
        if t * math.sqrt(var_sum / m) < room:
            return m
    return None


def _job_decides(added: Difference, ratio: float, margin_s: float, confidence: float) -> str:
    """What closes an open job-time comparison, if the estimates stay as measured: the interval of
    the added job time ending below the tolerance (not starved) or excluding 0 (slower: then the
    attribution decides), whichever takes fewer runs."""
    slower = runs_needed(added, confidence) if added.delta > 0 else None
    bounded = runs_to_bound(added, margin_s, confidence)
    if bounded is not None and (slower is None or bounded <= slower):
        return f"the job time: {_about(bounded)} runs a side would show it less than the tolerance slower (not starved)"
    if slower is not None:
        return f"the job time: {_about(slower)} runs a side would show it slower if it stays x{ratio:.2f}"
    return "the job time"


def _about(n: int | None) -> str:
    return "more than 100" if n is None or n > 100 else f"about {n}"


def _what_decides(dominance: Difference, waiting: Difference, busy: Difference, confidence: float) -> str:
    """The nearer of the two ways an open attribution closes, if the estimates stay as measured:
    waiting - busy excluding 0 (starved / not starved), or every part that has not grown
    significantly doing so (mixed)."""
    n_dom = runs_needed(dominance, confidence)
    grow = [(name, p) for name, p in (("waiting", waiting), ("busy", busy)) if not p.above_zero]
    need = [runs_needed(p, confidence) if p.delta > 0 else None for _, p in grow]
    n_mix = None if any(n is None for n in need) else max(n for n in need if n is not None)
    dom = f"waiting - busy per run ({dominance.delta:+.1f} s now): {_about(n_dom)} runs a side"
    if n_mix is not None and (n_dom is None or n_mix < n_dom):
        names = " and ".join(name for name, _ in grow)
        return f"the {names} part's growth ({_about(n_mix)} runs a side would show it: mixed); or {dom}"
    return dom


def constant_text(base: Sequence[float], scen: Sequence[float], job: Comparison) -> str:
    """What a slowdown that does not vary from run to run is (``job.constant``): no test and no
    number of runs can say more of it."""
    return (
        f"job times do not vary from run to run ({job.n_baseline}/{job.n_treatment} runs: {float(np.mean(base)):.3g} s "
        f"vs {float(np.mean(scen)):.3g} s, a constant {signed(job.percent_change)} %): with no run-to-run variation "
        "Welch's test is undefined and more runs of the same would not change that -- a deterministic "
        "measurement (a simulated backend, or a clock coarser than the runs' spread), to be read as it is"
    )


def level_text(confidence: float) -> str:
    """'95 %', or '99.87 %' for a sequential look's level."""
    pct = confidence * 100
    return f"{pct:.0f} %" if abs(pct - round(pct)) < 1e-9 else f"{pct:.2f} %"


def attribute(
    base_runs: pd.DataFrame,
    scen_runs: pd.DataFrame,
    cpu_col: str,
    *,
    alpha: float = 0.05,
    tolerance: float = 0.10,
    min_reps: int = 3,
) -> Attribution | None:
    """The split and the verdict of one comparison (module doc); None when the runs lack the
    executors' run time (the diagnosis then keeps seed 001's strict verdict)."""
    b, s = split(base_runs, cpu_col), split(scen_runs, cpu_col)
    if b is None or s is None:
        return None
    conf = 1 - alpha
    lvl = level_text(conf)

    def diff(col: str) -> Difference:
        return difference(b[col].tolist(), s[col].tolist(), conf, min_reps)

    added, waiting, busy = diff("job"), diff("waiting"), diff("busy")
    dominance = difference((b["waiting"] - b["busy"]).tolist(), (s["waiting"] - s["busy"]).tolist(), conf, min_reps)
    job = compare(b["job"].tolist(), s["job"].tolist(), confidence=conf, min_n=min_reps)
    cpu = compare(b["cpu"].tolist(), s["cpu"].tolist(), confidence=conf, min_n=min_reps)
    cpu_base = float(b["cpu"].mean()) if len(b) else float("nan")
    base_job = float(b["job"].mean()) if len(b) else float("nan")
    att = Attribution("inconclusive", [], added, waiting, busy, dominance, cpu, cpu_base)
    n_b, n_s = len(b), len(s)
    if min(n_b, n_s) < max(2, min_reps):
        att.reasons.append(f"too few runs to attribute ({n_b}/{n_s}; need >= {max(2, min_reps)} a side)")
        att.decide = f"{max(2, min_reps) - min(n_b, n_s)} more run(s) on the short side"
        return att
    slower = job.significant and job.ratio_ci_low > 1.0
    parts = (
        f"added job time {added.text()} = waiting {waiting.text()} + busy {busy.text()} "
        f"({lvl} Welch intervals; {att.shares_text()})"
    )
    cpu_text = (
        f"more CPU work explains at most {att.cpu_at_most_s:.1f} s (CPU work on the critical path x{cpu.ratio:.2f}, "
        f"{lvl} CI {cpu.ci_text()}, of {cpu_base:.1f} s)"
        if cpu.has_interval
        else f"CPU work on the critical path x{cpu.ratio:.2f} ({cpu.ci_text()})"
    )
    small_wait = waiting.has_interval and waiting.ci_high < tolerance * base_job
    if not slower:
        bound = 1 + tolerance
        if job.has_interval and job.ratio_ci_high < bound:
            att.verdict = "not starved"
            att.reasons.append(
                f"job shown less than {tolerance:.0%} slower: x{job.ratio:.2f} ({lvl} CI {job.ci_text()}, "
                f"upper end below x{bound:g})"
            )
        elif job.constant and job.ratio < bound:
            att.verdict = "not starved"
            att.reasons.append(constant_text(b["job"].tolist(), s["job"].tolist(), job))
        elif job.constant:
            att.decide = "no number of runs: the job times do not vary"
            att.reasons.append(constant_text(b["job"].tolist(), s["job"].tolist(), job))
        else:
            att.decide = _job_decides(added, job.ratio, tolerance * base_job, conf)
            att.reasons.append(
                f"job x{job.ratio:.2f}, neither significantly slower nor shown less than {tolerance:.0%} slower "
                f"({lvl} CI {job.ci_text()}); decides: {att.decide}"
            )
        att.reasons += [parts, cpu_text]
        return att
    if dominance.above_zero and waiting.above_zero:
        att.verdict = "starved"
        att.reasons.append(f"waiting is significantly the larger part: waiting - busy {dominance.text()}")
    elif dominance.below_zero:
        att.verdict = "not starved"
        att.reasons.append(
            f"busy executors (CPU work and CPU taken by other processes) are significantly the larger part: "
            f"waiting - busy {dominance.text()}"
        )
    elif small_wait:
        att.verdict = "not starved"
        att.reasons.append(
            f"the added waiting is at most {waiting.ci_high:.1f} s, under {tolerance:.0%} of the baseline job "
            f"({base_job:.1f} s): the time went to busy executors"
        )
    elif waiting.above_zero and busy.above_zero:
        att.verdict = "mixed"
        att.reasons.append(
            f"both parts grew and neither is significantly larger ({att.shares_text()}; waiting - busy "
            f"{dominance.text()})"
        )
    else:
        att.decide = _what_decides(dominance, waiting, busy, conf)
        att.reasons.append(
            f"which part is larger is not clear (waiting - busy {dominance.text()}); decides: {att.decide}"
        )
    att.reasons.insert(0, f"job x{job.ratio:.2f} ({lvl} CI {job.ci_text()}): {parts}")
    att.reasons.append(cpu_text)
    att.extra.update(waiting_share=att.waiting_share, busy_share=att.busy_share, cpu_at_most_s=att.cpu_at_most_s)
    return att


STRICT = "seed 001's strict test (CPU shown unchanged within the tolerance)"


def attributed_verdict(att: Attribution | None, strict: str, strict_reasons: list[str]) -> tuple[str, list[str]]:
    """The diagnosis' verdict and reasons: the attribution's, then seed 001's strict test as a
    reported result; without an attribution (no executor run time) the strict verdict, saying so."""
    if att is None:
        return strict, [*strict_reasons, "no attribution: the runs lack the executors' run time (executor_run_s)"]
    return att.verdict, [*att.reasons, f"{STRICT}: {strict} -- " + "; ".join(strict_reasons)]


def attribution_columns(att: Attribution | None, strict: str) -> dict[str, object]:
    """The diagnosis table's columns for the attribution (seconds of job time, Welch intervals)."""
    if att is None:
        return {"strict_verdict": strict, "waiting_s": "–", "busy_s": "–", "cpu_at_most_s": float("nan"),
                "shares": "–"}  # fmt: skip
    return {
        "strict_verdict": strict,
        "waiting_s": att.waiting.text(),
        "busy_s": att.busy.text(),
        "cpu_at_most_s": att.cpu_at_most_s,
        "shares": att.shares_text(),
    }
