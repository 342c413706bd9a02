"""TPC-H for the NDP experiments: data from ``tpchgen-cli``, queries Q1, Q6, Q14 and Q19 twice
-- as Spark DataFrame programs and as DuckDB SQL, the reference every policy must match.

Data. ``tpchgen-cli`` (PyPI, a Rust port of dbgen) writes Parquet; :func:`prepare` rewrites it
into files that each fit one HDFS block (so one file = one block = one pushdown request), with
plain ``string`` columns (the generator writes Arrow ``string_view``, which Spark's Parquet reader
and our plan types do not need) and TPC-H's decimals kept as ``decimal(15,2)``: sums are exact on
both engines, so results compare exactly. Prepared data are cached by scale factor and file size.

Queries use the specification's validation parameters (Q1 DELTA = 90, Q6 1994 / 0.06 / 24,
Q14 1995-09, Q19 Brand#12/23/34 with quantities 1/10/20). The DataFrame programs are written so
that Spark can hand the scan's conjuncts to a DataSource V2 connector: literals have the column's
type (decimal literals for decimal columns, dates for dates), so no cast hides a predicate.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import math
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

QUERIES = ("q1", "q6", "q14", "q19")
TABLES = ("lineitem", "part")
ROW_GROUP_ROWS = 100_000

# Spark DDL of each table (the connector's ``schema`` option) and the plan's column types.
SPARK_DDL = {
    "lineitem": (
        "l_orderkey BIGINT, l_partkey BIGINT, l_suppkey BIGINT, l_linenumber INT, l_quantity DECIMAL(15,2), "
        "l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_tax DECIMAL(15,2), l_returnflag STRING, "
        "l_linestatus STRING, l_shipdate DATE, l_commitdate DATE, l_receiptdate DATE, l_shipinstruct STRING, "
        "l_shipmode STRING, l_comment STRING"
    ),
    "part": (
        "p_partkey BIGINT, p_name STRING, p_mfgr STRING, p_brand STRING, p_type STRING, p_size INT, "
        "p_container STRING, p_retailprice DECIMAL(15,2), p_comment STRING"
    ),
}


class TpchError(RuntimeError):
    pass


def plan_schema(table: str) -> dict[str, str]:
    """Column -> plan type (int|float|decimal|string|date) from the table's DDL."""
    kinds = {"BIGINT": "int", "INT": "int", "STRING": "string", "DATE": "date"}
    out = {}
    for part in SPARK_DDL[table].split(", "):
        name, typ = part.split(" ", 1)
        out[name] = "decimal" if typ.startswith("DECIMAL") else kinds[typ]
    return out


# -- data ------------------------------------------------------------------------------------------------
def _tpchgen() -> str:
    exe = Path(sys.executable).with_name("tpchgen-cli")
    if exe.exists():
        return str(exe)
    found = shutil.which("tpchgen-cli")
    if not found:
        raise TpchError("tpchgen-cli not found: `pip install tpchgen-cli` (make setup installs it)")
    return found


def cache_dir(scale_factor: float, file_mb: int) -> Path:
    from shufflelab.artifacts import cache_root

    key = hashlib.sha256(f"{scale_factor}:{file_mb}:{ROW_GROUP_ROWS}:v1".encode()).hexdigest()[:10]
    return cache_root() / f"tpch-sf{scale_factor:g}-{key}"


def _plain(table: pa.Table) -> pa.Table:
    """string_view -> string (Spark and the plan types know plain strings)."""
    fields = []
    for f in table.schema:
        t = pa.string() if getattr(pa.types, "is_string_view", lambda _t: False)(f.type) else f.type
        fields.append(pa.field(f.name, t, nullable=f.nullable))
    return table.cast(pa.schema(fields))


def prepare(scale_factor: float, file_mb: int = 16, out: Path | None = None) -> Path:
    """Generate lineitem and part at ``scale_factor`` into ``<out>/<table>/<table>-NNN.parquet``,
    each file at most about ``file_mb`` MB; cached. Returns the directory (with ``manifest.json``)."""
    if not 0 < scale_factor <= 10:
        raise TpchError(f"scale_factor: {scale_factor} must be in (0, 10] on this machine")
    dest = out or cache_dir(scale_factor, file_mb)
    if (dest / "manifest.json").exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".tpch-", dir=dest.parent))
    try:
        r = subprocess.run(
            [_tpchgen(), "parquet", "-s", f"{scale_factor:g}", "--tables", ",".join(TABLES), "-o", str(work / "raw")],
            capture_output=True,
            text=True,
            timeout=3600,
        )
        if r.returncode != 0:
            raise TpchError(f"tpchgen-cli failed ({r.returncode}): {r.stderr[-1000:]}")
        manifest: dict[str, Any] = {"scale_factor": scale_factor, "file_mb": file_mb, "tables": {}}
        for t in TABLES:
            manifest["tables"][t] = _rewrite(work / "raw" / f"{t}.parquet", work / "out" / t, t, file_mb)
        (work / "out" / "manifest.json").write_text(json.dumps(manifest, indent=1))
        shutil.rmtree(dest, ignore_errors=True)
        (work / "out").rename(dest)  # whole directory or nothing
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


def _rewrite(src: Path, out: Path, table: str, file_mb: int) -> dict[str, Any]:
    out.mkdir(parents=True)
    data = _plain(pq.read_table(src))
    want = plan_schema(table)
    if data.column_names != list(want):
        raise TpchError(f"{src}: columns {data.column_names} differ from the expected {list(want)}")
    n_files = max(1, math.ceil(src.stat().st_size / (file_mb * 1e6)))
    per = math.ceil(data.num_rows / n_files)
    files = []
    for i in range(n_files):
        path = out / f"{table}-{i:03d}.parquet"
        pq.write_table(data.slice(i * per, per), path, row_group_size=ROW_GROUP_ROWS, compression="snappy")
        files.append({"name": path.name, "bytes": path.stat().st_size, "rows": min(per, data.num_rows - i * per)})
    return {"rows": data.num_rows, "bytes": sum(f["bytes"] for f in files), "files": files}


def manifest(data_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((data_dir / "manifest.json").read_text())
    return doc


# -- queries: DuckDB reference ---------------------------------------------------------------------------
SQL = {
    "q1": """
        SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
               sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
               sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
               avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc,
               count(*) AS count_order
        FROM lineitem WHERE l_shipdate <= DATE '1998-09-02'
        GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
    "q6": """
        SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem
        WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
          AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
    "q14": """
        SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END)
               / sum(l_extendedprice * (1 - l_discount)) AS promo_revenue
        FROM lineitem, part
        WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'""",
    "q19": """
        SELECT sum(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem, part
        WHERE (p_partkey = l_partkey AND p_brand = 'Brand#12'
               AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG') AND l_quantity >= 1 AND l_quantity <= 11
               AND p_size BETWEEN 1 AND 5 AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON')
           OR (p_partkey = l_partkey AND p_brand = 'Brand#23'
               AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK') AND l_quantity >= 10
               AND l_quantity <= 20 AND p_size BETWEEN 1 AND 10 AND l_shipmode IN ('AIR', 'AIR REG')
               AND l_shipinstruct = 'DELIVER IN PERSON')
           OR (p_partkey = l_partkey AND p_brand = 'Brand#34'
               AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG') AND l_quantity >= 20
               AND l_quantity <= 30 AND p_size BETWEEN 1 AND 15 AND l_shipmode IN ('AIR', 'AIR REG')
               AND l_shipinstruct = 'DELIVER IN PERSON')""",
}


def duckdb_answer(query: str, data_dir: Path) -> list[dict[str, Any]]:
    """The reference answer of ``query`` over the prepared Parquet files."""
    import duckdb

    con = duckdb.connect(config={"threads": 1})
    try:
        for t in TABLES:
            files = sorted(str(p) for p in (data_dir / t).glob("*.parquet"))
            con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet({files!r})")
        cur = con.execute(SQL[query])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()


# -- queries: Spark DataFrame programs -----------------------------------------------------------------------
def _d(text: str) -> Any:
    from pyspark.sql import functions as F

    return F.lit(decimal.Decimal(text))


def _date(y: int, m: int, d: int) -> Any:
    from pyspark.sql import functions as F

    return F.lit(dt.date(y, m, d))


def q1(tables: Callable[[str], Any]) -> Any:
    from pyspark.sql import functions as F

    li = tables("lineitem")
    disc_price = F.col("l_extendedprice") * (F.lit(1) - F.col("l_discount"))
    return (
        li.filter(F.col("l_shipdate") <= _date(1998, 9, 2))
        .groupBy("l_returnflag", "l_linestatus")
        .agg(
            F.sum("l_quantity").alias("sum_qty"),
            F.sum("l_extendedprice").alias("sum_base_price"),
            F.sum(disc_price).alias("sum_disc_price"),
            F.sum(disc_price * (F.lit(1) + F.col("l_tax"))).alias("sum_charge"),
            F.avg("l_quantity").alias("avg_qty"),
            F.avg("l_extendedprice").alias("avg_price"),
            F.avg("l_discount").alias("avg_disc"),
            F.count(F.lit(1)).alias("count_order"),
        )
        .orderBy("l_returnflag", "l_linestatus")
    )


def q6(tables: Callable[[str], Any]) -> Any:
    from pyspark.sql import functions as F

    li = tables("lineitem")
    return li.filter(
        (F.col("l_shipdate") >= _date(1994, 1, 1))
        & (F.col("l_shipdate") < _date(1995, 1, 1))
        & (F.col("l_discount") >= _d("0.05"))
        & (F.col("l_discount") <= _d("0.07"))
        & (F.col("l_quantity") < _d("24"))
    ).agg(F.sum(F.col("l_extendedprice") * F.col("l_discount")).alias("revenue"))


def q14(tables: Callable[[str], Any]) -> Any:
    from pyspark.sql import functions as F

    li = tables("lineitem").filter(
        (F.col("l_shipdate") >= _date(1995, 9, 1)) & (F.col("l_shipdate") < _date(1995, 10, 1))
    )
    part = tables("part")
    rev = F.col("l_extendedprice") * (F.lit(1) - F.col("l_discount"))
    promo = F.when(F.col("p_type").startswith("PROMO"), rev).otherwise(F.lit(0))
    return li.join(part, li["l_partkey"] == part["p_partkey"]).agg(
        (_d("100.00") * F.sum(promo) / F.sum(rev)).alias("promo_revenue")
    )


def q19(tables: Callable[[str], Any]) -> Any:
    from pyspark.sql import functions as F

    # The conjuncts common to the three branches are written once: what Spark's optimizer would
    # factor out anyway, and what a connector can take (the OR of the branches stays in Spark).
    li = tables("lineitem").filter(
        F.col("l_shipmode").isin("AIR", "AIR REG")
        & (F.col("l_shipinstruct") == F.lit("DELIVER IN PERSON"))
        & (F.col("l_quantity") >= _d("1"))
        & (F.col("l_quantity") <= _d("30"))
    )
    part = tables("part").filter(F.col("p_size") >= F.lit(1))
    j = li.join(part, li["l_partkey"] == part["p_partkey"])

    def branch(brand: str, containers: list[str], lo: str, hi: str, size: int) -> Any:
        return (
            (F.col("p_brand") == F.lit(brand))
            & F.col("p_container").isin(*containers)
            & (F.col("l_quantity") >= _d(lo))
            & (F.col("l_quantity") <= _d(hi))
            & (F.col("p_size") <= F.lit(size))
        )

    cond = (
        branch("Brand#12", ["SM CASE", "SM BOX", "SM PACK", "SM PKG"], "1", "11", 5)
        | branch("Brand#23", ["MED BAG", "MED BOX", "MED PKG", "MED PACK"], "10", "20", 10)
        | branch("Brand#34", ["LG CASE", "LG BOX", "LG PACK", "LG PKG"], "20", "30", 15)
    )
    return j.filter(cond).agg(F.sum(F.col("l_extendedprice") * (F.lit(1) - F.col("l_discount"))).alias("revenue"))


PROGRAMS: dict[str, Callable[[Callable[[str], Any]], Any]] = {"q1": q1, "q6": q6, "q14": q14, "q19": q19}


def rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


@dataclass(frozen=True)
class Mismatch:
    row: int
    column: str
    got: Any
    want: Any


def compare(got: list[dict[str, Any]], want: list[dict[str, Any]], places: int = 6) -> list[Mismatch]:
    """Differences between two answers. Integers, strings, dates and decimals with at most
    ``places`` digits compare exactly; averages and ratios (DuckDB computes them in double, Spark in
    decimal with 6 places) compare after rounding both to ``places`` decimal places."""
    out: list[Mismatch] = []
    if len(got) != len(want):
        return [Mismatch(-1, "rows", len(got), len(want))]
    q = decimal.Decimal(1).scaleb(-places)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if list(g) != list(w):
            out.append(Mismatch(i, "columns", list(g), list(w)))
            continue
        for c in g:
            a, b = g[c], w[c]
            numeric = decimal.Decimal | float
            if isinstance(a, numeric) and isinstance(b, numeric | str) or isinstance(b, numeric) and isinstance(a, str):
                # answers that travelled through JSON carry their decimals as strings
                a = decimal.Decimal(str(a)).quantize(q, rounding=decimal.ROUND_HALF_EVEN)
                b = decimal.Decimal(str(b)).quantize(q, rounding=decimal.ROUND_HALF_EVEN)
            if a != b:
                out.append(Mismatch(i, c, g[c], w[c]))
    return out


# -- what each policy pushes for each query (lineitem; the profile that feeds Net-Aware) --------------------
def _f(column: str, op: str, value: Any = None, values: list[Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"column": column, "op": op}
    if values is not None:
        d["values"] = values
    elif value is not None:
        d["value"] = value
    return d


def _sum(alias: str, *, column: str | None = None, expr: dict[str, Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"fn": "sum", "alias": alias}
    if column:
        d["column"] = column
    if expr:
        d["expr"] = expr
    return d


_PRICE_DISC = {
    "op": "*",
    "args": [{"col": "l_extendedprice"}, {"op": "-", "args": [{"lit": 1}, {"col": "l_discount"}]}],
}
_ONE_PLUS_TAX = {"op": "+", "args": [{"lit": 1}, {"col": "l_tax"}]}
_PRICE_TIMES_DISC = {"op": "*", "args": [{"col": "l_extendedprice"}, {"col": "l_discount"}]}
_FILTERS = {
    "q1": [_f("l_shipdate", "<=", "1998-09-02")],
    "q6": [
        _f("l_shipdate", ">=", "1994-01-01"), _f("l_shipdate", "<", "1995-01-01"),
        _f("l_discount", ">=", 0.05), _f("l_discount", "<=", 0.07), _f("l_quantity", "<", 24),
    ],
    "q14": [_f("l_shipdate", ">=", "1995-09-01"), _f("l_shipdate", "<", "1995-10-01")],
    "q19": [
        _f("l_shipmode", "in", values=["AIR", "AIR REG"]), _f("l_shipinstruct", "=", "DELIVER IN PERSON"),
        _f("l_quantity", ">=", 1), _f("l_quantity", "<=", 30),
    ],
}  # fmt: skip
_PROJECT = {
    "q1": ["l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag", "l_linestatus"],
    "q6": ["l_extendedprice", "l_discount"],
    "q14": ["l_partkey", "l_extendedprice", "l_discount"],
    "q19": ["l_partkey", "l_quantity", "l_extendedprice", "l_discount"],
}
_AGGREGATE: dict[str, dict[str, Any]] = {
    "q1": {
        "group_by": ["l_returnflag", "l_linestatus"],
        "aggregates": [
            _sum("sum_qty", column="l_quantity"), _sum("sum_base_price", column="l_extendedprice"),
            _sum("sum_disc_price", expr=_PRICE_DISC),
            _sum("sum_charge", expr={"op": "*", "args": [_PRICE_DISC, _ONE_PLUS_TAX]}),
            _sum("sum_disc", column="l_discount"), {"fn": "count", "alias": "count_order"},
        ],
    },
    "q6": {"aggregates": [_sum("revenue", expr=_PRICE_TIMES_DISC)]},
}  # fmt: skip
POLICIES = ("none", "filter", "filter+project", "full")


def push_plans(query: str) -> dict[str, dict[str, Any]]:
    """The lineitem plan each policy pushes for ``query`` (``full`` only where the aggregate sits
    directly on the scan: Q1 and Q6; for the joins Q14 and Q19 ``full`` pushes filter+project)."""
    out: dict[str, dict[str, Any]] = {
        "filter": {"filters": _FILTERS[query]},
        "filter+project": {"filters": _FILTERS[query], "project": _PROJECT[query]},
    }
    out["full"] = {"filters": _FILTERS[query], **_AGGREGATE[query]} if query in _AGGREGATE else out["filter+project"]
    return out


def profile(data_dir: Path) -> dict[str, Any]:
    """Per query and policy: bytes that cross the network (Arrow IPC out of the proxy, or the
    Parquet files for ``none``) and single-core DuckDB seconds at the storage side, measured by
    running each plan over every lineitem file here. Cached in ``<data_dir>/profile.json``."""
    cached = data_dir / "profile.json"
    if cached.exists():
        doc: dict[str, Any] = json.loads(cached.read_text())
        return doc
    import time

    from shufflelab.ndp import execute as X
    from shufflelab.ndp import plan as P

    schema = plan_schema("lineitem")
    files = sorted((data_dir / "lineitem").glob("*.parquet"))
    total = sum(f.stat().st_size for f in files)
    out: dict[str, Any] = {"partitions": len(files), "parquet_bytes": total, "queries": {}}
    for q in QUERIES:
        per: dict[str, Any] = {"none": {"crossing_bytes": total, "storage_cpu_s": 0.0, "rows": None}}
        for policy, doc_ in push_plans(q).items():
            plan = P.validate(P.Plan.model_validate(doc_), schema)
            t0 = time.process_time()
            n_bytes = rows = 0
            for f in files:
                t = X.run(plan, schema, f, threads=1)
                n_bytes += len(X.to_ipc(t))
                rows += t.num_rows
            per[policy] = {"crossing_bytes": n_bytes, "storage_cpu_s": time.process_time() - t0, "rows": rows}
        out["queries"][q] = per
    tmp = cached.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1))
    tmp.replace(cached)
    return out
