"""Run application specs (recorded Spark applications on a fabric) through the Rust core.

Every matrix point × seed is one run of ``shufflelab_simcore.run_apps``; the results land in
``RESULTS/<experiment>.apps.json`` (the spec; per application what was recorded and how it was
scaled; per run its values, seed, the core's result and the simulator's wall time), and a report
labelled SIMULATED is written next to it (:mod:`shufflelab.sim.apps_report`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shufflelab.sim import app_dag, app_spec
from shufflelab.sim.core import simulate_apps
from shufflelab.sim.fabric import _write_atomic, load_results
from shufflelab.sim.fabric_spec import GraphFile
from shufflelab.sim.spec import SimSpecError


@dataclass
class AppsRuns:
    path: Path
    doc: dict[str, Any]


def describe(point: app_spec.AppsPoint, base_dir: Path) -> list[dict[str, Any]]:
    """Per ``[[app]]`` of a point: the recording, its scaling in words, and the job time without a
    network (compute and driver time only) before and after scaling."""
    spec = point.spec
    hosts = app_spec.host_count(spec, base_dir)
    out = []
    for i, a in enumerate(spec.app):
        rec = app_spec.recorded(a, i, base_dir)
        dag = app_spec.scaled(a, i, spec, hosts, base_dir)
        assert dag.scaling is not None
        out.append(
            {
                "source": a.source,
                "run_id": rec.run_id,
                "app_index": rec.app_index,
                "copies": a.copies,
                "placement": a.placement,
                "executors": a.executors or hosts,
                "recorded_slots": rec.slots,
                "recorded_job_time_s": rec.job_time_s,
                "recorded_tasks": rec.tasks,
                "recorded_shuffle_bytes": rec.shuffle_bytes,
                "recorded_no_network_s": app_dag.makespan_no_network(rec),
                "stages": [
                    {"id": s.stage_id, "tasks": len(s.tasks), "reads_from": list(s.reads_from), "after": list(s.after)}
                    for s in rec.stages
                ],
                "scaled_tasks": dag.tasks,
                "scaled_shuffle_bytes": dag.shuffle_bytes,
                "scaled_no_network_s": app_dag.makespan_no_network(dag),
                "scaling": dag.scaling.statement(rec.slots),
                **({"compute": rec.cpu.compute, "compute_times": rec.cpu.statement()} if rec.cpu else {}),
                "notes": list(rec.notes),
            }
        )
    return out


def run_point(point: app_spec.AppsPoint, seed: int, base_dir: Path, where: str) -> dict[str, Any]:
    config = app_spec.core_config(point.spec, seed, base_dir, where=where)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        result = simulate_apps(config)
    except ValueError as err:
        raise SimSpecError(f"{where} [{point.label}]: {err}") from None
    return {
        "label": point.label,
        "values": point.values,
        "seed": seed,
        "oversubscription": None if isinstance(t := point.spec.topology, GraphFile) else t.ratio(),
        "cores_per_host": point.spec.hosts.cores,
        "arrival": point.spec.arrival.model_dump(exclude_none=True),
        **({"tcp": config["tcp"]} if "tcp" in config else {}),
        "apps": describe(point, base_dir),
        "wall_s": time.perf_counter() - t0,
        # the core runs in this process (the binding releases the GIL, not the thread)
        "cpu_s": time.process_time() - c0,
        "result": result,
    }


def run_experiment(spec_path: Path, results: Path, data: dict[str, Any] | None = None) -> AppsRuns:
    """Every matrix point × seed of an application spec into ``RESULTS/<experiment>.apps.json``."""
    where = str(spec_path)
    spec = app_spec.parse(data, where) if data is not None else app_spec.load(spec_path)
    base_dir = spec_path.parent
    runs = [
        run_point(point, seed, base_dir, where)
        for point in app_spec.expand(spec, where)
        for seed in range(spec.experiment.seeds)
    ]
    doc = {
        "kind": "apps",
        "experiment": spec.experiment.name,
        "description": spec.experiment.description,
        "spec_path": where,
        "spec": spec.model_dump(mode="json", exclude_none=True),
        "runs": runs,
    }
    out = results / f"{spec.experiment.name}.apps.json"
    _write_atomic(out, json.dumps(doc, indent=1))
    return AppsRuns(out, doc)


def load(path: Path) -> dict[str, Any]:
    return load_results(path, "apps", "applications")


def summary_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per run and application (virtual seconds)."""
    rows = []
    for run in doc["runs"]:
        r = run["result"]
        # the core's applications are the [[app]] tables' copies, in order
        no_net = [a["scaled_no_network_s"] for a in run["apps"] for _ in range(a["copies"])]
        for a, alone in zip(r["apps"], no_net, strict=True):
            rows.append(
                {
                    "scenario": run["label"],
                    "seed": run["seed"],
                    "application": a["name"],
                    "hosts": a["executors"],
                    "oversubscription": run["oversubscription"],
                    "arrival s": a["arrival_s"],
                    "job time s": a["job_time_s"],
                    "no-network time s": alone,
                    "remote GiB (all apps)": r["remote_bytes"] / 2**30,
                }
            )
    return rows


def short_label(run: dict[str, Any]) -> str:
    """A run's matrix values by their last key part (``oversubscription=4, placement=pack``)."""
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in run["values"].items()) or run["label"]


def run_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per run: its applications' job times against the no-network time (virtual s)."""
    rows = []
    modes = any("packet" in run["result"] for run in doc["runs"])
    for run in doc["runs"]:
        r = run["result"]
        times = [a["job_time_s"] for a in r["apps"] if a["job_time_s"] is not None]
        alone = [a["scaled_no_network_s"] for a in run["apps"] for _ in range(a["copies"])]
        mean = sum(times) / len(times) if times else None
        base = sum(alone) / len(alone)
        spine = sum(t["carried_bytes"] for t in r["tiers"] if "spine" in t["name"]) / 2 / 2**30
        rows.append(
            {
                "run": short_label(run),
                # a result with "packet" came from the packet-faithful mode
                **({"mode": "packet" if "packet" in r else "maxmin"} if modes else {}),
                "seed": run["seed"],
                "apps done": f"{len(times)}/{len(r['apps'])}",
                "mean job s": mean,
                "max job s": max(times) if times else None,
                "no-network s": base,
                "network adds %": None if mean is None else 100 * (mean - base) / base,
                "remote GiB": r["remote_bytes"] / 2**30,
                "via spines GiB": spine,
                "wall s": run["wall_s"],
            }
        )
    return rows
