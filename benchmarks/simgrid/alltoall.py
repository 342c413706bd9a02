"""The 1,000-host all-to-all shuffle of ``experiments/sim-alltoall-1000.toml`` in SimGrid (run by
``benchmarks/sim_vs_simgrid.py`` with the Python of an environment where pip ``simgrid`` is
installed; it imports nothing from shufflelab).

The same workload, drawn the same way: map task ``m`` on host ``floor(m * H / maps)`` and reduce
task ``r`` on host ``floor(r * H / reducers)``; each reducer fetches one block from every map task
in a seeded random order, lognormal sizes (mean and sigma as given), blocks on its own host read
off the network, at most ``max_reqs`` fetches and ``max_bytes`` bytes in flight (one fetch always
may go). Every reducer starts at time 0 (one core per host, at most one reducer per host here).
The platform: a SimGrid cluster (inside a zone: a bare one crashes SimGrid 4.1) with the
FAT_TREE topology ``2;HOSTS_PER_LEAF,LEAVES;1,SPINES;1,1`` (every host one link to its leaf,
every leaf one link to each spine), every link at the same rate and latency. The random draws
differ from shufflelab's (Python's generator, not ChaCha8): the two simulate the same
distribution, not the same blocks.

Two ways of writing it (``"model"`` in the parameters):

- ``controller`` (the default, the cheapest for SimGrid): one actor starts every fetch with
  ``Comm.sendto_async`` (a transfer between hosts, no actor on either end) and waits for any of
  them to end;
- ``actors`` (how a SimGrid user writes a shuffle with its actor API): one actor per reducer on its
  host, one sender actor per fetch on the source host putting the block into the reducer's
  mailbox, which the reducer owns as permanent receiver (so transfers start when they are put,
  not when the reducer next calls ``get``).

    python alltoall.py PARAMS.json   -> one JSON line on stdout
"""

from __future__ import annotations

import json
import math
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

import simgrid as sg


def platform_xml(p: dict) -> str:
    hosts = p["leaves"] * p["hosts_per_leaf"]
    return f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
 <zone id="world" routing="Full">
  <cluster id="fabric" prefix="h" suffix="" radical="0-{hosts - 1}" speed="1Gf"
           bw="{p["link_gbps"]}Gbps" lat="{p["latency_us"]}us" sharing_policy="SPLITDUPLEX" topology="FAT_TREE"
           topo_parameters="2;{p["hosts_per_leaf"]},{p["leaves"]};1,{p["spines"]};1,1"/>
 </zone>
</platform>
"""


def fetch_lists(p: dict) -> list[list[tuple[int, int]]]:
    """Per reducer, its remote fetches in request order: (source host, bytes)."""
    hosts = p["leaves"] * p["hosts_per_leaf"]
    maps, reducers = p["maps"], p["reducers"]
    mu = math.log(p["mean_bytes"]) - p["sigma"] ** 2 / 2
    out = []
    for r in range(reducers):
        rng = random.Random(p["seed"] * 1_000_003 + r)
        here = r * hosts // reducers
        blocks = [(m * hosts // maps, max(1, round(rng.lognormvariate(mu, p["sigma"])))) for m in range(maps)]
        rng.shuffle(blocks)
        out.append([(src, size) for src, size in blocks if src != here])
    return out


def main() -> None:
    p = json.loads(Path(sys.argv[1]).read_text())
    t_build = time.perf_counter()
    lists = fetch_lists(p)
    hosts_n = p["leaves"] * p["hosts_per_leaf"]
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(platform_xml(p))
        xml = f.name
    e = sg.Engine(["alltoall", "--log=root.thres:critical", *(f"--cfg={c}" for c in p["cfg"])])
    e.load_platform(xml)
    Path(xml).unlink()
    hosts = [sg.Host.by_name(f"h{i}") for i in range(hosts_n)]
    reducers = p["reducers"]
    done_at = [0.0] * reducers
    fetches = [0]

    def controller() -> None:
        pending = sg.ActivitySet()
        owner: dict[int, tuple[int, int]] = {}  # id(comm) -> (reducer, bytes)
        comms: dict[int, sg.Comm] = {}
        state = [[0, 0, 0] for _ in range(reducers)]  # next index, requests, bytes in flight

        def issue(r: int) -> None:
            todo, st = lists[r], state[r]
            dst = hosts[r * hosts_n // reducers]
            while st[0] < len(todo):
                src, size = todo[st[0]]
                if st[1] > 0 and (st[1] >= p["max_reqs"] or st[2] + size > p["max_bytes"]):
                    return
                st[0] += 1
                st[1] += 1
                st[2] += size
                c = sg.Comm.sendto_async(hosts[src], dst, size)
                owner[id(c)] = (r, size)
                comms[id(c)] = c  # keeps the Python object (and its id) alive while in flight
                pending.push(c)

        for r in range(reducers):
            issue(r)
        while not pending.empty():
            c = pending.wait_any()
            r, size = owner.pop(id(c))
            del comms[id(c)]
            fetches[0] += 1
            state[r][1] -= 1
            state[r][2] -= size
            issue(r)
            if state[r][1] == 0 and state[r][0] == len(lists[r]):
                done_at[r] = sg.Engine.clock

    def sender(mailbox: str, size: int) -> None:
        sg.Mailbox.by_name(mailbox).put(size, size)

    def reducer(r: int) -> None:
        todo = lists[r]
        name = f"r{r}"
        mb = sg.Mailbox.by_name(name)
        mb.set_receiver(sg.Actor.self())
        nxt = reqs = in_flight = 0
        while nxt < len(todo) or reqs:
            while nxt < len(todo):
                src, size = todo[nxt]
                if reqs > 0 and (reqs >= p["max_reqs"] or in_flight + size > p["max_bytes"]):
                    break
                hosts[src].add_actor(f"s{r}.{nxt}", sender, name, size)
                nxt += 1
                reqs += 1
                in_flight += size
            size = mb.get()
            fetches[0] += 1
            reqs -= 1
            in_flight -= size
        done_at[r] = sg.Engine.clock

    if p.get("model", "controller") == "actors":
        for r in range(reducers):
            hosts[r * hosts_n // reducers].add_actor(f"reducer{r}", reducer, r)
    else:
        hosts[0].add_actor("controller", controller)
    w0, c0 = time.perf_counter(), time.process_time()
    e.run()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(
        json.dumps(
            {
                "simulator": f"SimGrid {sg.simgrid_version if hasattr(sg, 'simgrid_version') else ''}".strip(),
                "model": p.get("model", "controller"),
                "hosts": hosts_n,
                "fetches": fetches[0],
                "wall_s": wall,
                "cpu_s": cpu,
                "setup_s": w0 - t_build,
                "completion_s": max(done_at),
                "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


if __name__ == "__main__":
    main()
