"""Pushdown plans: validation, hostile input, execution equal to DuckDB SQL, partial aggregates."""

from __future__ import annotations

import datetime as dt
import json
import random

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shufflelab.ndp import execute as X
from shufflelab.ndp import plan as P

SCHEMA = {
    "l_orderkey": "int", "l_quantity": "float", "l_extendedprice": "float", "l_discount": "float",
    "l_returnflag": "string", "l_shipdate": "date", "l_shipmode": "string",
}  # fmt: skip


def _lineitem(n: int = 3000, seed: int = 1) -> pa.Table:
    rng = random.Random(seed)
    d0 = dt.date(1994, 1, 1)
    return pa.table(
        {
            "l_orderkey": [i // 4 for i in range(n)],
            "l_quantity": [float(rng.randint(1, 50)) for _ in range(n)],
            "l_extendedprice": [round(rng.uniform(900, 100_000), 2) for _ in range(n)],
            "l_discount": [rng.choice([0.0, 0.02, 0.05, 0.06, 0.07, 0.1]) for _ in range(n)],
            "l_returnflag": [rng.choice("ANR") for _ in range(n)],
            "l_shipdate": [d0 + dt.timedelta(days=rng.randint(0, 730)) for _ in range(n)],
            "l_shipmode": [rng.choice(["AIR", "MAIL", "SHIP", "TRUCK", "REG AIR"]) for _ in range(n)],
        }
    )


Q6 = {
    "filters": [
        {"column": "l_shipdate", "op": ">=", "value": "1994-01-01"},
        {"column": "l_shipdate", "op": "<", "value": "1995-01-01"},
        {"column": "l_discount", "op": "between", "values": [0.05, 0.07]},
        {"column": "l_quantity", "op": "<", "value": 24},
    ],
    "aggregates": [{"fn": "sum", "column": "l_extendedprice", "alias": "revenue_base"},
                   {"fn": "count", "alias": "n"}],
}  # fmt: skip
Q6_SQL = """SELECT sum(l_extendedprice) AS revenue_base, count(*) AS n FROM t
 WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
   AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"""


def _duck(table: pa.Table, q: str) -> list[tuple]:
    con = duckdb.connect()
    con.register("t", table)
    return con.execute(q).fetchall()


def test_q6_like_plan_equals_duckdb_sql() -> None:
    t = _lineitem()
    plan = P.validate(P.parse(json.dumps(Q6)), SCHEMA)
    got = X.run(plan, SCHEMA, t).to_pylist()[0]
    want = _duck(t, Q6_SQL)[0]
    assert got["revenue_base"] == pytest.approx(want[0]) and got["n"] == want[1]
    assert plan.operators() == ["filter", "project", "aggregate"]


def test_partials_of_blocks_combine_to_the_whole() -> None:
    t = _lineitem(4000, seed=2)
    plan = P.validate(P.Plan.model_validate({
        "filters": [{"column": "l_shipmode", "op": "in", "values": ["AIR", "REG AIR"]}],
        "group_by": ["l_returnflag"],
        "aggregates": [{"fn": "avg", "column": "l_quantity", "alias": "avg_qty"},
                       {"fn": "sum", "column": "l_extendedprice", "alias": "price"},
                       {"fn": "min", "column": "l_discount", "alias": "dmin"},
                       {"fn": "max", "column": "l_shipdate", "alias": "last"},
                       {"fn": "count", "column": None, "alias": "n"}],
    }), SCHEMA)  # fmt: skip
    blocks = [t.slice(0, 1000), t.slice(1000, 1700), t.slice(2700)]
    partials = [X.from_ipc(X.to_ipc(X.run(plan, SCHEMA, b))) for b in blocks]  # through the wire format
    got = X.combine(plan, partials).to_pylist()
    want = _duck(
        t,
        """SELECT l_returnflag, avg(l_quantity), sum(l_extendedprice), min(l_discount), max(l_shipdate),
                        count(*) FROM t WHERE l_shipmode IN ('AIR', 'REG AIR') GROUP BY 1 ORDER BY 1""",
    )
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g["l_returnflag"] == w[0]
        assert g["avg_qty"] == pytest.approx(w[1]) and g["price"] == pytest.approx(w[2])
        assert g["dmin"] == w[3] and g["last"] == w[4] and g["n"] == w[5]


def _deep(n: int) -> dict:
    e: dict = {"col": "l_quantity"}
    for _ in range(n - 1):
        e = {"op": "+", "args": [e, {"lit": 1}]}
    return e


def test_arithmetic_aggregates_equal_duckdb_and_combine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = _lineitem(3000, seed=3)
    revenue = {
        "op": "*",
        "args": [{"col": "l_extendedprice"}, {"op": "-", "args": [{"lit": 1}, {"col": "l_discount"}]}],
    }
    plan = P.validate(P.Plan.model_validate({
        "filters": [{"column": "l_shipdate", "op": "<=", "value": "1995-06-30"}],
        "group_by": ["l_returnflag"],
        "aggregates": [{"fn": "sum", "expr": revenue, "alias": "rev"},
                       {"fn": "avg", "expr": {"op": "*", "args": [{"col": "l_quantity"}, {"lit": 2.5}]}, "alias": "q"},
                       {"fn": "max", "expr": _deep(8), "alias": "deep"}],
    }), SCHEMA)  # fmt: skip
    import pyarrow.parquet as pq

    pq.write_table(t.slice(1200), tmp_path / "rest.parquet")  # a file source: its parameter sits between
    partials = [X.from_ipc(X.to_ipc(X.run(plan, SCHEMA, b))) for b in (t.slice(0, 1200), tmp_path / "rest.parquet")]
    got = X.combine(plan, partials).to_pylist()
    want = _duck(
        t,
        """SELECT l_returnflag, sum(l_extendedprice * (1 - l_discount)), avg(l_quantity * 2.5),
                              max(l_quantity + 7) FROM t WHERE l_shipdate <= DATE '1995-06-30' GROUP BY 1 ORDER BY 1""",
    )
    assert [(g["l_returnflag"], g["deep"]) for g in got] == [(w[0], w[3]) for w in want]
    for g, w in zip(got, want, strict=True):
        assert g["rev"] == pytest.approx(w[1], rel=1e-12) and g["q"] == pytest.approx(w[2], rel=1e-12)


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ({"col": "l_shipmode"}, "numeric"),
        ({"col": "nope"}, "no column"),
        ({"op": "/", "args": [{"col": "l_quantity"}, {"lit": 0}]}, "Input should be"),
        ({"op": "+", "args": [{"col": "l_quantity"}]}, "at least 2"),
        ({"col": "l_quantity", "lit": 1}, "exactly one of"),
        ({"lit": True}, "a literal is a number, got bool"),
        ({"sql": "1"}, "Extra inputs"),
        (_deep(9), "deeper than 8"),
    ],
)
def test_bad_aggregate_expressions(expr: dict, reason: str) -> None:
    with pytest.raises(P.PlanError) as e:
        P.validate(P.parse(json.dumps({"aggregates": [{"fn": "sum", "expr": expr, "alias": "s"}]})), SCHEMA)
    assert e.value.field.startswith("aggregates.0") and reason in e.value.reason, str(e.value)


def test_projection_and_null_predicates(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    t = _lineitem(500)
    path = tmp_path / "b.parquet"
    pq.write_table(t, path)
    plan = P.validate(P.Plan(filters=[P.Predicate(column="l_shipmode", op="starts_with", value="RE"),
                                      P.Predicate(column="l_quantity", op="not_null")],
                             project=["l_orderkey", "l_quantity"]), SCHEMA)  # fmt: skip
    got = X.run(plan, SCHEMA, path)
    assert got.column_names == ["l_orderkey", "l_quantity"]
    assert got.num_rows == _duck(t, "SELECT count(*) FROM t WHERE starts_with(l_shipmode, 'RE')")[0][0]


@pytest.mark.parametrize("op", ["in", "="])
def test_minus_zero_matches_both_zeros_from_arrow_and_parquet(tmp_path, op: str) -> None:  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    t = pa.table({"l_quantity": [0.0, 0.1, -0.0, 1.0, 0.0]})
    pq.write_table(t, tmp_path / "z.parquet")
    pred = {"op": "in", "values": [0.1, -0.0]} if op == "in" else {"op": "=", "value": -0.0}
    plan = P.validate(
        P.parse(json.dumps({"filters": [{"column": "l_quantity", **pred}], "project": ["l_quantity"]})), SCHEMA
    )
    want = [-0.0, 0.0, 0.0, 0.1] if op == "in" else [-0.0, 0.0, 0.0]  # every zero, whatever its sign
    for source in (t, tmp_path / "z.parquet"):  # an Arrow table (DuckDB's hash lookup) and a file
        assert sorted(X.run(plan, SCHEMA, source).column("l_quantity").to_pylist()) == want, source


@pytest.mark.parametrize(
    ("doc", "field", "reason"),
    [
        ({"version": 2}, "version", "Input should be 1"),
        ({"filters": [{"column": "nope", "op": "=", "value": 1}]}, "filters.0.column", "no column 'nope'"),
        ({"filters": [{"column": "l_quantity", "op": "=", "value": "1; DROP TABLE t"}]}, "filters.0.value",
         "needs a number"),
        ({"filters": [{"column": "l_shipdate", "op": ">", "value": "yesterday"}]}, "filters.0.value", "ISO date"),
        ({"filters": [{"column": "l_quantity", "op": "like", "value": "%"}]}, "filters.0.op", "Input should be"),
        ({"filters": [{"column": "l_quantity", "op": "between", "values": [1]}]}, "filters.0", "between takes"),
        ({"filters": [{"column": 'x" OR 1=1 --', "op": "=", "value": 1}]}, "filters.0.column", "not a column name"),
        ({"aggregates": [{"fn": "sum", "column": "l_shipmode", "alias": "s"}]}, "aggregates.0.fn", "numeric"),
        ({"aggregates": [{"fn": "median", "column": "l_quantity", "alias": "m"}]}, "aggregates.0.fn", "Input should"),
        ({"group_by": ["l_returnflag"]}, "plan", "group_by needs aggregates"),
        ({"sql": "SELECT 1"}, "sql", "Extra inputs are not permitted"),
        ({"filters": [{"column": "l_quantity", "op": "in", "values": list(range(1001))}]}, "filters.0.values",
         "at most 1000"),
    ],
)  # fmt: skip
def test_bad_plans_name_the_field(doc: dict, field: str, reason: str) -> None:
    with pytest.raises(P.PlanError) as e:
        P.validate(P.parse(json.dumps(doc)), SCHEMA)
    assert e.value.field == field and reason in e.value.reason, str(e.value)


def test_hostile_documents() -> None:
    with pytest.raises(P.PlanError, match="bytes, at most"):
        P.parse(b"{" + b" " * P.MAX_PLAN_BYTES + b"}")
    with pytest.raises(P.PlanError, match="not JSON"):
        P.parse(b"\xff\xfe")
    with pytest.raises(P.PlanError):
        P.parse("[" * 3000 + "]" * 3000)  # deep nesting: rejected, not a crash
    with pytest.raises(P.PlanError, match="must be a JSON object"):
        P.parse("42")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
_keys = st.sampled_from(["version", "filters", "project", "group_by", "aggregates", "column", "op", "value",
                         "values", "fn", "alias"])  # fmt: skip
_planish = st.dictionaries(_keys, _json, max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_planish.map(json.dumps), st.binary(max_size=200)))
def test_fuzz_parser_never_crashes(doc: str | bytes) -> None:
    """Any input: a valid plan or a PlanError, never another exception (the 10^5-input run is in
    benchmarks/ndp_fuzz.py)."""
    try:
        plan = P.validate(P.parse(doc), SCHEMA)
    except P.PlanError:
        return
    X.sql(plan, SCHEMA)  # a plan that validates always compiles
