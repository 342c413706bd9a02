"""``shufflelab tune``: a budgeted search over shuffle and network knobs, every trial a stored run.

A tune file is an experiment TOML (the base configuration, which is also "the default") plus a
``[tune]`` table::

    [tune]
    trials = 12          # budget
    reps = 3             # runs per trial (their mean job time is the objective)
    confirm_reps = 5     # default and best re-run side by side at the end, interleaved
    patience = 6         # early stop: this many trials without a 2 % improvement ends the search
    seed = 1
    [tune.knobs]
    "spark.conf.spark.reducer.maxSizeInFlight" = { choices = ["12m", "48m", "96m"] }
    "tcp.initcwnd" = { low = 10, high = 400, log = true, int = true }
    "topology.bottleneck.queue_bytes" = { low = 30000, high = 1000000, log = true, int = true }

Knob paths are the spec's dotted paths; ``spark.conf.<key>`` sets one Spark conf entry. The
search uses Optuna (TPE sampler, seeded); every trial is a scenario of one results file, so the
trials can be reported, diagnosed and resumed like any experiment. The outcome: the best
configuration, its gain over the default with a Welch 95 % CI from the confirmation runs,
and each knob's importance (Optuna's PED-ANOVA over the completed trials).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shufflelab import spec as S
from shufflelab import stats

CONF_PREFIX = "spark.conf."


class Knob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    choices: list[Any] | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    int: bool = False

    @model_validator(mode="after")
    def _one_kind(self) -> Knob:
        if self.choices is not None:
            if not self.choices:
                raise ValueError("choices: give at least one value")
            if self.low is not None or self.high is not None:
                raise ValueError("give either choices or low/high, not both")
        elif self.low is None or self.high is None:
            raise ValueError("give choices, or low and high")
        elif self.low >= self.high:
            raise ValueError(f"low ({self.low:g}) must be below high ({self.high:g})")
        elif self.log and self.low <= 0:
            raise ValueError("a log-scale knob needs low > 0")
        return self


class TuneConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    trials: int = Field(default=12, ge=1, le=1000)
    reps: int = Field(default=3, ge=1, le=100)
    confirm_reps: int = Field(default=5, ge=2, le=100)
    patience: int = Field(default=6, ge=1)
    min_improvement: float = Field(default=0.02, ge=0, lt=1)
    seed: int = 1
    knobs: dict[str, Knob] = Field(min_length=1)


def apply(base: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The base spec data with the knob values set (``spark.conf.<key>`` sets one conf entry)."""
    data = copy.deepcopy(base)
    for path, value in params.items():
        if path.startswith(CONF_PREFIX):
            data.setdefault("spark", {}).setdefault("conf", {})[path[len(CONF_PREFIX) :]] = str(value)
        else:
            S.set_path(data, path, value)  # S.PathError if the path descends into a value or a list
    return data


def overrides(base: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as a case's dotted overrides (Spark conf entries merged into one ``spark.conf`` table)."""
    out = {k: v for k, v in params.items() if not k.startswith(CONF_PREFIX)}
    conf = {k[len(CONF_PREFIX) :]: str(v) for k, v in params.items() if k.startswith(CONF_PREFIX)}
    if conf:
        out["spark.conf"] = {**base.get("spark", {}).get("conf", {}), **conf}
    return out


def load(path: str | Path) -> tuple[dict[str, Any], TuneConfig]:
    """The base experiment's data (validated) and the tune settings; errors name the file and field."""
    p = Path(path)
    data = S.read_toml(p)
    raw = data.pop("tune", None)
    if raw is None:
        raise S.SpecError(f"{p}: no [tune] table (knobs to search, budget)")
    if data.get("matrix") or data.get("cases"):
        raise S.SpecError(f"{p}: a tune file has no [matrix] or [cases]: the search chooses the values")
    try:
        cfg = TuneConfig.model_validate(raw)
    except ValidationError as exc:
        errs = "; ".join(f"tune.{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise S.SpecError(f"{p}: {errs}") from None
    S.parse(data, str(p))
    for params in extreme_params(cfg):  # every extreme value must make a valid spec
        ((name, v),) = params.items()
        try:
            S.parse(apply(data, params), f"{p} (tune.knobs.{name} = {v!r})")
        except S.SpecError as exc:
            raise S.SpecError(str(exc)) from None
        except S.PathError as exc:
            raise S.SpecError(f"{p}: {S.field_path(('tune', 'knobs', name))}: {exc}") from None
    return data, cfg


def extreme_params(cfg: TuneConfig) -> list[dict[str, Any]]:
    """One knob at one of its extremes (a choice, or the low or high end) per entry."""
    out = []
    for name, knob in cfg.knobs.items():
        for v in knob.choices if knob.choices is not None else [knob.low, knob.high]:
            out.append({name: int(v) if knob.int and isinstance(v, float) else v})
    return out


def extremes_spec(base: dict[str, Any], cfg: TuneConfig, where: str) -> S.ExperimentSpec:
    """The base experiment with a case per knob extreme (and the default configuration): what a
    backend checks before the search starts (``tune --hosts``: what the machines cannot run)."""
    data = copy.deepcopy(base)
    seen = {S.spec_hash(S.parse(base, where))}
    data["cases"] = {"default": {}}
    for i, params in enumerate(extreme_params(cfg)):
        h = S.spec_hash(S.parse(apply(base, params), where))
        if h not in seen:  # an extreme that is the default (or another extreme) is checked once
            seen.add(h)
            data["cases"][f"x{i}"] = overrides(base, params)
    return S.parse(data, where)


def suggest(trial: Any, knobs: dict[str, Knob]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, k in knobs.items():
        if k.choices is not None:
            out[name] = trial.suggest_categorical(name, k.choices)
        elif k.int:
            out[name] = trial.suggest_int(name, int(k.low), int(k.high), log=k.log)  # type: ignore[arg-type]
        else:
            out[name] = trial.suggest_float(name, k.low, k.high, log=k.log)  # type: ignore[arg-type]
    return out


# (case name, spec data, repetitions) -> objective values of the successful runs
Evaluate = Callable[[str, dict[str, Any], int], list[float]]


@dataclass
class TuneResult:
    trials: list[dict[str, Any]]
    best_params: dict[str, Any] | None
    best_value: float | None
    stopped_early: bool
    importance: dict[str, float] = field(default_factory=dict)
    confirm: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "best_params": self.best_params,
            "best_value": self.best_value,
            "stopped_early": self.stopped_early,
            "importance": self.importance,
            "confirm": self.confirm,
        }


def search(
    base: dict[str, Any], cfg: TuneConfig, evaluate: Evaluate, on_trial: Callable[[dict], None] | None = None
) -> TuneResult:
    """The default configuration first (the reference for early stopping), then Optuna's ask/tell loop."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=cfg.seed))
    rows: list[dict[str, Any]] = []
    ref = evaluate("default", copy.deepcopy(base), cfg.reps)
    best = sum(ref) / len(ref) if ref else math.inf
    rows.append({"trial": "default", "params": {}, "n": len(ref), "value": best if ref else None})
    if on_trial:
        on_trial(rows[-1])
    since_best = 0
    stopped = False
    for n in range(cfg.trials):
        trial = study.ask()
        params = suggest(trial, cfg.knobs)
        values = evaluate(f"trial{n}", apply(base, params), cfg.reps)
        row: dict[str, Any] = {"trial": n, "params": params, "n": len(values)}
        if values:
            value = sum(values) / len(values)
            study.tell(trial, value)
            row["value"] = value
            if value < best * (1 - cfg.min_improvement):
                best, since_best = value, 0
            else:
                since_best += 1
        else:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            row["value"] = None
            since_best += 1
        rows.append(row)
        if on_trial:
            on_trial(row)
        if since_best >= cfg.patience:
            stopped = True
            break
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    importance: dict[str, float] = {}
    varied = [k for k in cfg.knobs if len({json.dumps(t.params.get(k)) for t in done}) > 1]
    if len(done) >= 3 and varied:
        try:
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()  # needs no scikit-learn
            imp = optuna.importance.get_param_importances(study, params=varied, evaluator=evaluator)
            importance = {k: float(v) for k, v in imp.items()}
        except (RuntimeError, ValueError, ImportError):
            importance = {}
    best_trial = study.best_trial if done else None
    return TuneResult(
        rows,
        dict(best_trial.params) if best_trial else None,
        float(best_trial.value) if best_trial and best_trial.value is not None else None,
        stopped,
        importance,
    )


def confirm(default: list[float], best: list[float]) -> dict[str, Any]:
    """Best vs default from the interleaved confirmation runs: ratio of means with its Welch CI (stats.compare)."""
    c = stats.compare(default, best)
    d, b = stats.summarize(default), stats.summarize(best)
    return {
        "default_mean_s": d.mean,
        "default_sd_s": d.sd,
        "best_mean_s": b.mean,
        "best_sd_s": b.sd,
        "n_default": d.n,
        "n_best": b.n,
        "ratio": c.ratio,
        # no interval (None) below stats.MIN_N runs a side; JSON has no NaN
        "ratio_ci": [c.ratio_ci_low, c.ratio_ci_high] if c.has_interval else None,
        "ratio_ci_text": c.ci_text(3),
        "gain_percent": -c.percent_change,
        "p_value": c.p_value if c.has_interval else None,
        "significant": bool(c.significant and c.ratio < 1.0),
    }


def emulate_evaluator(
    base: dict[str, Any], results: Path, progress: Any = None, backend: Any = None
) -> tuple[Evaluate, Callable]:
    """Evaluate trials as real runs on the emulated fabric (or ``backend``'s machines: ``tune
    --hosts``), all in ``results/<name>.duckdb``.

    Returns the trial evaluator and a confirmation function (default vs best, interleaved)."""
    from shufflelab.emulate.runner import EmulateRunner
    from shufflelab.kinds import DRIVERS

    name = base["experiment"]["name"]

    def _run(cases: dict[str, dict[str, Any]], reps: int, data: dict[str, Any]) -> dict[str, list[float]]:
        d = copy.deepcopy(data)
        d["experiment"]["repetitions"] = reps
        d["cases"] = cases
        sp = S.parse(d, f"tune:{name}")
        runner = EmulateRunner(
            sp, f"tune:{name}", results, **({"progress": progress} if progress else {}), backend=backend, kinds=DRIVERS
        )
        res = runner.run()
        out: dict[str, list[float]] = {c: [] for c in cases}
        for o in res.outcomes:
            case = o.label.split("case=")[-1]
            if o.status == "ok" and o.job_time_s is not None:
                out.setdefault(case, []).append(o.job_time_s)
        # runs finished by an earlier, interrupted invocation are kept in the store: count them too
        from shufflelab.results import Store

        df, _ = Store(runner.store.path).runs_with_values()
        for case in cases:
            ids = {sc.scenario_id for sc in runner.scenarios if sc.label.endswith(f"case={case}")}
            ok = df[(df["scenario_id"].isin(ids)) & (df["status"] == "ok")]
            out[case] = ok["job_time_s"].dropna().tolist()
        return out

    def evaluate(case: str, data: dict[str, Any], reps: int) -> list[float]:
        return _run({case: {}}, reps, data)[case]

    def confirm_runs(best_params: dict[str, Any], reps: int) -> tuple[list[float], list[float]]:
        r = _run({"default": {}, "best": overrides(base, best_params)}, reps, base)
        return r["default"], r["best"]

    return evaluate, confirm_runs


def write(result: TuneResult, out: Path, cfg: TuneConfig) -> Path:
    """tune.json and tune.md (trials, best, gain with CI, importances) and a history figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.json").write_text(json.dumps(result.to_json(), indent=1, default=str))
    xs = [i for i, t in enumerate(result.trials) if t["value"] is not None]
    ys = [t["value"] for t in result.trials if t["value"] is not None]
    if xs:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.plot(xs, ys, "o", label="trial (mean job time)")
        run_best = [min(ys[: i + 1]) for i in range(len(ys))]
        ax.step(xs, run_best, where="post", label="best so far")
        ax.set_xlabel("evaluation (0 = the default configuration)")
        ax.set_ylabel("job time (s)")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "history.png", dpi=120)
        plt.close(fig)
    ending = (
        f"stopped early (no {cfg.min_improvement:.0%} improvement in {cfg.patience} trials)"
        if result.stopped_early
        else "budget used"
    )
    md = ["# Tuning result", "", f"Budget {cfg.trials} trials x {cfg.reps} runs; {ending}.", ""]
    md += ["| trial | n | mean job time (s) | " + " | ".join(cfg.knobs) + " |"]
    md += ["|---|---|---|" + "---|" * len(cfg.knobs)]
    for t in result.trials:
        v = f"{t['value']:.2f}" if t["value"] is not None else "failed"
        cells = " | ".join(str(t["params"].get(k)) for k in cfg.knobs)
        md.append(f"| {t['trial']} | {t['n']} | {v} | {cells} |")
    if result.best_value is not None:
        md += ["", f"Best (search): {result.best_params} at {result.best_value:.2f} s"]
    else:
        md += ["", "No trial succeeded."]
    if result.confirm:
        c = result.confirm
        verdict = "significant" if c["significant"] else "not significant"
        md += [
            "",
            "## Confirmation (default and best, interleaved)",
            "",
            f"default {c['default_mean_s']:.2f} ± {c['default_sd_s']:.2f} s (n = {c['n_default']}), "
            f"best {c['best_mean_s']:.2f} ± {c['best_sd_s']:.2f} s (n = {c['n_best']}): "
            f"ratio {c['ratio']:.3f}, Welch 95 % CI {c['ratio_ci_text']}, gain {c['gain_percent']:.1f} %, "
            + (f"Welch p = {c['p_value']:.3g}; {verdict}." if c["p_value"] is not None else "no verdict."),
        ]
    if result.importance:
        md += ["", "## Knob importance (PED-ANOVA over completed trials)", ""]
        md += [f"- `{k}`: {v:.2f}" for k, v in sorted(result.importance.items(), key=lambda kv: -kv[1])]
    if xs:
        md += ["", "![Search history](history.png)"]
    p = out / "tune.md"
    p.write_text("\n".join(md) + "\n")
    return p
