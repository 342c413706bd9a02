"""A spec's matrix, shared by the lab's and the simulator's specs: dotted field paths set in a
document, the bound on the number of points."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

MAX_SCENARIOS = 10_000
"""The most scenarios one experiment may expand to (matrix points x cases). Checked before
expanding, so a matrix of millions of points is refused at once with its count instead of taking
minutes and gigabytes; 10,000 is far beyond what can run on one host (a run takes a minute)."""


class PathError(ValueError):
    """A dotted path that descends into something other than a table."""


def set_path(data: dict[str, Any], path: str, value: Any, *, lists: bool = False) -> None:
    """Set the field at the dotted ``path`` (creating tables on the way); raise :class:`PathError`
    when the path descends into a value, or into a list unless ``lists`` (then a part that is a
    list's index selects that element: ``clusters.0.cores``)."""
    node: Any = data
    parts = path.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if lists and isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise PathError(f"{'.'.join(parts[: i + 1])}: {part!r} is not an index of the list")
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
            continue
        if not isinstance(node, dict):
            what = "a list" if isinstance(node, list) else f"a value ({_brief(node)})"
            raise PathError(f"{'.'.join(parts[:i])} is {what}, not a table: the path cannot descend into it")
        if last:
            node[part] = value
        else:
            node = node.setdefault(part, {})


def points(matrix: Mapping[str, Sequence[Any]]) -> Iterator[dict[str, Any]]:
    """The matrix's cartesian product in its key order, the last key varying fastest: one
    ``{path: value}`` per point (a single empty point for an empty matrix)."""
    keys = list(matrix)
    for combo in itertools.product(*(matrix[k] for k in keys)):
        yield dict(zip(keys, combo, strict=True))


def check_bound(counts: Sequence[tuple[int, str]], where: str, error: type[Exception], noun: str) -> None:
    """Refuse more than :data:`MAX_SCENARIOS` points before expanding anything; ``counts`` are the
    sizes of the factors with what they count (``(3, "tcp.congestion_control")``)."""
    total = math.prod(n for n, _ in counts)
    if total > MAX_SCENARIOS:
        sizes = " x ".join(f"{n} {what}" for n, what in counts)
        raise error(
            f"{where}: matrix: {total:,} {noun} ({sizes}) exceed the bound of {MAX_SCENARIOS:,} per experiment; "
            "vary fewer values or split the experiment"
        )


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
