"""TPC-H through the NDP connector (seed 003's prototype): one query, or a stream of queries
arriving every ``interval_s``, each reading lineitem/part from HDFS through the storage hosts'
NDP proxies with the policy's pushdown prefix.

The runner passes the deployment in ``ndp`` (proxies, HDFS root, the connector's statistics file,
the reference answers, the network and cost facts Net-Aware needs). For ``policy = "net-aware"``
each query asks :mod:`shufflelab.ndp.advisor` at its arrival, with the proxies' live status; the
decision and its estimated terms are part of the output. Every answer is compared with DuckDB's.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

from shufflelab.ndp import advisor, tpch
from shufflelab.spec import TpchParams
from shufflelab.workloads.failure import WorkloadFailed

MIX = ("q1", "q6", "q14", "q19")


def query_list(p: TpchParams) -> list[str]:
    if p.query == "mix":
        return [MIX[i % len(MIX)] for i in range(p.queries)]
    return [p.query] * p.queries


def proxy_status(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/ndp/v1/status", timeout=timeout_s) as r:  # noqa: S310 - fabric address
        doc: dict[str, Any] = json.loads(r.read())
    return doc


def run(spark: Any, p: TpchParams, ndp: dict[str, Any] | None = None) -> dict[str, Any]:
    if not ndp:
        raise RuntimeError("workload 'tpch' needs the runner's NDP deployment (storage hosts, proxies)")
    proxies: list[str] = ndp["proxies"]
    expected: dict[str, list[dict[str, Any]]] = ndp.get("expected", {})
    running = {"n": 0}
    lock = threading.Lock()

    def reader(table: str, policy: str) -> Any:
        r = (
            spark.read.format("shufflelab-ndp")
            .option("proxies", ",".join(proxies))
            .option("path", f"{ndp['root']}/{table}")
            .option("schema", tpch.SPARK_DDL[table])
            .option("pushdown", policy)
            .option("user", ndp.get("user", "root"))
        )
        if ndp.get("stats_file"):
            r = r.option("stats_file", ndp["stats_file"])
        return r.load()

    def one(i: int, q: str, arrival: float) -> dict[str, Any]:
        out: dict[str, Any] = {"i": i, "query": q, "policy_asked": p.policy, "arrival_s": arrival}
        t0 = time.time()
        out["started_at"] = t0
        with lock:
            running["n"] += 1
            concurrent = running["n"]
        try:
            if p.policy == "net-aware":
                statuses = []
                for u in proxies:
                    try:
                        statuses.append(proxy_status(u))
                    except OSError as exc:  # a proxy that does not answer counts as idle; say so
                        statuses.append({"error": str(exc)})
                decision = advisor.decide(q, ndp["model"], statuses, concurrent_queries=concurrent)
                policy = decision.policy
                # what asking the proxies and deciding cost (counted in the query's time)
                out["estimate"] = {**decision.as_dict(), "decide_s": round(time.time() - t0, 4)}
            else:
                policy = p.policy
            out["policy"] = policy
            spark.sparkContext.setJobGroup(f"tpch-{i}-{q}", f"{q} ({policy})", interruptOnCancel=True)
            got = tpch.rows(tpch.PROGRAMS[q](lambda t: reader(t, policy)))
            out["finished_at"] = time.time()
            out["time_s"] = out["finished_at"] - t0
            out["rows"] = len(got)
            if q in expected:
                bad = tpch.compare(got, expected[q])
                out["correct"] = not bad
                if bad:
                    out["mismatches"] = [b.__dict__ for b in bad[:5]]
            out["answer"] = json.loads(json.dumps(got, default=str))
            out["ok"] = True
        except Exception as exc:  # noqa: BLE001 - one failed query is reported, the stream goes on
            out["ok"] = False
            out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            out["finished_at"] = time.time()
        finally:
            with lock:
                running["n"] -= 1
        return out

    qs = query_list(p)
    t_start = time.time()
    results: list[dict[str, Any] | None] = [None] * len(qs)
    threads = []
    for i, q in enumerate(qs):
        due = t_start + i * p.interval_s
        if i and len(qs) > 1:
            time.sleep(max(0.0, due - time.time()))

        def go(i: int = i, q: str = q) -> None:
            results[i] = one(i, q, time.time() - t_start)

        th = threading.Thread(target=go, name=f"tpch-{i}", daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    done = [r for r in results if r is not None]
    failed = [r for r in done if not r["ok"]]
    wrong = [r for r in done if r.get("correct") is False]
    out = {
        "queries": done,
        "makespan_s": time.time() - t_start,
        "mean_query_s": sum(r.get("time_s", 0.0) for r in done) / max(1, len(done)),
    }
    if failed:
        raise WorkloadFailed(f"{len(failed)} of {len(done)} queries failed; first: {failed[0]['error']}", out)
    if wrong:
        raise WorkloadFailed(
            f"{len(wrong)} answers differ from DuckDB's; first: {wrong[0]['query']} {wrong[0].get('mismatches')}", out
        )
    return out
