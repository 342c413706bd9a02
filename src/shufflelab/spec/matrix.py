"""A spec's matrix, shared by the lab's and the simulator's specs: dotted field paths set in a
document, the bound on the number of points, and the expansion of a simulator spec's matrix into
one document per point (:func:`point_documents`, for seed 003's, the fabric and the application
specs)."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

MAX_SCENARIOS = 10_000
"""The most scenarios one experiment may expand to (matrix points x cases). Checked before
expanding, so a matrix of millions of points is refused at once with its count instead of taking
minutes and gigabytes; 10,000 is far beyond what can run on one host (a run takes a minute)."""


class PathError(ValueError):
    """A dotted path that descends into something other than a table."""


def set_path(data: dict[str, Any], path: str, value: Any, *, lists: bool = False, create: bool = True) -> None:
    """Set the field at the dotted ``path`` (creating tables on the way, unless not ``create``: then
    a missing table is a :class:`PathError`); raise :class:`PathError` when the path descends into a
    value, or into a list unless ``lists`` (then a part that is a list's index selects that element:
    ``clusters.0.cores``)."""
    node: Any = data
    parts = path.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if lists and isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise PathError(f"{'.'.join(parts[: i + 1])}: {part!r} is not an index below {len(node)}")
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
        elif part in node or create:
            node = node.setdefault(part, {})
        else:
            raise PathError(f"{'.'.join(parts[: i + 1])} is not a table of the spec: give the table to vary its fields")


def points(matrix: Mapping[str, Sequence[Any]]) -> Iterator[dict[str, Any]]:
    """The matrix's cartesian product in its key order, the last key varying fastest: one
    ``{path: value}`` per point (a single empty point for an empty matrix)."""
    keys = list(matrix)
    for combo in itertools.product(*(matrix[k] for k in keys)):
        yield dict(zip(keys, combo, strict=True))


def same_values(values: Sequence[Any]) -> tuple[Any, Any] | None:
    """The first two values of one matrix list that are the same value (``0.0`` and ``-0.0``, ``2``
    and ``2.0``, tables with such values), else None: they are one configuration, which would be
    run as two scenarios with two ids. ``true`` and ``1`` stay distinct. Linear in the list's length."""
    seen: dict[Any, Any] = {}
    for v in values:
        key = _canonical(v)
        if key in seen:
            return seen[key], v
        seen[key] = v
    return None


def check_distinct(
    matrix: Mapping[str, Sequence[Any]],
    where: str,
    error: type[Exception],
    name: Callable[[str], str] = lambda path: f"matrix.{path}",
) -> None:
    """Refuse a matrix list that gives one value twice (:func:`same_values`), naming the file, the
    field (``name`` of its path) and the two values."""
    for path, values in matrix.items():
        if (same := same_values(values)) is not None:
            raise error(f"{where}: {name(path)}: {same[0]!r} and {same[1]!r} are the same value: give each value once")


def _canonical(v: Any) -> Any:
    """A hashable key under which equal configuration values coincide."""
    if isinstance(v, bool) or v is None:
        return ("bool", v)
    if isinstance(v, int):
        return ("num", v)
    if isinstance(v, float):
        if math.isnan(v):
            return ("num", "nan")
        return ("num", int(v)) if v.is_integer() else ("num", v)  # -0.0 -> 0, 2.0 -> 2
    if isinstance(v, str):
        return ("str", v)
    if isinstance(v, (list, tuple)):
        return ("list", tuple(_canonical(x) for x in v))
    if isinstance(v, Mapping):
        return ("table", tuple(sorted((str(k), _canonical(x)) for k, x in v.items())))
    return ("other", repr(v))


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


FIXED = ("matrix", "experiment")
"""The tables a simulator spec's matrix cannot vary."""


def point_documents(
    matrix: Mapping[str, Sequence[Any]],
    base: Mapping[str, Any],
    where: str,
    error: type[Exception],
    *,
    create: bool = True,
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """A simulator spec's matrix points, the last key varying fastest: per point its
    ``{path: value}`` and a copy of the document ``base`` with those values set (list items by
    index; missing tables created unless not ``create``). Refused before anything is expanded,
    naming the file and the field: an empty list, a path into a :data:`FIXED` table, more than
    :data:`MAX_SCENARIOS` points, a value given twice; then a path that cannot be set, at its point."""
    for key, given in matrix.items():
        if not given:
            raise error(f"{where}: matrix.{key}: give a non-empty list of values")
        if key.split(".")[0] in FIXED:
            raise error(f"{where}: matrix.{key}: this field cannot be varied")
    check_bound([(len(v), k) for k, v in matrix.items()], where, error, "points")
    check_distinct(matrix, where, error)  # (now bounded)
    for values in points(matrix):
        doc = copy.deepcopy(dict(base))
        for k, v in values.items():
            try:
                set_path(doc, k, v, lists=True, create=create)
            except PathError as exc:
                raise error(f"{where}: matrix.{k}: {exc}") from None
        yield values, doc


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
