"""Net-Aware for the real NDP system: seed 003's model (:mod:`shufflelab.netaware`, shared with
the simulator) fed with this deployment's numbers, deciding per query at its arrival.

Each pushdown choice (none, filter, filter+project, full) is priced as a whole
(:func:`shufflelab.netaware.plan_prefixes`):

``T = [pushes]·(Q_s/X_s + storage_s) + Tn(D) + compute_s``

* ``storage_s``: the choice's single-core DuckDB seconds over the table (measured on the data by
  :func:`shufflelab.ndp.tpch.profile`) times ``storage_overhead`` (the DataNode read, the proxy's
  spooling and Arrow serialisation), over the storage cluster's CPUs (hosts × cores each);
* ``Q_s/X_s``: the live queue at the proxies (``GET /ndp/v1/status``: queued + running pushdowns
  times their mean service time, per worker), averaged over the storage hosts;
* ``Tn(D)``: ``8·D / (B/S)`` with ``D`` the bytes the choice sends across the bottleneck (profiled:
  Arrow IPC from the proxy, or the Parquet files themselves for ``none``), ``B`` the bottleneck
  rate and ``S`` the queries reading at the same time (each shares the link);
* ``compute_s``: what Spark does with the bytes it receives -- decode Parquet (``none``) or take
  Arrow batches -- at ``compute_s_per_byte`` CPU seconds per byte, over the compute cluster's CPUs.

The two per-byte costs and the storage overhead are properties of this machine's engines, measured
by ``benchmarks/ndp_costs.py`` (docs/benchmarks.md); they can be given per experiment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from shufflelab.netaware import NetworkEstimate, PrefixEstimate, plan_prefixes

POLICIES = ("none", "filter", "filter+project", "full")

# Engine costs on this machine (CPU seconds per byte received by Spark; storage multiplier).
# Fitted by `python benchmarks/ndp_costs.py results/ndp-costs.duckdb` (docs/benchmarks.md, "NDP engine costs").
DEFAULT_COSTS = {"parquet_s_per_byte": 3.4e-8, "arrow_s_per_byte": 2.1e-9, "storage_overhead": 0.62}


@dataclass(frozen=True)
class Model:
    """What the advisor knows of the deployment (built once per run by the runner)."""

    bandwidth_gbps: float
    storage_hosts: int
    storage_cpus_per_host: float
    proxy_workers: int
    compute_cpus: float
    profile: Mapping[str, Any]  # tpch.profile(): per query and policy crossing_bytes, storage_cpu_s
    costs: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_COSTS))
    max_concurrent_transfers: float = 1e9  # the lab has no admission limit on transfers

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Model:
        return cls(**dict(d))


@dataclass(frozen=True)
class Decision:
    query: str
    policy: str
    times_s: dict[str, float]
    terms: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def prefixes(query: str, m: Model) -> list[PrefixEstimate]:
    per = m.profile["queries"][query]
    storage_cpus = m.storage_hosts * m.storage_cpus_per_host
    out = []
    for policy in POLICIES:
        p = per[policy]
        d = float(p["crossing_bytes"])
        per_byte = m.costs["parquet_s_per_byte"] if policy == "none" else m.costs["arrow_s_per_byte"]
        out.append(
            PrefixEstimate(
                name=policy,
                storage_s=float(p["storage_cpu_s"]) * m.costs["storage_overhead"] / storage_cpus,
                crossing_gb=d / 1e9,
                compute_s=d * per_byte / m.compute_cpus,
            )
        )
    return out


def storage_wait_s(statuses: Sequence[Mapping[str, Any]], fallback_service_s: float) -> float:
    """Mean over the proxies of (queued + running) × service time / workers."""
    waits = []
    for st in statuses:
        if "error" in st:
            continue
        busy = float(st.get("queued", 0)) + float(st.get("running", 0))
        svc = st.get("service_s") or fallback_service_s
        waits.append(busy * float(svc) / max(1, int(st.get("workers", 1))))
    return sum(waits) / len(waits) if waits else 0.0


def decide(
    query: str,
    model: Model | Mapping[str, Any],
    statuses: Sequence[Mapping[str, Any]],
    concurrent_queries: int = 1,
) -> Decision:
    m = model if isinstance(model, Model) else Model.from_dict(model)
    if query not in m.profile["queries"]:
        raise KeyError(f"no profile for query {query!r} (have {', '.join(sorted(m.profile['queries']))})")
    pre = prefixes(query, m)
    partitions = max(1, int(m.profile["partitions"]))
    # one pushdown's service time at a worker if the proxies never reported one yet: the filter's CPU
    # seconds per file at the CPU share of one worker (a host's CPUs split over its workers)
    cpu_per_file = pre[1].storage_s * m.storage_hosts * m.storage_cpus_per_host / partitions
    fallback = cpu_per_file * m.proxy_workers / m.storage_cpus_per_host
    wait = storage_wait_s(statuses, fallback)
    net = NetworkEstimate(
        bandwidth_gbps=m.bandwidth_gbps,
        concurrent_transfers=max(1, concurrent_queries),
        max_concurrent_transfers=m.max_concurrent_transfers,
    )
    best, times = plan_prefixes(pre, net, wait, 0.0)
    return Decision(
        query=query,
        policy=pre[best].name,
        times_s={p.name: round(t, 4) for p, t in zip(pre, times, strict=True)},
        terms={
            "bandwidth_gbps": m.bandwidth_gbps,
            "concurrent_queries": concurrent_queries,
            "storage_wait_s": round(wait, 4),
            "storage_s": {p.name: round(p.storage_s, 4) for p in pre},
            "crossing_mb": {p.name: round(p.crossing_gb * 1e3, 3) for p in pre},
            "compute_s": {p.name: round(p.compute_s, 4) for p in pre},
            "statuses": [
                {k: s.get(k) for k in ("queued", "running", "workers", "service_s", "error")} for s in statuses
            ],
        },
    )
