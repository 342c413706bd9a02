"""``shufflelab run SPEC --until-decided --max-reps N``: repetitions added, interleaved, to the
comparisons whose starvation verdict is still open, each stopped when it is decided at a look of
the sequential design (:mod:`shufflelab.sequential`) or at the cap.

The loop: run every scenario to the first look (the spec's repetitions, at least 3), then, while a
comparison is open and the cap is not reached, one more repetition of the scenarios the open
comparisons need (the scenario and its baseline; rep n of each before rep n + 1 of any, as the
runner interleaves) and the decisions again. The decisions are recomputed from the stored runs
each time (a look uses only the first n repetitions), so a run interrupted and started again
resumes where it was and reaches the same decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from shufflelab import sequential
from shufflelab.emulate.runner import ExperimentResult, RunOutcome
from shufflelab.results import Store
from shufflelab.spec import ExperimentSpec
from shufflelab.stats import MIN_N


class Runner(Protocol):
    store: Store

    def run(self) -> ExperimentResult: ...


RunnerFactory = Callable[[ExperimentSpec, "set[str] | None"], Runner]
"""(spec with the repetitions to reach, the scenario labels to run or None for all) -> a runner."""


@dataclass
class Result:
    store_path: Path
    design: sequential.Design
    outcomes: list[RunOutcome] = field(default_factory=list)
    skipped: int = 0
    decisions: list[sequential.Decision] = field(default_factory=list)
    added: list[tuple[int, list[str]]] = field(default_factory=list)  # (rep, labels) added beyond the first look


def with_reps(spec: ExperimentSpec, reps: int) -> ExperimentSpec:
    return spec.model_copy(update={"experiment": spec.experiment.model_copy(update={"repetitions": reps})})


def run(
    spec: ExperimentSpec,
    make_runner: RunnerFactory,
    max_reps: int,
    *,
    alpha: float = 0.05,
    spending: str = "pocock",
    decide: Callable[[Path, sequential.Design], list[sequential.Decision]] = sequential.decisions,
    on_look: Callable[[int, list[sequential.Decision]], None] = lambda n, found: None,
) -> Result:
    """Run until every comparison is decided or has ``max_reps`` runs a side (module doc)."""
    design = sequential.Design(max(MIN_N, spec.experiment.repetitions), max_reps, alpha, spending)
    n = design.first_n
    runner = make_runner(with_reps(spec, n), None)
    first = runner.run()
    out = Result(first.store_path, design, list(first.outcomes), first.skipped)
    sequential.save(runner.store, design)
    while True:
        out.decisions = decide(out.store_path, design)
        on_look(n, out.decisions)
        still = [d for d in out.decisions if not d.decided]
        if not still or n >= design.max_n:
            return out
        n += 1
        labels = set().union(*(d.labels for d in still))
        res = make_runner(with_reps(spec, n), labels).run()
        out.outcomes += res.outcomes
        out.skipped += max(0, len(labels) - len(res.outcomes))  # rep n already stored (a resumed run)
        out.added.append((n, sorted(labels)))


def only(runner: Runner, labels: set[str] | None) -> Runner:
    """``runner`` restricted to the scenarios with these labels (all when None)."""
    if labels is not None:
        runner.scenarios = [sc for sc in runner.scenarios if sc.label in labels]  # type: ignore[attr-defined]
    return runner
