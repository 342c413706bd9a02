"""Shipped experiments (experiments/*.toml) as dictionaries that a test trims -- fewer cells, hosts
or rows -- and writes back as a spec file for ``shufflelab run --hosts``."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def load(name: str) -> dict[str, Any]:
    """experiments/``name`` as a dictionary."""
    return tomllib.loads((REPO / "experiments" / name).read_text())


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _value(v: object) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(v)  # strings, numbers and booleans are written alike in TOML


def write(data: dict[str, Any], path: Path) -> Path:
    """``data`` (a spec's tables) as a TOML file at ``path``: each top-level table a section, what
    it nests written inline."""
    lines = []
    for table, body in data.items():
        lines.append(f"[{table}]")
        lines += [f"{_key(k)} = {_value(v)}" for k, v in body.items()]
    path.write_text("\n".join(lines) + "\n")
    return path
