"""The NDP proxy's pushdown request, checked before it takes a place in the queue (pure; fuzzed by
``benchmarks/ndp_fuzz.py``): size, strict JSON, valid Unicode, no duplicate keys, known fields, the
plan against the declared schema; the request path; the file's schema against the declared one.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any, get_args

import pyarrow as pa

from shufflelab.ndp import plan as P

MAX_SCHEMA_BYTES = 32 * 1024  # room for the schema next to a plan of at most plan.MAX_PLAN_BYTES
MAX_BODY_BYTES = P.MAX_PLAN_BYTES + MAX_SCHEMA_BYTES
MAX_ROW_GROUPS = 10_000
MAX_PATH_CHARS = 4096
COLUMN_TYPES: tuple[str, ...] = get_args(P.ColumnType)
REQUEST_FIELDS = ("plan", "schema", "row_groups")


class BodyTooLarge(P.PlanError):
    """The request body exceeds :data:`MAX_BODY_BYTES` (HTTP 413)."""


@dataclass(frozen=True)
class PushdownRequest:
    """A checked pushdown request: a plan valid against ``schema``, optionally a row-group subset."""

    plan: P.Plan
    schema: dict[str, str]
    row_groups: tuple[int, ...] | None = None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise P.PlanError("body", f"key {k[:70]!r} repeats in one object")
        out[k] = v
    return out


def _strict_constant(name: str) -> Any:
    raise P.PlanError("body", f"{name} is not JSON")


def _check_text(doc: Any) -> None:
    """Every string in ``doc`` (keys too) can be encoded as UTF-8; else PlanError naming its path.
    (JSON's ``\\ud800`` escapes decode to lone surrogates, which nothing downstream can encode.)"""
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, node = stack.pop()
        items: Any = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        if isinstance(node, str):
            try:
                P.check_text(node)
            except ValueError as exc:
                raise P.PlanError(path or "body", str(exc)) from None
        for k, v in items:
            name = json.dumps(k)[1:-1][:70] if isinstance(k, str) else str(k)  # ASCII: escapes shown as such
            sub = f"{path}.{name}" if path else name
            if isinstance(k, str):
                try:
                    P.check_text(k)
                except ValueError as exc:
                    raise P.PlanError(sub, f"key {exc}") from None
            stack.append((sub, v))


def _check_schema(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise P.PlanError("schema", "must be an object {column: type}")
    if not raw:
        raise P.PlanError("schema", "declares no column")
    if len(raw) > P.MAX_COLUMNS:
        raise P.PlanError("schema", f"{len(raw)} columns, at most {P.MAX_COLUMNS}")
    for name, ctype in raw.items():
        if not name or len(name) > 64 or not set(name) <= P.NAME_CHARS or name[0].isdigit():
            raise P.PlanError(
                f"schema.{name[:70]}", f"{name[:70]!r} is not a column name (lowercase letters, digits, _; at most 64)"
            )
        if ctype not in COLUMN_TYPES:
            raise P.PlanError(f"schema.{name}", f"type {str(ctype)[:40]!r} is not one of {', '.join(COLUMN_TYPES)}")
    return {str(k): str(v) for k, v in raw.items()}


def _check_row_groups(raw: Any) -> tuple[int, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise P.PlanError("row_groups", "must be a non-empty list of row-group numbers")
    if len(raw) > MAX_ROW_GROUPS:
        raise P.PlanError("row_groups", f"{len(raw)} entries, at most {MAX_ROW_GROUPS}")
    for i, g in enumerate(raw):
        if not isinstance(g, int) or isinstance(g, bool) or not 0 <= g < 2**31:
            raise P.PlanError(f"row_groups.{i}", f"{str(g)[:40]} is not a row-group number (an integer >= 0)")
    if len(set(raw)) != len(raw):
        raise P.PlanError("row_groups", "row groups repeat")
    return tuple(raw)


def parse_request(body: bytes) -> PushdownRequest:
    """Parse and check a pushdown request body; raises :class:`~shufflelab.ndp.plan.PlanError`
    (:class:`BodyTooLarge` for an oversized body) whose ``field`` is the path in the body, e.g.
    ``plan.filters.0.column`` or ``schema.l_tax``."""
    if len(body) > MAX_BODY_BYTES:
        raise BodyTooLarge("body", f"{len(body)} bytes, at most {MAX_BODY_BYTES}")
    try:
        doc = json.loads(body, object_pairs_hook=_no_duplicates, parse_constant=_strict_constant)
    except P.PlanError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise P.PlanError("body", f"not JSON: {str(exc)[:200]}") from None
    if not isinstance(doc, dict):
        raise P.PlanError("body", "must be a JSON object with plan and schema")
    _check_text(doc)
    for k in doc:
        if k not in REQUEST_FIELDS:
            raise P.PlanError(str(k)[:70], f"unknown field (known: {', '.join(REQUEST_FIELDS)})")
    for k in ("plan", "schema"):
        if k not in doc:
            raise P.PlanError(k, "missing")
    if not isinstance(doc["plan"], dict):
        raise P.PlanError("plan", "must be a JSON object")
    schema = _check_schema(doc["schema"])
    row_groups = _check_row_groups(doc.get("row_groups"))
    text = json.dumps(doc["plan"], separators=(",", ":"), ensure_ascii=False).encode()
    try:
        plan = P.validate(P.parse(text), schema)
    except P.PlanError as exc:
        raise P.PlanError("plan" if exc.field == "plan" else f"plan.{exc.field}", exc.reason) from None
    return PushdownRequest(plan, schema, row_groups)


def request_path(raw_path: str) -> str:
    """The HDFS path a pushdown names: its raw request path after ``/ndp/v1``, percent-decoded as
    UTF-8 (``%ff`` is refused, not read as a file literally named ``%ff``)."""
    try:
        decoded = urllib.parse.unquote_to_bytes(raw_path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise P.PlanError("path", f"percent-encoded bytes that are not UTF-8 (at byte {exc.start})") from None
    prefix = "/ndp/v1"
    if not decoded.startswith(prefix + "/"):
        raise P.PlanError("path", "give the file's absolute HDFS path after /ndp/v1")
    return check_hdfs_path(decoded[len(prefix) :])


def check_hdfs_path(path: str) -> str:
    """An absolute HDFS path without ``.``/``..``/empty segments or control characters."""
    if not path.startswith("/") or path == "/":
        raise P.PlanError("path", "give the file's absolute HDFS path after /ndp/v1")
    if len(path) > MAX_PATH_CHARS:
        raise P.PlanError("path", f"{len(path)} characters, at most {MAX_PATH_CHARS}")
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise P.PlanError("path", "control characters are not allowed")
    if any(seg in ("", ".", "..") for seg in path[1:].split("/")):
        raise P.PlanError("path", "empty, '.' and '..' segments are not allowed")
    return path


# -- the file's schema against the declared one -------------------------------------------------
def arrow_kind(t: pa.DataType) -> str | None:
    """The plan column type an Arrow type stands for (None: no plan type)."""
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", bool)(t):
        return "string"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_dictionary(t):
        return arrow_kind(t.value_type)
    return None


def check_file_schema(declared: dict[str, str], actual: pa.Schema) -> None:
    """Every declared column exists in the file with the declared type; else PlanError(schema.<col>)."""
    names = actual.names
    for col, ctype in declared.items():
        if names.count(col) != 1:
            what = "no column" if col not in names else "more than one column"
            raise P.PlanError(f"schema.{col}", f"the file has {what} {col!r} (it has {', '.join(names[:40])})")
        t = actual.field(col).type
        kind = arrow_kind(t)
        if kind != ctype:
            raise P.PlanError(f"schema.{col}", f"declared {ctype}, the file has {t} ({kind or 'no plan type'})")
