"""Fuzz the NDP plan parser and validator: N random documents, none may raise anything but PlanError.

Inputs: random bytes, random JSON, and mutations of valid TPC-H plans (fields dropped, values
swapped for other types, strings lengthened, lists blown up, names with SQL in them). Every plan
that validates must also compile to its parameterised query.

    .venv/bin/python benchmarks/ndp_fuzz.py --n 100000 --out docs/benchmarks-ndp-fuzz.json
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from shufflelab.ndp import execute as X
from shufflelab.ndp import plan as P

SCHEMA = {"l_orderkey": "int", "l_quantity": "float", "l_extendedprice": "float", "l_discount": "float",
          "l_returnflag": "string", "l_shipdate": "date", "l_shipmode": "string"}  # fmt: skip
SEEDS: list[dict[str, Any]] = [
    {"filters": [{"column": "l_shipdate", "op": ">=", "value": "1994-01-01"},
                 {"column": "l_discount", "op": "between", "values": [0.05, 0.07]}],
     "aggregates": [{"fn": "sum", "column": "l_extendedprice", "alias": "rev"}]},
    {"filters": [{"column": "l_shipmode", "op": "in", "values": ["AIR", "REG AIR"]}],
     "group_by": ["l_returnflag"], "aggregates": [{"fn": "avg", "column": "l_quantity", "alias": "q"}]},
    {"filters": [{"column": "l_returnflag", "op": "=", "value": "R"}], "project": ["l_orderkey", "l_quantity"]},
]  # fmt: skip
NASTY: list[Any] = [None, True, -1, 0, 2**63, 1e308, float("inf"), "", "x" * 5000, "'; DROP TABLE t; --",
                    'a" OR 1=1 --', "1994-13-45", [], {}, [1] * 5000, {"$": 1}, "\u0000", "é", 3.5]  # fmt: skip


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


def one(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.15:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    if r < 0.25:
        return ("[" * rng.randint(1, 5000)).encode()
    doc = _mutate(rng, copy.deepcopy(rng.choice(SEEDS)))
    return json.dumps(doc, allow_nan=True).encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    accepted = rejected = 0
    crashes: list[str] = []
    t0 = time.monotonic()
    for _ in range(a.n):
        doc = one(rng)
        try:
            plan = P.validate(P.parse(doc), SCHEMA)
            X.sql(plan, SCHEMA)
            accepted += 1
        except P.PlanError:
            rejected += 1
        except Exception as exc:  # noqa: BLE001 - the point: anything else is a defect
            crashes.append(f"{type(exc).__name__}: {exc} <- {doc[:200]!r}")
    result = {"command": " ".join(["benchmarks/ndp_fuzz.py", *sys.argv[1:]]), "inputs": a.n, "accepted": accepted,
              "rejected": rejected, "crashes": len(crashes), "first_crashes": crashes[:10],
              "seconds": round(time.monotonic() - t0, 1)}  # fmt: skip
    print(json.dumps(result, indent=1))
    if a.out:
        a.out.write_text(json.dumps(result, indent=1))
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
