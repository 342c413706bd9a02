"""One application's tables from a store, and whether a store holds event logs (``shufflelab analyze``)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pandas as pd

from shufflelab.appreport.analysis import App
from shufflelab.results import Store, StoreError


def is_eventlog_store(db: Path) -> bool:
    """True for a store ``shufflelab analyze`` wrote (its experiment is the event logs, not a lab spec)."""
    try:
        exp = Store(db).query("SELECT spec_json FROM experiments LIMIT 1")
    except Exception:  # noqa: BLE001 - not a results file: the caller's own error applies
        return False
    if exp.empty:
        return False
    try:
        return json.loads(str(exp.iloc[0, 0])).get("source") == "eventlog"
    except ValueError:
        return False


def applications(store: Store) -> list[tuple[str, int, str]]:
    """(run_id, app_index, name) of every application in the store, oldest first."""
    q = (
        "SELECT a.run_id, coalesce(a.app_index, 0) AS app_index, coalesce(s.label, a.app_id) AS name, a.app_id "
        "FROM apps a LEFT JOIN runs r USING (run_id) LEFT JOIN scenarios s USING (scenario_id) "
        "ORDER BY a.first_job_at_ms NULLS LAST, a.run_id"
    )
    rows = list(store.query(q).itertuples(index=False, name=None))
    names = Counter(str(n) for _, _, n, _ in rows)
    # an application's name, with its id where several share it (the same job run again)
    return [(str(r), int(i), str(n) if names[str(n)] == 1 or str(n) == str(a) else f"{n} ({a})") for r, i, n, a in rows]


def _seconds(v: object) -> float:
    """A stored duration; NaN when it was not recorded (NULL: no job ended), never 0."""
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")
    return x if math.isfinite(x) else float("nan")


def load(store: Store, run_id: str, app_index: int = 0, name: str | None = None) -> App:
    """One application's tables."""
    args = [run_id, app_index]
    where = "WHERE run_id = ? AND coalesce(app_index, 0) = ?"
    apps = store.query(f"SELECT * FROM apps {where}", args)
    if apps.empty:
        raise StoreError(f"no application {run_id!r} (index {app_index}) in the store")
    a = apps.iloc[0]
    tables = {t: store.query(f"SELECT * FROM {t} {where}", args) for t in ("tasks", "stages", "jobs", "executors")}
    job_time = _seconds(a["job_time_s"])
    env: dict[str, object] = {}
    run = store.query("SELECT run_dir, environment_json FROM runs WHERE run_id = ?", [run_id])
    if not run.empty:
        try:
            env = json.loads(str(run.iloc[0]["environment_json"] or "{}"))
        except ValueError:
            env = {}
    problems = env.get("problems")
    return App(
        run_id,
        app_index,
        name or str(a["app_id"]),
        tables["tasks"],
        tables["stages"],
        tables["jobs"],
        tables["executors"],
        job_time,
        str(a["status"]),
        str(a["app_id"] or ""),
        str(env.get("log") or (run.iloc[0]["run_dir"] if not run.empty else "") or ""),
        str(env.get("spark_version") or ""),
        [str(p) for p in problems] if isinstance(problems, list) else [],
    )


def load_all(store: Store, which: list[tuple[str, int, str]] | None = None) -> list[App]:
    """The applications ``which`` (default: :func:`applications`), as :func:`load` reads them one by
    one, but with one query per table for all of them: a store of 10,000 applications is read in
    seven queries, not 70,000 (each opens the store)."""
    which = applications(store) if which is None else which
    tables: dict[str, dict[tuple[str, int], pd.DataFrame]] = {}
    empty: dict[str, pd.DataFrame] = {}
    for t in ("apps", "tasks", "stages", "jobs", "executors"):
        df = store.query(f"SELECT * FROM {t}")
        empty[t] = df.iloc[0:0]
        idx = df["app_index"].fillna(0).astype(int) if "app_index" in df else pd.Series(0, index=df.index)
        groups = df.groupby([df["run_id"].astype(str), idx], sort=False)
        tables[t] = {(str(r), int(i)): g.reset_index(drop=True) for (r, i), g in groups}
    runs = store.query("SELECT run_id, run_dir, environment_json FROM runs")
    run_of = {str(r.run_id): r for r in runs.itertuples(index=False)}
    out = []
    for run_id, app_index, name in which:
        k = (str(run_id), int(app_index))
        a_rows = tables["apps"].get(k)
        if a_rows is None or a_rows.empty:
            raise StoreError(f"no application {run_id!r} (index {app_index}) in the store")
        a = a_rows.iloc[0]
        env: dict[str, object] = {}
        run = run_of.get(str(run_id))
        if run is not None:
            try:
                env = json.loads(str(run.environment_json or "{}"))
            except ValueError:
                env = {}
        problems = env.get("problems")
        parts = {t: tables[t].get(k, empty[t]) for t in ("tasks", "stages", "jobs", "executors")}
        out.append(
            App(
                run_id,
                app_index,
                name or str(a["app_id"]),
                parts["tasks"],
                parts["stages"],
                parts["jobs"],
                parts["executors"],
                _seconds(a["job_time_s"]),
                str(a["status"]),
                str(a["app_id"] or ""),
                str(env.get("log") or (run.run_dir if run is not None else "") or ""),
                str(env.get("spark_version") or ""),
                [str(p) for p in problems] if isinstance(problems, list) else [],
            )
        )
    return out
