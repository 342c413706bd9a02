"""Shipped experiments as they are (one repetition instead of three, the JVMs started as the tests'
other Spark runs start them: ``spark.fast_jvm``) on six stand-in hosts: their
six spec hosts on five machines (the Spark master sharing one with a worker) and their shared
bottleneck on a router host.

- experiments/quickstart.toml, its scenario with cross traffic (UDP at 75 % of the link from tgen to
  tsink through the router; the scenario without it is the same run minus the iperf3 pair, covered
  by the other hosts tests), its link self-test (its job time against the local backend's is measured
  by benchmarks/hosts_vs_local.py, not asserted here);
- experiments/cc-under-udp-switch.toml, one cell, on four of them (tgen and tsink, which run
  nothing, with the master and w1): the userspace switch on the router host with its delay, RED/ECN
  and DCTCP, making the UDP cross traffic itself -- also the test of the switch over SSH (its
  configuration, counters, samples and marks in the record, the delay in the self-test's RTT, the
  offloads it turns off back on), which had a run of its own on a four-host lab;
- experiments/faults.toml, its link-down case: a worker's data interface down for 5 s mid-job and
  its routes back.

Every host as before afterwards. The six hosts are one lab for the session (``lab6``), shared with
test_hosts_switch.py."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import duckdb
import pytest

from shufflelab.switch import binary_path

from .conftest import Lab, sh
from .test_hosts_run import REPO, cli, host_state, job_times

pytestmark = [pytest.mark.root, pytest.mark.spark]

# the shipped specs' six hosts on five machines (host6 the router)
MACHINES = {"master": "host1", "w1": "host1", "w2": "host2", "w3": "host3", "tgen": "host4", "tsink": "host5"}
ROUTER = 5  # host6's index in the lab
UDP = ["--select", "udp=75"]  # the scenario with cross traffic through the router host


def shipped(lab: Lab, tmp_path: Path, name: str, share: str = "w1", idle_traffic: bool = False) -> tuple[Path, Path]:
    """The inventory (the master on ``share``'s machine; ``idle_traffic``: tgen and tsink there too)
    and experiments/``name`` with one repetition and the tests' quicker JVMs (``spark.fast_jvm``)."""
    inv = lab.inventory(tmp_path / "inv.toml")
    text = inv.read_text()
    machines = dict(MACHINES)
    if share == "w2":  # w2 with the master, w1 on a machine of its own
        machines["w1"], machines["w2"] = "host2", "host1"
    if idle_traffic:  # they run nothing: the switch makes the UDP (four machines with the router)
        machines["tgen"] = machines["tsink"] = "host1"
    text = text[: text.index("[map]")] + "[map]\n" + "".join(f'{h} = "{m}"\n' for h, m in machines.items())
    inv.write_text(f'router = "{lab.hosts[ROUTER].name}"\n' + text)
    spec = tmp_path / name
    text = (REPO / "experiments" / name).read_text()
    assert "[spark]\n" in text, name
    # the JVMs with C1 only and the serial collector (spark.fast_jvm): half the CPU of a run
    spec.write_text(
        text.replace("repetitions = 3", "repetitions = 1").replace("[spark]\n", "[spark]\nfast_jvm = true\n")
    )
    return inv, spec


def routing(lab: Lab) -> list[object]:
    """Every host's routes and forwarding settings (the router host changes both while it runs)."""
    return [
        (
            json.loads(sh("ip", "-j", "route", "show", ns=h.ns)),
            sh("sysctl", "-n", "net.ipv4.ip_forward", "net.ipv4.conf.all.send_redirects", ns=h.ns).split(),
        )
        for h in lab.hosts
    ]


def by_udp(db: Path) -> dict[bool, list[float]]:
    """Job times of the runs with and without UDP cross traffic."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT job_time_s, run_id IN (SELECT run_id FROM cross_traffic WHERE kind = 'udp' AND bytes > 0) "
            "FROM runs WHERE status = 'ok'"
        ).fetchall()
    out: dict[bool, list[float]] = {False: [], True: []}
    for t, udp in rows:
        out[bool(udp)].append(float(t))
    return out


def test_the_quickstart_unchanged_runs_over_ssh(lab6: Lab, tmp_path: Path) -> None:
    inv, spec = shipped(lab6, tmp_path, "quickstart.toml")
    before, routes = host_state(lab6), routing(lab6)

    r = cli("run", str(spec), "--hosts", str(inv), "--results", str(tmp_path / "hosts"), "--no-report", *UDP)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert host_state(lab6) == before and routing(lab6) == routes  # shaping, sysctls, routes, forwarding: back
    db = tmp_path / "hosts" / "quickstart.duckdb"
    job_times(db)
    remote = by_udp(db)
    with duckdb.connect(str(db), read_only=True) as con:
        udp = con.execute("SELECT bytes, bits_per_second FROM cross_traffic WHERE kind = 'udp'").fetchall()
        backlog = con.execute("SELECT dev, count(*), max(backlog_bytes) FROM queue_samples GROUP BY dev").fetchall()
        hosts = {row[0] for row in con.execute("SELECT DISTINCT host FROM tasks").fetchall()}
        machines = json.loads(con.execute("SELECT environment_json FROM runs").fetchone()[0])["machines"]
        through = con.execute(
            "SELECT r.bottleneck_tx_bytes, (SELECT sum(remote_bytes) FROM tasks t WHERE t.run_id = r.run_id) "
            "FROM runs r"
        ).fetchall()
    print(f"over SSH: {remote}; UDP {udp}; router queue {backlog}")
    assert len(remote[False]) == 0 and len(remote[True]) == 1, remote
    # the shuffle's remote fetches left the router host through its shaped queue
    assert through and all(sent is not None and rb and sent >= rb for sent, rb in through), through
    # what the driver wrote on the master's host came back: event logs (the tasks table, the executors
    # on the stand-ins' data addresses) and the listener's output
    assert hosts and all(str(h).startswith("10.214.") for h in hosts), hosts
    assert machines["master"]["machine"] == machines["w1"]["machine"] == "host1", machines  # one machine
    runs = sorted((tmp_path / "hosts" / "quickstart" / "runs").iterdir())
    assert runs and all(any((d / "eventlog").iterdir()) for d in runs)
    assert all(any(p.stat().st_size for p in (d / "listener").glob("*.jsonl")) for d in runs)
    # the router host's queue sampled, named as the emulated router's downlink
    assert len(backlog) == 1 and backlog[0][1] > 0 and backlog[0][2] > 0, backlog

    r = cli("clean", "--hosts", str(inv))
    assert r.returncode == 0 and "restored 0 leases" in r.stdout, r.stdout + r.stderr


def offloads(lab: Lab) -> list[str]:
    """Every host's data interface's TSO/GSO/GRO (the switch turns them off while it runs)."""
    wanted = ("tcp-segmentation-offload:", "generic-segmentation-offload:", "generic-receive-offload:")
    return [
        " ".join(line.strip() for line in sh("ethtool", "-k", "data0", ns=h.ns).splitlines() if line.startswith(wanted))
        for h in lab.hosts
    ]


def data_address(lab: Lab, i: int) -> str:
    return str(
        json.loads(sh("ip", "-j", "-4", "addr", "show", "dev", "data0", ns=lab.hosts[i].ns))[0]["addr_info"][0]["local"]
    )


SWITCH_CELL = ["--select", "cc=dctcp", "--select", "udp=50"]  # DCTCP, the switch's UDP at half the link


@pytest.mark.skipif(binary_path() is None, reason="shufflelab-switch is not built (make setup)")
def test_the_switch_makes_the_cross_traffic_on_the_router_host(lab6: Lab, tmp_path: Path) -> None:
    """cc-under-udp-switch.toml on four machines (master, w1, tgen and tsink on one; w2; w3; the
    router), DCTCP with the switch's UDP at half the link: the source is the router host's switch (no
    iperf3 anywhere), its status fetched into the record; the switch's delay, RED with ECN marking and
    DCTCP (the switch's DCTCP over the hosts' cubic) in its configuration, its counters and samples
    in the record, the delay in the link self-test's RTT, every host as before afterwards (offloads too)."""
    inv, spec = shipped(lab6, tmp_path, "cc-under-udp-switch.toml", idle_traffic=True)
    link = tomllib.loads(spec.read_text())["topology"]["bottleneck"]
    delay_ms = float(link["delay_ms"])
    before, routes, offs = host_state(lab6), routing(lab6), offloads(lab6)
    r = cli("run", str(spec), "--hosts", str(inv), "--results", str(tmp_path / "res"), "--no-report", *SWITCH_CELL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # every host as before: qdiscs, TCP sysctls, no tagged process, routes and forwarding, offloads
    assert host_state(lab6) == before and routing(lab6) == routes and offloads(lab6) == offs
    with duckdb.connect(str(tmp_path / "res" / "cc-under-udp-switch.duckdb"), read_only=True) as con:
        run = con.execute(
            "SELECT run_id, status, cause, job_time_s, bottleneck_tx_bytes, bottleneck_drops, bottleneck_marks, "
            "bottleneck_max_backlog_bytes FROM runs"
        ).fetchall()
        udp = con.execute("SELECT generator, bytes, lost_packets, error FROM cross_traffic").fetchall()
        remote = con.execute("SELECT sum(remote_bytes) FROM tasks").fetchone()
        samples = con.execute(
            "SELECT dev, count(*), max(backlog_bytes), max(marks) FROM queue_samples GROUP BY dev"
        ).fetchall()
    assert len(run) == 1, run
    run_id, status, cause, job_s, tx, drops, marks, backlog = run[0]
    run_dir = tmp_path / "res" / "cc-under-udp-switch" / "runs" / run_id
    checks = json.loads((run_dir / "selftest.json").read_text())
    config = json.loads((run_dir / "switch.json").read_text())
    log = (run_dir / "switch.log").read_text()
    print(f"run {run[0]}; cross traffic {udp}; shuffle remote {remote}; samples {samples}; self-test {checks}")
    assert status == "ok", cause
    assert len(udp) == 1 and udp[0][0] == "switch" and udp[0][1] > 0 and udp[0][3] is None, udp
    assert remote is not None and remote[0]
    # the switch ran on the router host's data interface, one-armed, with the spec's link and DCTCP hosts
    assert [p["ifname"] for p in config["ports"]] == ["data0"], config["ports"]
    port = config["ports"][0]
    assert port["delay_us"] == delay_ms * 1000 and port["discipline"] == "red" and port["red"]["ecn"]
    assert {h["port"] for h in config["hosts"]} == {"data0"} and {h["mode"] for h in config["hosts"]} == {"dctcp"}
    assert {h["ip"] for h in config["hosts"]} == {data_address(lab6, i) for i in range(3)}  # host1-3 run Spark
    assert log.startswith("ready"), log[-2000:]
    # its counters are the record's bottleneck: every remote shuffle byte crossed it, DCTCP was marked
    assert tx is not None and tx >= remote[0], (tx, remote)
    assert marks is not None and marks > 0, marks
    # its samples are the run's queue samples, named as the emulated router's downlink
    assert len(samples) == 1 and samples[0][0] == "sw" and samples[0][1] > 0 and samples[0][2] > 0, samples
    # the delay is in the path: ping across it reads at least the two crossings of the delayed queue
    assert len(checks) == 1 and checks[0]["rtt_ms"] is not None, checks
    assert checks[0]["rtt_ms"] >= 2 * delay_ms * 0.95, checks
    r = cli("clean", "--hosts", str(inv), timeout=120)
    assert r.returncode == 0 and "restored 0 leases" in r.stdout, r.stdout + r.stderr


def test_a_link_down_fault_on_a_machine(lab6: Lab, tmp_path: Path) -> None:
    """faults.toml's link-down case: w1's data interface down for 5 s mid-job (the master shares
    w2's machine, not w1's); the job recovers and the machine's routes come back."""
    inv, spec = shipped(lab6, tmp_path, "faults.toml", share="w2")
    before, routes = host_state(lab6), routing(lab6)
    r = cli("run", str(spec), "--hosts", str(inv), "--results", str(tmp_path / "res"), "--no-report",
            "--select", "case=link-down")  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert host_state(lab6) == before and routing(lab6) == routes  # the link up, its routes back
    with duckdb.connect(str(tmp_path / "res" / "faults.duckdb"), read_only=True) as con:
        run = con.execute("SELECT status, cause, job_time_s FROM runs").fetchall()
        events = con.execute("SELECT kind, host, detail, error FROM faults").fetchall()
    print(f"run {run}; faults {events}")
    assert [row[0] for row in run] == ["ok"], run
    assert events == [("link-down", "w1", "w1: data0 down for 5 s", None)], events
