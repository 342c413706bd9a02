"""The adapter to the Rust simulator core (``crates/simcore``, module ``shufflelab_simcore``).

The core takes and returns JSON documents (fields and units in ``crates/simcore/src/model.rs``);
this module turns them into Python dicts and says how to build the core when it is missing.
"""

from __future__ import annotations

import json
from typing import Any

from shufflelab.netaware import NetworkEstimate, OperatorEstimate


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


def rust_plan(operators: list[OperatorEstimate], net: NetworkEstimate, chain: bool = False) -> int:
    """The Rust twin of :func:`shufflelab.netaware.plan` (``chain``: of ``plan_chain``)."""
    doc = {
        "operators": [
            {k: (_finite(v) if isinstance(v, float) else v) for k, v in vars(op).items()} for op in operators
        ],
        "network": {k: _finite(v) for k, v in vars(net).items()},
    }
    return int(_module().net_aware_plan(json.dumps(doc), chain))


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
