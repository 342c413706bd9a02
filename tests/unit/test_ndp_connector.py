"""The NDP connector in Spark local mode against the real proxy: answers equal DuckDB's for every
pushdown policy, and what was pushed is what the policy allows.

The proxies (two, so files go round-robin) run in a background event loop on 127.0.0.1 in front of
a small fake WebHDFS: a "NameNode" that lists a directory and redirects ``OPEN`` to a "DataNode"
serving Parquet bytes from memory."""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import io
import json
import random
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from aiohttp import web

import sparklocal
from shufflelab.ndp import proxy as NP

_MISSING = [t for t in ("java", "javac", "mvn") if shutil.which(t) is None]
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(bool(_MISSING), reason=f"needs {', '.join(_MISSING)} to build and run the connector"),
]

DIR = "/data/lineitem"
DDL = (
    "l_orderkey BIGINT, l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), "
    "l_tax DECIMAL(15,2), l_returnflag STRING, l_linestatus STRING, l_shipdate DATE, l_shipmode STRING"
)  # the files also hold l_comment, which the table does not declare
POLICIES = ("none", "filter", "filter+project", "full")

Q6 = """
SELECT sum(l_extendedprice * l_discount) AS revenue FROM li
WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24
"""
Q1_SELECT = """
SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
  sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
  sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
  {avg_qty}, {avg_disc}, count(*) AS count_order,
  sum(l_orderkey) AS sum_key, max(l_orderkey) AS max_key, min(l_shipdate) AS first_ship, min(l_shipmode) AS mode
FROM li WHERE l_shipdate <= DATE '1998-09-02'
GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus
"""
Q1 = Q1_SELECT.format(avg_qty="avg(l_quantity) AS avg_qty", avg_disc="avg(l_discount) AS avg_disc")
# DuckDB's avg of a decimal is a DOUBLE: the reference takes sum and count and divides as Spark does
Q1_REF = Q1_SELECT.format(
    avg_qty="sum(l_quantity) AS avg_qty_s, count(l_quantity) AS avg_qty_n",
    avg_disc="sum(l_discount) AS avg_disc_s, count(l_discount) AS avg_disc_n",
)
# The OR is not a plan predicate: Spark keeps it, so the aggregate cannot be pushed either
OR_QUERY = """
SELECT l_returnflag, count(*) AS n, sum(l_extendedprice) AS s FROM li
WHERE l_shipdate >= DATE '1995-01-01' AND (l_shipmode = 'AIR' OR l_quantity < 5)
GROUP BY l_returnflag ORDER BY l_returnflag
"""
# what the proxy reports (X-NDP-Operators) for each policy; None: no pushdown at all
PUSHED = {
    "q6": {"none": None, "filter": "filter", "filter+project": "filter,project", "full": "filter,project,aggregate"},
    "q1": {"none": None, "filter": "filter", "filter+project": "filter,project", "full": "filter,project,aggregate"},
    "or": {"none": None, "filter": "filter", "filter+project": "filter,project", "full": "filter,project"},
}


def _lineitem(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    d0 = dt.date(1993, 6, 1)
    dec = pa.decimal128(15, 2)
    cents = [Decimal(rng.randint(90_000, 10_000_000)) / 100 for _ in range(n)]
    return pa.table(
        {
            # INT in the files, BIGINT in the table: read as declared (and DuckDB sums it into a HUGEINT)
            "l_orderkey": pa.array([seed * 100_000 + i // 4 for i in range(n)], pa.int32()),
            "l_quantity": pa.array([Decimal(rng.randint(1, 50)) for _ in range(n)], dec),
            "l_extendedprice": pa.array(cents, dec),
            "l_discount": pa.array([Decimal(rng.randint(0, 10)) / 100 for _ in range(n)], dec),
            "l_tax": pa.array([Decimal(rng.randint(0, 8)) / 100 for _ in range(n)], dec),
            "l_returnflag": [rng.choice("ANR") for _ in range(n)],
            "l_linestatus": [rng.choice("FO") for _ in range(n)],
            "l_shipdate": pa.array([d0 + dt.timedelta(days=rng.randint(0, 2000)) for _ in range(n)], pa.date32()),
            "l_shipmode": [
                None if rng.random() < 0.02 else rng.choice(["AIR", "MAIL", "SHIP", "TRUCK"]) for _ in range(n)
            ],
            "l_comment": [f"comment {i}" for i in range(n)],
        }
    )


# -- a fake WebHDFS (NameNode: LISTSTATUS, OPEN -> redirect; DataNode: the bytes) -------------------
@dataclass
class Fake:
    files: dict[str, bytes]
    dn_port: int = 0
    delay_s: float = 0.0  # DataNode reads take this long (to make pushdowns overlap)
    opens: list[str] = field(default_factory=list)

    def namenode(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/webhdfs/v1{path:.*}", self._nn)
        return app

    def datanode(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/webhdfs/v1{path:.*}", self._dn)
        return app

    async def _nn(self, r: web.Request) -> web.Response:
        path = r.match_info["path"].rstrip("/")
        if r.query.get("op") == "LISTSTATUS":
            kids = [p for p in self.files if p.rsplit("/", 1)[0] == path]
            if not kids:
                return web.json_response({"RemoteException": {"exception": "FileNotFoundException"}}, status=404)
            st = [{"pathSuffix": p.rsplit("/", 1)[1], "type": "FILE", "length": len(self.files[p])} for p in kids]
            st.append({"pathSuffix": "_tmp", "type": "DIRECTORY", "length": 0})
            return web.json_response({"FileStatuses": {"FileStatus": st}})
        if r.query.get("op") == "OPEN" and path in self.files:
            self.opens.append(path)
            loc = f"http://127.0.0.1:{self.dn_port}/webhdfs/v1{path}?op=OPEN&offset=0"
            return web.Response(status=307, headers={"Location": loc})
        return web.json_response({"RemoteException": {"exception": "FileNotFoundException"}}, status=404)

    async def _dn(self, r: web.Request) -> web.Response:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return web.Response(body=self.files[r.match_info["path"]], content_type="application/octet-stream")


class Servers:
    """The fake HDFS and the proxies, served by an event loop in a background thread."""

    def __init__(self, fake: Fake, spool: Path) -> None:
        self.fake = fake
        self.spool = spool
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="ndp-test-servers", daemon=True)
        self.runners: list[web.AppRunner] = []
        self.proxies: list[NP.NdpProxy] = []
        self.urls: list[str] = []

    def __enter__(self) -> Servers:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _serve(self, app: web.Application) -> int:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self.runners.append(runner)
        return int(runner.addresses[0][1])

    async def _start(self) -> None:
        nn = await self._serve(self.fake.namenode())
        self.fake.dn_port = await self._serve(self.fake.datanode())
        # two ordinary proxies, and a third with one worker and no queue: it answers 503 to overlap
        for workers, queue in ((2, 8), (2, 8), (1, 0)):
            cfg = NP.ProxyConfig(
                webhdfs=f"http://127.0.0.1:{nn}",
                datanodes=frozenset({f"127.0.0.1:{self.fake.dn_port}"}),
                workers=workers,
                max_queue=queue,
                spool=self.spool,
            )
            proxy = NP.NdpProxy(cfg)
            self.proxies.append(proxy)
            self.urls.append(f"http://127.0.0.1:{await self._serve(proxy.app())}")

    async def _stop(self) -> None:
        for r in reversed(self.runners):
            await r.cleanup()

    def counters(self) -> list[dict[str, int]]:
        return [dict(p.counters) for p in self.proxies]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from shufflelab.ndp import connector

    root = tmp_path_factory.mktemp("ndp-connector")
    local = root / "files"
    local.mkdir()
    files = {}
    for i, n in enumerate((3000, 2500, 3500)):
        buf = io.BytesIO()
        pq.write_table(_lineitem(n, seed=i + 1), buf, row_group_size=1000)
        files[f"{DIR}/part-{i}.parquet"] = buf.getvalue()
        (local / f"part-{i}.parquet").write_bytes(buf.getvalue())
    files[f"{DIR}/_SUCCESS"] = b""  # not a Parquet file: not listed as a partition
    jvm_tmp = root / "jvm-tmp"
    jvm_tmp.mkdir()
    jar = connector.ensure_jar()
    with Servers(Fake(files), root / "spool") as servers:
        with sparklocal.class_path_after([str(jar)]):
            spark = sparklocal.builder(
                "shufflelab-ndp-connector-test",
                conf={"spark.sql.shuffle.partitions": "2"},
                more_java=f"-Djava.io.tmpdir={jvm_tmp}",
            ).getOrCreate()
        try:
            yield {"spark": spark, "servers": servers, "local": local, "root": root, "jvm_tmp": jvm_tmp}
        finally:
            sparklocal.stop(spark)


def _load(env: dict[str, Any], policy: str, stats: Path, proxies: list[str] | None = None) -> Any:
    return (
        env["spark"]
        .read.format("shufflelab-ndp")
        .option("proxies", ",".join(proxies or env["servers"].urls[:2]))
        .option("path", DIR)
        .option("schema", DDL)
        .option("pushdown", policy)
        .option("stats_file", str(stats))
        .load()
    )


def _duck(env: dict[str, Any], sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    con.execute(f"CREATE VIEW li AS SELECT * FROM read_parquet('{env['local']}/*.parquet')")
    return [tuple(r) for r in con.execute(sql).fetchall()]


def _spark_avg(total: Decimal, n: int) -> Decimal:
    """Spark's avg of a DECIMAL(15,2): sum / count as DECIMAL(38,15), then DECIMAL(19,6), both HALF_UP."""
    with decimal.localcontext() as c:
        c.prec = 60
        q = (total / n).quantize(Decimal("1e-15"), rounding=decimal.ROUND_HALF_UP)
        return q.quantize(Decimal("1e-6"), rounding=decimal.ROUND_HALF_UP)


def _q1_reference(env: dict[str, Any]) -> list[tuple[Any, ...]]:
    out = []
    for r in _duck(env, Q1_REF):
        qs, qn, ds, dn = r[6:10]
        out.append((*r[:6], _spark_avg(qs, qn), _spark_avg(ds, dn), *r[10:]))
    return out


def _stats(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_answers_and_pushed_plans_per_policy(env: dict[str, Any]) -> None:
    servers = env["servers"]
    refs = {"q6": _duck(env, Q6), "q1": _q1_reference(env), "or": _duck(env, OR_QUERY)}
    assert refs["q6"][0][0] is not None and len(refs["q1"]) == 6 and refs["or"]
    sizes = {f"{DIR}/part-{i}.parquet": (env["local"] / f"part-{i}.parquet").stat().st_size for i in range(3)}
    body: dict[tuple[str, str], int] = {}
    for policy in POLICIES:
        for name, sql in (("q6", Q6), ("q1", Q1), ("or", OR_QUERY)):
            stats = env["root"] / f"stats-{name}-{policy}.jsonl"
            before = servers.counters()
            _load(env, policy, stats).createOrReplaceTempView("li")
            got = [tuple(r) for r in env["spark"].sql(sql).collect()]
            after = servers.counters()
            assert got == refs[name], f"{name} with pushdown={policy}"

            lines = _stats(stats)
            assert sorted(s["path"] for s in lines) == sorted(sizes), f"{name}/{policy}: one line per file"
            by_path = {s["path"]: s for s in lines}
            # files are dealt to the proxies round-robin in path order
            assert [by_path[p]["proxy"] for p in sorted(sizes)] == [servers.urls[0], servers.urls[1], servers.urls[0]]
            assert all(s["policy"] == policy for s in lines)
            posts = sum(a["completed"] - b["completed"] for a, b in zip(after, before, strict=True))
            want = PUSHED[name][policy]
            if want is None:  # whole files: WebHDFS only, the files' bytes exactly
                assert posts == 0, f"{name}/{policy} must not push anything"
                assert all(s["operators"] == "" and s["body_bytes"] == sizes[s["path"]] for s in lines)
                assert all(s["datanode"] == f"127.0.0.1:{servers.fake.dn_port}" for s in lines)
            else:
                assert posts == 3, f"{name}/{policy}: one pushdown per file"
                assert {s["operators"] for s in lines} == {want}, f"{name}/{policy} pushed {lines[0]['operators']}"
                assert all(s["body_bytes"] > 0 and s["input_bytes"] == sizes[s["path"]] for s in lines)
            body[name, policy] = sum(s["body_bytes"] for s in lines)
    # each operator pushed makes the answer smaller (Q1 needs every declared column: projecting saves
    # nothing); but Arrow IPC is not compressed, so a filter that keeps most rows (Q1's) sends more
    # than the compressed Parquet file: only Q6's is selective enough to beat the whole file
    for q in ("q6", "q1"):
        sent = {p: body[q, p] for p in POLICIES}
        assert sent["filter"] >= sent["filter+project"] > sent["full"], f"{q}: bytes per policy {sent}"
        assert sent["full"] * 10 < sent["none"], f"{q}: bytes per policy {sent}"
    assert body["q6", "none"] > body["q6", "filter"] > body["q6", "filter+project"]
    assert body["q1", "none"] < body["q1", "filter"]
    # whole-file reads leave no temporary file behind
    assert not list(env["jvm_tmp"].glob("shufflelab-ndp-*"))


def test_count_star_needs_no_column(env: dict[str, Any]) -> None:
    """count(*) reads no column: with filter+project the plan asks for one (the proxy takes an empty
    projection as "all columns") and the readers drop it; with full the count itself is pushed."""
    sql = "SELECT count(*) AS n FROM li WHERE l_shipdate >= DATE '1996-01-01'"
    want = _duck(env, sql)
    for policy, ops in (("none", ""), ("filter+project", "filter,project"), ("full", "filter,project,aggregate")):
        stats = env["root"] / f"stats-count-{policy}.jsonl"
        _load(env, policy, stats).createOrReplaceTempView("li")
        assert [tuple(r) for r in env["spark"].sql(sql).collect()] == want, policy
        assert {s["operators"] for s in _stats(stats)} == {ops}


def test_busy_proxy_is_retried(env: dict[str, Any]) -> None:
    """A proxy with one worker and no queue refuses overlapping pushdowns (503, Retry-After);
    the readers wait and ask again, and the answer is still right."""
    servers = env["servers"]
    servers.fake.delay_s = 0.4  # reads overlap: local[2] runs two tasks at once
    try:
        stats = env["root"] / "stats-busy.jsonl"
        _load(env, "full", stats, proxies=[servers.urls[2]]).createOrReplaceTempView("li")
        got = [tuple(r) for r in env["spark"].sql(Q6).collect()]
    finally:
        servers.fake.delay_s = 0.0
    assert got == _duck(env, Q6)
    c = servers.counters()[2]
    assert c["completed"] == 3 and c["rejected"] >= 1, c
    assert len(_stats(stats)) == 3


def test_bad_options_are_named(env: dict[str, Any]) -> None:
    spark, urls = env["spark"], env["servers"].urls

    def load(**opts: str) -> None:
        r = spark.read.format("shufflelab-ndp")
        for k, v in {"proxies": urls[0], "path": DIR, "schema": DDL, **opts}.items():
            r = r.option(k, v)
        r.load().count()

    with pytest.raises(Exception, match="column 'ts' has type TIMESTAMP"):
        load(schema="l_orderkey BIGINT, ts TIMESTAMP")
    with pytest.raises(Exception, match="pushdown=all is not one of"):
        load(pushdown="all")
    with pytest.raises(Exception, match="proxy 'localhost' is not http"):
        load(proxies="localhost")
    with pytest.raises(Exception, match="FileNotFoundException"):
        load(path="/data/nothing")
