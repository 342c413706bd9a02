"""A binding, not a model: the Python face of the Rust simulator core (``crates/simcore``, module
``shufflelab_simcore``). Every simulated figure is computed in Rust; nothing is modelled here.

The core takes and returns JSON documents (fields and units in ``crates/simcore/src/model.rs``);
this module turns them into Python dicts and says how to build the core when it is missing.
"""

from __future__ import annotations

import json
from typing import Any

from shufflelab.netaware import NetworkEstimate, OperatorEstimate, PendingTransfer, TransferView


class CoreMissingError(RuntimeError):
    """The compiled core is not installed."""


def _module() -> Any:
    try:
        import shufflelab_simcore
    except ImportError as err:
        raise CoreMissingError(
            "the simulator core is not built: run scripts/setup.sh (or .venv/bin/pip install crates/simcore)"
        ) from err
    return shufflelab_simcore


def simulate(config: dict[str, Any]) -> dict[str, Any]:
    """Run one configuration in the Rust core and return its result document."""
    try:
        out = _module().run(json.dumps(config))
    except ValueError as err:
        raise ValueError(f"simulator core rejected the configuration: {err}") from None
    result: dict[str, Any] = json.loads(out)
    return result


def rust_plan(
    operators: list[OperatorEstimate], net: NetworkEstimate, chain: bool = False, view: TransferView | None = None
) -> int:
    """The Rust twin of :func:`shufflelab.netaware.plan` (``chain``: of ``plan_chain``; a
    ``view``: of ``plan_fluid``)."""
    doc: dict[str, Any] = {
        "operators": [
            {k: (_finite(v) if isinstance(v, float) else v) for k, v in vars(op).items()} for op in operators
        ],
        "network": {k: _finite(v) for k, v in vars(net).items()},
    }
    if view is not None:
        doc["transfers"] = {"transfers": [vars(t) for t in view.transfers], "queued": view.queued}
    return int(_module().net_aware_plan(json.dumps(doc), chain))


def rust_fluid_finish_s(transfers: list[PendingTransfer], bandwidth_gbps: float, max_concurrent: int) -> list[float]:
    """The Rust twin of :func:`shufflelab.netaware.fluid_finish_s`."""
    doc = {
        "transfers": [vars(t) for t in transfers],
        "bandwidth_gbps": bandwidth_gbps,
        "max_concurrent": max_concurrent,
    }
    ends = json.loads(_module().net_aware_fluid_finish(json.dumps(doc)))
    return [float("inf") if e is None else float(e) for e in ends]


def _finite(x: float) -> float | None:
    # JSON has no infinity; the core reads null back as infinity ("no CPU cost").
    return None if x == float("inf") else x


def planner_inputs(record: dict[str, Any]) -> tuple[list[OperatorEstimate], NetworkEstimate]:
    """The planner inputs a Net-Aware run recorded for one job, as :mod:`netaware` values."""
    ops = []
    for o in record["operators"]:
        fields: dict[str, Any] = {k: (float("inf") if v is None else v) for k, v in o.items()}
        ops.append(OperatorEstimate(**fields))
    return ops, NetworkEstimate(**record["network"])


def transfer_view(record: dict[str, Any]) -> TransferView | None:
    """The per-transfer view a Net-Aware (fluid) run recorded for one job (None for the others)."""
    view = record.get("transfers")
    if view is None:
        return None
    return TransferView(tuple(PendingTransfer(**t) for t in view["transfers"]), int(view["queued"]))


def simulate_fabric(config: dict[str, Any]) -> dict[str, Any]:
    """Run one fabric configuration (``crates/simcore/src/fabric.rs``) and return its result."""
    module = _module()
    if not hasattr(module, "run_fabric"):
        raise CoreMissingError(
            "the installed simulator core predates fabric simulation: rebuild it with scripts/setup.sh "
            "(or .venv/bin/pip install crates/simcore)"
        )
    try:
        out = module.run_fabric(json.dumps(config))
    except ValueError as err:
        raise ValueError(f"simulator core rejected the fabric configuration: {err}") from None
    result: dict[str, Any] = json.loads(out)
    return result


def simulate_apps(config: dict[str, Any]) -> dict[str, Any]:
    """Run Spark applications (stage DAGs) on a fabric (``crates/simcore/src/apps.rs``)."""
    module = _module()
    if not hasattr(module, "run_apps"):
        raise CoreMissingError(
            "the installed simulator core predates application simulation: rebuild it with scripts/setup.sh "
            "(or .venv/bin/pip install crates/simcore)"
        )
    try:
        out = module.run_apps(json.dumps(config))
    except ValueError as err:
        raise ValueError(f"simulator core rejected the applications configuration: {err}") from None
    result: dict[str, Any] = json.loads(out)
    return result


def rust_max_min_rates(
    capacities: list[float], paths: list[list[int]], caps: list[float | None] | None = None
) -> list[float]:
    """Max-min fair rates of flows over links with the fabric's solver (``maxmin.rs``); a cap of
    None is an elastic flow."""
    module = _module()
    if not hasattr(module, "max_min_rates"):
        raise CoreMissingError("the installed simulator core predates max_min_rates: rebuild it with scripts/setup.sh")
    doc = {"capacities": capacities, "paths": paths, "caps": caps}
    rates: list[float] = json.loads(module.max_min_rates(json.dumps(doc)))
    return rates
