"""Fuzz the NDP plan parser, validator and executor: N random documents, none may raise anything but PlanError.

Inputs: random bytes, random JSON, and mutations of valid TPC-H plans, in structure (fields dropped,
values swapped for other types, strings lengthened, lists blown up, names with SQL in them) and in
values (each number, string or date of a plan replaced by one from the edges of what JSON carries:
integers past 64 and 128 bits and 38 digits, 1e999, subnormals, lone surrogates, NUL, ISO week and
basic dates; aggregate arithmetic that overflows BIGINT on the data; aggregate aliases that collide
with each other, with an ``avg``'s partial columns ``<alias>__sum``/``<alias>__count`` or with a
group_by column). Every plan that validates must
also compile to its parameterised query.

``--target`` picks what is fuzzed:

* ``plan`` (default): ``plan.parse`` + ``plan.validate`` on the documents themselves;
* ``request``: the NDP proxy's request parsing (``proxy.parse_request``: body -> plan, schema,
  row groups) on request bodies wrapping those documents, with mutated schemas, extra and repeated
  keys, NaN, oversized bodies;
* ``exec``: request parsing, then the plan executed by DuckDB (``execute.run``) over the fuzz table
  in memory: an overflow must come back as a ``PlanError`` naming the plan part, never as an engine
  exception;
* ``http``: the same bodies POSTed to a proxy running in-process (its aiohttp application, a fake
  WebHDFS behind it holding one Parquet file): every answer must be 200, 400, 413 or 422 -- never
  a 5xx -- and the proxy must still answer its status afterwards.

None needs the network fabric or HDFS.

    .venv/bin/python benchmarks/ndp_fuzz.py --n 100000 --out docs/benchmarks-ndp-fuzz.json
    .venv/bin/python benchmarks/ndp_fuzz.py --target exec --n 20000 --out docs/benchmarks-ndp-fuzz-exec.json
    .venv/bin/python benchmarks/ndp_fuzz.py --target http --n 5000 --out docs/benchmarks-ndp-fuzz-http.json
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import functools
import io
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shufflelab.ndp import execute as X
from shufflelab.ndp import plan as P

SCHEMA = {"l_orderkey": "int", "l_quantity": "float", "l_extendedprice": "float", "l_discount": "float",
          "l_returnflag": "string", "l_shipdate": "date", "l_shipmode": "string", "l_tax": "decimal"}  # fmt: skip
SEEDS: list[dict[str, Any]] = [
    {"filters": [{"column": "l_shipdate", "op": ">=", "value": "1994-01-01"},
                 {"column": "l_discount", "op": "between", "values": [0.05, 0.07]}],
     "aggregates": [{"fn": "sum", "column": "l_extendedprice", "alias": "rev"}]},
    {"filters": [{"column": "l_shipmode", "op": "in", "values": ["AIR", "REG AIR"]}],
     "group_by": ["l_returnflag"], "aggregates": [{"fn": "avg", "column": "l_quantity", "alias": "q"}]},
    {"filters": [{"column": "l_returnflag", "op": "=", "value": "R"}], "project": ["l_orderkey", "l_quantity"]},
    {"filters": [{"column": "l_shipdate", "op": "<=", "value": "1998-09-02"}], "group_by": ["l_returnflag"],
     "aggregates": [{"fn": "sum", "alias": "charge", "expr": {"op": "*", "args": [
         {"op": "*", "args": [{"col": "l_extendedprice"}, {"op": "-", "args": [{"lit": 1}, {"col": "l_discount"}]}]},
         {"op": "+", "args": [{"lit": 1}, {"col": "l_quantity"}]}]}},
         {"fn": "count", "alias": "n"}, {"fn": "avg", "column": "l_discount", "alias": "q"}]},
    {"filters": [{"column": "l_tax", "op": "between", "values": [0, 1]},
                 {"column": "l_shipdate", "op": "in", "values": ["1994-01-01", "1995-06-30"]}],
     "group_by": ["l_shipmode"], "aggregates": [
         {"fn": "sum", "alias": "s", "expr": {"op": "*", "args": [{"col": "l_orderkey"}, {"lit": 2**62}]}},
         {"fn": "max", "alias": "m", "expr": {"op": "+", "args": [{"col": "l_tax"}, {"lit": 7}]}}]},
    {"filters": [{"column": "l_shipmode", "op": "starts_with", "value": "REG"},
                 {"column": "l_orderkey", "op": ">", "value": -9223372036854775808}],
     "project": ["l_orderkey", "l_tax", "l_shipmode"]},
]  # fmt: skip
NASTY: list[Any] = [None, True, -1, 0, 2**63, 1e308, float("inf"), "", "x" * 5000, "'; DROP TABLE t; --",
                    'a" OR 1=1 --', "1994-13-45", [], {}, [1] * 5000, {"$": 1}, "\u0000", "é", 3.5]  # fmt: skip
# values: the edges of each type, and what JSON can carry beyond them (1e999 parses as infinity,
# "\ud800" as a lone surrogate)
EDGE_INTS = [0, -1, 2, 100_000, 2**31, 2**53 + 1, 2**62, -(2**62), 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 2**64,
             2**127 - 1, -(2**127), 2**127, 2**128, 10**36, 10**38 - 1, -(10**38 - 1), 10**38, 2**200]  # fmt: skip
EDGE_FLOATS = [0.0, -0.0, 5e-324, 0.1, 1e300, -1e300, 1.7976931348623157e308, float("inf"), float("-inf")]
EDGE_STRINGS = ["", "\x00", "a\x00b", "\ud800", "a\udfff", "\U0001f600", "é", "REG AIR", "x" * 1025]
ALIASES = ["q", "q__sum", "q__count", "rev", "n", "l_returnflag", "l_shipmode", "s__sum"]
EDGE_DATES = ["1994-01-01", "0001-01-01", "9999-12-31", "1994-W01-1", "19940101", "1994-1-1", "1994-01-01T00:00",
              "0000-01-01", "1994-02-30"]  # fmt: skip


def _mutate(rng: random.Random, node: Any, depth: int = 0) -> Any:
    if isinstance(node, dict):
        node = dict(node)
        for k in list(node):
            r = rng.random()
            if r < 0.1:
                del node[k]
            elif r < 0.25:
                node[k] = rng.choice(NASTY)
            else:
                node[k] = _mutate(rng, node[k], depth + 1)
        if rng.random() < 0.1:
            node[rng.choice(["sql", "version", "op", "column", "extra"])] = rng.choice(NASTY)
        return node
    if isinstance(node, list):
        node = [_mutate(rng, x, depth + 1) for x in node]
        if rng.random() < 0.1:
            node = node * rng.randint(2, 80)
        return node
    return rng.choice(NASTY) if rng.random() < 0.2 else node


def _edge(rng: random.Random, v: Any) -> Any:
    """A value of the same kind as ``v`` from the edges (sometimes of another kind)."""
    if rng.random() < 0.1:
        return rng.choice([*EDGE_INTS, *EDGE_FLOATS, *EDGE_STRINGS, *EDGE_DATES])
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return rng.choice(EDGE_INTS) * rng.choice([1, 1, 1, -1])
    if isinstance(v, float):
        return rng.choice(EDGE_FLOATS)
    if isinstance(v, str) and len(v) == 10 and v[4:5] == "-":
        return rng.choice(EDGE_DATES)
    if isinstance(v, str):
        return rng.choice(EDGE_STRINGS)
    return v


def _values(rng: random.Random, node: Any, key: str = "") -> Any:
    """``node`` with its values (never its keys, names or operators) replaced, each with p = 0.3."""
    if isinstance(node, dict):
        return {k: _values(rng, v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_values(rng, x, key) for x in node]
    if key in ("value", "values", "lit") and rng.random() < 0.3:
        return _edge(rng, node)
    if key == "alias" and rng.random() < 0.3:  # names avg's partials (q__sum, q__count) or a group_by column take
        return rng.choice(ALIASES)
    return node


def _text(doc: Any) -> bytes:
    # what JSON can say about a float beyond a double's range: 1e999 (parsed back as infinity)
    return json.dumps(doc, allow_nan=True).replace("-Infinity", "-1e999").replace("Infinity", "1e999").encode()


def one(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.15:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    if r < 0.25:
        return ("[" * rng.randint(1, 5000)).encode()
    doc = copy.deepcopy(rng.choice(SEEDS))
    if r < 0.6:
        return _text(_values(rng, doc))  # structure intact, values from the edges
    return _text(_mutate(rng, doc))


def one_request(rng: random.Random) -> bytes:
    """A proxy request body: mostly {plan, schema[, row_groups]} around a fuzzed plan document."""
    r = rng.random()
    if r < 0.08:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    if r < 0.12:
        return one(rng)  # a bare plan document, no wrapper
    if r < 0.14:
        return b'{"plan": {}, "schema": {"a": "int"}, "pad": "' + b"x" * rng.randint(60_000, 120_000) + b'"}'
    raw = one(rng)
    try:
        plan: Any = json.loads(raw)
    except (ValueError, RecursionError):
        plan = rng.choice(NASTY)
    schema: Any = dict(SCHEMA)
    if rng.random() < 0.3:
        schema = _mutate(rng, schema)
    if rng.random() < 0.05:
        schema = {f"c{i}": "int" for i in range(rng.choice([0, 300]))}
    doc: dict[str, Any] = {"plan": plan, "schema": schema}
    if rng.random() < 0.2:
        doc["row_groups"] = rng.choice([[0], [0, 0], [-1], [2**40], [True], "0", [], [0] * 20_000, [1.5], None])
    if rng.random() < 0.1:
        doc[rng.choice(["offset", "length", "sql", "path"])] = rng.choice(NASTY)
    if rng.random() < 0.1:
        del doc[rng.choice(["plan", "schema"])]
    text = _text(doc).decode()
    if rng.random() < 0.05:  # the same key twice
        text = text.replace('{"plan":', '{"plan": {}, "plan":', 1)
    return text.encode()


def _check_plan(doc: bytes) -> bool:
    plan = P.validate(P.parse(doc), SCHEMA)
    X.sql(plan, SCHEMA)
    return True


def _check_request(doc: bytes) -> bool:
    from shufflelab.ndp import proxy as NP

    req = NP.parse_request(doc)
    X.sql(req.plan, req.schema)
    return True


@functools.cache
def _table(m: int = 200) -> Any:
    """The fuzz table: SCHEMA's columns, the int64 and decimal extremes among ordinary values."""
    import decimal

    import pyarrow as pa

    keys = [i if i % 50 else (2**63 - 1, -(2**63), 2**62, 0)[i // 50 % 4] for i in range(m)]
    return pa.table({
        "l_orderkey": pa.array(keys, pa.int64()), "l_quantity": [float(i % 50) for i in range(m)],
        "l_extendedprice": [1000.0 + i for i in range(m)], "l_discount": [(i % 10) / 100 for i in range(m)],
        "l_returnflag": [("A", "N", "R")[i % 3] for i in range(m)],
        "l_shipdate": pa.array([8766 + i for i in range(m)], pa.int32()).cast(pa.date32()),
        "l_shipmode": [("AIR", "REG AIR", "SHIP", "\x00", "")[i % 5] for i in range(m)],
        "l_tax": pa.array([decimal.Decimal(("0.08", "9999999999999.99", "-9999999999999.99")[i % 3]) for i in range(m)],
                          pa.decimal128(15, 2)),
    })  # fmt: skip


def _check_exec(doc: bytes) -> bool:
    from shufflelab.ndp import proxy as NP

    req = NP.parse_request(doc)
    X.run(req.plan, req.schema, _table())
    return True


def fuzz_in_process(n: int, rng: random.Random, gen: Callable[[random.Random], bytes],
                    check: Callable[[bytes], bool]) -> dict[str, Any]:  # fmt: skip
    accepted = rejected = 0
    crashes: list[str] = []
    for _ in range(n):
        doc = gen(rng)
        try:
            check(doc)
            accepted += 1
        except P.PlanError:
            rejected += 1
        except Exception as exc:  # noqa: BLE001 - the point: anything else is a defect
            crashes.append(f"{type(exc).__name__}: {exc} <- {doc[:200]!r}")
    return {"accepted": accepted, "rejected": rejected, "crashes": crashes}


def fuzz_http(n: int, rng: random.Random) -> dict[str, Any]:
    """POST fuzzed bodies to an in-process proxy in front of a fake WebHDFS with one Parquet file."""
    import pyarrow.parquet as pq
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    from shufflelab.ndp import proxy as NP

    table = _table()
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=100)
    data = buf.getvalue()
    statuses: dict[int, int] = {}
    crashes: list[str] = []

    async def datanode(r: web.Request) -> web.Response:
        return web.Response(body=data)

    async def go() -> dict[str, Any]:
        nn_app, dn_app = web.Application(), web.Application()
        dn_app.router.add_get("/webhdfs/v1/data/x.parquet", datanode)
        async with TestServer(dn_app) as dn:

            async def namenode(r: web.Request) -> web.Response:
                loc = f"http://127.0.0.1:{dn.port}/webhdfs/v1/data/x.parquet?op=OPEN&offset=0"
                return web.Response(status=307, headers={"Location": loc})

            nn_app.router.add_get("/webhdfs/v1/data/x.parquet", namenode)
            with tempfile.TemporaryDirectory() as spool:
                nn = TestServer(nn_app)
                await nn.start_server()
                dns = frozenset({f"127.0.0.1:{dn.port}"})
                cfg = NP.ProxyConfig(webhdfs=f"http://127.0.0.1:{nn.port}", datanodes=dns, workers=2, max_queue=8,
                                     spool=Path(spool))  # fmt: skip
                async with TestClient(TestServer(NP.NdpProxy(cfg).app())) as client:
                    for _ in range(n):
                        body = one_request(rng)
                        r = await client.post("/ndp/v1/data/x.parquet", data=body)
                        await r.read()
                        statuses[r.status] = statuses.get(r.status, 0) + 1
                        if r.status not in (200, 400, 413, 422):
                            crashes.append(f"HTTP {r.status}: {(await r.text())[:200]} <- {body[:200]!r}")
                    st = await client.get("/ndp/v1/status")
                    doc = await st.json()
                    if st.status != 200 or doc["completed"] != statuses.get(200, 0):
                        crashes.append(f"status after the run: {st.status} {doc}")
                await nn.close()
                if any(Path(spool).iterdir()):
                    crashes.append(f"spool not empty: {sorted(Path(spool).rglob('*'))[:5]}")
        return {"accepted": statuses.get(200, 0), "rejected": n - statuses.get(200, 0), "crashes": crashes,
                "statuses": {str(k): v for k, v in sorted(statuses.items())}}  # fmt: skip

    return asyncio.run(go())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", choices=["plan", "request", "exec", "http"], default="plan")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    t0 = time.monotonic()
    if a.target == "plan":
        res = fuzz_in_process(a.n, rng, one, _check_plan)
    elif a.target == "request":
        res = fuzz_in_process(a.n, rng, one_request, _check_request)
    elif a.target == "exec":
        res = fuzz_in_process(a.n, rng, one_request, _check_exec)
    else:
        res = fuzz_http(a.n, rng)
    crashes = res.pop("crashes")
    result = {"command": " ".join(["benchmarks/ndp_fuzz.py", *sys.argv[1:]]), "target": a.target, "inputs": a.n,
              **res, "crashes": len(crashes), "first_crashes": crashes[:10],
              "seconds": round(time.monotonic() - t0, 1)}  # fmt: skip
    print(json.dumps(result, indent=1))
    if a.out:
        a.out.write_text(json.dumps(result, indent=1))
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
