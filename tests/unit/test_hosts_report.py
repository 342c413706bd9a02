"""The report of a run over SSH says where it ran: the inventory machines and their CPUs as the
run's environment records them, not "one host" with the controller's CPUs."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from shufflelab import spec as specmod
from shufflelab.report.data import Data
from shufflelab.report.text import scale_note

SPEC: dict[str, Any] = {
    "experiment": {"name": "t"},
    "topology": {"kind": "shared", "bottleneck": {"rate_mbps": 40}},
    "hosts": {
        "master": {"roles": ["spark-master"]},
        "w1": {"roles": ["spark-worker"]},
        "w2": {"roles": ["spark-worker"]},
    },
    "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 4}},
}


def _data(env: dict[str, Any]) -> Data:
    runs = pd.DataFrame({"status": ["ok"], "label": ["base"], "environment_json": [json.dumps(env)]})
    return Data("t", "", specmod.parse(SPEC), runs, [], env)


def _machine(name: str, cpus: int | None) -> dict[str, Any]:
    return {"machine": name, "address": "192.0.2.1", "data_interface": "eth1", "cpus": cpus}


def test_an_ssh_run_names_its_machines_and_their_cpus() -> None:
    env = {
        "cpus": 2,  # the controller's
        "kernel": "6.1",
        "machines": {
            "(router)": _machine("node9", 2),
            "master": _machine("node1", 16),
            "w1": _machine("node2", 8),
            "w2": _machine("node2", 8),
        },
    }
    first, *_, last = scale_note(_data(env))
    assert "one host" not in first and "2 CPUs)" not in first.split("over SSH")[0], first
    assert first.startswith(
        "On 3 machines over SSH (node9, 2 CPUs: the router host; node1, 16 CPUs: master; node2, 8 CPUs: w1, w2): "
        "2 workers x 1 core(s), topology 'shared'"
    ), first
    assert last.startswith("Environment (the controller): kernel 6.1") and "measured on those machines" in last


def test_machines_recorded_without_cpus_say_so() -> None:
    env = {"cpus": 2, "machines": {"master": _machine("node1", None), "w1": _machine("node2", None)}}
    first = scale_note(_data(env))[0]
    assert first.startswith("On 2 machines over SSH (node1, CPUs not recorded: master; node2, CPUs not recorded: w1)")


def test_a_local_run_is_still_one_host() -> None:
    first, *_, last = scale_note(_data({"cpus": 2, "kernel": "6.1"}))
    assert first.startswith("Scaled to one host (2 CPUs): 2 workers x 1 core(s)"), first
    assert "measured on the emulated fabric" in last
