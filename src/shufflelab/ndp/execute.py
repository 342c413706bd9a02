"""Run a validated pushdown plan with DuckDB, and combine partial aggregates.

The plan becomes one parameterised query: identifiers are schema-checked names (quoted), every
value is a bound parameter, so nothing from the request is ever spliced into SQL text. The source
is an Arrow table or a Parquet file; the result is an Arrow table (``to_ipc`` streams it).
Partial aggregates: ``sum``/``count``/``min``/``max`` as themselves, ``avg`` as two columns
``<alias>__sum`` and ``<alias>__count``; :func:`combine` merges the partials of several blocks into
the final answer (avg = Σ sum / Σ count).

Values the plan cannot be computed on -- arithmetic that overflows its type (``sum(l_orderkey *
4611686018427387904)`` overflows BIGINT), an integer compared with a decimal column that does not
fit the DECIMAL(38, scale) DuckDB compares in, a result wider than the 38 digits Arrow's decimal
holds -- raise :class:`ValueRangeError` naming the plan part (an overflow is located by evaluating
the filters, then each aggregate on its own: only on this error path), never an engine exception.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from shufflelab.ndp.plan import Expr, Plan, PlanError


class ValueRangeError(PlanError):
    """A valid plan that cannot be computed on these values (an overflow): ``field`` is the plan part."""


def _q(name: str) -> str:
    return f'"{name}"'  # names are validated: [a-z_][a-z0-9_]*


def _both_zeros(values: Sequence[Any]) -> list[Any]:
    """``values`` with a float zero given as both 0.0 and -0.0: they are equal, but DuckDB's Python
    package pushes an IN into its scan of an Arrow table as pyarrow's ``Expression.isin``, a hash lookup
    where either zero misses the rows holding the other (DuckDB 1.5.6; its Parquet scan compares them
    equal)."""
    if not any(isinstance(v, float) and v == 0.0 for v in values):
        return list(values)
    return [v for v in values if not (isinstance(v, float) and v == 0.0)] + [0.0, -0.0]


def _where(plan: Plan, schema: dict[str, str]) -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []

    def val(v: Any, col: str) -> str:
        params.append(v)
        return "CAST(? AS DATE)" if schema.get(col) == "date" else "?"

    for p in plan.filters:
        c = _q(p.column)
        if p.op in ("=", "!=", "<", "<=", ">", ">="):
            parts.append(f"{c} {'<>' if p.op == '!=' else p.op} {val(p.value, p.column)}")
        elif p.op == "between":
            assert p.values is not None  # validated: between has exactly two values
            lo, hi = p.values
            parts.append(f"{c} BETWEEN {val(lo, p.column)} AND {val(hi, p.column)}")
        elif p.op == "in":
            parts.append(f"{c} IN ({', '.join(val(v, p.column) for v in _both_zeros(p.values or []))})")
        elif p.op == "is_null":
            parts.append(f"{c} IS NULL")
        elif p.op == "not_null":
            parts.append(f"{c} IS NOT NULL")
        elif p.op == "starts_with":
            parts.append(f"starts_with({c}, {val(p.value, p.column)})")
    return (" WHERE " + " AND ".join(parts)) if parts else "", params


def _expr(e: Expr, params: list[Any]) -> str:
    if e.col is not None:
        return _q(e.col)
    if e.lit is not None:
        params.append(e.lit)
        return "?"
    left, right = (_expr(a, params) for a in e.args or [])
    return f"({left} {e.op} {right})"  # op is one of + - * (validated)


def _select(plan: Plan, schema: dict[str, str], params: list[Any]) -> str:
    if plan.aggregates:
        cols = [_q(g) for g in plan.group_by]
        for a in plan.aggregates:

            def arg(a: Any = a) -> str:  # each use binds its own copy of the literals
                return _q(a.column) if a.column else _expr(a.expr, params) if a.expr is not None else "*"

            if a.fn == "avg":
                s_col, n_col = a.partial_columns()
                cols += [f"sum({arg()}) AS {_q(s_col)}", f"count({arg()}) AS {_q(n_col)}"]
            else:
                cols.append(f"{a.fn}({arg()}) AS {_q(a.alias)}")
        return ", ".join(cols)
    # project [] is "every column" as no project is: the declared ones, never others the file has
    return ", ".join(_q(c) for c in (plan.project or schema))


def sql(
    plan: Plan, schema: dict[str, str], source: str = "src", source_params: Sequence[Any] = ()
) -> tuple[str, list[Any]]:
    """The parameterised query for ``plan`` over the relation ``source``."""
    params: list[Any] = []
    select = _select(plan, schema, params)  # parameters in text order: SELECT's literals, then WHERE's
    where, where_params = _where(plan, schema)
    params += [*source_params, *where_params]  # in text order: SELECT, FROM, WHERE
    q = f"SELECT {select} FROM {source}{where}"
    if plan.group_by:
        q += " GROUP BY " + ", ".join(_q(g) for g in plan.group_by)
    return q, params


def run(
    plan: Plan,
    schema: dict[str, str],
    data: pa.Table | str | Path,
    threads: int = 1,
    on_connect: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> pa.Table:
    """Execute ``plan`` (already validated against ``schema``) over an Arrow table or a Parquet file.
    ``on_connect`` receives the connection first (a caller may ``interrupt()`` it from another thread)."""
    con = duckdb.connect(config={"threads": threads})
    if on_connect is not None:
        on_connect(con)
    try:
        if isinstance(data, pa.Table):
            con.register("src", data)
            source = "src"
        else:  # a table function over the file: the path is bound as a parameter, never spliced
            source = "read_parquet(?)"
        source_params = () if source == "src" else (str(data),)
        _check_decimal_values(plan, data.schema if isinstance(data, pa.Table) else pq.read_schema(data))
        q, params = sql(plan, schema, source, source_params)
        try:
            table = con.execute(q, params).to_arrow_table()
        except duckdb.DataError as exc:  # Out of Range / Conversion: the values, not the engine
            field = _culprit(con, plan, schema, source, source_params) or "plan"
            raise ValueRangeError(field, f"cannot be computed on this data: {_first_line(exc)}") from None
        bad = _out_of_range(plan, table)
        if bad is not None:
            raise ValueRangeError(*bad)
        return table
    finally:
        con.close()


def _check_decimal_values(plan: Plan, source: pa.Schema) -> None:
    """Integers compared with a DECIMAL(p, s) column are cast to a decimal of scale s and at most 38
    digits: one with 38 - s integer digits or more cannot be (DuckDB: "Could not cast value"), so it
    is refused naming the value. (With a float among the values the comparison is in DOUBLE.)"""
    for i, p in enumerate(plan.filters):
        t = source.field(p.column).type if p.column in source.names else None
        values = (
            [("value", p.value)] if p.value is not None else [(f"values.{j}", v) for j, v in enumerate(p.values or [])]
        )
        if t is None or not pa.types.is_decimal(t) or any(isinstance(v, float) for _, v in values):
            continue
        for where, v in values:
            if isinstance(v, int) and abs(v) >= 10 ** (38 - t.scale):
                raise ValueRangeError(
                    f"filters.{i}.{where}",
                    f"{v} does not fit DECIMAL(38, {t.scale}), the type column {p.column!r} ({t}) is compared in "
                    f"(at most {38 - t.scale} integer digits; a float compares in DOUBLE)",
                )


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__


def _agg_field(plan: Plan, i: int) -> str:
    a = plan.aggregates[i]
    return f"aggregates.{i}." + ("expr" if a.expr is not None else "column" if a.column is not None else "fn")


def _out_of_range(plan: Plan, table: pa.Table) -> tuple[str, str] | None:
    """(field, reason) of the first aggregate whose result does not fit its Arrow type (DuckDB hands
    128-bit integer sums over as decimal128(38, 0) without checking the 38 digits), else None."""
    for i, a in enumerate(plan.aggregates):
        for name in a.partial_columns():
            if name not in table.column_names or not pa.types.is_decimal(table.schema.field(name).type):
                continue
            try:
                table.column(name).validate(full=True)
            except pa.ArrowInvalid as exc:
                return _agg_field(plan, i), f"the result does not fit its type: {_first_line(exc)}"
    return None


def _culprit(
    con: duckdb.DuckDBPyConnection, plan: Plan, schema: dict[str, str], source: str, source_params: Sequence[Any]
) -> str | None:
    """The plan part whose evaluation fails on these values: a filter (alone), else an aggregate
    (alone, under all the filters and the grouping), else None."""

    def fails(p: Plan) -> bool:
        q, params = sql(p, schema, source, source_params)
        try:
            if p.aggregates:
                t = con.execute(q, params).to_arrow_table()  # every aggregate column is computed
                return _out_of_range(p, t) is not None
            con.execute(f"SELECT count(*) FROM ({q})", params).fetchall()
        except duckdb.DataError:
            return True
        return False

    bare: dict[str, Any] = {"project": [], "group_by": [], "aggregates": []}
    if plan.filters and fails(plan.model_copy(update={**bare, "filters": plan.filters})):
        for i, f in enumerate(plan.filters):
            if fails(plan.model_copy(update={**bare, "filters": [f]})):
                return f"filters.{i}" + (".value" if f.value is not None else ".values" if f.values else "")
        return "filters"
    for i, a in enumerate(plan.aggregates):
        if fails(plan.model_copy(update={"aggregates": [a]})):
            return _agg_field(plan, i)
    return None


def combine(plan: Plan, partials: list[pa.Table]) -> pa.Table:
    """Merge per-block partial aggregates into the final result (avg from its sum and count)."""
    if not plan.aggregates:
        raise ValueError("only aggregate plans have partials to combine")
    con = duckdb.connect(config={"threads": 1})
    try:
        con.register("p", pa.concat_tables(partials) if partials else _empty_partial(plan))
        cols = [_q(g) for g in plan.group_by]
        for a in plan.aggregates:
            if a.fn == "avg":
                s, n = (_q(c) for c in a.partial_columns())
                cols.append(f"sum({s}) / nullif(sum({n}), 0) AS {_q(a.alias)}")
            elif a.fn == "count":
                cols.append(f"coalesce(sum({_q(a.alias)}), 0) AS {_q(a.alias)}")
            else:
                outer = {"sum": "sum", "min": "min", "max": "max"}[a.fn]
                cols.append(f"{outer}({_q(a.alias)}) AS {_q(a.alias)}")
        q = f"SELECT {', '.join(cols)} FROM p"
        if plan.group_by:
            q += (
                " GROUP BY "
                + ", ".join(_q(g) for g in plan.group_by)
                + " ORDER BY "
                + ", ".join(_q(g) for g in plan.group_by)
            )
        return con.execute(q).to_arrow_table()
    finally:
        con.close()


def _empty_partial(plan: Plan) -> pa.Table:
    fields = [pa.field(g, pa.string()) for g in plan.group_by]
    for a in plan.aggregates:
        if a.fn == "avg":
            s_col, n_col = a.partial_columns()
            fields += [pa.field(s_col, pa.float64()), pa.field(n_col, pa.int64())]
        else:
            fields.append(pa.field(a.alias, pa.float64()))
    return pa.schema(fields).empty_table()


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()
