"""The starvation verdict for applications read from event logs: each application of one store
compared with baseline logs of the same application (another store) by :mod:`shufflelab.diagnose`.

A lab store pairs scenarios by their specs (the same scenario without cross traffic); event logs
have no spec, so the pairing is by application name: every name in the store that the baseline
store also holds is one comparison (its runs are the repetitions). When no name is shared and
each side holds a single application name, the two are compared, and the reasons say that the
names differ. Only applications that ended ok are compared (a failed or cut run's job time is not
the application's); the reasons say how many were left out.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from shufflelab import diagnose as dg
from shufflelab.appreport.stores import is_eventlog_store
from shufflelab.results import Store

NO_BASELINE = (
    "{db} holds applications read from event logs, not lab scenarios with and without cross traffic: "
    "the starvation verdict compares them with logs of the same application on a quiet network. Read those "
    "into a store of their own (shufflelab analyze QUIET_LOGS --db quiet.duckdb) and name it: "
    "shufflelab diagnose {db} --baseline quiet.duckdb (or: shufflelab analyze LOGS --out DIR --baseline QUIET_LOGS)"
)


def runs(store: Store) -> pd.DataFrame:
    """One row per application: run_id, name, status and the totals diagnose compares."""
    return store.query(
        "SELECT r.run_id, s.label AS name, r.status, r.job_time_s, r.executor_cpu_s, r.executor_run_s, r.fetch_wait_s, "
        "r.total_cores "
        "FROM runs r JOIN scenarios s USING (scenario_id) ORDER BY s.label, r.started_at NULLS LAST, r.run_id"
    )


def pairs(names: list[str], base_names: list[str]) -> tuple[list[tuple[str, str]], str | None]:
    """(name, baseline name) to compare, and a note when the names differ; ValueError when none pair."""
    same = [n for n in dict.fromkeys(names) if n in set(base_names)]
    if same:
        return [(n, n) for n in same], None
    a, b = sorted(set(names)), sorted(set(base_names))
    if len(a) == 1 and len(b) == 1:
        return [(a[0], b[0])], f"the baseline logs' application is named {b[0]!r}, these {a[0]!r}: compared as one"
    raise ValueError(
        f"no application name is in both: these logs hold {', '.join(map(repr, a)) or 'none'}, the baseline logs "
        f"{', '.join(map(repr, b)) or 'none'} (baselines are paired with the application of the same name)"
    )


def _tasks(store: Store, run_ids: list[str]) -> pd.DataFrame:
    if not run_ids:
        return pd.DataFrame(columns=["run_id", "executor_cpu_ms"])
    marks = ",".join("?" for _ in run_ids)
    return store.query(f"SELECT run_id, executor_cpu_ms FROM tasks WHERE run_id IN ({marks})", run_ids)


def diagnose_stores(db: Path, baseline_db: Path, name: str | None = None, min_reps: int = 3) -> list[dg.Diagnosis]:
    """The verdict for each application of ``db`` that ``baseline_db`` has logs of (``name``: that one only)."""
    store, base = Store(db), Store(baseline_db)
    scen, bruns = runs(store), runs(base)
    names = [str(n) for n in scen["name"]]
    if name is not None:
        if name not in names:
            raise ValueError(f"--scenario {name!r}: no application of this name in {db} (known: {', '.join(names)})")
        names = [name]
    todo, note = pairs(names, [str(n) for n in bruns["name"]])
    out = []
    for s_name, b_name in todo:
        s_all, b_all = scen[scen["name"] == s_name], bruns[bruns["name"] == b_name]
        s_ok, b_ok = s_all[s_all["status"] == "ok"], b_all[b_all["status"] == "ok"]
        d = dg.diagnose(
            s_name,
            f"{b_name} (baseline logs)",
            b_ok,
            s_ok,
            _tasks(base, [str(r) for r in b_ok["run_id"]]),
            _tasks(store, [str(r) for r in s_ok["run_id"]]),
            min_reps=min_reps,
        )
        left = len(s_all) - len(s_ok) + len(b_all) - len(b_ok)
        if left:
            d.reasons.append(f"{left} application run(s) that did not end ok left out (failed, killed or cut logs)")
        if note:
            d.reasons.append(note)
        out.append(d)
    return out


def diagnose_command(db: Path, scenario: str | None, baseline: str | None, min_reps: int) -> list[dg.Diagnosis]:
    """``shufflelab diagnose`` on a store of event logs: ``baseline`` names the store of baseline logs."""
    if baseline is None:
        raise ValueError(NO_BASELINE.format(db=db))
    base = Path(baseline)
    if not base.is_file():
        raise ValueError(f"--baseline {baseline}: no such file; on a store of event logs it names the store of "
                         "baseline logs (shufflelab analyze QUIET_LOGS --db quiet.duckdb)")  # fmt: skip
    if not is_eventlog_store(base):
        raise ValueError(f"--baseline {baseline}: not a store of event logs written by shufflelab analyze")
    return diagnose_stores(db, base, scenario, min_reps)
