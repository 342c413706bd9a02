"""The pushdown plan: what a storage node may run next to the data, as a small typed document.

A plan is JSON, never SQL: a conjunction of predicates (``filters``), the columns to return
(``project``), and optional partial aggregates (``aggregates`` grouped by ``group_by``). The
storage side validates it against the data's schema before doing anything:

* version must be known; unknown fields are rejected;
* operators come from a whitelist (aggregate arguments may be ``+ - *`` over numeric columns and
  number literals, at most 8 deep); every column must exist in the schema; a value must have the
  column's type (numbers for numeric columns, ISO dates ``YYYY-MM-DD`` for dates, strings for
  strings);
* every value is one the engine can hold: integers of at most 38 digits (the widest decimal Spark
  and Arrow have, inside DuckDB's 128-bit HUGEINT), finite floats (a JSON number beyond a double's
  range parses as infinity), strings that are valid Unicode (no lone surrogates, which JSON's
  ``\\ud800`` escapes can produce and UTF-8 cannot encode);
* size limits: the document, the number of predicates, columns, IN-list items and string lengths.

A bad plan raises :class:`PlanError` with the field path and the reason (the proxy turns it into
a 4xx). ``avg`` is executed as a partial ``sum`` and ``count`` so that partials from several
blocks combine exactly (:func:`shufflelab.ndp.execute.combine`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    field_validator,
    model_validator,
)

MAX_PLAN_BYTES = 64 * 1024
MAX_PREDICATES = 64
MAX_COLUMNS = 256
MAX_IN_ITEMS = 1000
MAX_STRING = 1024
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")

ColumnType = Literal["int", "float", "decimal", "string", "date"]
Op = Literal["=", "!=", "<", "<=", ">", ">=", "between", "in", "is_null", "not_null", "starts_with"]
AggFn = Literal["sum", "count", "min", "max", "avg"]
ArithOp = Literal["+", "-", "*"]
MAX_EXPR_DEPTH = 8
MAX_INT_DIGITS = 38  # decimal(38, 0): Spark's and Arrow's widest, inside DuckDB's HUGEINT (< 2**127)
MAX_INT = 10**MAX_INT_DIGITS - 1
ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # what DuckDB's CAST(... AS DATE) and Python agree on


class PlanError(ValueError):
    """A plan that must not run: ``field`` is the path of the offending part."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_text(v: str) -> str:
    """``v`` if it can be encoded as UTF-8 (no lone surrogates), else ValueError saying where."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"not valid Unicode: a lone surrogate {v[exc.start]!r} at character {exc.start} (UTF-8 cannot encode it)"
        ) from None
    return v


def _number(v: int | float) -> int | float:
    if isinstance(v, int) and abs(v) > MAX_INT:
        raise ValueError(
            f"an integer of {len(str(abs(v)))} digits; at most {MAX_INT_DIGITS} "
            f"(the widest decimal, inside the engine's 128-bit integers): write a float instead"
        )
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError("a number must be finite (NaN, or beyond a double's range)")
    return v


def _scalar(v: Any) -> int | float | str:
    """A predicate value: a number the engine can hold or a valid Unicode string of bounded length."""
    if isinstance(v, bool):
        raise ValueError("booleans are not values here")
    if isinstance(v, int | float):
        return _number(v)
    if isinstance(v, str):
        if len(v) > MAX_STRING:
            raise ValueError(f"string longer than {MAX_STRING} characters")
        return check_text(v)
    raise ValueError(f"a value is a number or a string, got {type(v).__name__}")


def _literal(v: Any) -> int | float:
    """An arithmetic literal: a number the engine can hold."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"a literal is a number, got {type(v).__name__}")
    return _number(v)


Scalar = Annotated[int | float | str, PlainValidator(_scalar)]
Number = Annotated[int | float, PlainValidator(_literal)]


def _name(v: str) -> str:
    if not v or len(v) > 64 or not set(v) <= NAME_CHARS or v[0].isdigit():
        raise ValueError(f"{v[:70]!r} is not a column name (lowercase letters, digits, _; at most 64)")
    return v


class Predicate(_Model):
    column: str
    op: Op
    value: Scalar | None = None
    values: list[Scalar] | None = Field(default=None, max_length=MAX_IN_ITEMS)

    _col = field_validator("column")(classmethod(lambda cls, v: _name(v)))

    @model_validator(mode="after")
    def _arity(self) -> Predicate:
        if self.op in ("is_null", "not_null"):
            if self.value is not None or self.values is not None:
                raise ValueError(f"{self.op} takes no value")
        elif self.op == "between":
            if self.values is None or len(self.values) != 2 or self.value is not None:
                raise ValueError("between takes values = [low, high]")
        elif self.op == "in":
            if not self.values or self.value is not None:
                raise ValueError("in takes a non-empty values list")
        elif self.value is None or self.values is not None:
            raise ValueError(f"{self.op} takes one value")
        if self.op == "starts_with" and not isinstance(self.value, str):
            raise ValueError("starts_with takes a string")
        return self


class Expr(_Model):
    """Arithmetic over numeric columns, the argument of an aggregate: exactly one of ``col`` (a
    column), ``lit`` (a number) or ``op`` with two ``args``. Only ``+ - *``: no division, so no
    division-by-zero semantics to agree on between DuckDB and Spark."""

    col: str | None = None
    lit: Number | None = None
    op: ArithOp | None = None
    args: list[Expr] | None = Field(default=None, min_length=2, max_length=2)

    @field_validator("col")
    @classmethod
    def _col(cls, v: str | None) -> str | None:
        return None if v is None else _name(v)

    @model_validator(mode="after")
    def _one(self) -> Expr:
        kinds = [self.col is not None, self.lit is not None, self.op is not None]
        if sum(kinds) != 1:
            raise ValueError("an expression is exactly one of col, lit or op")
        if (self.op is None) != (self.args is None):
            raise ValueError("op and args go together")
        if self.depth() > MAX_EXPR_DEPTH:
            raise ValueError(f"expression deeper than {MAX_EXPR_DEPTH}")
        return self

    def depth(self) -> int:
        return 1 + max((a.depth() for a in self.args or []), default=0)

    def columns(self) -> list[str]:
        if self.col is not None:
            return [self.col]
        return [c for a in self.args or [] for c in a.columns()]


class Aggregate(_Model):
    fn: AggFn
    column: str | None = None  # None (and no expr) only for count(*)
    expr: Expr | None = None
    alias: str

    _alias = field_validator("alias")(classmethod(lambda cls, v: _name(v)))

    @field_validator("column")
    @classmethod
    def _column(cls, v: str | None) -> str | None:
        return None if v is None else _name(v)

    @model_validator(mode="after")
    def _star(self) -> Aggregate:
        if self.column is not None and self.expr is not None:
            raise ValueError("give column or expr, not both")
        if self.column is None and self.expr is None and self.fn != "count":
            raise ValueError(f"{self.fn} needs a column or an expr (only count may omit both)")
        return self

    def partial_columns(self) -> tuple[str, ...]:
        """The columns this aggregate's partial result has: ``avg`` travels as ``<alias>__sum`` and
        ``<alias>__count`` (so that partials of several blocks combine exactly), the others as the alias."""
        return (self.alias + "__sum", self.alias + "__count") if self.fn == "avg" else (self.alias,)


class Plan(_Model):
    version: Literal[1] = 1
    filters: list[Predicate] = Field(default_factory=list, max_length=MAX_PREDICATES)
    project: list[str] | None = Field(default=None, max_length=MAX_COLUMNS)
    group_by: list[str] = Field(default_factory=list, max_length=MAX_COLUMNS)
    aggregates: list[Aggregate] = Field(default_factory=list, max_length=MAX_COLUMNS)

    @field_validator("project", "group_by")
    @classmethod
    def _names(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        for c in v:
            _name(c)
        if len(set(v)) != len(v):
            raise ValueError("columns repeat")
        return v

    @model_validator(mode="after")
    def _shape(self) -> Plan:
        if self.group_by and not self.aggregates:
            raise ValueError("group_by needs aggregates")
        if self.aggregates and self.project is not None:
            raise ValueError("give project or aggregates, not both (aggregates project their own columns)")
        # every column of the result, and of the partial result (avg's alias__sum and alias__count
        # too), has a name of its own
        for result in ("final", "partial"):
            taken = {g: f"the group_by column {g!r}" for g in self.group_by}
            for i, a in enumerate(self.aggregates):
                cols = a.partial_columns() if result == "partial" else (a.alias,)
                for c in cols:
                    if c in taken:
                        own = "" if c == a.alias else f" (avg {a.alias!r} sends its partial result as {c!r})"
                        raise PlanError(
                            f"aggregates.{i}.alias", f"{a.alias!r} collides with {taken[c]}{own}: give another alias"
                        )
                for c in cols:
                    taken[c] = f"aggregates.{i}.alias {a.alias!r}" + ("" if c == a.alias else f" (its partial {c!r})")
        return self

    # -- the operator prefix this plan pushes (seed 003's vocabulary) ------------------------------
    def operators(self) -> list[str]:
        ops = []
        if self.filters:
            ops.append("filter")
        if self.project is not None or self.aggregates:
            ops.append("project")
        if self.aggregates:
            ops.append("aggregate")
        return ops


def parse(text: str | bytes) -> Plan:
    """Parse and structurally validate a plan document (no schema yet)."""
    try:
        raw = text.encode() if isinstance(text, str) else text
    except UnicodeEncodeError as exc:
        raise PlanError("plan", f"not valid Unicode: a lone surrogate at character {exc.start}") from None
    if len(raw) > MAX_PLAN_BYTES:
        raise PlanError("plan", f"{len(raw)} bytes, at most {MAX_PLAN_BYTES}")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise PlanError("plan", f"not JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise PlanError("plan", "must be a JSON object")
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e["loc"])
        inner = e.get("ctx", {}).get("error")
        if isinstance(inner, PlanError):  # a whole-model check that knows the part it refuses
            raise PlanError(f"{where}.{inner.field}" if where else inner.field, inner.reason) from None
        raise PlanError(where or "plan", e["msg"]) from None


_NUMERIC = {"int", "float", "decimal"}


def _check_value(path: str, ctype: str, v: Scalar) -> None:
    if ctype in _NUMERIC:
        if not isinstance(v, int | float) or isinstance(v, bool):
            raise PlanError(path, f"a {ctype} column needs a number, got {type(v).__name__}")
    elif ctype == "date":
        if not isinstance(v, str):
            raise PlanError(path, "a date column needs an ISO date string")
        try:
            if not ISO_DATE.fullmatch(v):
                raise ValueError(v)
            dt.date.fromisoformat(v)
        except ValueError:
            raise PlanError(path, f"{v[:40]!r} is not an ISO date (YYYY-MM-DD, years 0001-9999)") from None
    elif not isinstance(v, str):
        raise PlanError(path, f"a string column needs a string, got {type(v).__name__}")


def validate(plan: Plan, schema: dict[str, str]) -> Plan:
    """Check ``plan`` against the data's ``schema`` (column -> int|float|decimal|string|date)."""
    for i, p in enumerate(plan.filters):
        if p.column not in schema:
            raise PlanError(f"filters.{i}.column", f"no column {p.column!r}")
        ctype = schema[p.column]
        if p.op == "starts_with" and ctype != "string":
            raise PlanError(f"filters.{i}.op", "starts_with needs a string column")
        for j, v in enumerate([p.value] if p.value is not None else (p.values or [])):
            _check_value(f"filters.{i}.value" if p.value is not None else f"filters.{i}.values.{j}", ctype, v)
    for name, cols in (("project", plan.project or []), ("group_by", plan.group_by)):
        for i, c in enumerate(cols):
            if c not in schema:
                raise PlanError(f"{name}.{i}", f"no column {c!r}")
    for i, a in enumerate(plan.aggregates):
        if a.column is not None and a.column not in schema:
            raise PlanError(f"aggregates.{i}.column", f"no column {a.column!r}")
        if a.fn in ("sum", "avg") and a.column is not None and schema[a.column] not in _NUMERIC:
            raise PlanError(f"aggregates.{i}.fn", f"{a.fn} needs a numeric column, {a.column!r} is {schema[a.column]}")
        for c in a.expr.columns() if a.expr is not None else []:
            if c not in schema:
                raise PlanError(f"aggregates.{i}.expr", f"no column {c!r}")
            if schema[c] not in _NUMERIC:
                raise PlanError(f"aggregates.{i}.expr", f"arithmetic needs numeric columns, {c!r} is {schema[c]}")
    return plan
