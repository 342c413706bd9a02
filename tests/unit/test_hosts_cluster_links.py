"""Spark hosts with ``deploy_dir``s of their own, different from each other (fakes of the hosts
backend's sessions and seams, never used by the product): a jar a driver's request puts on the
driver's and executors' class path from the controller's cache -- TPC-H/NDP's connector -- is named
through the link every host has in its lease folder to its own cache, as the listener jar is, so one
class path serves every host (before, a TPC-H run stopped naming the hosts whose caches differ)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from shufflelab import artifacts, sparkconf
from shufflelab import spec as specmod
from shufflelab.emulate.spark import ClusterSpec
from shufflelab.hosts.cluster import HostsCluster
from shufflelab.hosts.inventory import InventoryHost

SCRATCH = "/var/tmp/shufflelab-hosts/0123456789ab"
DEPLOY = {"node1": "/opt/lab/a", "node2": "/srv/other/b"}  # one deploy_dir per machine, not the same


class _Loop:
    def call(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        return asyncio.run(coro)


class _Session:
    def __init__(self, name: str, written: dict[str, str]) -> None:
        self.host = InventoryHost(address="192.0.2.1", data_interface="eth1", agent=True, deploy_dir=DEPLOY[name])
        self.written = written

    async def run(self, step: str, argv: Sequence[str], input: str | None = None, **kw: Any) -> Any:
        if input is not None:
            self.written[argv[-1]] = input
        return SimpleNamespace(stdout="", stderr="", exit_status=0)


def test_a_class_path_jar_of_the_controllers_cache_is_each_hosts_own_through_its_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setattr(artifacts, "cache_root", lambda: cache)
    spec = specmod.parse(
        {
            "experiment": {"name": "t"},
            "topology": {"kind": "star", "bottleneck": {"rate_mbps": 100}},
            "hosts": {"master": {"roles": ["spark-master"]}, "w1": {"roles": ["spark-worker"]}},
            "spark": {"cds": False},
            "workload": {"name": "sort-aggregate", "params": {"rows": 10, "partitions": 1}},
        }
    )
    places = {"master": "node1", "w1": "node2"}
    written: dict[str, str] = {}
    sessions = {m: _Session(m, written) for m in DEPLOY}
    ran: list[tuple[str | None, list[str]]] = []
    launched: list[tuple[str, list[str]]] = []
    fabric = SimpleNamespace(
        places=places,
        network=SimpleNamespace(host_addresses={"master": "10.0.0.1", "w1": "10.0.0.2"}),
        remote_scratch=dict.fromkeys(DEPLOY, SCRATCH),
        session=lambda h: sessions[places[h]],
    )
    backend = SimpleNamespace(
        loop=_Loop(),
        run=lambda argv, place=None, **kw: ran.append((place, list(argv))) or "",
        launch=lambda place, argv, log, env=None: launched.append((place, list(argv))) or SimpleNamespace(log=log),
    )
    cluster = HostsCluster(ClusterSpec.of(spec), fabric, backend, tmp_path / "logs")  # type: ignore[arg-type]
    jar = cache / "ndp-connector-abc.jar"
    run = tmp_path / "run"
    run.mkdir()
    request = run / "driver_request_0.json"
    conf = {sparkconf.DRIVER_CLASS_PATH: str(jar), sparkconf.EXECUTOR_DIST_CLASS_PATH: f"/x/y.jar:{jar}"}
    body = {"conf": conf, "class_path_after": [str(jar)], "result": str(run / "driver_result_0.json")}
    request.write_text(json.dumps(body))
    cluster.driver(request, run / "driver_0.log")
    (text,) = written.values()
    sent = json.loads(text)
    link = f"{SCRATCH}/deployed-cache"
    assert sent["conf"][sparkconf.DRIVER_CLASS_PATH] == f"{link}/ndp-connector-abc.jar"
    assert sent["conf"][sparkconf.EXECUTOR_DIST_CLASS_PATH] == f"/x/y.jar:{link}/ndp-connector-abc.jar"
    assert sent["class_path_after"] == [f"{link}/ndp-connector-abc.jar"]
    assert str(cache) not in text
    # the link on the driver's machine leads to that machine's own cache
    links = [argv for place, argv in ran if argv[:2] == ["sh", "-c"] and "ln -sfn" in argv[2]]
    assert links and links[0][4:6] == [f"{DEPLOY['node1']}/cache", link]
    assert launched and launched[0][0] == "node1"
