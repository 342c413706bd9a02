"""Benchmark: the fabric simulator vs ns-3 on a two-tier topology with oversubscribed uplinks.

    .venv/bin/pip install ns3
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_fabric.py [--out /tmp/sim-vs-ns3-fabric.md]
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_fabric.py --cc cubic dctcp --out /tmp/sim-vs-ns3-fabric-cc.md

Scenario: a leaf-spine fabric of 2 leaves x 4 hosts and one spine, 1 Gbit/s host links, leaf
uplinks at 4 / 2 / 1 Gbit/s (oversubscription 1:1, 2:1, 4:1), 10 µs per link, drop-tail ports of
1,000 packets (with 200, 9 of the 56 flows at 1:1 had not finished after 120 s: seven senders
into one 1 Gbit/s port at once); an all-to-all shuffle: every host sends 10 MB to every other host
(56 flows, all starting together; Cubic without ECN). Flows ns-3 has not finished after 120
virtual seconds are reported as stuck: with ns-3's default hosts they are not in exponential
backoff but in a loop of one retransmission timeout every 200 ms (the delayed-ACK race below; the
rows' ``ns3_not_done_rtos``). ns-3 side:
``benchmarks/ns3/two_tier.cc`` (compiled like ``sim_vs_ns3.py``'s program). Simulator side:
``run_fabric`` on the same leaf-spine (``spines = 1``) with a shuffle of 8 maps and 8 reducers,
one per host, each reducer fetching all 7 remote blocks at once (no in-flight limit); its flows are
the same 56 host pairs. Compared: the shuffle's end (the last flow), the mean FCT, and each host's
last incoming flow (the reducer's finish).

``--cc cubic dctcp``: one row set per congestion control, the simulator with the matching ``[tcp]``
(tcp_spec: the per-link-class correction from the packet-level probe) next to the plain max-min
answer. Cubic: ECN off, drop-tail ports of 1,000 packets. DCTCP: every port marks at K = 20
packets on the instantaneous queue (ns-3: RED with MinTh = MaxTh = K, weight 1; 1,000 packets of
buffer). ns-3's hosts are set up like Linux's (``--ns3-host linux``, the default with ``--cc``): a
delayed-ACK timer of 40 ms (Linux's minimum; ns-3's 200 ms equals the 200 ms minimum RTO, so a
lone segment's ACK loses the race against the sender's timer and a flow whose window fell to one
segment sends one or two segments per timeout, for ever), and DCTCP's ssthresh kept at 2 segments
or more (Linux's dctcp_ssthresh; ns-3's TcpDctcp has no floor). ``--ns3-host ns3`` keeps ns-3's
defaults (the rows above are run so). Without ``--cc``: the rows above, the simulator without
``[tcp]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_vs_ns3 import MSS, WIRE_PER_SEGMENT, compile_ns3  # noqa: E402

from shufflelab.sim.core import simulate_fabric  # noqa: E402
from shufflelab.sim.tcp_spec import Tcp  # noqa: E402

SOURCE = Path(__file__).resolve().parent / "ns3" / "two_tier.cc"
LEAVES, HOSTS_PER_LEAF, HOST_GBPS, DELAY_US, MEGABYTES, QUEUE = 2, 4, 1.0, 10.0, 10.0, 1000
UPLINKS_GBPS = (4.0, 2.0, 1.0)
CCS = {"cubic": "ns3::TcpCubic", "dctcp": "ns3::TcpDctcp"}
STEP_K = 20  # DCTCP's marking threshold, packets (as sim_vs_ns3.py's step rows)
DCTCP_FLOOR = 2  # segments: Linux's dctcp_ssthresh floor on ns-3's TcpDctcp (--ns3-host linux)
DELACK_MS = 40  # Linux's minimum delayed-ACK timer (TCP_DELACK_MIN), ns-3's DelAckTimeout with --ns3-host linux
STOP_S = 120.0  # ns-3's virtual-time limit: flows not done by then are reported as not done


def ns3_args(uplink_gbps: float, cc: str | None, host: str, data_retries: int | None) -> list[str]:
    """``two_tier.cc``'s options for one row (``cc`` None: today's rows, Cubic through drop-tail)."""
    args = [f"--leaves={LEAVES}", f"--hostsPerLeaf={HOSTS_PER_LEAF}", f"--hostGbps={HOST_GBPS}"]
    args += [f"--uplinkGbps={uplink_gbps}", f"--delayUs={DELAY_US}", f"--megabytes={MEGABYTES}", f"--queue={QUEUE}"]
    args += [f"--stopS={STOP_S:g}"]
    if cc is not None:
        args += [f"--cc={CCS[cc]}"]
    if cc == "dctcp":
        args += ["--queueDisc=step", f"--markK={STEP_K}"]
    if host == "linux":
        args += [f"--delAckTimeoutMs={DELACK_MS}"]
        args += [f"--dctcpFloor={DCTCP_FLOOR}"] if cc == "dctcp" else []
    if data_retries is not None:
        args += [f"--dataRetries={data_retries}"]
    return args


def run_ns3(binary: Path, args: list[str]) -> dict[str, Any]:
    out = subprocess.run([str(binary), *args], check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def tcp_table(cc: str) -> dict[str, Any]:
    """The simulator's ``[tcp]`` matching ns-3's side of a ``--cc`` row (tcp_spec.Tcp's fields)."""
    if cc == "cubic":
        return {"cc": "cubic", "discipline": "droptail", "ecn": False, "queue_packets": float(QUEUE)}
    return {"cc": "dctcp", "discipline": "step", "mark_packets": float(STEP_K), "queue_packets": float(QUEUE)}


def sim_config(uplink_gbps: float, cc: str | None = None) -> dict[str, Any]:
    hosts = LEAVES * HOSTS_PER_LEAF
    wire = MEGABYTES * 1e6 / MSS * WIRE_PER_SEGMENT
    return {
        "topology": {
            "kind": "leaf_spine",
            "leaves": LEAVES,
            "hosts_per_leaf": HOSTS_PER_LEAF,
            "spines": 1,
            "host_bytes_per_s": HOST_GBPS * 1e9 / 8,
            "uplink_bytes_per_s": uplink_gbps * 1e9 / 8,
            "host_delay_s": DELAY_US * 1e-6,
            "uplink_delay_s": DELAY_US * 1e-6,
        },
        "cores_per_host": 1,
        "seed": 1,
        "shuffle": {
            "maps": hosts,
            "reducers": hosts,
            "sizes": {"kind": "constant", "bytes": wire},
            "max_bytes_in_flight": 1e15,
        },
        "fct_bucket_edges_bytes": [],
    } | ({} if cc is None else {"tcp": Tcp(**tcp_table(cc)).core()})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/sim-vs-ns3-fabric.md"))
    ap.add_argument(
        "--cc",
        nargs="+",
        choices=sorted(CCS),
        default=None,
        help="row sets per congestion control, the simulator with the matching [tcp] (absent: today's rows)",
    )
    ap.add_argument("--uplink", nargs="+", type=float, default=list(UPLINKS_GBPS), help="uplink rates, Gbit/s")
    ap.add_argument(
        "--ns3-host",
        choices=("linux", "ns3"),
        default=None,
        help="ns-3's TCP hosts: Linux's 40 ms delayed-ACK timer and DCTCP ssthresh floor, or ns-3's defaults "
        "(default: linux with --cc, ns3 without)",
    )
    ap.add_argument(
        "--data-retries",
        type=int,
        default=None,
        help="timeouts of one segment before ns-3 closes the connection (ns-3's default 6; Linux's tcp_retries2 15)",
    )
    a = ap.parse_args(argv)
    if a.ns3_host is None:
        a.ns3_host = "ns3" if a.cc is None else "linux"
    return a


def ns3_diagnostics(ns: dict[str, Any]) -> dict[str, Any]:
    """What ns-3's senders went through: timeouts, sub-segment windows, flows that stopped sending."""
    done = [f >= 0 for _, _, f in ns["flows"]]
    return {
        "ns3_rtos": sum(ns["rtos"]),
        "ns3_flows_with_rto": sum(r > 0 for r in ns["rtos"]),
        "ns3_flows_with_sub_mss_cwnd": sum(c > 0 for c in ns["sub_mss_cwnd"]),
        "ns3_sub_mss_cwnds": sum(ns["sub_mss_cwnd"]),
        "ns3_max_tx_gap_s": max(ns["max_tx_gap_s"]),
        # RTO is capped at 60 s: a flow silent for longer before the end was closed by ns-3 (DataRetries)
        "ns3_flows_given_up": sum(not d and t < STOP_S - 60.0 for d, t in zip(done, ns["last_tx_s"], strict=True)),
        "ns3_not_done_last_tx_s": [t for d, t in zip(done, ns["last_tx_s"], strict=True) if not d],
        "ns3_not_done_rtos": [r for d, r in zip(done, ns["rtos"], strict=True) if not d],
    }


def compare(ns: dict[str, Any], sim: dict[str, Any]) -> dict[str, Any]:
    """Shuffle end, mean FCT and reducers' finish of one simulator answer against ns-3's flows."""
    hosts = LEAVES * HOSTS_PER_LEAF
    nan = float("nan")
    all_fcts = [f for _, _, f in ns["flows"]]
    stuck = sum(f < 0 for f in all_fcts)  # not finished at the time limit
    fcts = [f for f in all_fcts if f >= 0]
    ns_reducers = [
        nan if any(f < 0 for _, d, f in ns["flows"] if d == h) else max(f for _, d, f in ns["flows"] if d == h)
        for h in range(hosts)
    ]
    (bucket,) = sim["fct"]
    sim_end = float(sim["shuffle_completion_s"])
    sim_reducers = sorted(sim["reducer_finish_s"])
    ns_end = nan if stuck else max(fcts)
    ns_mean = statistics.mean(fcts) if fcts else nan
    return {
        "ns3_flows_not_done": stuck,
        "ns3_end_s": ns_end,
        "sim_end_s": sim_end,
        "end_error": (sim_end - ns_end) / ns_end,
        "ns3_mean_fct_s": ns_mean,
        "sim_mean_fct_s": bucket["mean_s"],
        "mean_fct_error": (bucket["mean_s"] - ns_mean) / ns_mean,
        "ns3_reducers_s": sorted(ns_reducers),
        "sim_reducers_s": sim_reducers,
        "reducer_max_abs_error": nan
        if stuck
        else max(abs(s - n) / n for s, n in zip(sim_reducers, sorted(ns_reducers), strict=True)),
    }


def timed_sim(cfg: dict[str, Any]) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    sim = simulate_fabric(cfg)
    return sim, time.perf_counter() - t0


def pct(x: float) -> str:
    return "–" if x != x else f"{x * 100:+.1f} %"


def ns3_end(r: dict[str, Any], unfinished: str) -> str:
    """ns-3's shuffle end, or how many of the 56 flows it left unfinished (worded as each table has it)."""
    stuck = r["ns3_flows_not_done"]
    return f"{r['ns3_end_s']:.3f}" if stuck == 0 else f"{stuck} of 56 flows {unfinished}"


def plain_table(rows: list[dict[str, Any]]) -> list[str]:
    """Today's table: the simulator without [tcp] against ns-3's Cubic through drop-tail."""
    lines = [
        "| oversubscription (uplink) | ns-3 shuffle end (s) | sim (s) | error | ns-3 mean FCT of finished flows (s) "
        "| sim (s) | error "
        "| reducers' finish, worst error | ns-3 wall (s) | sim wall (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        end = ns3_end(r, "stuck")
        lines.append(
            f"| {r['oversubscription']:g}:1 ({r['uplink_gbps']:g} Gbit/s) | {end} "
            f"| {r['sim_end_s']:.3f} "
            f"| {pct(r['end_error'])} | {r['ns3_mean_fct_s']:.3f} | {r['sim_mean_fct_s']:.3f} "
            f"| {pct(r['mean_fct_error'])} | {pct(r['reducer_max_abs_error'])} "
            f"| {r['ns3_wall_s']:.1f} | {r['sim_wall_s'] * 1e3:.2f} |"
        )
    return lines


def cc_table(rows: list[dict[str, Any]]) -> list[str]:
    """``--cc`` rows: ns-3 against the simulator with the matching [tcp] and without it (max-min)."""
    lines = [
        "| CC, ports | oversubscription (uplink) | ns-3 shuffle end (s) | sim [tcp] (s) | error | sim max-min (s) "
        "| error | ns-3 mean FCT of finished flows (s) | sim [tcp] (s) | error | sim max-min (s) | error "
        "| reducers' finish, worst error ([tcp]) | ns-3 timeouts (flows) | ns-3 wall (s) | sim wall (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ports = "drop-tail" if r["cc"] == "cubic" else f"step K={STEP_K}"
        name = f"{r['cc']} ({r['ns3_host']} hosts)"
        end = ns3_end(r, "not done")
        lines.append(
            f"| {name}, {ports} | {r['oversubscription']:g}:1 ({r['uplink_gbps']:g} Gbit/s) | {end} "
            f"| {r['sim_end_s']:.3f} | {pct(r['end_error'])} | {r['plain']['sim_end_s']:.3f} "
            f"| {pct(r['plain']['end_error'])} | {r['ns3_mean_fct_s']:.3f} | {r['sim_mean_fct_s']:.3f} "
            f"| {pct(r['mean_fct_error'])} | {r['plain']['sim_mean_fct_s']:.3f} | {pct(r['plain']['mean_fct_error'])} "
            f"| {pct(r['reducer_max_abs_error'])} | {r['ns3_rtos']} ({r['ns3_flows_with_rto']}) "
            f"| {r['ns3_wall_s']:.1f} | {r['sim_wall_s'] * 1e3:.2f} |"
        )
    for key, label in (("end_error", "shuffle end"), ("mean_fct_error", "mean FCT")):
        errs = [abs(r[key]) for r in rows if r[key] == r[key]]
        lines += ["", f"{label} ([tcp]): {len(errs)} rows compared, {sum(e <= 0.10 for e in errs)} within 10 %."]
    return lines


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    binary = compile_ns3(SOURCE, "two-tier")
    rows = []
    for cc in a.cc or [None]:
        for up in a.uplink:
            args = ns3_args(up, cc, a.ns3_host, a.data_retries)
            ns = run_ns3(binary, args)
            sim, wall = timed_sim(sim_config(up, cc))
            row: dict[str, Any] = {"oversubscription": HOSTS_PER_LEAF * HOST_GBPS / up, "uplink_gbps": up}
            row |= compare(ns, sim)
            row |= {"ns3_wall_s": ns["wall_s"], "sim_wall_s": wall}
            row |= ns3_diagnostics(ns)
            if cc is not None:
                plain, plain_wall = timed_sim(sim_config(up))
                row |= {
                    "cc": cc,
                    "ns3_host": a.ns3_host,
                    "ns3_args": args,
                    "sim_tcp": sim_config(up, cc)["tcp"],
                    "sim_tcp_links": sim.get("tcp_links"),
                    "plain": compare(ns, plain) | {"sim_wall_s": plain_wall},
                }
            rows.append(row)
            print(json.dumps(row), flush=True)
    lines = plain_table(rows) if a.cc is None else cc_table(rows)
    a.out.write_text("\n".join(lines) + "\n")
    a.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
