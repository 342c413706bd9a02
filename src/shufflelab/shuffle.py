"""The shuffle path's share of a job, from its task table (seed 004's "shuffle is 30-40 % of run time").

Definitions (per stage, per job or per run; tasks as stored by ``eventlog.py``):

* ``read_share``  = Σ fetch wait / Σ executor run time: the part of executor time a task was
  blocked waiting for remote or local shuffle blocks;
* ``write_share`` = Σ shuffle write time / Σ executor run time: time spent writing map output
  (serialisation excluded: Spark counts only the write and fsync-free flush);
* ``share`` = their sum.
* ``network_efficiency`` = ideal transfer time / observed shuffle time, where the ideal is the
  busiest bottleneck's bytes at its configured rate (``shared`` topology: every remote byte crosses
  the one bottleneck; ``star``: each host's remote bytes cross its own router port, the busiest
  port sets the ideal) and the observed shuffle time is the union of the wall-clock spans of the
  stages that read remote shuffle data. 1.0 means the shuffle moved its bytes as fast as the
  bottleneck allows; computation overlapping the fetches pulls it below 1 even on an ideal network.
"""

from __future__ import annotations

import pandas as pd

WIRE_PAYLOAD = 1448 / 1514  # TCP payload per Ethernet frame byte at MTU 1500 with timestamps


def share(tasks: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Shuffle share of executor time, grouped by ``by`` (e.g. ``["run_id"]``, ``["run_id", "stage_id"]``)."""
    cols = ["run_ms", "fetch_wait_ms", "shuffle_write_ms", "read_share", "write_share", "share"]
    if tasks.empty:
        return pd.DataFrame(columns=[*(by or []), *cols])
    t = tasks.assign(run_ms=tasks["executor_run_ms"])
    agg = (
        t.groupby(by, sort=False)[["run_ms", "fetch_wait_ms", "shuffle_write_ms"]].sum().reset_index()
        if by
        else t[["run_ms", "fetch_wait_ms", "shuffle_write_ms"]].sum().to_frame().T
    )
    denom = agg["run_ms"].where(agg["run_ms"] > 0)
    agg["read_share"] = agg["fetch_wait_ms"] / denom
    agg["write_share"] = agg["shuffle_write_ms"] / denom
    agg["share"] = agg["read_share"] + agg["write_share"]
    return agg


def _union_s(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def network_efficiency(tasks: pd.DataFrame, rate_mbps: float, kind: str = "shared") -> dict[str, float | None]:
    """Ideal vs observed shuffle transfer time for one run (one or more applications)."""
    reading = tasks[tasks["remote_bytes"] > 0]
    if reading.empty or rate_mbps <= 0:
        return {"remote_bytes": 0, "ideal_s": None, "observed_s": None, "efficiency": None}
    keys = (
        ["app_index", "stage_id", "stage_attempt"] if "app_index" in reading.columns else ["stage_id", "stage_attempt"]
    )
    spans = [(g["launch_at_ms"].min() / 1000.0, g["finish_at_ms"].max() / 1000.0) for _, g in reading.groupby(keys)]
    observed = _union_s(spans)
    if kind == "star":
        busiest = float(tasks.groupby("host")["remote_bytes"].sum().max())
    else:
        busiest = float(tasks["remote_bytes"].sum())
    ideal = busiest * 8 / (rate_mbps * 1e6 * WIRE_PAYLOAD)
    return {
        "remote_bytes": int(tasks["remote_bytes"].sum()),
        "ideal_s": ideal,
        "observed_s": observed,
        "efficiency": ideal / observed if observed > 0 else None,
    }


def per_run(tasks: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run: shuffle shares and network efficiency. ``runs`` needs run_id, rate_mbps, kind."""
    rows = []
    for _, r in runs.iterrows():
        t = tasks[tasks["run_id"] == r["run_id"]]
        if t.empty:
            continue
        s = share(t).iloc[0]
        eff = network_efficiency(t, float(r["rate_mbps"]), str(r["kind"]))
        rows.append(
            {
                "run_id": r["run_id"],
                "read_share": s["read_share"],
                "write_share": s["write_share"],
                "share": s["share"],
                "ideal_shuffle_s": eff["ideal_s"],
                "observed_shuffle_s": eff["observed_s"],
                "network_efficiency": eff["efficiency"],
            }
        )
    return pd.DataFrame(rows)
