"""Root integration: the NDP proxy in a storage host's namespace, in front of a real HDFS on the fabric.

NameNode on ``nn``, DataNodes on ``s1`` and ``s2`` (every block on both), the proxy on ``s1``;
requests come from ``client``. Skipped when the Hadoop jars have not been fetched (``make setup``)."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import subprocess
import sys
import time
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hdfslab
from shufflelab import netplan
from shufflelab import spec as S
from shufflelab import topology as T
from shufflelab.emulate import netns
from shufflelab.emulate.fabric import NamespaceFabric
from shufflelab.ndp import execute as X
from shufflelab.ndp import hdfs_config
from shufflelab.ndp import proxy as NP

pytestmark = hdfslab.MARKS

SPEC = hdfslab.spec("ndp-proxy")
SCHEMA = {
    "l_orderkey": "int", "l_quantity": "float", "l_extendedprice": "float", "l_discount": "float",
    "l_returnflag": "string", "l_shipdate": "date", "l_shipmode": "string",
}  # fmt: skip
FILTER_PROJECT = {
    "filters": [
        {"column": "l_shipdate", "op": ">=", "value": "1994-03-01"},
        {"column": "l_discount", "op": "between", "values": [0.05, 0.07]},
        {"column": "l_quantity", "op": "<", "value": 24},
    ],
    "project": ["l_orderkey", "l_extendedprice", "l_discount"],
}
PARTIAL_AGG = {
    "filters": [{"column": "l_shipmode", "op": "in", "values": ["AIR", "REG AIR"]}],
    "group_by": ["l_returnflag"],
    "aggregates": [
        {"fn": "sum", "column": "l_extendedprice", "alias": "revenue"},
        {"fn": "count", "alias": "n"},
        {"fn": "avg", "column": "l_quantity", "alias": "q"},
    ],
}
PROXY_PORT = NP.DEFAULT_PORT


def _lineitem(n: int = 6000, seed: int = 11) -> pa.Table:
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


def _pythonpath() -> str:
    return os.pathsep.join(p for p in sys.path if p)


def _wait_listening(proc: netns.NamespaceProcess, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"proxy exited ({proc.poll()}): {proc.log.read_text(errors='replace')[-2000:]}")
        if proc.log.exists() and "ndp proxy listening" in proc.log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"proxy not listening after {timeout_s} s: {proc.log.read_text(errors='replace')[-2000:]}")


def test_ndp_proxy_pushdown_forwarding_and_hostile_plans() -> None:
    sp = S.parse(SPEC)
    net = T.build(sp)
    table = _lineitem()
    with netns.lease() as lz, NamespaceFabric(lz, net) as fab:
        fab.configure(netplan.of(sp, fab.network))
        addr = net.host_addresses
        cluster = hdfslab.cluster(fab, lz)
        user = cluster.config.user
        local = lz.scratch / "lineitem.parquet"
        pq.write_table(table, local, row_group_size=1000)
        spool = lz.scratch / "ndp-spool"
        proxy_url = f"http://{addr['s1']}:{PROXY_PORT}"

        def ndp(*args: str, timeout: float = 60) -> dict[str, Any]:
            """The proxy's client, run in the client host's namespace; its one line of JSON."""
            argv = ["env", f"PYTHONPATH={_pythonpath()}", sys.executable, "-m", "shufflelab.ndp.client"]
            out = netns.run([*argv, "--url", proxy_url, "--timeout", "60", *args], ns=fab.ns["client"], timeout=timeout)
            doc: dict[str, Any] = json.loads(out)
            return doc

        def pushdown(name: str, body: dict[str, Any] | bytes, path: str = "/data/lineitem.parquet") -> dict[str, Any]:
            req = lz.scratch / f"{name}.json"
            req.write_bytes(body if isinstance(body, bytes) else json.dumps(body).encode())
            out = lz.scratch / f"{name}.arrow"
            res = ndp("pushdown", path, "--request", str(req), "--out", str(out))
            if res["status"] == 200:
                res["table"] = X.from_ipc(out.read_bytes())
            return res

        def send(name: str, method: str, target: str, body: bytes | None = None) -> dict[str, Any]:
            args = ["send", method, target]
            if body is not None:
                f = lz.scratch / f"{name}.bin"
                f.write_bytes(body)
                args += ["--body-file", str(f)]
            return ndp(*args)

        with cluster:
            dn_pids = {n: p.pid for n, p in cluster.daemons.items()}
            cluster.put(local, "/data/lineitem.parquet")
            proc = netns.NamespaceProcess(
                fab.ns["s1"],
                [sys.executable, "-m", "shufflelab.ndp.proxy", "--listen", f"{addr['s1']}:{PROXY_PORT}",
                 "--webhdfs", f"http://{addr['nn']}:{hdfs_config.NN_HTTP_PORT}", "--workers", "1", "--max-queue", "4",
                 "--user", user, "--spool", str(spool)],
                lz.scratch / "logs" / "ndp-proxy-s1.log",
                env={"PYTHONPATH": _pythonpath()},
            )  # fmt: skip
            try:
                _wait_listening(proc)
                st = ndp("status")
                assert st["queued"] == 0 and st["running"] == 0 and st["workers"] == 1 and st["completed"] == 0

                # -- pushdowns equal DuckDB on the local copy of the file ----------------------------
                con = duckdb.connect()
                res = pushdown("fp", {"plan": FILTER_PROJECT, "schema": SCHEMA})
                assert res["status"] == 200, res
                want = con.execute(
                    "SELECT l_orderkey, l_extendedprice, l_discount FROM read_parquet(?) WHERE l_shipdate >= "
                    "DATE '1994-03-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
                    [str(local)],
                ).to_arrow_table()
                got = res["table"]
                assert got.schema == want.schema and got.num_rows == want.num_rows > 0
                keys = [("l_orderkey", "ascending"), ("l_extendedprice", "ascending")]
                assert got.sort_by(keys).to_pylist() == want.sort_by(keys).to_pylist()
                stats = res["stats"]
                assert stats["rows"] == want.num_rows and stats["input_bytes"] == local.stat().st_size
                assert stats["datanode"] == f"{addr['s1']}:{hdfs_config.DN_HTTP_PORT}"  # read from the local DataNode
                assert stats["output_bytes"] > 0 and stats["exec_s"] > 0

                res = pushdown("agg", {"plan": PARTIAL_AGG, "schema": SCHEMA})
                assert res["status"] == 200, res
                want = con.execute(
                    "SELECT l_returnflag, sum(l_extendedprice) AS revenue, count(*) AS n, sum(l_quantity) AS q__sum, "
                    "count(l_quantity) AS q__count FROM read_parquet(?) WHERE l_shipmode IN ('AIR', 'REG AIR') "
                    "GROUP BY l_returnflag ORDER BY l_returnflag",
                    [str(local)],
                ).to_arrow_table()
                got_agg = res["table"].sort_by("l_returnflag").to_pylist()
                assert [{k: v for k, v in r.items() if k != "revenue"} for r in got_agg] == [
                    {k: v for k, v in r.items() if k != "revenue"} for r in want.to_pylist()
                ]  # a float sum depends on the order of addition: the rest is exact
                for g, w in zip(got_agg, want.to_pylist(), strict=True):
                    assert g["revenue"] == pytest.approx(w["revenue"], rel=1e-12)

                # -- plain WebHDFS through the proxy: byte-identical, redirects passed through ----------
                direct = cluster.read("/data/lineitem.parquet")
                assert direct == local.read_bytes()
                via = lz.scratch / "via-proxy.parquet"
                q = f"op=OPEN&user.name={user}"
                r = cluster._request("client", "GET", f"{proxy_url}/webhdfs/v1/data/lineitem.parquet?{q}", download=via)
                assert r["status"] == 200 and via.read_bytes() == direct
                assert r["url"].startswith(f"http://{addr['s1']}:{hdfs_config.DN_HTTP_PORT}/") or r["url"].startswith(
                    f"http://{addr['s2']}:{hdfs_config.DN_HTTP_PORT}/"
                )  # the client followed the NameNode's redirect to a DataNode itself
                small = lz.scratch / "small.bin"
                small.write_bytes(random.Random(5).randbytes(300_000))
                q = f"op=CREATE&overwrite=true&user.name={user}"
                cluster._request("client", "PUT", f"{proxy_url}/webhdfs/v1/data/small.bin?{q}", upload=small)
                assert cluster.read("/data/small.bin") == small.read_bytes()
                st_direct = cluster.status("/data/lineitem.parquet")
                r = cluster._request(
                    "client", "GET", f"{proxy_url}/webhdfs/v1/data/lineitem.parquet?op=GETFILESTATUS&user.name={user}"
                )
                assert json.loads(r["body"])["FileStatus"]["length"] == st_direct["length"] == len(direct)

                # -- hostile requests: 4xx with a reason, the DataNode never sees them ----------------
                hostile: list[tuple[dict[str, Any], int, str | None]] = [
                    (pushdown("h1", {"plan": {"filters": [{"column": "x\"; DROP TABLE t; --", "op": "=",
                                                          "value": 1}]}, "schema": SCHEMA}), 400,
                     "plan.filters.0.column"),
                    (pushdown("h2", {"plan": {"project": ["l_tax"]}, "schema": SCHEMA}), 400, "plan.project.0"),
                    (pushdown("h3", {"plan": {"raw_sql": "COPY (SELECT 1) TO '/etc/x'"}, "schema": SCHEMA}), 400,
                     "plan.raw_sql"),
                    (pushdown("h4", {"plan": {}, "schema": {**SCHEMA, "l_quantity": "string"}}), 400,
                     "schema.l_quantity"),
                    (pushdown("h5", b"[" * 200_000), 413, "body"),
                    (pushdown("h6", b"\x00\xffgarbage"), 400, "body"),
                    (pushdown("h7", {"plan": {}, "schema": SCHEMA}, path="/data/missing.parquet"), 404, "path"),
                    (pushdown("h8", {"plan": {}, "schema": SCHEMA}, path="/data/small.bin"), 422, "path"),
                    (send("h9", "POST", "/ndp/v1/data/../data/lineitem.parquet", b"{}"), 400, None),
                    (send("h10", "GET", "/webhdfs/v1/../../jmx"), 400, None),
                    (send("h11", "GET", "/jmx"), 404, None),
                ]  # fmt: skip
                for i, (res, status, field) in enumerate(hostile, 1):
                    assert res["status"] == status, (i, res)
                    if field is not None:
                        assert res["field"] == field and res["error"], (i, res)

                # -- afterwards: proxy, DataNodes and NameNode are fine --------------------------------
                assert proc.poll() is None
                assert cluster.alive() and {n: p.pid for n, p in cluster.daemons.items()} == dn_pids
                cluster.wait_live(30)
                assert cluster.read("/data/lineitem.parquet") == direct
                res = pushdown("again", {"plan": FILTER_PROJECT, "schema": SCHEMA})
                assert res["status"] == 200 and res["stats"]["rows"] == got.num_rows
                st = ndp("status")
                assert st["completed"] == 3 and st["not_found"] == 1 and st["invalid"] == 8, st
                assert st["queued"] == 0 and st["running"] == 0 and st["drain_per_s"] > 0 and st["forwarded"] >= 3
                print(f"ndp proxy status: {st}; hdfs timings: {cluster.timings}")
            finally:
                code = proc.stop(grace_s=10)
            assert code == 0, proc.log.read_text(errors="replace")[-2000:]
            assert not any(spool.iterdir()), sorted(spool.rglob("*"))  # the proxy removed its spool
        marker = str(lz.scratch)
        assert not hdfslab.alive(proc.pid)
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
        assert not [p for p in left if int(p) != os.getpid()]
    assert not [n for n in netns.namespaces() if n.startswith(lz.prefix)]
    assert not lz.scratch.exists()
