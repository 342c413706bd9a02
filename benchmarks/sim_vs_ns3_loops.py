"""The applications' packet mode against ns-3 on a shuffle whose reducers keep five requests in flight
(SIMULATED on both sides): does a reducer's loop, closed over the whole path, load an oversubscribed
spine as ns-3's does?

Scenario: the 2 x 4 leaf-spine at 4:1 (10 Gbit/s hosts and uplinks, one spine, 1 µs links,
100-packet ports: droptail for Cubic, step marking at K = 20 for DCTCP), 64 map tasks on 8 one-core
hosts (8 a host), 8 reducers, one a host, each fetching one block of every map: 56 over the network
in a random order, 5 requests in flight, each next request sent when a block has arrived. ns-3:
``benchmarks/ns3/two_tier.cc --blocks=8 --reqsInFlight=5`` (a new connection per block, its sender
started after the request's propagation; Linux-like hosts as in the other rows:
``--delAckTimeoutMs=40``, DCTCP ``--dctcpFloor=2``), each row over ``--orderSeed=1..3`` (``--ns3-runs``); the
simulator: the applications' engine in its packet mode (``mode = "packet"``), seeds 1-5 (``--seeds``). Each
row's mean-FCT error comes with its 95 % interval (Fieller's, the seeds' means against ns-3's runs') and the
verdict "within" 10 %, "out" or "undecided" (a mean led by a few 200 ms timeouts needs more runs on both sides).

A connection whose SYN is lost at a full port waits ns-3's 3 s connection timer; the model has no
handshake (Spark fetches over connections it keeps, one per pair of executors), so those fetches
are counted apart and left out of ns-3's mean and p99. A run that ns-3 aborts on an assertion of
its own TCP state machine (ns-3.44 at 2 x 16 hosts, DCTCP, order seed 3: "From OPEN->DISORDER but
with 7 dup ACKs") is left out of its row and named in the table. ns-3's runs are read back from
``~/.cache/shufflelab/ns3-bench/runs`` when the same program ran with the same arguments before
(``--fresh-ns3``: run again), so a second run of a check costs the simulator's side only; ``--json
FILE`` writes every row's figures (ns-3's run by run means, the model's seed by seed), and ``--ns3-rows
FILE ...`` takes ns-3's side of a row from such a file when its ns-3 arguments and number of runs are
the same (a row not found there runs ns-3), so the committed check re-runs on a fresh machine in the
simulator's time (docs/results/sim-vs-ns3/loops-ns3-*.json).

    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_loops.py --out /tmp/sim-vs-ns3-loops.md
    # ns-3's PRR without its 3.44 bug, as the packet mode's table (sim_vs_ns3_packet.py --prr-sack-fix):
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_loops.py --prr-sack-fix --out /tmp/loops-fix.md
    # the same at 2 x 8 hosts (the uplinks at 20 Gbit/s, still 4:1; 128 maps, 16 reducers):
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_loops.py --prr-sack-fix --linux-acks --hosts-per-leaf 8
    # as docs/results/sim-vs-ns3/loops.md's top section: ns-3 with every Linux option, RACK, the probe and
    # its ports counting bytes as a switch does
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_loops.py --prr-sack-fix --linux-acks --linux-cwnd-count \
        --linux-cwr-recovery --linux-dctcp-loss --linux-rack --linux-tlp --queue-bytes --hosts-per-leaf 8
    # ns-3's hosts' own ports as a Linux sender's qdisc (no marks, no drops), as the model takes them:
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_loops.py ... --linux-host-queue
    # ns-3's ACKs served before data at its leaf-spine ports (a diagnostic: what its ACK path costs):
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_loops.py ... --ns3-acks-ahead
    # the simulator's side only, against the committed ten-run reference at 2 x 8 hosts:
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_loops.py ... --hosts-per-leaf 8 --ns3-runs 10 \
        --ns3-rows docs/results/sim-vs-ns3/loops-ns3-2x8.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_vs_ns3 import (  # noqa: E402
    CACHE,
    add_host_options,
    compile_ns3,
    host_settings,
    hosts_for,
    sim_tcp_extra,
    two_tier_switch,
)
from sim_vs_ns3_packet import difference_interval, ratio_interval, sign_verdict, verdict  # noqa: E402

from shufflelab.sim import core  # noqa: E402

SOURCE = Path(__file__).resolve().parent / "ns3" / "two_tier.cc"
MAPS_PER_HOST, IN_FLIGHT = 8, 5
# --hosts-per-leaf N: 2 leaves of N hosts, the uplinks at N x 10 / 4 Gbit/s (4:1 at any N)
HOSTS_PER_LEAF = [4]


def hosts() -> int:
    return 2 * HOSTS_PER_LEAF[0]


def uplink_gbps() -> float:
    return HOSTS_PER_LEAF[0] * 10 / 4


SYN_TIMER_S = 3.0  # ns-3's TcpSocket::ConnTimeout
# ns-3's runs are deterministic: a run of the same program (its name holds the hash of its sources
# and of the ns-3 libraries) with the same arguments is read back from here, as sim_vs_ns3_packet.py
# does (the same keys); --fresh-ns3 runs it again
NS3_RUNS = CACHE / "runs"
FRESH_NS3 = [False]


def run_ns3(args: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """ns-3's last output line for ``args`` (the program first) as JSON, or None and the line of the
    assertion ns-3 aborted on (or that it crashed); from the cache of earlier identical runs unless ``--fresh-ns3``."""
    stored = NS3_RUNS / f"{hashlib.sha256(chr(0).join(args).encode()).hexdigest()[:24]}.json"
    if stored.exists() and not FRESH_NS3[0]:
        kept = json.loads(stored.read_text())
        return kept.get("out"), kept.get("aborted")
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        failed = next((ln for ln in run.stderr.splitlines() if "NS_ASSERT failed" in ln), None)
        if failed is None and run.returncode == -signal.SIGSEGV:
            # ns-3.44's own SACK scoreboard (TcpTxBuffer::Update) crashed when a host's pure ACK
            # overtook its segment (a jitter hosts.h no longer makes: no run has crashed since);
            # should one crash still, the run is left out and counted
            failed = "ns-3 crashed (SIGSEGV)"
        if failed is None:
            raise SystemExit(f"ns-3 failed: {' '.join(args)}\n{run.stderr[-2000:]}")
        out, aborted = None, failed
    else:
        out, aborted = json.loads(run.stdout.strip().splitlines()[-1]), None
    NS3_RUNS.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps({"args": args, "out": out, "aborted": aborted}))
    return out, aborted


# --prr-sack-fix, --linux-acks: ns-3's hosts (sim_vs_ns3.host_settings), two_tier.cc's extra arguments
NS3_HOSTS: list[str] = []
# --queue-bytes, --send-jitter: two_tier.cc's ports count bytes, its hosts jitter (sim_vs_ns3.two_tier_switch)
TWO_TIER_SWITCH: list[str] = []
# --sim-delayed-ack: the model's receivers (the spec's tcp.delayed_ack; empty: every segment ACKed at once)
SIM_DELAYED_ACK: dict[str, Any] = {}
# --sim-queued-acks: the model's ACKs behind the other direction's data (the applications' tcp.queued_acks)
SIM_TCP_EXTRA: dict[str, Any] = {}


def ns3_args(cc: str, block_mb: float, order_seed: int) -> list[str]:
    args = ["--leaves=2", f"--hostsPerLeaf={HOSTS_PER_LEAF[0]}", "--hostGbps=10", f"--uplinkGbps={uplink_gbps():g}"]
    args += ["--delayUs=1"]
    args += [f"--megabytes={block_mb}", "--queue=100", "--stopS=60", "--delAckTimeoutMs=40"]
    args += [f"--blocks={MAPS_PER_HOST}", f"--reqsInFlight={IN_FLIGHT}", f"--orderSeed={order_seed}"]
    args += hosts_for(NS3_HOSTS, cc, ecn=cc == "dctcp")  # Cubic: drop-tail without ECN
    args += TWO_TIER_SWITCH
    if cc == "dctcp":
        return args + ["--cc=ns3::TcpDctcp", "--queueDisc=step", "--markK=20", "--dctcpFloor=2"]
    return args + ["--cc=ns3::TcpCubic"]


# ns-3's side of earlier rows of this check, by (its arguments for order seed 1, its number of runs) (--ns3-rows)
STORED_NS3: dict[tuple[str, ...], dict[str, Any]] = {}


def stored_key(cc: str, block_mb: float, runs: int) -> tuple[str, ...]:
    return (*ns3_args(cc, block_mb, 1), f"runs={runs}")


def load_stored_ns3(paths: list[Path]) -> None:
    """Keep ns-3's side of the rows in ``paths`` (this check's ``--json`` output) by their key
    (:func:`stored_key`); a file that is not such a list of rows stops the check, naming it."""
    for path in paths:
        try:
            rows = json.loads(path.read_text())
            for row in rows:
                key = (*row["ns3_args"], f"runs={row['ns3_runs']}")
                ns = row["ns3"]
                missing = [
                    f for f in ("mean", "run_means", "p99", "end", "timeouts", "syn_lost", "aborted") if f not in ns
                ]
                if missing:  # refused here, not half-way through the table
                    raise KeyError(missing[0])
                STORED_NS3[key] = ns
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"--ns3-rows {path}: not this check's rows ({type(e).__name__}: {e})") from None


def ns3_row(binary: Path, cc: str, block_mb: float, runs: int) -> dict[str, Any]:
    """ns-3 over order seeds 1..``runs``. A run that ns-3 aborts on an assertion of its own TCP
    state machine is left out and counted (``aborted``); every run aborting is an error."""
    fcts: list[float] = []
    ends, syn, rtos, wall, aborted = [], 0, 0, 0.0, []
    run_means: list[float] = []
    for seed in range(1, runs + 1):
        t0 = time.perf_counter()
        d, failed = run_ns3([str(binary), *ns3_args(cc, block_mb, seed)])
        wall += time.perf_counter() - t0
        if d is None:
            aborted.append(seed)
            print(f"  ns-3 run {seed} aborted: {failed}", flush=True)
            continue
        done = [f[2] for f in d["flows"]]
        if min(done) < 0:
            raise SystemExit(f"ns-3 {cc} {block_mb} MB run {seed}: a flow did not finish within --stopS")
        fct = [e - r for e, r in zip(done, d["requested_s"], strict=True)]
        syn += sum(1 for x in fct if x >= SYN_TIMER_S)
        kept = [x for x in fct if x < SYN_TIMER_S]
        fcts += kept
        run_means.append(statistics.fmean(kept))
        ends.append(max(done))
        rtos += sum(d["rtos"])
    if not ends:
        raise SystemExit(f"ns-3 {cc} {block_mb} MB: every run aborted")
    fcts.sort()
    done = len(ends)
    return {
        "mean": statistics.fmean(fcts),
        "run_means": run_means,
        "p99": fcts[min(len(fcts) - 1, int(0.99 * len(fcts)))],
        "end": statistics.fmean(ends),
        "timeouts": rtos / done,
        "syn_lost": syn / done,
        "wall_s": wall,
        "aborted": aborted,
    }


def sim_config(cc: str, block_mb: float, seed: int) -> dict[str, Any]:
    n = hosts()
    maps = n * MAPS_PER_HOST
    block = block_mb * 1e6
    tcp = {"cc": cc, "discipline": "step" if cc == "dctcp" else "droptail", "queue_packets": 100}
    tcp |= {"mark_packets": 20, "ecn": False} | SIM_TCP_EXTRA
    if SIM_DELAYED_ACK:
        tcp["delayed_ack"] = dict(SIM_DELAYED_ACK)
    return {
        "topology": {
            "kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": HOSTS_PER_LEAF[0], "spines": 1,
            "host_bytes_per_s": 1.25e9, "uplink_bytes_per_s": uplink_gbps() * 1.25e8, "host_delay_s": 1e-6,
            "uplink_delay_s": 1e-6,
        },
        "apps": [{
            "name": "loops", "executors": n, "placement": "pack",
            "stages": [
                {"compute_s": [1e-6] * maps, "write_bytes": [block * n] * maps, "read_bytes": [0.0] * maps},
                {"after": [0], "reads_from": [0], "compute_s": [0.0] * n, "write_bytes": [0.0] * n,
                 "read_bytes": [block * maps] * n},
            ],
        }],
        "cores_per_host": 1, "max_reqs_in_flight": IN_FLIGHT, "fct_bucket_edges_bytes": [],
        "tcp": tcp, "seed": seed, "mode": "packet",
    }  # fmt: skip


def sim_row(cc: str, block_mb: float, seeds: int) -> dict[str, Any]:
    runs = []
    for seed in range(1, seeds + 1):
        t0 = time.process_time()
        r = core.simulate_apps(sim_config(cc, block_mb, seed))
        cpu = time.process_time() - t0
        (bucket,) = [b for b in r["fct"] if b["count"]]
        p = r["packet"]
        runs.append((bucket["mean_s"], bucket["p99_s"], r["apps"][0]["job_time_s"], p["timeouts"], p["passes"], cpu))
    return {
        "mean": statistics.fmean(x[0] for x in runs),
        "seed_means": [x[0] for x in runs],
        "p99": statistics.fmean(x[1] for x in runs),
        "end": statistics.fmean(x[2] for x in runs),
        "timeouts": statistics.fmean(x[3] for x in runs),
        "passes": [x[4] for x in runs],
        "cpu_s": sum(x[5] for x in runs) / seeds,
    }


def pct(sim: float, ns: float) -> str:
    return f"{100 * (sim - ns) / ns:+.1f} %"


def row_line(mb: float, cc: str, ns: dict[str, Any], sim: dict[str, Any]) -> tuple[str, str]:
    """A row of the table (``ns``: :func:`ns3_row`'s, ``sim``: :func:`sim_row`'s) and its mean's verdict:
    the error's 95 % interval (Fieller's, the seeds' means against ns-3's runs' means:
    ``sim_vs_ns3_packet.ratio_interval``) within ±10 %, out, or undecided (more runs decide it)."""
    ci = ratio_interval(sim["seed_means"], ns["run_means"])
    ci_txt = "" if ci is None else f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]"
    what = verdict(ci)
    line = (
        f"| {mb:g} MB | {cc} | {1e3 * ns['mean']:.2f} | {1e3 * sim['mean']:.2f} "
        f"| {pct(sim['mean'], ns['mean'])}{ci_txt} | {what} "
        f"| {1e3 * ns['p99']:.1f} | {1e3 * sim['p99']:.1f} | {pct(sim['p99'], ns['p99'])} "
        f"| {ns['end']:.3f} / {sim['end']:.3f} | {ns['timeouts']:.1f} / {sim['timeouts']:.1f} "
        f"| {ns['syn_lost']:.1f} | {'-'.join(map(str, sorted(set(sim['passes']))))} | {sim['cpu_s']:.2f} "
        f"| {', '.join(f'order seed {x}' for x in ns['aborted']) or '–'} |"
    )
    return line, what


def tally_line(whats: list[str]) -> str:
    """The check's closing line: how many rows' mean-FCT verdicts (:func:`row_line`'s) are "within",
    "out" and "undecided", and how many have no interval ("–": one ns-3 run or one seed)."""
    counts: dict[str, int] = {}
    for w in whats:
        label = "no interval (one run or one seed)" if w == "–" else w
        counts[label] = counts.get(label, 0) + 1
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    return f"- Mean FCT within 10 % of ns-3's at 95 % (the error's interval inside ±10 %): {verdicts}."


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/sim-vs-ns3-loops.md"))
    ap.add_argument("--blocks-mb", nargs="+", type=float, default=[0.1, 0.3])
    ap.add_argument("--ns3-runs", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--fresh-ns3", action="store_true", help="run ns-3 again where an identical run is cached")
    ap.add_argument(
        "--ns3-acks-ahead",
        action="store_true",
        help="a diagnostic: ns-3's leaf-spine ports serve pure ACKs before data (two_tier.cc --ackPrio=true), so "
        "they neither wait behind data nor are dropped there, as the model's ACKs",
    )
    ap.add_argument(
        "--ns3-acks-ahead-hosts",
        action="store_true",
        help="a diagnostic: ns-3's host links' ports (a host's own and its leaf's) serve pure ACKs before data "
        "(two_tier.cc --ackPrioHosts=true)",
    )
    ap.add_argument("--json", type=Path, help="write every row's figures here (what --ns3-rows reads)")
    ap.add_argument(
        "--ns3-rows", type=Path, nargs="+", default=[], help="ns-3's side of rows from earlier --json output"
    )
    ap.add_argument(
        "--hosts-per-leaf", type=int, default=4, help="2 leaves of N hosts at 4:1 (uplinks at N x 10 / 4 Gbit/s)"
    )
    add_host_options(ap)
    a = ap.parse_args()
    FRESH_NS3[0] = a.fresh_ns3
    NS3_HOSTS[:], delayed = host_settings(a)
    TWO_TIER_SWITCH[:] = two_tier_switch(a) + (["--ackPrio=true"] if a.ns3_acks_ahead else [])
    TWO_TIER_SWITCH.extend(["--ackPrioHosts=true"] if a.ns3_acks_ahead_hosts else [])
    HOSTS_PER_LEAF[:] = [a.hosts_per_leaf]
    SIM_DELAYED_ACK.update(delayed)
    SIM_TCP_EXTRA.update(sim_tcp_extra(a))
    load_stored_ns3(a.ns3_rows)
    binary: list[Path] = []  # compiled when a row is not stored
    rows: list[dict[str, Any]] = []
    lines = [
        "| block | CC | ns-3 mean FCT (ms) | sim mean FCT (ms) | error [95 % CI] | within 10 % "
        "| ns-3 p99 (ms) | sim p99 (ms) | error "
        "| shuffle end ns-3 / sim (s) | timeouts ns-3 / sim | ns-3 SYNs lost | sim passes | sim CPU (s) "
        "| ns-3 runs aborted |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    signs: list[str] = []
    whats: list[str] = []
    for mb in a.blocks_mb:
        means = {}
        for cc in ("cubic", "dctcp"):
            print(f"{mb} MB {cc} ...", flush=True)
            ns = STORED_NS3.get(stored_key(cc, mb, a.ns3_runs))
            if ns is None:
                binary[:] = binary or [compile_ns3(SOURCE, "two_tier")]
                ns = ns3_row(binary[0], cc, mb, a.ns3_runs)
            else:
                print("  ns-3: the stored row", flush=True)
            sim = sim_row(cc, mb, a.seeds)
            rows.append({
                "hosts_per_leaf": HOSTS_PER_LEAF[0], "block_mb": mb, "cc": cc,
                "ns3_args": list(ns3_args(cc, mb, 1)), "ns3_runs": a.ns3_runs, "ns3": ns, "sim": sim,
            })  # fmt: skip
            means[cc] = (ns, sim)
            line, what = row_line(mb, cc, ns, sim)
            lines.append(line)
            whats.append(what)
        (nc, sc), (nd, sd) = means["cubic"], means["dctcp"]
        d_ns, d_sim = nc["mean"] - nd["mean"], sc["mean"] - sd["mean"]
        # each side's 95 % Welch interval over its runs (a run's mean over its fetches, a seed's)
        ci_ns = difference_interval(nc["run_means"], nd["run_means"])
        ci_sim = difference_interval(sc["seed_means"], sd["seed_means"])
        what = sign_verdict(d_ns, d_sim, ci_ns, ci_sim, len(nc["run_means"]))

        def ms(d: float, ci: list[float] | None) -> str:
            return f"{1e3 * d:+.2f} ms" + ("" if ci is None else f" [{1e3 * ci[0]:+.2f}, {1e3 * ci[1]:+.2f}]")

        signs.append(
            f"- {mb:g} MB: Cubic − DCTCP mean FCT [95 % CI]: ns-3 {ms(d_ns, ci_ns)}, sim {ms(d_sim, ci_sim)}: "
            f"sign {'right' if d_ns * d_sim > 0 else 'WRONG'} on the means; at 95 %: {what}"
        )
    signs.append(tally_line(whats))
    text = "\n".join(lines + [""] + signs) + "\n"
    a.out.write_text(text)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
