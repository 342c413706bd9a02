"""An experiment spec validated, and expanded into its scenarios (matrix points x cases), each with
a content hash as its id."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from shufflelab.spec.experiment import ExperimentSpec
from shufflelab.spec.loader import SpecError, check_nesting, describe_error, field_path, read_toml
from shufflelab.spec.matrix import MISSING, PathError, check_bound, check_distinct, get_path, points, set_path


class Scenario(BaseModel):
    """One point of an experiment's matrix: its values, a readable label and a content hash."""

    model_config = ConfigDict(frozen=True)

    spec: ExperimentSpec
    values: dict[str, Any]
    label: str
    scenario_id: str


def _format(exc: ValidationError, where: str) -> str:
    lines = [f"{where}: invalid experiment spec"]
    for err in exc.errors():
        lines.append(f"  - {describe_error(err)}")
    return "\n".join(lines)


# experiment fields a matrix point or case may change (e.g. a shorter timeout for a case that starves)
_VARIABLE_META = frozenset({"experiment.run_timeout_s"})


def parse(data: dict[str, Any], where: str = "<spec>") -> ExperimentSpec:
    """Validate a spec dictionary; raise :class:`SpecError` naming ``where`` and the bad fields."""
    check_nesting(data, where)
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_format(exc, where)) from None
    for path, values in spec.matrix.items():
        if not values:
            raise SpecError(f"{where}: {field_path(('matrix', path))}: give a non-empty list of values")
        if path.split(".")[0] in ("matrix", "experiment") and path not in _VARIABLE_META:
            raise SpecError(f"{where}: {field_path(('matrix', path))}: this field cannot be varied")
    for case, overrides in spec.cases.items():
        for path in overrides:
            if path == ONLY:
                if not isinstance(overrides[path], dict) or not overrides[path]:
                    raise SpecError(
                        f"{where}: {field_path(('cases', case, ONLY))}: give a table of field paths and values"
                    )
                continue
            if path.split(".")[0] in ("matrix", "experiment", "cases") and path not in _VARIABLE_META:
                raise SpecError(f"{where}: {field_path(('cases', case, path))}: this field cannot be varied")
    expand(spec, where)  # every matrix point must validate, so errors surface at load time
    return spec


def stored(spec: str | Mapping[str, Any]) -> ExperimentSpec | None:
    """A scenario's spec as a results store keeps it (JSON or its dictionary), validated again, so
    analyses use the spec's own rules (``cross_traffic.active``, ``datapath()``, ...) instead of
    re-deriving them from JSON. None for a store of imported event logs (no lab spec)."""
    data = json.loads(spec) if isinstance(spec, str) else dict(spec)
    if "topology" not in data:
        return None
    return ExperimentSpec.model_validate(data)


def resolve_app_files(data: dict[str, Any], base: Path, where: str) -> None:
    """Make a user application's files (script, jar, py_files) absolute, relative to ``base``; each must exist."""
    w = data.get("workload")
    if not isinstance(w, dict):
        return

    def one(value: Any, field: str) -> Any:
        if not isinstance(value, str) or not value:
            return value  # validation names the bad type
        p = (base / value).expanduser().resolve()
        if not p.is_file():
            raise SpecError(f"{where}: workload.{field}: no file {p}")
        return str(p)

    for key in ("script", "jar"):
        if key in w:
            w[key] = one(w[key], key)
    if isinstance(w.get("py_files"), list):
        w["py_files"] = [one(v, f"py_files[{i}]") for i, v in enumerate(w["py_files"])]


def load(path: str | Path) -> ExperimentSpec:
    """Read and validate a TOML experiment file (a user application's files relative to it)."""
    data = read_toml(path)
    resolve_app_files(data, Path(path).parent, str(path))
    return parse(data, str(path))


ONLY = "only"  # a case's key limiting it to some matrix points; not a spec field


def _case_applies(data: dict[str, Any], only: dict[str, Any] | None) -> bool:
    """Does a case with this ``only`` table apply to the matrix point ``data``? A value may be a list
    of allowed values."""
    for path, want in (only or {}).items():
        have = get_path(data, path)
        allowed = want if isinstance(want, list) else [want]
        if have is MISSING or have not in allowed:
            return False
    return True


def _show(value: Any) -> str:
    if isinstance(value, dict) and "name" in value:
        return str(value["name"])
    return str(value)


def _short(path: str) -> str:
    aliases = {
        "congestion_control": "cc",
        "udp_percent": "udp",
        "partitions": "parts",
        "rate_mbps": "rate",
    }
    last = path.rsplit(".", 1)[-1]
    return aliases.get(last, last)


# Fields added after experiments were recorded: left out of the hash while at their default, so a
# scenario keeps its id (and its finished runs) when the spec language grows.
_HASH_NEUTRAL_DEFAULTS: dict[tuple[str, ...], Any] = {
    ("topology", "bottleneck", "red"): None,
    ("topology", "bottleneck", "datapath"): "auto",
    ("tcp", "vcc"): False,
    ("telemetry", "selftest"): "warn",
    ("topology", "switch_spin"): False,
    ("faults",): [],
    ("cross_traffic", "generator"): "iperf3",  # the in-switch source
    ("cross_traffic", "pattern"): "constant",
    ("cross_traffic", "on_ms"): 100.0,
    ("cross_traffic", "off_ms"): 100.0,
    ("cross_traffic", "seed"): 1,
    ("workload", "script"): None,  # the user-application fields
    ("workload", "jar"): None,
    ("workload", "main_class"): None,
    ("workload", "args"): [],
    ("workload", "py_files"): [],
    ("workload", "conf"): {},
}
_HOST_HASH_NEUTRAL_DEFAULTS: dict[str, Any] = {"vcc": None}


def spec_hash(spec: ExperimentSpec) -> str:
    """Stable 12-hex-digit content hash of a scenario spec (matrix and repetitions excluded)."""
    data = spec.model_dump(mode="json", exclude={"matrix", "cases"})
    data["experiment"].pop("repetitions", None)
    data["experiment"].pop("order", None)
    for path, default in _HASH_NEUTRAL_DEFAULTS.items():
        parent = get_path(data, ".".join(path[:-1])) if len(path) > 1 else data
        if isinstance(parent, dict) and parent.get(path[-1], MISSING) == default:
            del parent[path[-1]]
    for host in data.get("hosts", {}).values():
        if host.get("rack", MISSING) is None:  # added with the dumbbell topology
            del host["rack"]
        for key, default in _HOST_HASH_NEUTRAL_DEFAULTS.items():
            if host.get("tcp", {}).get(key, MISSING) == default:
                del host["tcp"][key]
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def selected(spec: ExperimentSpec, select: list[str] | None, where: str = "<spec>") -> list[Scenario]:
    """The scenarios whose label has every part of ``select`` (``case=none``, ``udp=75``; None or
    empty: all), as ``run --select`` chooses them; a SpecError when none does."""
    chosen = [sc for sc in expand(spec, where) if all(part in sc.label.split(",") for part in (select or []))]
    if not chosen:
        raise SpecError(f"{where}: no scenario matches --select {' '.join(select or [])}")
    return chosen


def expand(spec: ExperimentSpec, where: str = "<spec>") -> list[Scenario]:
    """The matrix's cartesian product (x the named cases) as validated scenarios.

    Order follows the matrix table's key order, last key varying fastest; cases vary fastest of
    all, so a case and its siblings run next to each other. One scenario if there is neither.
    """
    cases: list[tuple[str | None, dict[str, Any]]] = list(spec.cases.items()) or [(None, {})]
    counts = [(len(v), k) for k, v in spec.matrix.items()] + ([(len(spec.cases), "cases")] if spec.cases else [])
    check_bound(counts, where, SpecError, "scenarios")  # counted before anything is expanded
    check_distinct(spec.matrix, where, SpecError, lambda path: field_path(("matrix", path)))  # (now bounded)
    base = spec.model_dump(mode="json", exclude={"matrix", "cases"})
    scenarios: list[Scenario] = []
    for point in points(spec.matrix):
        for case, overrides in cases:
            data = copy.deepcopy(base)
            values: dict[str, Any] = dict(point)
            for path, value in values.items():
                try:
                    set_path(data, path, copy.deepcopy(value))  # never alias the matrix's own values
                except PathError as exc:
                    raise SpecError(f"{where}: {field_path(('matrix', path))}: {exc}") from None
            if not _case_applies(data, overrides.get(ONLY)):
                continue
            for path, value in overrides.items():
                if path != ONLY:
                    try:
                        set_path(data, path, copy.deepcopy(value))  # never alias the matrix's own values
                    except PathError as exc:
                        raise SpecError(f"{where}: {field_path(('cases', case, path))}: {exc}") from None
            parts = [f"{_short(k)}={_show(v)}" for k, v in values.items()]
            if case is not None:
                values["case"] = case
                parts.append(f"case={case}")
            label = ",".join(parts) or "base"
            try:
                concrete = ExperimentSpec.model_validate(data)
            except ValidationError as exc:
                raise SpecError(_format(exc, f"{where} (matrix point {label})")) from None
            scenarios.append(Scenario(spec=concrete, values=values, label=label, scenario_id=spec_hash(concrete)))
    if not scenarios:
        raise SpecError(f"{where}: no scenario left: every case's 'only' table excludes every matrix point")
    ids = [s.scenario_id for s in scenarios]
    if len(set(ids)) != len(ids):
        raise SpecError(f"{where}: matrix produces duplicate scenarios")
    return scenarios
