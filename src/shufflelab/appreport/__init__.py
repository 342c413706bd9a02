"""The report of applications read from event logs (``shufflelab analyze``): the lab's questions for
any Spark application -- how much the network costs it, why, and which fix pays off.

:mod:`.stores` reads one application's tables from a store; :mod:`.analysis` computes; :mod:`.render`
builds the :class:`shufflelab.document.Document`; :func:`write` does all three for a store.
:mod:`.starvation` compares a store with baseline logs (``diagnose``); :func:`whatif_table` is
``whatif`` on such a store.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from shufflelab.appreport.stores import applications, is_eventlog_store, load, load_all
from shufflelab.results import Store, StoreError, reading

__all__ = ["Store", "applications", "is_eventlog_store", "load", "load_all", "whatif_table", "write"]


def write(
    db: Path,
    out: Path,
    link_gbps: float | None = None,
    baseline_db: Path | None = None,
    baseline_problem: str | None = None,
) -> tuple[Path, Path]:
    """Write ``report.md``/``report.html`` (and ``figures/``) for every application in ``db``, and
    ``fleet.md``/``fleet.html`` (:mod:`.fleet`) when it holds more than one; with a
    store of baseline logs, the starvation verdict of each application it has logs of
    (``baseline_problem``: why baseline logs given could not be used)."""
    with reading(db):
        return _write(db, out, link_gbps, baseline_db, baseline_problem)


def _write(
    db: Path, out: Path, link_gbps: float | None, baseline_db: Path | None, baseline_problem: str | None
) -> tuple[Path, Path]:
    from shufflelab import document
    from shufflelab.appreport import render, starvation

    store = Store(db)
    apps = load_all(store)
    if not apps:
        raise StoreError(f"{db}: no application with a recorded job in the store")
    verdicts, problem = None, baseline_problem
    if baseline_db is not None:
        try:
            verdicts = starvation.diagnose_stores(db, baseline_db)
        except (ValueError, StoreError) as exc:
            problem = str(exc)
    doc = render.document(db.name, apps, out / "figures", link_gbps, verdicts, problem)
    paths = document.write(doc, out)
    from shufflelab.appreport import fleet

    if len(apps) > 1:  # several applications: the fleet page too (fleet.md, fleet.html)
        fleet.write(db, out)
    else:  # one: no fleet page, not even an earlier store's
        fleet.remove(out)
    return paths


def whatif_table(
    db: Path, speedup: float, cpu_saving_per_gb_s: float = 0.0, select: list[str] | None = None
) -> pd.DataFrame:
    """``shufflelab whatif`` on a store of event logs: one row per application (each log is its own
    recording), the network-bound time being the fetch wait only, as in the application report
    (:func:`analysis.network_prediction_s`)."""
    from shufflelab.appreport import analysis

    store = Store(db)
    rows = []
    with reading(db):
        which = applications(store)
        loaded = {(r, i): load(store, r, i, n) for r, i, n in which if all(p in n for p in (select or []))}
    for run_id, idx, name in which:
        if not all(p in name for p in (select or [])):
            continue
        app = loaded[(run_id, idx)]
        try:
            at_one = analysis.replay_s(app, 1.0)
            pred = analysis.network_prediction_s(app, speedup, cpu_saving_per_gb_s, at_one=at_one)
        except ValueError as exc:  # no tasks, no ended job or no completed stage: nothing to replay
            rows.append({"application": name, "status": app.status, "recorded_s": app.job_time_s, "note": str(exc)})
            continue
        except Exception as exc:  # noqa: BLE001 - one application's failure must not lose the others' rows
            note = f"could not be replayed ({type(exc).__name__}: {exc})"
            rows.append({"application": name, "status": app.status, "recorded_s": app.job_time_s, "note": note})
            continue
        rows.append(
            {
                "application": name,
                "status": app.status,
                "recorded_s": app.job_time_s,
                "replay_at_1x_s": at_one,
                "predicted_s": pred,
                "change": pred / app.job_time_s - 1 if app.job_time_s > 0 else float("nan"),
                "note": "",
            }
        )
    return pd.DataFrame(rows)
