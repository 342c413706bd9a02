"""A spec's matrix, shared by the lab's and the simulator's specs: dotted field paths set in a
document, the bound on the number of points."""

from __future__ import annotations

from typing import Any

MAX_SCENARIOS = 10_000
"""The most scenarios one experiment may expand to (matrix points x cases). Checked before
expanding, so a matrix of millions of points is refused at once with its count instead of taking
minutes and gigabytes; 10,000 is far beyond what can run on one host (a run takes a minute)."""


class PathError(ValueError):
    """A dotted path that descends into something other than a table."""


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set the field at the dotted ``path`` (creating tables on the way); raise :class:`PathError`
    when the path descends into a value or a list."""
    node = data
    parts = path.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            what = "a list" if isinstance(child, list) else f"a value ({_brief(child)})"
            raise PathError(f"{'.'.join(parts[: i + 1])} is {what}, not a table: the path cannot descend into it")
        node = child
    node[parts[-1]] = value


def _brief(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def get_path(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


MISSING = object()
