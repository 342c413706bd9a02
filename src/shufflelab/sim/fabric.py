"""Run fabric specs (all-to-all shuffles or traffic matrices on data-center topologies) through the Rust core.

Every matrix point × seed is one run of ``shufflelab_simcore.run_fabric``; the results land in
``RESULTS/<experiment>.fabric.json`` (the spec, and per run its values, seed, the core's result
document and the simulator's wall time) and a report labelled SIMULATED is written next to it
(:mod:`shufflelab.sim.fabric_report`). Times in results are virtual seconds except ``wall_s``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shufflelab.sim import fabric_spec
from shufflelab.sim.core import simulate_fabric
from shufflelab.sim.spec import SimSpecError


@dataclass
class FabricRuns:
    path: Path
    doc: dict[str, Any]


def run_point(
    point: fabric_spec.Point, seed: int, base_dir: Path, *, recompute: str | None = None, where: str = "<spec>"
) -> dict[str, Any]:
    """One run: the core's result with the point's label, values, seed and wall time."""
    config = fabric_spec.core_config(point.spec, seed, base_dir, recompute=recompute)
    t0 = time.perf_counter()
    try:
        result = simulate_fabric(config)
    except ValueError as err:  # what only the core can check (e.g. a failure's node names)
        raise SimSpecError(f"{where} [{point.label}]: {err}") from None
    wall = time.perf_counter() - t0
    return {
        "label": point.label,
        "values": point.values,
        "seed": seed,
        "recompute": config["recompute"],
        "oversubscription": fabric_spec.oversubscription(point.spec),
        "topology": point.spec.topology.kind,
        "cores_per_host": point.spec.hosts.cores,
        "workload": fabric_spec.describe_workload(point.spec),
        **({"tcp": config["tcp"]} if "tcp" in config else {}),
        "wall_s": wall,
        "result": result,
    }


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_experiment(spec_path: Path, results: Path, data: dict[str, Any] | None = None) -> FabricRuns:
    """Run every matrix point × seed of a fabric spec into ``RESULTS/<experiment>.fabric.json``."""
    spec = fabric_spec.parse(data, str(spec_path)) if data is not None else fabric_spec.load(spec_path)
    base_dir = spec_path.parent
    runs = [
        run_point(point, seed, base_dir, where=str(spec_path))
        for point in fabric_spec.expand(spec, str(spec_path))
        for seed in range(spec.experiment.seeds)
    ]
    doc = {
        "kind": "fabric",
        "experiment": spec.experiment.name,
        "description": spec.experiment.description,
        "spec_path": str(spec_path),
        "spec": spec.model_dump(mode="json", exclude_none=True),
        "runs": runs,
    }
    out = results / f"{spec.experiment.name}.fabric.json"
    _write_atomic(out, json.dumps(doc, indent=1))
    return FabricRuns(out, doc)


def load(path: Path) -> dict[str, Any]:
    """A results file written by :func:`run_experiment`."""
    return load_results(path, "fabric", "fabric")


def load_results(path: Path, kind: str, what: str) -> dict[str, Any]:
    """A ``sim run`` results document of ``kind`` (``what`` names it in errors)."""
    try:
        doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"{path}: not a readable {what} results file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        raise FileNotFoundError(
            f"{path}: not a{'n' if what[0] in 'aeiou' else ''} {what} results file (written by `shufflelab sim run`)"
        )
    return doc


def summary_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per run: the headline numbers (virtual time)."""
    rows = []
    for run in doc["runs"]:
        r = run["result"]
        fct = r["fct"]
        worst = max((b["p99_s"] for b in fct), default=float("nan"))
        rows.append(
            {
                "scenario": run["label"],
                "seed": run["seed"],
                "hosts": r["hosts"],
                "oversubscription": run["oversubscription"],
                "remote fetches": r["remote_fetches"],
                "remote GiB": r["remote_bytes"] / 2**30,
                "shuffle completion s": r["shuffle_completion_s"],
                "worst bucket p99 FCT s": worst,
                "rerouted": r["rerouted_flows"],
                "stranded": r["stranded_flows"],
            }
        )
    return rows
