"""The NDP proxy in-process: plain WebHDFS forwarding, pushdowns equal to DuckDB, refusals, load status.

A small fake WebHDFS stands in for HDFS: a "NameNode" that redirects ``OPEN`` to a "DataNode"
(another local server) holding Parquet files, and echoes every other request back."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import decimal
import gzip
import io
import json
import math
import random
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from shufflelab.ndp import client as C
from shufflelab.ndp import execute as X
from shufflelab.ndp import plan as P
from shufflelab.ndp import proxy as NP

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
            "l_comment": [f"c{i}" for i in range(n)],  # in the file, not declared: never reachable
        }
    )


def _parquet(table: pa.Table, row_group: int = 1000) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=row_group)
    return buf.getvalue()


LINEITEM = _lineitem()
FILES = {"/data/lineitem.parquet": _parquet(LINEITEM), "/data/notparquet.bin": b"PAR1 but not really"}

FILTER_PROJECT = {
    "filters": [
        {"column": "l_returnflag", "op": "=", "value": "R"},
        {"column": "l_shipdate", "op": ">=", "value": "1994-06-01"},
        {"column": "l_discount", "op": "between", "values": [0.05, 0.07]},
    ],
    "project": ["l_orderkey", "l_extendedprice", "l_shipmode"],
}
PARTIAL_AGG = {
    "filters": [{"column": "l_shipmode", "op": "in", "values": ["AIR", "REG AIR", "MAIL"]}],
    "group_by": ["l_returnflag"],
    "aggregates": [
        {"fn": "sum", "column": "l_extendedprice", "alias": "revenue"},
        {"fn": "count", "alias": "n"},
        {"fn": "avg", "column": "l_quantity", "alias": "avg_qty"},
        {"fn": "max", "column": "l_discount", "alias": "max_disc"},
    ],
}


# -- a fake WebHDFS --------------------------------------------------------------------------------
@dataclass
class Fake:
    files: dict[str, bytes]
    gate: asyncio.Event | None = None  # when set up, DataNode reads wait for it
    seen: list[dict[str, Any]] = field(default_factory=list)
    dn_port: int = 0

    def namenode(self) -> web.Application:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/webhdfs/v1{path:.*}", self._nn)
        return app

    def datanode(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/webhdfs/v1{path:.*}", self._dn)
        return app

    async def _nn(self, r: web.Request) -> web.StreamResponse:
        path = r.match_info["path"]
        if r.query.get("op") == "OPEN":
            self.seen.append({"method": r.method, "target": r.raw_path, "headers": dict(r.headers)})
            if path not in self.files:
                rex = {"exception": "FileNotFoundException", "message": f"File does not exist: {path}"}
                return web.json_response({"RemoteException": rex}, status=404)
            loc = f"http://127.0.0.1:{self.dn_port}/webhdfs/v1{path}?op=OPEN&namenoderpcaddress=127.0.0.1:9000&offset=0"
            return web.Response(status=307, headers={"Location": loc})
        body = await r.read()  # echo: what reached the upstream
        self.seen.append({"method": r.method, "target": r.raw_path, "headers": dict(r.headers), "body": body})
        resp = web.StreamResponse(status=201 if r.method == "PUT" else 200, reason="Echo")
        resp.headers["X-Upstream"] = "nn"
        resp.headers["Set-Cookie"] = "hadoop.auth=abc; Path=/"
        resp.headers.add("Set-Cookie", "second=1")
        resp.headers["Content-Type"] = "application/x-echo"
        resp.content_length = len(body) + 4
        await resp.prepare(r)
        await resp.write(b"ECHO")
        await resp.write(body)
        return resp

    async def _dn(self, r: web.Request) -> web.Response:
        if self.gate is not None:
            await self.gate.wait()
        return web.Response(body=self.files[r.match_info["path"]], content_type="application/octet-stream")


@contextlib.asynccontextmanager
async def _stack(tmp: Path, *, gate: bool = False, **cfg: Any) -> AsyncIterator[tuple[TestClient, NP.NdpProxy, Fake]]:
    fake = Fake(dict(FILES), asyncio.Event() if gate else None)
    async with TestServer(fake.namenode()) as nn, TestServer(fake.datanode()) as dn:
        fake.dn_port = dn.port
        conf = {"workers": 2, "max_queue": 4, "datanodes": frozenset({f"127.0.0.1:{dn.port}"}), **cfg}
        proxy = NP.NdpProxy(NP.ProxyConfig(webhdfs=f"http://127.0.0.1:{nn.port}", spool=tmp, **conf))
        async with TestClient(TestServer(proxy.app())) as client:
            yield client, proxy, fake
        assert proxy.spool_dir is not None and not proxy.spool_dir.exists(), "spool left behind"


def _body(plan: Any, schema: Any = None, **extra: Any) -> bytes:
    return json.dumps({"plan": plan, "schema": SCHEMA if schema is None else schema, **extra}).encode()


async def _pushdown(client: TestClient, body: bytes, path: str = "/data/lineitem.parquet") -> tuple[int, Any, Any]:
    r = await client.post(f"/ndp/v1{path}", data=body, headers={"Content-Type": "application/json"})
    data = await r.read()
    if r.status == 200:
        assert r.headers["Content-Type"] == NP.ARROW_STREAM
        return r.status, X.from_ipc(data), C.PushdownStats.from_headers(r.headers)
    return r.status, json.loads(data), r.headers


async def _raw(client: TestClient, head: str, body: bytes = b"") -> tuple[list[str], bytes]:
    """Send a request exactly as written (no client library in between): (header lines, body)."""
    rd, wr = await asyncio.open_connection(client.host, client.port)
    try:
        wr.write((head + "Connection: close\r\n\r\n").encode() + body)
        data = await rd.read()
    finally:
        wr.close()
    top, _, body = data.partition(b"\r\n\r\n")
    return top.decode().split("\r\n"), body


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def _direct(sql: str) -> pa.Table:
    con = duckdb.connect()
    con.register("lineitem", LINEITEM)
    return con.execute(sql).to_arrow_table()


def _sorted(t: pa.Table, keys: list[str]) -> list[dict[str, Any]]:
    return t.sort_by([(k, "ascending") for k in keys]).to_pylist()


# -- plain WebHDFS ----------------------------------------------------------------------------------
def test_plain_requests_are_forwarded_untouched(tmp_path: Path) -> None:
    async def go() -> None:
        async with _stack(tmp_path) as (client, proxy, fake):
            # byte for byte: the request target (percent-encoding included), headers, no added ones
            target = "/webhdfs/v1/data/a%20b%2Bc?op=GETFILESTATUS&user.name=root&x=%2F%26"
            extra = "X-Custom: 1\r\nAccept: text/x-odd\r\n"
            head, body = await _raw(client, f"GET {target} HTTP/1.1\r\nHost: x\r\n{extra}")
            assert head[0] == "HTTP/1.1 200 Echo"
            assert "X-Upstream: nn" in head and "Set-Cookie: hadoop.auth=abc; Path=/" in head
            assert "Set-Cookie: second=1" in head
            assert "Content-Type: application/x-echo" in head and body == b"ECHO"
            got = fake.seen[-1]
            assert got["method"] == "GET" and got["target"] == target
            assert got["headers"]["X-Custom"] == "1" and got["headers"]["Accept"] == "text/x-odd"
            assert "User-Agent" not in got["headers"] and "Accept-Encoding" not in got["headers"]

            # a body is streamed through unchanged, with its length or chunked
            payload = random.Random(3).randbytes(3 * 1024 * 1024 + 17)
            r = await client.put("/webhdfs/v1/data/up?op=CREATE", data=payload)
            assert r.status == 201 and await r.read() == b"ECHO" + payload
            assert fake.seen[-1]["body"] == payload and fake.seen[-1]["method"] == "PUT"

            async def gen() -> AsyncIterator[bytes]:
                for i in range(5):
                    yield bytes([i]) * 70_000

            r = await client.post("/webhdfs/v1/data/up?op=APPEND", data=gen())
            assert r.status == 200 and fake.seen[-1]["body"] == b"".join(bytes([i]) * 70_000 for i in range(5))
            await r.read()

            # the NameNode's redirect comes back as it is; following it reads the DataNode directly
            r = await client.get("/webhdfs/v1/data/lineitem.parquet?op=OPEN&user.name=root", allow_redirects=False)
            assert r.status == 307
            assert r.headers["Location"].startswith(f"http://127.0.0.1:{fake.dn_port}/webhdfs/v1/data/lineitem.parquet")
            r = await client.get("/webhdfs/v1/data/lineitem.parquet?op=OPEN&user.name=root")
            assert r.status == 200 and await r.read() == FILES["/data/lineitem.parquet"]

            # never anything outside /webhdfs/v1 on the NameNode
            n = len(fake.seen)
            for bad in ("/webhdfs/v1/../../jmx", "/webhdfs/v1/%2e%2e/x", "/webhdfs/v1/a/./b"):
                head, _ = await _raw(client, f"GET {bad} HTTP/1.1\r\nHost: x\r\n")
                assert head[0].split()[1] == "400", bad
            assert (await client.get("/jmx")).status == 404
            assert (await client.get("/webhdfsX/v1/a")).status == 404
            assert len(fake.seen) == n
            assert proxy.counters["forwarded"] == 5

    _run(go())


def test_upstream_down_answers_502(tmp_path: Path) -> None:
    async def go() -> None:
        cfg = NP.ProxyConfig(webhdfs="http://127.0.0.1:9", datanodes=frozenset(), spool=tmp_path, workers=1)
        async with TestClient(TestServer(NP.NdpProxy(cfg).app())) as client:
            r = await client.get("/webhdfs/v1/x?op=GETFILESTATUS")
            assert r.status == 502 and "could not be reached" in (await r.json())["error"]
            r = await client.post("/ndp/v1/x.parquet", data=_body(FILTER_PROJECT))
            assert r.status == 502 and (await r.json())["field"] == "path"

    _run(go())


# -- pushdowns ------------------------------------------------------------------------------------
def test_pushdown_filter_project_equals_duckdb(tmp_path: Path) -> None:
    async def go() -> None:
        async with _stack(tmp_path) as (client, proxy, fake):
            status, table, stats = await _pushdown(client, _body(FILTER_PROJECT))
            assert status == 200, table
            want = _direct(
                "SELECT l_orderkey, l_extendedprice, l_shipmode FROM lineitem WHERE l_returnflag = 'R' "
                "AND l_shipdate >= DATE '1994-06-01' AND l_discount BETWEEN 0.05 AND 0.07"
            )
            assert table.schema == want.schema and table.num_rows == want.num_rows > 0
            assert _sorted(table, ["l_orderkey", "l_extendedprice"]) == _sorted(want, ["l_orderkey", "l_extendedprice"])
            assert stats.rows == want.num_rows
            assert stats.input_bytes == len(FILES["/data/lineitem.parquet"])
            assert stats.output_bytes == len(X.to_ipc(table))
            assert stats.exec_s > 0 and stats.datanode == f"127.0.0.1:{fake.dn_port}"
            assert stats.operators == ("filter", "project")
            # the only thing a pushdown asked HDFS for: a read
            assert [(s["method"], "op=OPEN" in s["target"]) for s in fake.seen] == [("GET", True)]

            # only some row groups
            status, part, _ = await _pushdown(client, _body({"project": ["l_orderkey"]}, row_groups=[1]))
            assert status == 200
            assert part.column("l_orderkey").to_pylist() == LINEITEM.column("l_orderkey")[1000:2000].to_pylist()

    _run(go())


def test_pushdown_partial_aggregate_equals_duckdb(tmp_path: Path) -> None:
    async def go() -> None:
        async with _stack(tmp_path) as (client, _, _fake):
            status, table, stats = await _pushdown(client, _body(PARTIAL_AGG))
            assert status == 200, table
            want = _direct(
                "SELECT l_returnflag, sum(l_extendedprice) AS revenue, count(*) AS n, sum(l_quantity) AS avg_qty__sum, "
                "count(l_quantity) AS avg_qty__count, max(l_discount) AS max_disc FROM lineitem "
                "WHERE l_shipmode IN ('AIR', 'REG AIR', 'MAIL') GROUP BY l_returnflag"
            )
            assert table.column_names == want.column_names
            assert _sorted(table, ["l_returnflag"]) == _sorted(want, ["l_returnflag"])
            assert stats.operators == ("filter", "project", "aggregate") and stats.rows == 3

            # partials of two row-group ranges combine to DuckDB's final answer
            parts = []
            for groups in ([0], [1, 2]):
                s, t, _ = await _pushdown(client, _body(PARTIAL_AGG, row_groups=groups))
                assert s == 200
                parts.append(t)
            final = X.combine(P.parse(json.dumps(PARTIAL_AGG)), parts)
            want_final = _direct(
                "SELECT l_returnflag, sum(l_extendedprice) AS revenue, count(*) AS n, avg(l_quantity) AS avg_qty, "
                "max(l_discount) AS max_disc FROM lineitem WHERE l_shipmode IN ('AIR', 'REG AIR', 'MAIL') "
                "GROUP BY l_returnflag ORDER BY l_returnflag"
            )
            for a, b in zip(final.to_pylist(), want_final.to_pylist(), strict=True):
                assert a["l_returnflag"] == b["l_returnflag"] and a["n"] == b["n"]
                for k in ("revenue", "avg_qty", "max_disc"):
                    assert float(a[k]) == pytest.approx(float(b[k]), rel=1e-12)

    _run(go())


# -- refusals -------------------------------------------------------------------------------------
BAD: list[tuple[bytes, int, str]] = [
    (_body({"filters": [{"column": "l_tax", "op": "=", "value": 1}]}), 400, "plan.filters.0.column"),
    (_body({"filters": [{"column": "x; DROP TABLE t", "op": "=", "value": 1}]}), 400, "plan.filters.0.column"),
    (_body({"filters": [{"column": "l_quantity", "op": "=", "value": "1"}]}), 400, "plan.filters.0.value"),
    (_body({"filters": [{"column": "l_quantity", "op": "like", "value": 1}]}), 400, "plan.filters.0.op"),
    (_body({"project": ["l_orderkey"], "sql": "SELECT 1"}), 400, "plan.sql"),
    (_body({"version": 2}), 400, "plan.version"),
    (_body({"aggregates": [{"fn": "sum", "column": "l_shipmode", "alias": "s"}]}), 400, "plan.aggregates.0.fn"),
    (_body({}, schema={"l_quantity": "varchar"}), 400, "schema.l_quantity"),
    (_body({}, schema={"Bad Name": "int"}), 400, "schema.Bad Name"),
    (_body({}, schema={}), 400, "schema"),
    (_body({}, schema={**SCHEMA, "l_quantity": "int"}), 400, "schema.l_quantity"),  # the file has double
    (_body({}, schema={**SCHEMA, "l_tax": "float"}), 400, "schema.l_tax"),  # not in the file
    (_body({}, row_groups=[7]), 400, "row_groups.0"),  # the file has 3
    (_body({}, row_groups=[True]), 400, "row_groups.0"),
    (_body({}, offset=0), 400, "offset"),
    (json.dumps({"schema": SCHEMA}).encode(), 400, "plan"),
    (b'{"plan": {}, "plan": {}, "schema": {}}', 400, "body"),
    (b'{"plan": {"filters": [{"column": "l_quantity", "op": "=", "value": NaN}]}, "schema": {}}', 400, "body"),
    (b"\xff\xfe not json", 400, "body"),
    (b"[" * 100_000, 413, "body"),
    (b"[" * 50_000, 400, "body"),
    (b"", 400, "body"),
    (json.dumps([1, 2]).encode(), 400, "body"),
]


def test_bad_requests_are_refused_with_the_field(tmp_path: Path) -> None:
    async def go() -> None:
        async with _stack(tmp_path) as (client, proxy, fake):
            for body, want_status, want_field in BAD:
                status, doc, _ = await _pushdown(client, body)
                assert (status, doc["field"]) == (want_status, want_field), (body[:120], doc)
                assert doc["error"]
            # a huge body announced by Content-Length is refused before it is read
            big = b"x" * (NP.MAX_BODY_BYTES + 1)
            status, doc, _ = await _pushdown(client, big)
            assert status == 413 and doc["field"] == "body"
            # paths, sent as written (a client library would normalise the dot segments away)
            b = _body({})
            for path in ("/data/../etc/passwd", "/data/%2E%2E/x", "/data//x", "/data/./x", "/a%00b", "/"):
                req = f"POST /ndp/v1{path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(b)}\r\n"
                head, raw = await _raw(client, req, b)
                assert head[0].split()[1] == "400" and json.loads(raw)["field"] == "path", (path, head[0], raw)
            status, doc, _ = await _pushdown(client, _body({}), path="/data/missing.parquet")
            assert status == 404 and doc["field"] == "path" and "missing.parquet" in doc["error"]
            status, doc, _ = await _pushdown(client, _body({}), path="/data/notparquet.bin")
            assert status == 422 and doc["field"] == "path" and "Parquet" in doc["error"]
            # only the three refusals that need the file's own schema read it; the rest never reached HDFS
            assert sum("lineitem" in s["target"] for s in fake.seen) == 3
            st = await (await client.get("/ndp/v1/status")).json()
            assert st["not_found"] == 1 and st["completed"] == 0 and st["invalid"] >= len(BAD) + 1
            status, _, _ = await _pushdown(client, _body(FILTER_PROJECT))
            assert status == 200

    _run(go())


def test_slow_body_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(NP, "BODY_TIMEOUT_S", 0.3)

    async def go() -> None:
        async with _stack(tmp_path) as (client, proxy, _):
            rd, wr = await asyncio.open_connection(client.host, client.port)
            wr.write(b"POST /ndp/v1/data/lineitem.parquet HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            status = (await asyncio.wait_for(rd.readline(), 10)).split()[1]
            wr.close()
            assert status == b"408" and proxy.counters["invalid"] == 1
            assert (await client.get("/ndp/v1/status")).status == 200

    _run(go())


def test_long_execution_is_interrupted_with_504(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pushdown running past exec_timeout_s gets 504; its DuckDB connection is interrupted (the
    worker is free again) and the next pushdown runs normally."""
    interrupted = threading.Event()
    real = NP._execute

    class Con:
        def interrupt(self) -> None:
            interrupted.set()

    def slow(req: Any, spool: Path, on_connect: Any = None) -> Any:
        on_connect(Con())
        assert interrupted.wait(10), "never interrupted"
        raise RuntimeError("INTERRUPT Error: Interrupted!")

    async def go() -> None:
        async with _stack(tmp_path, exec_timeout_s=0.3, workers=1) as (client, proxy, _):
            monkeypatch.setattr(NP, "_execute", slow)
            status, doc, _ = await _pushdown(client, _body({"filters": []}))
            assert status == 504 and "execution limit" in doc["error"] and interrupted.is_set()
            assert proxy.counters["timed_out"] == 1 and proxy.running == 0
            monkeypatch.setattr(NP, "_execute", real)
            # the next one within a limit a loaded machine meets (0.3 s is for the slow one only)
            monkeypatch.setattr(proxy.config, "exec_timeout_s", 60.0)
            status, table, _ = await _pushdown(client, _body({"project": ["l_orderkey"]}))
            assert status == 200 and table.num_rows > 0

    _run(go())


def test_read_is_followed_only_to_the_local_datanode(tmp_path: Path) -> None:
    async def go() -> None:
        async with _stack(tmp_path, datanodes=frozenset({"127.0.0.1:1"})) as (client, proxy, fake):
            status, doc, _ = await _pushdown(client, _body(FILTER_PROJECT))
            assert status == 502 and "not this host's DataNode" in doc["error"]
            assert proxy.counters["failed"] == 1

    _run(go())


def test_file_larger_than_the_read_limit(tmp_path: Path) -> None:
    async def go() -> None:
        async with _stack(tmp_path, max_read_bytes=1000) as (client, proxy, _):
            status, doc, _ = await _pushdown(client, _body(FILTER_PROJECT))
            assert status == 413 and doc["field"] == "path"

    _run(go())


# -- load: status, queue, drain rate -----------------------------------------------------------------
def test_status_counters_and_queue_full(tmp_path: Path) -> None:
    async def go() -> None:
        async with _stack(tmp_path, gate=True, workers=1, max_queue=1) as (client, proxy, fake):
            assert fake.gate is not None

            async def status() -> dict[str, Any]:
                r = await client.get("/ndp/v1/status")
                assert r.status == 200
                return dict(await r.json())

            s0 = await status()
            assert s0["queued"] == 0 and s0["running"] == 0 and s0["workers"] == 1
            assert s0["completed"] == 0 and s0["drain_per_s"] == 0.0 and s0["rejected"] == 0
            first = asyncio.create_task(_pushdown(client, _body(FILTER_PROJECT)))
            second = asyncio.create_task(_pushdown(client, _body(PARTIAL_AGG)))
            for _ in range(200):
                s = await status()
                if s["running"] == 1 and s["queued"] == 1:
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError(f"never one running and one queued: {s}")
            status3, doc, headers = await _pushdown(client, _body(FILTER_PROJECT))
            assert status3 == 503 and "queue full" in doc["error"] and int(headers["Retry-After"]) >= 1
            fake.gate.set()
            r1, r2 = await first, await second
            assert r1[0] == 200 and r2[0] == 200
            assert r2[2].queue_s > 0  # it waited for the one worker
            s = await status()
            assert s["queued"] == 0 and s["running"] == 0 and s["rejected"] == 1 and s["completed"] == 2
            assert s["drain_per_s"] > 0 and s["service_s"] > 0
            assert s["bytes_read"] == 2 * len(FILES["/data/lineitem.parquet"]) and s["bytes_out"] > 0

    _run(go())


def test_drain_meter_counts_busy_time_only() -> None:
    now = [0.0]
    m = NP.DrainMeter(alpha=0.5, clock=lambda: now[0])
    assert m.rate == 0.0
    m.start()
    now[0] = 2.0
    m.finish(2.0)
    assert m.rate == pytest.approx(0.5) and m.service_s == 2.0
    now[0] = 100.0  # idle: does not count
    m.start()
    m.start()
    now[0] = 101.0
    m.finish(1.0)
    now[0] = 101.5
    m.finish(1.5)
    # busy gaps 1.0 and 0.5 after the first 2.0: EWMA 0.5*1 + 0.5*2 = 1.5, then 0.5*0.5 + 0.5*1.5 = 1.0
    assert m.interval_s == pytest.approx(1.0) and m.rate == pytest.approx(1.0)
    m.start()
    now[0] = 200.0
    m.finish(None)  # a failure frees the slot but is no completion
    assert m.rate == pytest.approx(1.0) and m.active == 0


def test_parse_request_and_config_errors() -> None:
    req = NP.parse_request(_body(PARTIAL_AGG, row_groups=[0, 2]))
    assert req.schema == SCHEMA and req.row_groups == (0, 2) and req.plan.group_by == ["l_returnflag"]
    with pytest.raises(NP.BodyTooLarge):
        NP.parse_request(b" " * (NP.MAX_BODY_BYTES + 1))
    for bad in (b"{", b"null", b'{"plan": [], "schema": {}}', b'{"plan": {}, "schema": {"a": 1}}'):
        with pytest.raises(P.PlanError):
            NP.parse_request(bad)
    with pytest.raises(ValueError, match="webhdfs"):
        NP.ProxyConfig(webhdfs="https://x:1", datanodes=frozenset())
    with pytest.raises(ValueError, match="workers"):
        NP.ProxyConfig(webhdfs="http://x:1", datanodes=frozenset(), workers=0)
    with pytest.raises(ValueError, match="datanode"):
        NP.ProxyConfig(webhdfs="http://x:1", datanodes=frozenset({"nohost"}))
    assert NP.usable_cpus() >= 1
    plan = P.parse(json.dumps(FILTER_PROJECT))
    again = NP.parse_request(C.request_body(plan, SCHEMA, [1]))
    assert again.plan == plan and again.schema == SCHEMA and again.row_groups == (1,)


# -- values: what the engine cannot hold is a 4xx naming the field, never a 500 ------------------------
def _agg(expr: dict[str, Any], fn: str = "sum", **plan: Any) -> bytes:
    return _body({**plan, "aggregates": [{"fn": fn, "alias": "s", "expr": expr}]})


def _times(col: str, lit: int | float) -> dict[str, Any]:
    return {"op": "*", "args": [{"col": col}, {"lit": lit}]}


VALUE_CASES: list[tuple[str, bytes, int, str]] = [
    # string literals that cannot be encoded: a JSON \ud800 escape decodes to a lone surrogate
    ("surrogate value", b'{"plan": {"filters": [{"column": "l_shipmode", "op": "=", "value": "AIR\\ud800"}]}, '
     b'"schema": ' + json.dumps(SCHEMA).encode() + b"}", 400, "plan.filters.0.value"),
    ("surrogate in list", _body({"filters": [{"column": "l_shipmode", "op": "in", "values": ["AIR", "\udfff"]}]}),
     400, "plan.filters.0.values.1"),
    ("surrogate plan key", _body({"project": ["l_orderkey"], "\ud800x": 1}), 400, "plan.\\ud800x"),
    # integer overflow inside an aggregate expression (BIGINT * BIGINT; INTEGER literals * INTEGER)
    ("int64 overflow", _agg(_times("l_orderkey", 2**62)), 422, "plan.aggregates.0.expr"),
    ("int32 overflow", _agg({"op": "*", "args": [{"lit": 100_000}, {"lit": 100_000}]}, fn="max"), 422,
     "plan.aggregates.0.expr"),
    ("second aggregate", _body({"group_by": ["l_returnflag"], "aggregates": [
        {"fn": "count", "alias": "n"}, {"fn": "min", "alias": "m", "expr": _times("l_orderkey", -(2**62))}]}),
     422, "plan.aggregates.1.expr"),
    # a sum that fits the engine's 128 bits but not the 38 digits of its Arrow decimal: 4 x 4e37
    ("sum beyond 38 digits", _agg({"lit": 4 * 10**37}, filters=[{"column": "l_orderkey", "op": "=", "value": 0}]),
     422, "plan.aggregates.0.expr"),
    # integer literals beyond 128 bits (and beyond what the engine's integer types hold)
    ("2**128 value", _body({"filters": [{"column": "l_orderkey", "op": "<", "value": 2**128}]}), 400,
     "plan.filters.0.value"),
    ("2**127 value", _body({"filters": [{"column": "l_orderkey", "op": "between", "values": [0, 2**127]}]}), 400,
     "plan.filters.0.values.1"),
    ("2**130 literal", _agg(_times("l_quantity", 2**130)), 400, "plan.aggregates.0.expr.args.1.lit"),
    # dates Python's fromisoformat takes and the engine's CAST(... AS DATE) does not
    ("week date", _body({"filters": [{"column": "l_shipdate", "op": ">=", "value": "1994-W01-1"}]}), 400,
     "plan.filters.0.value"),
    ("basic date", _body({"filters": [{"column": "l_shipdate", "op": "in", "values": ["1994-01-01", "19940102"]}]}),
     400, "plan.filters.0.values.1"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "status", "field"), [c[1:] for c in VALUE_CASES], ids=[c[0] for c in VALUE_CASES])
def test_values_the_engine_cannot_hold_get_a_4xx_naming_the_field(
    tmp_path: Path, body: bytes, status: int, field: str
) -> None:
    async def go() -> None:
        async with _stack(tmp_path) as (client, proxy, _):
            got, doc, _ = await _pushdown(client, body)
            assert (got, doc.get("field") if isinstance(doc, dict) else None) == (status, field), doc
            assert doc["error"]
            assert proxy.counters["failed"] == 0 and proxy.counters["invalid"] == 1
            got, table, _ = await _pushdown(client, _body(FILTER_PROJECT))  # the proxy is unharmed
            assert got == 200 and table.num_rows > 0

    _run(go())


def test_nul_bytes_and_wide_values_that_fit_get_the_right_answer(tmp_path: Path) -> None:
    """What the engine can hold is answered, and correctly: NUL in strings, 38-digit integers, a
    product that overflows BIGINT only for the rows the filter drops."""

    async def go() -> None:
        async with _stack(tmp_path) as (client, _, _fake):
            status, t, _ = await _pushdown(
                client,
                _body(
                    {
                        "filters": [{"column": "l_shipmode", "op": "in", "values": ["AIR", "\x00", "A\x00IR"]}],
                        "project": ["l_shipmode"],
                    }
                ),
            )
            assert status == 200 and t.num_rows == LINEITEM.column("l_shipmode").to_pylist().count("AIR")
            big = 10**38 - 1
            status, t, _ = await _pushdown(
                client,
                _body(
                    {
                        "filters": [{"column": "l_orderkey", "op": "between", "values": [-big, big]}],
                        "project": ["l_orderkey"],
                    }
                ),
            )
            assert status == 200 and t.num_rows == LINEITEM.num_rows
            status, t, _ = await _pushdown(
                client, _agg(_times("l_orderkey", 2**61), filters=[{"column": "l_orderkey", "op": "<=", "value": 3}])
            )
            assert status == 200, t
            assert t.column("s").to_pylist() == [sum(k * 2**61 for k in LINEITEM.column("l_orderkey").to_pylist()
                                                     if k <= 3)]  # fmt: skip
            status, t, _ = await _pushdown(client, _agg({"lit": 10**38 - 1}, fn="max"))
            assert status == 200 and t.column("s").to_pylist() == [10**38 - 1]

    _run(go())


def test_compressed_pushdown_body_is_refused_with_415(tmp_path: Path) -> None:
    async def go() -> None:
        async with _stack(tmp_path) as (client, proxy, _):
            for payload in (gzip.compress(_body(FILTER_PROJECT)), b"not gzip at all"):
                r = await client.post("/ndp/v1/data/lineitem.parquet", data=payload,
                                      headers={"Content-Encoding": "gzip"})  # fmt: skip
                assert r.status == 415 and (await r.json())["field"] == "Content-Encoding"
            assert proxy.counters["invalid"] == 2

    _run(go())


def test_path_that_is_not_utf8_is_refused_not_read_literally(tmp_path: Path) -> None:
    """``%ff`` is not a UTF-8 path: refused, not read as the file literally named ``%ff`` (which a
    client reaches as ``%25ff``)."""

    async def go() -> None:
        async with _stack(tmp_path) as (client, _, fake):
            fake.files["/data/%ff.parquet"] = FILES["/data/lineitem.parquet"]
            b = _body({"project": ["l_orderkey"]})
            for path in ("/data/%ff.parquet", "/data/%ed%a0%80.parquet"):
                head, raw = await _raw(
                    client, f"POST /ndp/v1{path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(b)}\r\n", b
                )
                assert head[0].split()[1] == "400" and json.loads(raw)["field"] == "path", (path, head, raw)
            assert fake.seen == []
            status, _, _ = await _pushdown(client, b, path="/data/%25ff.parquet")
            assert status == 200 and "/data/%25ff.parquet?" in fake.seen[-1]["target"]

    _run(go())


def test_forwarded_compressed_body_keeps_its_bytes(tmp_path: Path) -> None:
    async def go() -> None:
        async with _stack(tmp_path) as (client, _, fake):
            packed = gzip.compress(b"hello world" * 100)
            r = await client.put("/webhdfs/v1/data/up?op=CREATE", data=packed, headers={"Content-Encoding": "gzip"})
            assert r.status == 201, await r.text()
            assert fake.seen[-1]["body"] == b"hello world" * 100  # the NameNode decoded exactly what was sent
            assert fake.seen[-1]["headers"]["Content-Length"] == str(len(packed))

    _run(go())


def test_forwarded_body_with_broken_framing_gets_408(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp leaves a body whose chunked framing breaks mid-way as one that never ends: the forward
    answers the client's 408 once it stalls, not the NameNode's 504 after its read timeout."""
    monkeypatch.setattr(NP, "BODY_TIMEOUT_S", 0.5)

    async def go() -> None:
        async with _stack(tmp_path) as (client, _, _fake):
            rd, wr = await asyncio.open_connection(client.host, client.port)
            wr.write(b"PUT /webhdfs/v1/data/up?op=CREATE HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                     b"Connection: close\r\n\r\n5\r\nhello\r\n")  # fmt: skip
            await wr.drain()
            await asyncio.sleep(0.2)  # ordering only: the forward is under way when the framing breaks
            wr.write(b"zz\r\nbroken\r\n0\r\n\r\n")
            status_line = await asyncio.wait_for(rd.readline(), 30)
            wr.close()
            assert status_line.split()[1] == b"408", status_line

    _run(go())


def test_project_all_columns_means_the_declared_ones(tmp_path: Path) -> None:
    """``project: []`` returns every *declared* column, as a plan without project does: a column of
    the file that the request did not declare is never reachable."""

    async def go() -> None:
        async with _stack(tmp_path) as (client, _, _fake):
            for extra in ({}, {"row_groups": [0]}):
                status, t, _ = await _pushdown(client, _body({"project": []}, **extra))
                assert status == 200 and t.column_names == list(SCHEMA), extra

    _run(go())


# -- fuzzing values: any request is answered 2xx with the right answer or 4xx naming the field -------
# A file of edge values (64 rows, two row groups): the extremes of each type, NUL and non-BMP
# strings, the first and last dates, NULLs, and a column the requests do not declare. Requests are
# plans drawn over it whose values come from the file and from the edges of what JSON can carry; each
# draw records whether every value is one the proxy must accept. A clean request must get 200, or 422
# naming an aggregate whose arithmetic truly overflows (or an integer beyond the DECIMAL(38, 2) a
# decimal column is compared in); a hostile one 400; every 4xx names a field of the request. The
# answer of a 200 is checked against a reference evaluation in Python (exact integers and decimals,
# DOUBLE where a float meets a number, as DuckDB casts).
def _cycle(values: list[Any], n: int = 64) -> list[Any]:
    return [values[(i * 7 + i // len(values)) % len(values)] for i in range(n)]


INT_LIMIT = 10**38 - 1  # integers of up to 38 digits: decimal(38, 0), inside the engine's HUGEINT
VSCHEMA = {"k": "int", "i32": "int", "f": "float", "d": "decimal", "s": "string", "dt": "date"}
_DEC = [decimal.Decimal(x) for x in ("0.00", "1.05", "-3.10", "9999999999999.99", "-9999999999999.99", "0.01", "7")]
VALUES = pa.table(
    {
        "k": pa.array(_cycle([0, 1, -1, 7, 2**62, -(2**62), 2**63 - 1, -(2**63), 123456789, None]), pa.int64()),
        "i32": pa.array(_cycle([0, 3, -5, 2**31 - 1, -(2**31), 1000, None]), pa.int32()),
        "f": pa.array(_cycle([0.0, 1.5, -2.25, 1e300, -1e300, 5e-324, 2.0**53, 0.1, None]), pa.float64()),
        "d": pa.array(_cycle([*_DEC, None]), pa.decimal128(15, 2)),
        "s": pa.array(_cycle(["", "\x00", "a\x00b", "AIR", "é", "\U0001f600", "ZZZ", "a", "ab", None]), pa.string()),
        "dt": pa.array(
            _cycle([dt.date(1, 1, 1), dt.date(1970, 1, 1), dt.date(1994, 6, 30), dt.date(9999, 12, 31), None]),
            pa.date32(),
        ),
        "secret": pa.array([f"undeclared {i}" for i in range(64)]),  # in the file, not in VSCHEMA: unreachable
    }
)
VALUES_PATH = "/data/values.parquet"
VROWS = VALUES.drop_columns(["secret"]).to_pylist()
NUMERIC = ["k", "i32", "f", "d"]

EDGE_INTS = [0, 1, -1, 2, 7, 100_000, 2**31 - 1, -(2**31), 2**31, 2**53 + 1, 2**62, -(2**62), 2**63 - 1, -(2**63),
             2**63, 2**64 - 1, 2**64, 2**127 - 1, -(2**127), 2**127, 2**128, 10**38 - 1, -(10**38 - 1), 10**38,
             2**200]  # fmt: skip
EDGE_FLOATS = [0.0, -0.0, 0.5, 1.5, -2.25, 0.1, 2.0**53, 1e300, -1e300, 1e308, 5e-324, math.inf, -math.inf]
EDGE_STRINGS = ["", "\x00", "a\x00b", "AIR", "é", "\U0001f600", "\ud800", "a\udfff", "x" * 1025, "'; DROP TABLE t; --"]
EDGE_DATES = ["1994-06-30", "0001-01-01", "9999-12-31", "1970-01-01", "1994-W01-1", "19940630", "1994-6-30",
              "1994-06-30T00:00", "0000-01-01", "1994-02-30", " 1994-06-30", "1994-06-30 "]  # fmt: skip


def _encodable(s: str) -> bool:
    try:
        s.encode()
    except UnicodeEncodeError:
        return False
    return True


def _date_ok(s: str) -> bool:
    try:
        return len(s) == 10 and s[4] == s[7] == "-" and s.replace("-", "").isascii() and bool(dt.date.fromisoformat(s))
    except ValueError:
        return False


Tagged = tuple[Any, bool]  # a JSON value and whether the proxy must accept it
_numbers: st.SearchStrategy[Tagged] = st.one_of(
    st.sampled_from(EDGE_INTS), st.integers(-1000, 1000), st.integers(-(2**70), 2**70), st.integers()
).map(lambda v: (v, abs(v) <= INT_LIMIT)) | st.one_of(
    st.sampled_from(EDGE_FLOATS), st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False)
).map(lambda v: (v, math.isfinite(v)))
_strings: st.SearchStrategy[Tagged] = st.one_of(
    st.sampled_from(EDGE_STRINGS),
    st.text(max_size=8),
    st.text(alphabet=st.sampled_from(["a", "b", "\x00", "é", "\ud800", "\U0001f600"]), max_size=6),
).map(lambda s: (s, _encodable(s) and len(s) <= P.MAX_STRING))
_dates: st.SearchStrategy[Tagged] = st.one_of(st.dates().map(lambda d: d.isoformat()), st.sampled_from(EDGE_DATES)).map(
    lambda s: (s, _date_ok(s))
)
_wrong: st.SearchStrategy[Tagged] = st.one_of(st.none(), st.booleans(), st.lists(st.integers(), max_size=2)).map(
    lambda v: (v, False)
)


def _accepts(ctype: str, v: Any) -> bool:
    """Whether a column of ``ctype`` must accept the value ``v``."""
    if ctype in ("int", "float", "decimal"):
        if isinstance(v, bool) or not isinstance(v, int | float):
            return False
        return abs(v) <= INT_LIMIT if isinstance(v, int) else math.isfinite(v)
    if not isinstance(v, str):
        return False
    return _date_ok(v) if ctype == "date" else _encodable(v) and len(v) <= P.MAX_STRING


def _json_value(v: Any) -> Any:
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v


@st.composite
def _values_for(draw: st.DrawFn, col: str) -> Tagged:
    """A value for a predicate on ``col``: mostly one of its own values in the file or one from the
    edges of its type, sometimes one of another type; tagged with whether the proxy must accept it.
    (The mix is drawn explicitly: ``one_of`` flattens nested choices, so its branches weigh alike.)"""
    ctype = VSCHEMA[col]
    typed = {"string": _strings, "date": _dates}.get(ctype, _numbers)
    pick = draw(st.integers(0, 19))
    if pick < 8:
        v = draw(st.sampled_from([_json_value(r[col]) for r in VROWS]))
    elif pick < 18:
        v = draw(typed)[0]
    elif ctype == "date" and pick == 18:
        v = draw(st.sampled_from(EDGE_DATES))  # among them Python's ISO forms DuckDB's CAST lacks
    else:
        v = draw(st.one_of(*[s for s in (_numbers, _strings, _dates) if s is not typed], _wrong))[0]
    return v, _accepts(ctype, v)


@st.composite
def _predicate(draw: st.DrawFn) -> Tagged:
    col = draw(st.sampled_from(list(VSCHEMA)))
    ctype = VSCHEMA[col]
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "between", "in", "is_null", "not_null", "starts_with"]))
    p: dict[str, Any] = {"column": col, "op": op}
    ok = op != "starts_with" or ctype == "string"
    vs: list[Tagged] | None = None
    if op == "between":
        vs = [draw(_values_for(col)) for _ in range(2)]
    elif op == "in":
        vs = draw(st.lists(_values_for(col), min_size=1, max_size=4))
    elif op not in ("is_null", "not_null"):
        v, vok = draw(_values_for(col))
        p["value"] = v
        ok = ok and vok and (op != "starts_with" or isinstance(v, str))
    if vs is not None:
        p["values"] = [v for v, _ in vs]
        ok = ok and all(vok for _, vok in vs)
    return p, ok


_leaf: st.SearchStrategy[Tagged] = st.sampled_from(NUMERIC).map(lambda c: ({"col": c}, True)) | _numbers.map(
    lambda t: ({"lit": t[0]}, t[1])
)
_big_product: st.SearchStrategy[Tagged] = st.tuples(st.sampled_from(["k", "i32", "d"]), _numbers).map(
    lambda t: ({"op": "*", "args": [{"col": t[0]}, {"lit": t[1][0]}]}, t[1][1])
)  # overflows where the column's extremes pass the filters
_expr: st.SearchStrategy[Tagged] = st.recursive(
    _leaf | _big_product,
    lambda kids: st.tuples(st.sampled_from(["+", "-", "*"]), kids, kids).map(
        lambda t: ({"op": t[0], "args": [t[1][0], t[2][0]]}, t[1][1] and t[2][1])
    ),
    max_leaves=6,
)


@st.composite
def _aggregate(draw: st.DrawFn, alias: str, fn: str | None = None) -> Tagged:
    fn = fn or draw(st.sampled_from(["sum", "count", "min", "max", "avg"]))
    a: dict[str, Any] = {"fn": fn, "alias": alias}
    arg = draw(st.sampled_from(["none", "column", "column", "expr", "expr", "expr"]))
    if arg == "none" and (fn == "count" or draw(st.integers(0, 9)) == 0):
        return a, fn == "count"
    if arg in ("none", "column"):
        anything = fn not in ("sum", "avg") or draw(st.integers(0, 9)) == 0
        a["column"] = col = draw(st.sampled_from(list(VSCHEMA) if anything else NUMERIC))
        return a, fn not in ("sum", "avg") or col in NUMERIC
    a["expr"], ok = draw(_expr)
    return a, ok


ALIASES = ["x__sum", "x__count", "x", "k", "a0"]


def _distinct_outputs(plan: dict[str, Any]) -> bool:
    """Whether the result and the partial result (avg as alias__sum, alias__count) name every
    column once: group_by columns and aliases."""
    aggs = plan["aggregates"]
    final = [*plan["group_by"], *(a["alias"] for a in aggs)]
    partial = [*plan["group_by"]]
    for a in aggs:
        partial += [a["alias"] + "__sum", a["alias"] + "__count"] if a["fn"] == "avg" else [a["alias"]]
    return len(set(final)) == len(final) and len(set(partial)) == len(partial)


@st.composite
def _request(draw: st.DrawFn) -> tuple[bytes, bool]:
    tagged = draw(st.lists(_predicate(), max_size=3))
    plan: dict[str, Any] = {"filters": [p for p, _ in tagged]}
    ok = all(pok for _, pok in tagged)
    shape = draw(st.sampled_from(["aggregate", "aggregate", "project", "all"]))
    if shape == "project":
        plan["project"] = draw(st.lists(st.sampled_from(list(VSCHEMA)), unique=True, max_size=4))
    elif shape == "aggregate":
        plan["group_by"] = draw(st.lists(st.sampled_from(list(VSCHEMA)), unique=True, max_size=2))
        named = [(f"a{i}", None) for i in range(draw(st.integers(1, 3)))]
        if draw(st.integers(0, 3)) == 0:  # an avg 'x' (partials x__sum, x__count) beside aliases that may collide
            others = draw(st.lists(st.sampled_from(ALIASES), min_size=1, max_size=2))
            named = draw(st.permutations([("x", "avg"), *((a, None) for a in others)]))
        aggs = [draw(_aggregate(alias, fn)) for alias, fn in named]
        plan["aggregates"] = [a for a, _ in aggs]
        ok = ok and all(aok for _, aok in aggs) and _distinct_outputs(plan)
    if draw(st.integers(0, 29)) == 0:  # a key that is not valid Unicode
        plan["\ud800"] = 1
        ok = False
    doc: dict[str, Any] = {"plan": plan, "schema": VSCHEMA}
    if draw(st.booleans()):
        doc["row_groups"] = draw(st.lists(st.sampled_from([0, 1]), min_size=1, max_size=2, unique=True))
    # floats beyond a double's range travel as what JSON can say: 1e999
    text = json.dumps(doc, allow_nan=True).replace("-Infinity", "-1e999").replace("Infinity", "1e999")
    return text.encode(), ok


# -- the reference --------------------------------------------------------------------------------
class _Overflow(Exception):
    """A value of the reference evaluation that no engine type holds (justifies a 422)."""


def _holds(v: int | decimal.Decimal, scale: int = 0) -> None:
    limit = 2**31 if scale == 0 and isinstance(v, int) else 10**18  # the narrowest types involved
    if abs(v * 10**scale) >= limit:
        raise _Overflow(str(v))


def _compare(x: Any, op: str, v: Any, as_float: bool, ctype: str) -> bool:
    if ctype == "date":
        v = dt.date.fromisoformat(v)
    elif as_float:
        x, v = float(x), float(v)
    return bool({"=": x == v, "!=": x != v, "<": x < v, "<=": x <= v, ">": x > v, ">=": x >= v}[op])


def _keeps(p: dict[str, Any], row: dict[str, Any]) -> bool:
    x, op, ctype = row[p["column"]], p["op"], VSCHEMA[p["column"]]
    if op in ("is_null", "not_null"):
        return (x is None) == (op == "is_null")
    if x is None:
        return False
    if op == "starts_with":
        return bool(x.startswith(p["value"]))
    vs = p.get("values") or [p["value"]]
    as_float = isinstance(x, float) or any(isinstance(v, float) for v in vs)  # DuckDB: one common type
    if op == "between":
        return _compare(x, ">=", vs[0], as_float, ctype) and _compare(x, "<=", vs[1], as_float, ctype)
    if op == "in":
        return any(_compare(x, "=", v, as_float, ctype) for v in vs)
    return _compare(x, op, p["value"], isinstance(x, float) or isinstance(p["value"], float), ctype)


def _value(e: dict[str, Any], row: dict[str, Any], loose: bool) -> tuple[Any, int]:
    """(value, decimal scale) of an expression on one row, exact but where DuckDB computes in DOUBLE;
    ``loose``: raise _Overflow for a value beyond the narrowest engine type that could hold it."""
    if "col" in e:
        return row[e["col"]], 2 if VSCHEMA[e["col"]] == "decimal" else 0
    if "lit" in e:
        return e["lit"], 0
    (a, sa), (b, sb) = (_value(x, row, loose) for x in e["args"])
    if a is None or b is None:
        return None, 0
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        with np.errstate(all="ignore"):  # IEEE: overflow to inf, inf - inf = nan, like DuckDB's DOUBLE
            r = {"+": np.add, "-": np.subtract, "*": np.multiply}[e["op"]](np.float64(a), np.float64(b))
        return float(r), 0
    r = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b}[e["op"]]()
    scale = sa + sb if e["op"] == "*" else max(sa, sb)
    if loose:
        _holds(r, scale)
    return r, scale


def _close(got: Any, want: Any, scale: float) -> bool:
    if isinstance(got, float) or isinstance(want, float):
        g, w = float(got), float(want)
        if math.isnan(w) or not math.isfinite(scale):
            return isinstance(got, float)  # the order of a floating sum decides: only the type is fixed
        return g == w or abs(g - w) <= 1e-9 * scale + 1e-300
    return bool(got == want)


def _reference_aggregates(
    plan: dict[str, Any], rows: list[dict[str, Any]], loose: bool = False
) -> dict[tuple[Any, ...], dict]:
    """{group key: {output column: (value, scale for float comparison)}}; raises _Overflow for a sum
    beyond 38 digits (and, ``loose``, for any value some engine type involved might not hold)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[g] for g in plan.get("group_by", [])), []).append(r)
    if not plan.get("group_by") and not groups:
        groups[()] = []
    out: dict[tuple[Any, ...], dict] = {}
    for key, members in groups.items():
        cols: dict[str, tuple[Any, float]] = {}
        for a in plan["aggregates"]:
            if "expr" in a:
                vals = [_value(a["expr"], r, loose)[0] for r in members]
            elif "column" in a:
                vals = [r[a["column"]] for r in members]
            else:
                vals = [1] * len(members)
            vals = [v for v in vals if v is not None]
            numeric = all(isinstance(v, int | float | decimal.Decimal) for v in vals)
            mag = sum(abs(float(v)) for v in vals) if numeric else 0.0
            total: Any = None
            if vals and numeric and a["fn"] in ("sum", "avg"):
                if any(isinstance(v, float) for v in vals):
                    total = math.fsum(float(v) for v in vals) if math.isfinite(mag) else math.nan
                else:
                    total = sum(vals)
                    scale = max((x.as_tuple().exponent * -1 for x in vals if isinstance(x, decimal.Decimal)), default=0)
                    if abs(total) * 10**scale >= 10**38 or (loose and sum(abs(v) for v in vals) >= 2**127):
                        raise _Overflow(str(total))
            if a["fn"] in ("min", "max"):
                finite = not any(isinstance(v, float) and math.isnan(v) for v in vals)
                pick = (min if a["fn"] == "min" else max)(vals) if vals and finite else (math.nan if vals else None)
                cols[a["alias"]] = (pick, abs(float(pick)) if vals and finite and numeric else math.inf)
            elif a["fn"] == "count":
                cols[a["alias"]] = (len(vals), 0.0)
            elif a["fn"] == "sum":
                cols[a["alias"]] = (total, mag)
            else:
                cols[a["alias"] + "__sum"] = (total, mag)
                cols[a["alias"] + "__count"] = (len(vals), 0.0)
        out[key] = cols
    return out


def _check_answer(doc: dict[str, Any], table: pa.Table) -> None:
    with decimal.localcontext(prec=200):  # exact: 38 digits and more never round
        _check_answer_exactly(doc, table)


def _check_answer_exactly(doc: dict[str, Any], table: pa.Table) -> None:
    plan = doc["plan"]
    groups = doc.get("row_groups")
    rows = [r for i, r in enumerate(VROWS) if groups is None or i // 32 in groups]
    rows = [r for r in rows if all(_keeps(p, r) for p in plan.get("filters", []))]
    if not plan.get("aggregates"):
        cols = plan.get("project") or list(VSCHEMA)
        assert table.column_names == cols
        want = sorted(repr(tuple(r[c] for c in cols)) for r in rows)
        got = sorted(repr(tuple(r[c] for c in cols)) for r in table.to_pylist())
        assert got == want
        return
    want_groups = _reference_aggregates(plan, rows)
    got_rows = table.to_pylist()
    assert len(got_rows) == len(want_groups), (got_rows, want_groups)
    for g in got_rows:
        key = tuple(g[c] for c in plan.get("group_by", []))
        assert key in want_groups, (key, list(want_groups))
        for col, (want, scale) in want_groups[key].items():
            got = g[col]
            assert (got is None) == (want is None), (col, got, want)
            assert want is None or _close(got, want, scale), (col, got, want)


def _justified(doc: dict[str, Any], field: str) -> bool:
    """A 422 names an aggregate whose reference evaluation overflows some engine type, or an integer
    compared with the decimal(15, 2) column that DECIMAL(38, 2) cannot hold (and no float beside it)."""
    plan = doc["plan"]
    parts = field.split(".")
    if parts[:2] == ["plan", "filters"]:
        p = plan["filters"][int(parts[2])]
        v = p["value"] if parts[3:] == ["value"] else p["values"][int(parts[4])]
        floats = any(isinstance(x, float) for x in p.get("values") or [p.get("value")])
        return VSCHEMA[p["column"]] == "decimal" and isinstance(v, int) and abs(v) >= 10**36 and not floats
    if parts[:2] != ["plan", "aggregates"]:
        return False
    one = {**plan, "aggregates": [plan["aggregates"][int(parts[2])]]}
    if "expr" in one["aggregates"][0] and _folding_overflows(one["aggregates"][0]["expr"]):
        return True
    groups = doc.get("row_groups")
    rows = [r for i, r in enumerate(VROWS) if groups is None or i // 32 in groups]
    rows = [r for r in rows if all(_keeps(p, r) for p in plan.get("filters", []))]
    try:
        with decimal.localcontext(prec=200):
            _reference_aggregates(one, rows, loose=True)
    except _Overflow:
        return True
    return False


def _chain(e: dict[str, Any], op: str) -> list[dict[str, Any]]:
    """The operands of the chain of ``op`` rooted at ``e`` (``a * (b * c)``: a, b, c)."""
    if e.get("op") != op:
        return [e]
    return [x for a in e["args"] for x in _chain(a, op)]


def _int_bits(e: dict[str, Any]) -> int:
    """The width DuckDB gives an integer expression: a literal within INTEGER's range is an INTEGER
    (32), the ``i32`` column too; the ``k`` column, a wider literal or anything else BIGINT (64); an
    operation the wider of its operands."""
    if "lit" in e:
        return 32 if isinstance(e["lit"], int) and -(2**31) <= e["lit"] < 2**31 else 64
    if "col" in e:
        return 32 if e["col"] == "i32" else 64
    if e.get("op") in ("+", "-", "*") and e.get("args"):
        return max(_int_bits(a) for a in e["args"])
    return 64


def _folding_overflows(e: dict[str, Any]) -> bool:
    """DuckDB's optimizer folds the integer literals of a chain of ``+`` or of ``*`` together, in
    the chain's type, before it reads a row (``c1 * (k * c2)`` as ``(c1 * c2) * k``): a folded value
    beyond that type (BIGINT, or INTEGER where the chain holds only ``i32`` and literals within
    INTEGER: ``2147483647 * (i32 * 2)``) fails whatever the rows (``k`` NULL in every one
    included). Counted loosely: the literals' magnitudes, summed or multiplied, in any chain
    without a float or decimal operand."""
    if "args" not in e:
        return False
    if e["op"] in ("+", "*"):
        leaves = _chain(e, e["op"])
        lits = [abs(x["lit"]) for x in leaves if "lit" in x]
        exact = all(
            isinstance(x["lit"], int) if "lit" in x else "col" not in x or VSCHEMA[x["col"]] == "int" for x in leaves
        )
        folded = sum(lits) if e["op"] == "+" else math.prod(v for v in lits if v)
        if exact and len(lits) >= 2 and folded >= 2 ** (_int_bits(e) - 1):
            return True
    return any(_folding_overflows(a) for a in e["args"])


def _names_a_field(doc: Any, field: str) -> bool:
    """``field`` is a path into the request (its last step may name a missing key)."""
    node = doc
    steps = field.split(".")
    for i, step in enumerate(steps):
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        elif isinstance(node, dict) and json.dumps(list(node))[1:-1].find(step) >= 0:
            return True  # a key shown with its escapes (\ud800)
        else:
            return i == len(steps) - 1 and isinstance(node, dict)
    return True


def test_integer_beyond_a_decimal_columns_type(values_proxy: Any) -> None:
    """DuckDB compares an integer with a decimal(15, 2) column in DECIMAL(38, 2): 10**36 does not fit
    (was a 500, "Could not cast value"); now a 422 naming the value. With a float beside it the
    comparison is in DOUBLE and answered."""
    post, _ = values_proxy
    for pred, want in (
        ({"column": "d", "op": "=", "value": 10**36}, "plan.filters.0.value"),
        ({"column": "d", "op": "between", "values": [-(10**37), 0]}, "plan.filters.0.values.0"),
    ):
        status, data = post(json.dumps({"plan": {"filters": [pred], "project": ["d"]}, "schema": VSCHEMA}).encode())
        assert (status, json.loads(data)["field"]) == (422, want), data
    for pred in (
        {"column": "d", "op": "<", "value": 10**36 - 1},
        {"column": "d", "op": "in", "values": [10**36, 1.05]},
    ):
        doc = {"plan": {"filters": [pred], "project": ["d"]}, "schema": VSCHEMA}
        status, data = post(json.dumps(doc).encode())
        assert status == 200, data
        _check_answer(doc, X.from_ipc(data))


def test_aggregate_alias_colliding_with_a_partial_column_is_a_400(values_proxy: Any) -> None:
    """``avg`` travels as two partial columns ``<alias>__sum`` and ``<alias>__count``: another
    aggregate, or a grouping column, of one of those names collides with them (was a 500, "Column
    x__sum does not exist"); now a 400 naming the alias that takes a name already taken."""
    post, proxy = values_proxy
    avg = {"fn": "avg", "column": "k", "alias": "x"}
    wide = {**VSCHEMA, "x__count": "int"}  # the request is refused before the file's schema is read
    for plan, schema, want in (
        ({"aggregates": [avg, {"fn": "sum", "column": "k", "alias": "x__sum"}]}, VSCHEMA, "plan.aggregates.1.alias"),
        ({"aggregates": [{"fn": "count", "alias": "x__count"}, avg]}, VSCHEMA, "plan.aggregates.1.alias"),
        ({"aggregates": [avg, {"fn": "avg", "column": "f", "alias": "x"}]}, VSCHEMA, "plan.aggregates.1.alias"),
        ({"group_by": ["x__count"], "aggregates": [avg]}, wide, "plan.aggregates.0.alias"),
    ):
        status, data = post(json.dumps({"plan": plan, "schema": schema}).encode())
        err = json.loads(data)
        assert (status, err["field"]) == (400, want), data
        assert "'x" in err["error"] and "another alias" in err["error"], err
    assert proxy.counters["failed"] == 0


@pytest.fixture(scope="module")
def values_proxy(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A proxy over a fake WebHDFS holding VALUES, on its own event loop: post(body) -> (status, body)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    stack = _stack(tmp_path_factory.mktemp("spool"))
    client, proxy, fake = asyncio.run_coroutine_threadsafe(stack.__aenter__(), loop).result(30)
    fake.files[VALUES_PATH] = _parquet(VALUES, row_group=32)

    async def post(body: bytes) -> tuple[int, bytes]:
        r = await client.post(f"/ndp/v1{VALUES_PATH}", data=body)
        return r.status, await r.read()

    yield lambda body: asyncio.run_coroutine_threadsafe(post(body), loop).result(60), proxy
    asyncio.run_coroutine_threadsafe(stack.__aexit__(None, None, None), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


# DuckDB folds 2**62 * 2 before it reads a row, though k is NULL in every row the filter keeps: a 422
# (and 2147483647 * 2 in INTEGER over the i32 column: _FOLDED_INT32)
_FOLDED = {
    "plan": {
        "filters": [{"column": "k", "op": "is_null"}],
        "aggregates": [
            {"fn": "count", "alias": "a0"},
            {
                "fn": "sum",
                "alias": "a1",
                "expr": {"op": "*", "args": [{"lit": 2**62}, {"op": "*", "args": [{"col": "k"}, {"lit": 2}]}]},
            },
        ],
    },
    "schema": VSCHEMA,
}


_FOLDED_INT32 = {
    "plan": {
        "filters": [{"column": "i32", "op": "is_null"}],
        "aggregates": [
            {"fn": "count", "alias": "a0"},
            {
                "fn": "sum",
                "alias": "a1",
                "expr": {"op": "*", "args": [{"lit": 2**31 - 1}, {"op": "*", "args": [{"col": "i32"}, {"lit": 2}]}]},
            },
        ],
    },
    "schema": VSCHEMA,
}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_request())
@example(req=(json.dumps(_FOLDED).encode(), True))
@example(req=(json.dumps(_FOLDED_INT32).encode(), True))
def test_fuzz_values_get_the_right_answer_or_a_4xx_naming_the_field(values_proxy: Any, req: tuple[bytes, bool]) -> None:
    post, proxy = values_proxy
    body, clean = req
    status, data = post(body)  # a dropped connection raises here
    doc = json.loads(body)
    event(f"HTTP {status}, {'clean' if clean else 'hostile'}")
    if status == 200:
        assert clean, f"accepted a value it must refuse: {body[:300]!r}"
        _check_answer(doc, X.from_ipc(data))
        return
    assert status in (400, 422), (status, data[:300], body[:300])
    err = json.loads(data)
    assert isinstance(err["field"], str) and err["error"], err
    assert _names_a_field(doc, err["field"]), (err, body[:300])
    if status == 422:
        assert _justified(doc, err["field"]), f"422 without an overflow: {err} <- {body[:300]!r}"
    else:
        assert not clean, f"refused a request it must accept: {err} <- {body[:300]!r}"
    assert proxy.counters["failed"] == 0
