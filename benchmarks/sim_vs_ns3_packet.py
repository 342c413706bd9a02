"""Benchmark: the simulator's packet-faithful mode vs ns-3: incast on a two-tier fabric, and one
bottleneck next to UDP, for Cubic, Reno and DCTCP.

    .venv/bin/pip install ns3          # the PyPI wheel; the programs are compiled with g++ as sim_vs_ns3.py does
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_packet.py --out /tmp/sim-vs-ns3-packet.md
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_packet.py --only incast    # or: bottleneck, alltoall, all
    # the whole table (42 rows) as docs/results/sim-vs-ns3/packet-mode-all.md's headline, ns-3's side
    # from the committed rows (the simulator's side run; without --ns3-rows, ~40 min of ns-3):
    nice -n 10 .venv/bin/python benchmarks/sim_vs_ns3_packet.py --only all --udp-jitter 1 --prr-sack-fix \
        --linux-acks --linux-cwnd-count --linux-cwr-recovery --linux-dctcp-loss --linux-rack --linux-rack-prr \
        --linux-tlp --queue-bytes --send-jitter 1 --ns3-runs 5 --ns3-incast-runs 10 --ns3-a2a-runs 3 \
        --ns3-zero-runs 5 --seeds 10 --out /tmp/sim-vs-ns3-all.md \
        --ns3-rows docs/results/sim-vs-ns3/packet-mode-jitter.json
    # the all-to-all rows against ns-3 whose hosts' own ports neither mark nor drop (--linux-host-queue,
    # as the loops check's): the same arguments with --only alltoall --linux-host-queue

**Incast** (``--only incast``): a leaf-spine of 5 leaves x 8 hosts and one spine, 1 Gbit/s host links,
4 Gbit/s uplinks (2:1), 10 µs per link, every port 100 packets. N = 8 / 16 / 32 senders each send
1 MB to host 0, all at once. The senders are the hosts a shuffle of N + 1 maps and one reducer puts
its map tasks on (map j on host floor(j * 40 / (N + 1)); map 0 is on the reducer's host, read
locally), so the simulator side is that shuffle (``run_fabric``, ``mode = "packet"``, the matching
``[tcp]``) and the ns-3 side is ``benchmarks/ns3/two_tier.cc --incastSenders=...`` with the same
hosts. Cubic and Reno: drop-tail ports, no ECN. DCTCP: step marking at K = 20 packets. ns-3's hosts
are set up like Linux's (a 40 ms delayed-ACK timer, DCTCP's ssthresh floor of 2 segments, minimum
RTO 200 ms), as ``sim_vs_ns3_fabric.py --ns3-host linux``. The max-min mode's answer is shown
beside it.

**All-to-all** (``--only alltoall``, not in the default run): ``sim_vs_ns3_fabric.py``'s two-tier
scenario (2 leaves x 4 hosts, one spine, 1 Gbit/s hosts, uplinks 4 / 2 / 1 Gbit/s = 1:1 / 2:1 / 4:1,
10 µs links, 1,000-packet ports; every host sends 10 MB to every other, 56 flows at once), ns-3 with
the same Linux-like hosts; the simulator side is that shuffle (8 maps, 8 reducers) in the packet mode.
Its rows add the shuffle's end (the last flow) on both sides.

**One bottleneck** (``--only bottleneck``): ``sim_vs_ns3.py``'s scenario (4 flows x 20 MB through
1 Gbit/s, 10 Gbit/s access links, 50 µs per link, 200 packets, RED 20/60 packets or step marking at
20, ECN-capable TCP, non-ECN UDP at 0 / 50 / 90 / 100 %), ns-3 with the same Linux-like hosts
(``bottleneck.cc --delAckTimeoutMs=40 --dctcpFloor=2``) and RED like Linux's ``sch_red``
(``--wait=false``: ns-3's RedQueueDisc by default waits 1/p to 2/p packets between two marks,
Linux's ``red_action`` in include/net/red.h and the switch's RED space them uniformly up to 1/p;
step marking marks every packet at or above K, so the wait does not apply there); the simulator
side is the packet-faithful mode's per-link engine (``run_link``) on that one link, which is what
the mode computes for a fabric whose only loaded link is this one. With ``--udp-jitter J`` the UDP
leaves at its constant rate's instants each moved later by U[0, J) packet times of the bottleneck, on
both sides (``bottleneck.cc --udpJitter=J``, the simulator's ``cross_jitter_packets``), as a real
sender's interrupts and NIC move it; ns-3 then runs each UDP row with ``--run=1..N`` (``--ns3-runs``,
3) and the row is the mean over them. Without it the UDP is exactly periodic, and at 50 and 100 % its
period is a whole number of the bottleneck's packet times: its arrivals meet the departures on the
same nanosecond and each side's order of simultaneous events decides who gets the queue's last place.
With ``--prr-sack-fix`` ns-3's proportional rate reduction counts what each ACK newly acknowledged or
SACKed, as Linux's ``tcp_cwnd_reduction`` does (``--prrSackFix=true``, class ``TcpPrrSackFix`` in
``ns3/hosts.h``): ns-3.44's ``TcpPrrRecovery`` adds a segment per duplicate ACK on top of the SACKed
bytes, so in a loss recovery it sends about twice its proportional share (ns-3 issue 1350, fixed
after 3.44).
With ``--ns3-incast-runs N`` each incast row's ns-3 side is the mean over runs 1..N whose flows start
U[0, 12.064 µs) after the common start (a packet time of the host links; ``two_tier.cc
--startJitterUs --run``): an incast's timeouts turn on the senders' phases, so ns-3's one
deterministic run is one sample of them (incast 8 Cubic: 3-5 timeouts over runs 1-5, and 1-3 with
``--prr-sack-fix``), where the simulator's figure is a mean over seeds.
``--ns3-a2a-runs N`` and ``--ns3-zero-runs N`` do the same for the all-to-all rows and for the
bottleneck rows without UDP (``bottleneck.cc --startJitterUs``): without them those rows are one
deterministic ns-3 run each, taken as exact (step 0 % Reno: two of its four flows end 0.15-0.2 s
before the others in one run, and together in the next).
With ``--linux-cwnd-count`` ns-3's Reno and DCTCP clear their additive-increase count at a window
reduction, as Linux's ``tcp_init_cwnd_reduction`` does (``--cwndCntReset=true``, ``LinuxCwndCount``
in ``ns3/hosts.h``); ns-3.44 keeps it, so its first ACK after a cut may add a segment.
With ``--linux-cwr-recovery`` a sender in CWR (an ECN reduction) that finds a loss enters fast
recovery, as Linux's ``tcp_fastretrans_alert`` does (``--cwrRecovery=true``); ns-3.44 only counts the
duplicate ACK there and waits for the timer (its DCTCP incast timeouts). With ``--linux-dctcp-loss``
ns-3's DCTCP halves its window at a loss, as Linux's ``dctcp_react_to_loss`` (``--dctcpLossHalves=true``);
ns-3.44 cuts it by alpha / 2 as for a mark. With ``--linux-rack`` ns-3's senders find a loss once a
segment sent after it has been delivered, as Linux's RACK does (``--rackLoss=true``), a lost
retransmission too; ns-3.44 finds one only from three segments SACKed above it, so a sender whose
window's tail or retransmission was dropped waits for its timer. With ``--linux-rack-prr`` too, what RACK
finds lost in a recovery is sent again only as PRR allows, as Linux's ``tcp_cwnd_reduction`` after the
marks (``--rackPrr=true``); without it every lost segment found goes again at once, a burst. With
``--send-jitter J`` every packet a two-tier host sends reaches its leaf U[0, J) of a packet time late
(``two_tier.cc --sendJitter``), as a real host's and the model's do; without it ns-3's hosts are
perfectly regular and a full drop-tail port locks to their phases (one sender's windows dropped whole
again and again: most of the incasts' timeouts). With ``--linux-tlp`` they send Linux's
tail loss probe two smoothed round trips and 2 ms after their last new data or advancing ACK
(``--lossProbe=true``); ns-3.44 has none, so a window whose last segments or last ACK were dropped
waits for its timer. Each option goes only to the runs it can change
(``sim_vs_ns3.hosts_for``), so the others keep their arguments and ns-3's cache.
With ``--dctcp-ack-now`` ns-3's DCTCP receivers ACK at once the segment that changes their CE state,
as Linux's ``dctcp_ece_ack_update`` does (``--dctcpAckNow=true``, class ``TcpDctcpFloor`` in
``ns3/hosts.h``); ns-3's ``TcpDctcp`` then sends only the earlier segments' delayed ACK and leaves
this one to the delayed-ACK rule, so a sender at a window of two segments waits for the 40 ms timer.

Reported per row: mean and p99 FCT on both sides (p99 = the nearest-rank 99th percentile, i.e. the
slowest flow for these flow counts), their errors relative to ns-3, retransmission timeouts, and
per scenario the sign of Cubic's mean FCT minus DCTCP's on each side. Then each row's error with a
95 % confidence interval over ns-3's runs (``--ns3-runs``, ``--ns3-incast-runs``,
``--ns3-a2a-runs``) and the seeds (``shufflelab.stats.compare``: the ratio of the two means by
Welch's test inverted over the ratio, Fieller's method; a row that ns-3 runs once takes ns-3's
figure as exact, the seeds' t interval of their mean over it) and its verdict against the 10 % goal: within or out when
the whole interval is inside or outside ±10 %, undecided when it straddles a bound; and each
scenario's Cubic − DCTCP difference with Welch's interval on each side, its sign decided where the
interval excludes 0. Choose the numbers of runs and seeds before a run, not after looking at a
verdict (adding runs until a row is decided would need a sequential design). ns-3 is deterministic: one run
per row, kept under ``~/.cache/shufflelab/ns3-bench/runs`` by program and arguments (the program's
name holds the hash of its sources and of the ns-3 libraries) and read back by later runs of this
benchmark (``--fresh-ns3`` runs ns-3 again; a row's ns-3 wall time is its own run's), or, with
``--ns3-rows FILE ...``, taken from the rows of an earlier run of this benchmark whose ns-3
arguments are the same (its mean, p99, end, timeouts and wall time; a row not found there runs ns-3).
The
simulator is deterministic for a seed, which draws its RED decisions and each host's send-time
jitter (up to one packet time: without it a full drop-tail queue locks to the senders' phases); an
incast's timeouts, and so its mean FCT, depend on these draws, so the simulator's
figures are the mean over seeds 1-5 (``--seeds``), with the range of the seeds' values beside them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_vs_ns3 import (  # noqa: E402
    CACHE,
    CCS,
    MSS,
    RED,
    WIRE_PER_SEGMENT,
    add_host_options,
    compile_ns3,
    host_settings,
    hosts_for,
    sim_tcp_extra,
    two_tier_switch,
)
from sim_vs_ns3_fabric import sim_config as alltoall_config  # noqa: E402

from shufflelab import stats  # noqa: E402
from shufflelab.sim import core  # noqa: E402

HERE = Path(__file__).resolve().parent
TWO_TIER = HERE / "ns3" / "two_tier.cc"
GBPS = 1e9 / 8
# incast
LEAVES, HOSTS_PER_LEAF, UPLINK_GBPS, LINK_DELAY_US, QUEUE, STEP_K, MEGABYTES = 5, 8, 4.0, 10.0, 100, 20, 1.0
SENDERS = (8, 16, 32)
DELACK_MS, DCTCP_FLOOR = 40, 2
# one bottleneck (sim_vs_ns3.py's scenario)
B_FLOWS, B_MEGABYTES, B_DELAY_US, B_LIMIT, UDP_SHARES = 4, 20.0, 50.0, 200, (0.0, 0.5, 0.9, 1.0)


def p99(xs: list[float]) -> float:
    """The simulator's quantile (nearest rank on the sorted values)."""
    s = sorted(xs)
    return s[round((len(s) - 1) * 0.99)]


# ns-3's runs are deterministic: a run of the same program (its file name holds the hash of its
# sources and of the ns-3 libraries) with the same arguments is read back from here (--fresh-ns3: not)
NS3_RUNS = CACHE / "runs"
FRESH_NS3 = False
# ns-3's figures from earlier rows of this benchmark, by (case's program, its arguments) (--ns3-rows)
STORED_NS3: dict[tuple[str, ...], dict[str, Any]] = {}
# --udp-jitter: the one-bottleneck rows' UDP send-time jitter, in packet times of the link, on both
# sides (bottleneck.cc --udpJitter, the simulator's cross_jitter_packets); such a row runs ns-3 with
# --run=1..UDP_RUNS (RED's and the jitter's draws) and takes the mean over the runs
UDP_JITTER, UDP_RUNS = 0.0, 3
# --dctcp-ack-now: ns-3's DCTCP receivers ACK the segment that changes their CE state at once, as
# Linux's dctcp_ece_ack_update (the ns-3 programs' --dctcpAckNow=true); without it, ns-3's own rule
DCTCP_ACK_NOW: list[str] = []
# --ns3-incast-runs N: each incast row's ns-3 side is the mean over runs 1..N whose flows start
# U[0, INCAST_JITTER_US) after the common start (two_tier.cc --startJitterUs, --run): one packet time
# of the 1 Gbit/s host links, as the simulator's senders wander (without it ns-3 is one sample)
INCAST_RUNS, INCAST_JITTER_US = 1, 1508 * 8 / 1e3
# --ns3-a2a-runs N: each all-to-all row's ns-3 side is the mean over runs 1..N whose flows start up
# to the same packet time apart (1: one deterministic run, no jitter)
A2A_RUNS = 1
# --ns3-zero-runs N: the same for the bottleneck rows without UDP (bottleneck.cc --startJitterUs; 1:
# one deterministic run, taken as exact)
ZERO_RUNS = 1
# --prr-sack-fix, --linux-acks: ns-3's hosts (sim_vs_ns3.host_settings), the programs' extra arguments
NS3_HOSTS: list[str] = []
# --queue-bytes, --send-jitter: two_tier.cc's ports (incast and all-to-all rows) count bytes, its hosts
# jitter (sim_vs_ns3.two_tier_switch)
TWO_TIER_SWITCH: list[str] = []
# --sim-delayed-ack: the model's receivers (the spec's tcp.delayed_ack; empty: every segment ACKed at once)
SIM_DELAYED_ACK: dict[str, Any] = {}
# --sim-queued-acks: the model's ACKs behind the other direction's data (the fabric specs' tcp.queued_acks)
SIM_TCP_EXTRA: dict[str, Any] = {}


def stored_ns3(args: list[str]) -> dict[str, Any] | None:
    """An earlier row's ns-3 figures for the program and arguments ``args`` (None: not stored)."""
    row = STORED_NS3.get((Path(args[0]).name.split("-")[0], *args[1:]))
    if row is None:
        return None
    keys = ("ns3_mean_s", "ns3_p99_s", "ns3_end_s", "ns3_timeouts", "ns3_wall_s", "ns3_run_means_s", "ns3_run_p99s_s")
    out = {k: row.get(k) for k in keys}
    out |= {"ss_exit_segments": row.get("ns3_ss_exit_segments"), "args": args[1:], "cached": "stored"}
    return out


def load_stored_ns3(paths: list[Path]) -> None:
    """Keep the ns-3 figures of the rows in ``paths`` (this benchmark's JSON output) by their ns-3
    program (two_tier for incast and all-to-all rows, bottleneck for the others) and arguments."""
    for path in paths:
        for row in json.loads(path.read_text()):
            program = "two_tier" if row["case"].startswith(("incast", "all-to-all")) else "bottleneck"
            STORED_NS3[(program, *row["ns3_args"])] = row


def run_ns3(args: list[str]) -> dict[str, Any]:
    """The last line of ns-3's output for ``args`` (the program first) as JSON, from the cache of
    earlier identical runs unless ``FRESH_NS3``; ``cached`` says which."""
    key = hashlib.sha256("\0".join(args).encode()).hexdigest()[:24]
    stored = NS3_RUNS / f"{key}.json"
    if stored.exists() and not FRESH_NS3:
        out: dict[str, Any] = json.loads(stored.read_text())["out"]
        return out | {"cached": True}
    text = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    out = json.loads(text.strip().splitlines()[-1])
    NS3_RUNS.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps({"args": args, "out": out}))
    return out | {"cached": False}


def incast_hosts(n: int) -> list[int]:
    hosts = LEAVES * HOSTS_PER_LEAF
    return [j * hosts // (n + 1) for j in range(1, n + 1)]


def ns3_incast(binary: Path, cc: str, n: int) -> dict[str, Any]:
    args = [str(binary), f"--leaves={LEAVES}", f"--hostsPerLeaf={HOSTS_PER_LEAF}", "--hostGbps=1"]
    args += [f"--uplinkGbps={UPLINK_GBPS}", f"--delayUs={LINK_DELAY_US}", f"--megabytes={MEGABYTES}"]
    args += [f"--queue={QUEUE}", "--stopS=60", f"--cc={CCS[cc]}", f"--delAckTimeoutMs={DELACK_MS}"]
    if cc == "dctcp":
        args += ["--queueDisc=step", f"--markK={STEP_K}", f"--dctcpFloor={DCTCP_FLOOR}"]
        args += DCTCP_ACK_NOW
    args += hosts_for(NS3_HOSTS, cc, ecn=cc == "dctcp")  # drop-tail without ECN for the others
    args += TWO_TIER_SWITCH
    args += [f"--incastSenders={','.join(map(str, incast_hosts(n)))}", "--incastReceiver=0"]
    if INCAST_RUNS > 1:
        return ns3_link_runs(args + [f"--startJitterUs={INCAST_JITTER_US:g}"], INCAST_RUNS, "two_tier")
    if (kept := stored_ns3(args)) is not None:
        return kept
    out = run_ns3(args)
    fct = [f[2] for f in out["flows"]]
    return {"fct_s": fct, "timeouts": sum(out["rtos"]), "wall_s": out["wall_s"], "args": args[1:]} | {
        "cached": out["cached"],
        "ss_exit_segments": out.get("ss_exit_segments"),
    }


def incast_config(cc: str, n: int, mode: str) -> dict[str, Any]:
    tcp = {"cc": cc, "discipline": "step" if cc == "dctcp" else "droptail", "queue_packets": QUEUE}
    tcp |= {"mark_packets": STEP_K, "ecn": False} | SIM_TCP_EXTRA
    if SIM_DELAYED_ACK:
        tcp["delayed_ack"] = dict(SIM_DELAYED_ACK)
    config: dict[str, Any] = {
        "topology": {
            "kind": "leaf_spine",
            "leaves": LEAVES,
            "hosts_per_leaf": HOSTS_PER_LEAF,
            "spines": 1,
            "host_bytes_per_s": GBPS,
            "uplink_bytes_per_s": UPLINK_GBPS * GBPS,
            "host_delay_s": LINK_DELAY_US * 1e-6,
            "uplink_delay_s": LINK_DELAY_US * 1e-6,
        },
        "shuffle": {"maps": n + 1, "reducers": 1, "sizes": {"kind": "constant", "bytes": MEGABYTES * 1e6}},
        "tcp": tcp,
        "fct_bucket_edges_bytes": [],
    }
    if mode == "packet":
        config["mode"] = "packet"
    return config


def sim_fabric(config: dict[str, Any]) -> dict[str, Any]:
    """One simulator run of ``config``: the flows' mean and p99 FCT, the shuffle's end, the packet
    mode's timeouts (None in the max-min mode) and the wall time."""
    t0 = time.perf_counter()
    r = core.simulate_fabric(config)
    wall = time.perf_counter() - t0
    b = r["fct"][0]
    return {
        "mean_s": b["mean_s"],
        "p99_s": b["p99_s"],
        "end_s": r["shuffle_completion_s"],
        "timeouts": r.get("packet", {}).get("timeouts"),
        "wall_s": wall,
    }


def sim_incast(cc: str, n: int, mode: str, seed: int) -> dict[str, Any]:
    config = incast_config(cc, n, mode) | {"seed": seed}
    return sim_fabric(config) | {"config": config}


def over_seeds(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean, p99 and timeouts averaged over the seeds' runs, with each one's range and values, and
    the mean wall."""
    out: dict[str, Any] = {"wall_s": statistics.mean(r["wall_s"] for r in runs)}
    for key in ("mean_s", "p99_s", "timeouts"):
        values = [r[key] for r in runs]
        if any(v is None or v != v for v in values):
            out[key], out[key + "_range"], out[key + "_values"] = math.nan, None, None
        else:
            out[key], out[key + "_range"] = statistics.mean(values), [min(values), max(values)]
            out[key + "_values"] = values
    return out


def ratio_interval(sim: list[float] | None, ns: list[float] | None, level: float = 0.95) -> list[float] | None:
    """A ``level`` confidence interval of (sim's mean − ns-3's mean) / ns-3's mean, from the
    seeds' values ``sim`` and ns-3's runs' values ``ns``: the project's ratio of means
    (``shufflelab.stats.compare``: Welch's test inverted over the ratio, Fieller's method). One
    ns-3 run (a deterministic row) is taken as known exactly: the seeds' t interval of their mean
    over it. None below ``stats.MIN_N`` seeds (or runs, with more than one), or without spread."""
    if not sim or not ns:
        return None
    if len(ns) == 1:
        m = stats.summarize(sim, level)
        if not m.has_interval() or ns[0] <= 0:
            return None
        return [m.ci_low / ns[0] - 1, m.ci_high / ns[0] - 1]
    c = stats.compare(ns, sim, level)
    if not c.has_interval:
        return None
    return [c.ratio_ci_low - 1, c.ratio_ci_high - 1]


def verdict(interval: list[float] | None, bound: float = 0.10) -> str:
    """The verdict "within" when the whole interval lies within ±``bound``, "out" when none of it does,
    "undecided" when it straddles ±``bound`` (more runs and seeds decide it), "–" without one."""
    if interval is None:
        return "–"
    lo, hi = interval
    if -bound <= lo and hi <= bound:
        return "within"
    if hi < -bound or lo > bound:
        return "out"
    return "undecided"


def difference_interval(a: list[float] | None, b: list[float] | None, level: float = 0.95) -> list[float] | None:
    """Welch's t interval of mean(a) − mean(b) (``shufflelab.stats.difference``; None below
    ``stats.MIN_N`` values on either side)."""
    if not a or not b:
        return None
    d = stats.difference(b, a, level)
    return [d.ci_low, d.ci_high] if d.has_interval else None


A2A_UPLINKS_GBPS, A2A_QUEUE, A2A_MEGABYTES = (4.0, 2.0, 1.0), 1000, 10.0


def ns3_alltoall(binary: Path, cc: str, uplink_gbps: float) -> dict[str, Any]:
    args = [str(binary), "--leaves=2", "--hostsPerLeaf=4", "--hostGbps=1", f"--uplinkGbps={uplink_gbps}"]
    args += [f"--delayUs={LINK_DELAY_US}", f"--megabytes={A2A_MEGABYTES}", f"--queue={A2A_QUEUE}", "--stopS=120"]
    args += [f"--cc={CCS[cc]}", f"--delAckTimeoutMs={DELACK_MS}"]
    if cc == "dctcp":
        args += ["--queueDisc=step", f"--markK={STEP_K}", f"--dctcpFloor={DCTCP_FLOOR}"]
        args += DCTCP_ACK_NOW
    args += hosts_for(NS3_HOSTS, cc, ecn=cc == "dctcp")  # drop-tail without ECN for the others
    args += TWO_TIER_SWITCH
    if A2A_RUNS > 1:
        return ns3_link_runs(args + [f"--startJitterUs={INCAST_JITTER_US:g}"], A2A_RUNS, "two_tier")
    if (kept := stored_ns3(args)) is not None:
        return kept
    out = run_ns3(args)
    return {
        "fct_s": [f[2] for f in out["flows"]],
        "timeouts": sum(out["rtos"]),
        "wall_s": out["wall_s"],
        "args": args[1:],
        "cached": out["cached"],
    }


def sim_alltoall(cc: str, uplink_gbps: float, seed: int) -> dict[str, Any]:
    config = alltoall_config(uplink_gbps, "dctcp" if cc == "dctcp" else "cubic")
    tcp = {"cc": cc, "discipline": "step" if cc == "dctcp" else "droptail", "queue_packets": A2A_QUEUE}
    tcp |= {"mark_packets": STEP_K, "ecn": False} | SIM_TCP_EXTRA
    if SIM_DELAYED_ACK:
        tcp["delayed_ack"] = dict(SIM_DELAYED_ACK)
    config |= {"seed": seed, "mode": "packet", "tcp": tcp}
    config["shuffle"]["sizes"] = {"kind": "constant", "bytes": A2A_MEGABYTES * 1e6}  # payload: the mode adds headers
    return sim_fabric(config)


def link_config(cc: str, queue: str, share: float) -> dict[str, Any]:
    c, pkt = GBPS, float(WIRE_PER_SEGMENT)
    if queue == "red":
        red = {"min_bytes": RED["minTh"] * pkt, "max_bytes": RED["maxTh"] * pkt, "max_p": RED["maxP"]}
        red |= {"ewma_weight": RED["qw"], "ecn": True, "gentle": False}
    else:
        red = {"min_bytes": STEP_K * pkt, "max_bytes": STEP_K * pkt, "max_p": 1.0, "ecn": True}
    other_hops = 2 * pkt / (10 * GBPS)  # the two 10 Gbit/s access links' serialization
    rtt = 6 * B_DELAY_US * 1e-6 + other_hops
    flow = {"bytes": B_MEGABYTES * 1e6, "start_s": 0.0, "base_rtt_s": rtt, "one_way_s": rtt / 2}
    flow["access_bytes_per_s"] = 10 * GBPS
    return {
        "link_bytes_per_s": c,
        "queue_bytes": B_LIMIT * pkt,
        "red": red,
        "cc": cc,
        "ecn": True,
        "mss_bytes": float(MSS),
        "wire_bytes": pkt,
        "cross_bytes_per_s": share * c,
        "horizon_s": 60.0,
        "flows": [dict(flow) for _ in range(B_FLOWS)],
    } | ({"delayed_ack": dict(SIM_DELAYED_ACK)} if SIM_DELAYED_ACK else {})


def sim_link(cc: str, queue: str, share: float, seed: int) -> dict[str, Any]:
    config = link_config(cc, queue, share) | {"seed": seed}
    if share > 0:
        config["cross_jitter_packets"] = UDP_JITTER
    t0 = time.perf_counter()
    r = json.loads(core._module().run_link(json.dumps(config)))
    wall = time.perf_counter() - t0
    done = all(f == f for f in r["fct_s"])
    return {
        "mean_s": statistics.mean(r["fct_s"]) if done else math.nan,
        "p99_s": p99(r["fct_s"]) if done else math.nan,
        "timeouts": sum(r["timeouts"]),
        "wall_s": wall,
    }


def ns3_link(binary: Path, cc: str, queue: str, share: float) -> dict[str, Any]:
    args = [str(binary), f"--flows={B_FLOWS}", f"--megabytes={B_MEGABYTES}", "--rateGbps=1", "--stopS=60"]
    args += [f"--udpShare={share}", f"--cc={CCS[cc]}", f"--limit={B_LIMIT}", f"--delayUs={B_DELAY_US}"]
    args += [f"--delAckTimeoutMs={DELACK_MS}", f"--dctcpFloor={DCTCP_FLOOR}"]
    args += DCTCP_ACK_NOW if cc == "dctcp" else []
    args += hosts_for(NS3_HOSTS, cc)
    if queue == "red":
        # RED like Linux's sch_red: no wait between marks (ns-3's RedQueueDisc waits by default)
        args += ["--queue=red"] + [f"--{k}={v}" for k, v in RED.items()] + ["--wait=false"]
    else:
        args += ["--queue=step", f"--minTh={STEP_K}"]
    if share > 0 and UDP_JITTER > 0:
        return ns3_link_runs(args + [f"--udpJitter={UDP_JITTER:g}"])
    if share == 0 and ZERO_RUNS > 1:
        return ns3_link_runs(args + [f"--startJitterUs={INCAST_JITTER_US:g}"], ZERO_RUNS)
    if (kept := stored_ns3(args)) is not None:
        return kept
    out = run_ns3(args)
    return {
        "fct_s": out["fct_s"],
        "timeouts": sum(out["rtos"]),
        "wall_s": out["wall_s"],
        "args": args[1:],
        "cached": out["cached"],
    }


def ns3_link_runs(args: list[str], runs: int | None = None, program: str = "bottleneck") -> dict[str, Any]:
    """ns-3 with ``args`` for runs 1..``runs`` (UDP_RUNS): the mean over the runs of each one's mean,
    p99 and timeouts, its wall time summed; its arguments as a row's are ``args`` and ``--run=1..N``.
    ``program``: whose output it is (bottleneck's ``fct_s``, two_tier's ``flows``)."""
    runs = UDP_RUNS if runs is None else runs
    tagged = args + [f"--run=1..{runs}"]
    if (kept := stored_ns3(tagged)) is not None and kept["ns3_run_means_s"] is not None:
        return kept
    outs = [run_ns3(args + [f"--run={r}"]) for r in range(1, runs + 1)]
    if program == "two_tier":
        outs = [o | {"fct_s": [f[2] for f in o["flows"]]} for o in outs]
    done = all(f >= 0 for o in outs for f in o["fct_s"])
    return {
        "cached": "runs",
        "ns3_mean_s": statistics.mean(statistics.mean(o["fct_s"]) for o in outs) if done else math.nan,
        "ns3_p99_s": statistics.mean(p99(o["fct_s"]) for o in outs) if done else math.nan,
        "ns3_timeouts": statistics.mean(sum(o["rtos"]) for o in outs),
        "ns3_wall_s": sum(o["wall_s"] for o in outs),
        "ns3_end_s": statistics.mean(max(o["fct_s"]) for o in outs) if done else math.nan,
        "ns3_run_means_s": [statistics.mean(o["fct_s"]) for o in outs] if done else None,
        "ns3_run_p99s_s": [p99(o["fct_s"]) for o in outs] if done else None,
        "args": tagged[1:],
    }


def err(sim: float, ns: float) -> float:
    return (sim - ns) / ns if ns == ns and ns > 0 else float("nan")


def pct(x: float) -> str:
    return "–" if x != x else f"{x * 100:+.1f} %"


def sign(x: float) -> str:
    return "–" if x != x else ("+" if x > 0 else "-" if x < 0 else "0")


class Case(NamedTuple):
    """One row: its ns-3 run, the simulator's run for a seed, the max-min mode's (or None), and
    whether the row reports the shuffle's end."""

    case: str
    cc: str
    ns3: Callable[[], dict[str, Any]]
    sim: Callable[[int], dict[str, Any]]
    maxmin: Callable[[int], dict[str, Any]] | None = None
    ends: bool = False


def cases(only: str | None) -> Iterator[Case]:
    """The rows of ``--only`` (None: incast and bottleneck; "all": incast, all-to-all and
    bottleneck), in the table's order; each scenario's
    ns-3 program is compiled before its first row."""
    if only in (None, "incast", "all"):
        two_tier = compile_ns3(TWO_TIER, "two_tier")
        for n in SENDERS:
            for cc in ("cubic", "reno", "dctcp"):
                yield Case(
                    f"incast {n}",
                    cc,
                    partial(ns3_incast, two_tier, cc, n),
                    partial(sim_incast, cc, n, "packet"),
                    partial(sim_incast, cc, n, "maxmin"),
                )
    if only in ("alltoall", "all"):
        two_tier = compile_ns3(TWO_TIER, "two_tier")
        for up in A2A_UPLINKS_GBPS:
            for cc in ("cubic", "reno", "dctcp"):
                yield Case(
                    f"all-to-all {4 / up:g}:1",
                    cc,
                    partial(ns3_alltoall, two_tier, cc, up),
                    partial(sim_alltoall, cc, up),
                    ends=True,
                )
    if only in (None, "bottleneck", "all"):
        bottleneck = compile_ns3()
        for queue in ("red", "step"):
            for share in UDP_SHARES:
                for cc in ("cubic", "reno", "dctcp"):
                    yield Case(
                        f"{queue} UDP {share * 100:g} %",
                        cc,
                        partial(ns3_link, bottleneck, cc, queue, share),
                        partial(sim_link, cc, queue, share),
                    )


def cubic_dctcp_pairs(rows: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Each scenario that has both a Cubic and a DCTCP row, in the table's order: (case, the two rows)."""
    for case in dict.fromkeys(r["case"] for r in rows):
        by = {r["cc"]: r for r in rows if r["case"] == case}
        if "cubic" in by and "dctcp" in by:
            yield case, by["cubic"], by["dctcp"]


def ci_text(ci: list[float] | None) -> str:
    return "–" if ci is None else f"[{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}] %"


def interval_lines(rows: list[dict[str, Any]], seeds: int) -> list[str]:
    """Each row's error with its 95 % interval (``ratio_interval``) and what it decides against the
    10 % goal (``verdict``), and the counts of each verdict."""
    lines = [
        "",
        f"Each row's error with a 95 % confidence interval over ns-3's runs and the simulator's {seeds} "
        "seeds (the ratio of means by Welch's test inverted over the ratio, Fieller's method, "
        "Welch–Satterthwaite degrees of freedom; a row with one ns-3 run takes ns-3's figure as "
        "exact: the seeds' t interval of their mean over it). Within / out: the whole interval "
        "inside / outside ±10 %; undecided: it straddles ±10 %.",
        "",
        "| case | CC | ns-3 runs | mean error | 95 % CI | verdict | p99 error | 95 % CI | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    counts: dict[str, dict[str, int]] = {"mean": {}, "p99": {}}
    for r in rows:
        runs = len(r["ns3_run_means_s"] or [])
        v_mean, v_p99 = verdict(r["mean_error_ci"]), verdict(r["p99_error_ci"])
        counts["mean"][v_mean] = counts["mean"].get(v_mean, 0) + 1
        counts["p99"][v_p99] = counts["p99"].get(v_p99, 0) + 1
        lines.append(
            f"| {r['case']} | {r['cc']} | {runs} | {pct(r['mean_error'])} | {ci_text(r['mean_error_ci'])} | "
            f"{v_mean} | {pct(r['p99_error'])} | {ci_text(r['p99_error_ci'])} | {v_p99} |"
        )
    for key in ("mean", "p99"):
        c = counts[key]
        lines += [
            "",
            f"{key} FCT against the 10 % goal at 95 %: {c.get('within', 0)} within, {c.get('out', 0)} out, "
            f"{c.get('undecided', 0)} undecided, {c.get('–', 0)} without an interval (fewer than "
            f"{stats.MIN_N} seeds or runs, or a flow not done) (of {sum(c.values())} rows).",
        ]
    return lines


def sign_verdict(d_ns: float, d_sim: float, ci_ns: list[float] | None, ci_sim: list[float] | None, ns_runs: int) -> str:
    """Whether the simulator's Cubic − DCTCP difference ``d_sim`` has ns-3's sign ``d_ns``, each
    with its 95 % interval: "right" or "**wrong**" where both intervals exclude 0, else which side
    does not decide it. One ns-3 run is a deterministic row, taken as exact; two runs or one seed
    decide nothing."""

    def decided(ci: list[float] | None) -> bool:
        return ci is not None and (ci[0] > 0 or ci[1] < 0)

    ns_exact = ci_ns is None and ns_runs == 1
    if ci_sim is None:
        return "sim: too few seeds"
    if ci_ns is None and not ns_exact:
        return "ns-3: too few runs"
    if not ns_exact and not decided(ci_ns):
        return "ns-3 undecided"
    if not decided(ci_sim):
        return "sim undecided"
    return "right" if sign(d_ns) == sign(d_sim) else "**wrong**"


def sign_interval_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per scenario, Cubic's mean FCT minus DCTCP's on each side with its 95 % Welch interval, and
    whether the signs agree where ns-3's interval decides a sign."""
    lines = [
        "",
        "The same difference with 95 % intervals (Welch's t over ns-3's runs and over the seeds; "
        "a side with one run has none): a sign is decided where its interval excludes 0.",
        "",
        "| case | ns-3 Cubic − DCTCP (s) [95 % CI] | sim Cubic − DCTCP (s) [95 % CI] | sign |",
        "|---|---|---|---|",
    ]
    tally: dict[str, int] = {}
    for case, cubic, dctcp in cubic_dctcp_pairs(rows):
        d_ns = cubic["ns3_mean_s"] - dctcp["ns3_mean_s"]
        d_sim = cubic["sim_mean_s"] - dctcp["sim_mean_s"]
        ci_ns = difference_interval(cubic["ns3_run_means_s"], dctcp["ns3_run_means_s"])
        ci_sim = difference_interval(cubic["sim_seed_means_s"], dctcp["sim_seed_means_s"])
        if d_ns != d_ns or d_sim != d_sim:
            continue
        what = sign_verdict(d_ns, d_sim, ci_ns, ci_sim, len(cubic["ns3_run_means_s"] or []))
        tally[what] = tally.get(what, 0) + 1

        def fmt(d: float, ci: list[float] | None) -> str:
            return f"{d:+.4f}" + ("" if ci is None else f" [{ci[0]:+.4f}, {ci[1]:+.4f}]")

        lines.append(f"| {case} | {fmt(d_ns, ci_ns)} | {fmt(d_sim, ci_sim)} | {what} |")
    lines += ["", "Signs at 95 %: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())) + "."]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/sim-vs-ns3-packet.md"))
    ap.add_argument("--only", choices=("incast", "bottleneck", "alltoall", "all"), default=None)
    ap.add_argument("--seeds", type=int, default=5, help="simulator seeds 1..N per row")
    ap.add_argument("--fresh-ns3", action="store_true", help="run ns-3 again where an identical run is cached")
    ap.add_argument(
        "--udp-jitter",
        type=float,
        default=0.0,
        help="the bottleneck rows' UDP send-time jitter on both sides, in packet times of the link (0..1; "
        "0: exactly periodic)",
    )
    ap.add_argument("--ns3-runs", type=int, default=3, help="with --udp-jitter: ns-3 runs 1..N per UDP row")
    ap.add_argument(
        "--dctcp-ack-now",
        action="store_true",
        help="ns-3's DCTCP receivers ACK a segment that changes their CE state at once, as Linux's",
    )
    ap.add_argument(
        "--ns3-incast-runs",
        type=int,
        default=1,
        help="incast rows: ns-3 runs 1..N with the flows' starts jittered by a packet time, their mean",
    )
    ap.add_argument(
        "--ns3-a2a-runs",
        type=int,
        default=1,
        help="all-to-all rows: ns-3 runs 1..N with the flows' starts jittered by a packet time, their mean",
    )
    ap.add_argument(
        "--ns3-zero-runs",
        type=int,
        default=1,
        help="bottleneck rows without UDP: ns-3 runs 1..N with the flows' starts jittered by a packet time, "
        "their mean (1: one deterministic run)",
    )
    ap.add_argument(
        "--ns3-rows",
        type=Path,
        nargs="*",
        default=[],
        help="JSON rows of an earlier run: take ns-3's figures from the rows with the same ns-3 arguments",
    )
    add_host_options(ap)
    a = ap.parse_args()
    NS3_HOSTS[:], delayed = host_settings(a)
    TWO_TIER_SWITCH[:] = two_tier_switch(a)
    SIM_DELAYED_ACK.update(delayed)
    SIM_TCP_EXTRA.update(sim_tcp_extra(a))
    global FRESH_NS3, UDP_JITTER, UDP_RUNS, INCAST_RUNS, A2A_RUNS, ZERO_RUNS
    FRESH_NS3 = a.fresh_ns3
    if not 0 <= a.udp_jitter <= 1 or min(a.ns3_runs, a.ns3_incast_runs, a.ns3_a2a_runs, a.ns3_zero_runs) < 1:
        ap.error("--udp-jitter must be in [0, 1] and --ns3-runs and every --ns3-*-runs at least 1")
    UDP_JITTER, UDP_RUNS, INCAST_RUNS, A2A_RUNS = a.udp_jitter, a.ns3_runs, a.ns3_incast_runs, a.ns3_a2a_runs
    ZERO_RUNS = a.ns3_zero_runs
    DCTCP_ACK_NOW[:] = ["--dctcpAckNow=true"] if a.dctcp_ack_now else []
    load_stored_ns3(a.ns3_rows)
    seeds = range(1, a.seeds + 1)
    rows: list[dict[str, Any]] = []
    for c in cases(a.only):
        ns = c.ns3()
        runs = [c.sim(s) for s in seeds]
        pk = over_seeds(runs)
        mm = over_seeds([c.maxmin(s) for s in seeds]) if c.maxmin else None
        row: dict[str, Any] = {"case": c.case, "cc": c.cc}
        if ns["cached"] in ("stored", "runs"):
            done = ns["ns3_mean_s"] is not None and ns["ns3_mean_s"] == ns["ns3_mean_s"]
            row |= {"ns3_mean_s": ns["ns3_mean_s"] if done else math.nan}
            row |= {"ns3_p99_s": ns["ns3_p99_s"] if done else math.nan, "ns3_timeouts": ns["ns3_timeouts"]}
            ns |= {"wall_s": ns["ns3_wall_s"], "fct_s": [ns["ns3_end_s"] if done else -1.0]}
            row |= {"ns3_run_means_s": ns["ns3_run_means_s"] or ([ns["ns3_mean_s"]] if done else None)}
            row |= {"ns3_run_p99s_s": ns["ns3_run_p99s_s"] or ([ns["ns3_p99_s"]] if done else None)}
        else:
            done = all(f >= 0 for f in ns["fct_s"])
            row |= {"ns3_mean_s": statistics.mean(ns["fct_s"]) if done else math.nan}
            row |= {"ns3_p99_s": p99(ns["fct_s"]) if done else math.nan, "ns3_timeouts": ns.get("timeouts")}
            row |= {"ns3_run_means_s": [row["ns3_mean_s"]] if done else None}
            row |= {"ns3_run_p99s_s": [row["ns3_p99_s"]] if done else None}
        row |= {"sim_mean_s": pk["mean_s"], "sim_p99_s": pk["p99_s"], "sim_timeouts": pk["timeouts"]}
        row |= {"sim_mean_range_s": pk["mean_s_range"], "sim_p99_range_s": pk["p99_s_range"]}
        row |= {"sim_seed_means_s": pk["mean_s_values"], "sim_seed_p99s_s": pk["p99_s_values"]}
        if c.ends:
            row |= {"ns3_end_s": max(ns["fct_s"]) if done else math.nan}
            row |= {"sim_end_s": statistics.mean(r["end_s"] for r in runs)}
        row |= {"maxmin_mean_s": mm and mm["mean_s"], "maxmin_p99_s": mm and mm["p99_s"]}
        row |= {"ns3_wall_s": ns["wall_s"], "sim_wall_s": pk["wall_s"], "maxmin_wall_s": mm and mm["wall_s"]}
        row |= {"ns3_args": ns["args"], "ns3_cached": ns["cached"]}
        if ns.get("ss_exit_segments") is not None:
            row |= {"ns3_ss_exit_segments": ns["ss_exit_segments"]}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "ns3_args"}), flush=True)
    for r in rows:
        r["mean_error"] = err(r["sim_mean_s"], r["ns3_mean_s"])
        r["p99_error"] = err(r["sim_p99_s"], r["ns3_p99_s"])
        r["mean_error_ci"] = ratio_interval(r["sim_seed_means_s"], r["ns3_run_means_s"])
        r["p99_error_ci"] = ratio_interval(r["sim_seed_p99s_s"], r["ns3_run_p99s_s"])
    lines = [
        "| case | CC | ns-3 mean FCT (s) | sim mean FCT (s) [seeds' range] | error | ns-3 p99 FCT (s) | "
        "sim p99 FCT (s) [seeds' range] | error | timeouts ns-3 / sim (mean over seeds) | max-min mean / p99 (s) | "
        "ns-3 wall (s) | sim wall (ms, one seed) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def s3(x: float | None) -> str:
        return "–" if x is None or x != x else f"{x:.4f}"

    def rng(x: list[float] | None) -> str:
        return "" if x is None else f" [{x[0]:.3f}–{x[1]:.3f}]"

    for r in rows:
        mm = "–" if r["maxmin_mean_s"] is None else f"{r['maxmin_mean_s']:.4f} / {r['maxmin_p99_s']:.4f}"
        nt = r["ns3_timeouts"]  # one run's count, or the mean over --ns3-runs
        nt = "–" if nt is None else nt if isinstance(nt, int) else f"{nt:.1f}"
        to = f"{nt} / {r['sim_timeouts']:.1f}"
        sim_mean = s3(r["sim_mean_s"]) + rng(r["sim_mean_range_s"])
        sim_p99 = s3(r["sim_p99_s"]) + rng(r["sim_p99_range_s"])
        lines.append(
            f"| {r['case']} | {r['cc']} | {s3(r['ns3_mean_s'])} | {sim_mean} | {pct(r['mean_error'])} | "
            f"{s3(r['ns3_p99_s'])} | {sim_p99} | {pct(r['p99_error'])} | {to} | {mm} | "
            f"{r['ns3_wall_s']:.2f} | {r['sim_wall_s'] * 1e3:.1f} |"
        )
    for key, label in (("mean_error", "mean FCT"), ("p99_error", "p99 FCT")):
        errs = [abs(r[key]) for r in rows if r[key] == r[key]]
        if errs:
            within = sum(e <= 0.10 for e in errs)
            lines += [
                "",
                f"{label}: {len(errs)} rows compared, {within} within 10 %; |error| median "
                f"{statistics.median(errs) * 100:.1f} %, max {max(errs) * 100:.1f} %.",
            ]
    lines += interval_lines(rows, len(seeds))
    ends = [r for r in rows if "ns3_end_s" in r]
    if ends:
        lines += ["", "| case | CC | ns-3 shuffle end (s) | sim shuffle end (s) | error |", "|---|---|---|---|---|"]
        for r in ends:
            e = err(r["sim_end_s"], r["ns3_end_s"])
            lines.append(f"| {r['case']} | {r['cc']} | {s3(r['ns3_end_s'])} | {s3(r['sim_end_s'])} | {pct(e)} |")
    lines += [
        "",
        "| case | ns-3 Cubic − DCTCP mean (s) | sim Cubic − DCTCP mean (s) | sign right |",
        "|---|---|---|---|",
    ]
    right = total = 0
    for case, cubic, dctcp in cubic_dctcp_pairs(rows):
        d_ns = cubic["ns3_mean_s"] - dctcp["ns3_mean_s"]
        d_sim = cubic["sim_mean_s"] - dctcp["sim_mean_s"]
        ok = "–" if d_ns != d_ns or d_sim != d_sim else ("yes" if sign(d_ns) == sign(d_sim) else "**no**")
        if ok != "–":
            total += 1
            right += ok == "yes"
        lines.append(f"| {case} | {s3(d_ns)} | {s3(d_sim)} | {ok} |")
    lines += ["", f"Cubic-vs-DCTCP sign: right in {right} of {total} comparable cases."]
    lines += sign_interval_lines(rows)
    a.out.write_text("\n".join(lines) + "\n")
    a.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
