"""Fault specs (validation, field-named errors, hash neutrality) and Spark's recovery read from a
run's task and stage tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

import fakes
from shufflelab import netplan, topology
from shufflelab import spec as S
from shufflelab.emulate import faults
from shufflelab.emulate.faults import recovery
from shufflelab.routes import routes_to_restore


def _spec(faults: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {
        "experiment": {"name": "f"},
        "topology": {"kind": "shared", "bottleneck": {"rate_mbps": 20}},
        "hosts": {
            "m": {"roles": ["spark-master"]},
            "w1": {"roles": ["spark-worker"]},
            "w2": {"roles": ["spark-worker"]},
            "tgen": {"roles": ["traffic-source"]},
            "tsink": {"roles": ["traffic-sink"]},
        },
        "workload": {"name": "sort-aggregate", "params": {"rows": 10, "partitions": 2}},
    }
    if faults is not None:
        d["faults"] = faults
    return d


def test_faults_parse_and_leave_other_scenarios_ids_alone() -> None:
    plain = S.parse(_spec())
    assert S.spec_hash(plain) == S.spec_hash(S.parse(_spec([])))
    f = S.parse(
        _spec(
            [
                {"kind": "executor-kill", "at_s": 2, "host": "w2"},
                {"kind": "link-down", "at_s": 3, "host": "w1", "duration_s": 2},
                {"kind": "udp-burst", "at_s": 1, "duration_s": 2, "rate_mbps": 30},
            ]
        )
    )
    assert [x.kind for x in f.faults] == ["executor-kill", "link-down", "udp-burst"]
    assert S.spec_hash(f) != S.spec_hash(plain)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"kind": "executor-kill", "at_s": 1, "host": "m"}, "faults[0].host: 'm' runs no Spark executor"),
        ({"kind": "link-down", "at_s": 1, "host": "w1"}, "needs duration_s > 0"),
        ({"kind": "link-down", "at_s": 1, "host": "nope", "duration_s": 1}, "faults[0].host: no host named 'nope'"),
        ({"kind": "executor-kill", "at_s": -1, "host": "w1"}, "at_s"),
        ({"kind": "unplug", "at_s": 1}, "kind"),
    ],
)
def test_bad_faults_are_refused_by_name(fault: dict[str, Any], message: str) -> None:
    with pytest.raises(S.SpecError, match="faults"):
        S.parse(_spec([fault]))
    with pytest.raises(S.SpecError) as err:
        S.parse(_spec([fault]))
    assert message in str(err.value)


def test_a_burst_needs_a_sink() -> None:
    d = _spec([{"kind": "udp-burst", "at_s": 1, "duration_s": 1}])
    del d["hosts"]["tsink"]
    with pytest.raises(S.SpecError, match="traffic-sink"):
        S.parse(d)


def test_recovery_counts_failed_attempts_fetch_failures_and_stage_reattempts() -> None:
    tasks = pd.DataFrame(
        {
            "successful": [True, False, False, True, True],
            "end_reason": ["Success", "ExecutorLostFailure", "FetchFailed", "Success", "Success"],
        }
    )
    stages = pd.DataFrame({"stage_id": [0, 1, 1, 2], "stage_attempt": [0, 0, 1, 0]})
    r = recovery(tasks, stages)
    assert r["failed_tasks"] == 2 and r["fetch_failures"] == 1 and r["stage_reattempts"] == 1
    assert r["reasons"] == {"ExecutorLostFailure": 1, "FetchFailed": 1}
    assert recovery(pd.DataFrame(), None)["failed_tasks"] == 0


def test_faults_reach_their_hosts_only_through_the_backends_seams(tmp_path: Path) -> None:
    """A link down and an executor killed on a fabric of fakes: the link through the fabric (down,
    then up when the fault ends), the executors through the backend's runner at the worker's place
    (so the same on namespaces and on machines over SSH), only live ones killed."""
    spec = S.parse(
        _spec(
            [
                {"kind": "link-down", "at_s": 0, "host": "w1", "duration_s": 30},
                {"kind": "executor-kill", "at_s": 0, "host": "w2"},
            ]
        )
    )
    net = topology.build(spec)
    fabric = fakes.FakeFabric(fakes.Clock(), network=net)
    ran: list[tuple[str | None, list[str]]] = []

    def run(argv: Sequence[str], *, place: str | None = None, check: bool = True, timeout: float = 60) -> str:
        ran.append((place, list(argv)))
        return " 4711 Sl\n 4712 Z\n 4713 S\n" if argv[0] == "ps" else ""

    ready: list[Path] = []  # the cluster says when the session is up (its driver may run on another machine)
    cluster = SimpleNamespace(daemons={"w2": SimpleNamespace(pid=99)}, session_ready=lambda result: bool(ready))
    inj = faults.Injector(netplan.of(spec, net), fabric, cluster, tmp_path, run, fakes.Backend(tmp_path).launch)
    inj.tick()
    assert fabric.links == [] and ran == []  # fault times count from the session being up
    ready.append(tmp_path / "driver_result_0.ready")
    inj.tick()
    assert fabric.links == [("w1", False)]
    events = inj.close()
    assert [(e.kind, e.error, e.detail) for e in events] == [
        ("link-down", None, "w1: eth0 down for 30 s"),
        ("executor-kill", None, "w2: SIGKILL to executor pid(s) 4711, 4713"),
    ]
    assert fabric.links == [("w1", False), ("w1", True)]  # up again when the fault ends (here: the run)
    assert ran == [
        ("place-w2", ["ps", "-o", "pid=,stat=", "--ppid", "99"]),
        ("place-w2", ["kill", "-KILL", "4711", "4713"]),  # not the zombie
    ]


def test_a_downed_links_routes_come_back() -> None:
    before = [
        "default via 10.77.2.254 dev eth0",
        "10.77.2.0/24 dev eth0 proto kernel scope link src 10.77.2.1",
        "10.214.5.11 via 10.214.5.19 dev data0 initcwnd 10",
    ]
    now = "10.77.2.0/24 dev eth0 proto kernel scope link src 10.77.2.1\n"
    assert routes_to_restore(before, now) == [
        ["default", "via", "10.77.2.254", "dev", "eth0"],
        ["10.214.5.11", "via", "10.214.5.19", "dev", "data0", "initcwnd", "10"],
    ]
    assert routes_to_restore(before, "\n".join(before)) == []
