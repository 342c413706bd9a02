"""``doctor --hosts``: what it says is what a run would do. The cells row counts only cells no
refusal stops; shaping the interface that carries SSH is refused where a run would shape it (as
the run itself refuses it); every used host must reach the others' data addresses. The hosts are
fakes: probe results as :class:`HostFacts`, sessions that answer the reachability script."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from shufflelab.hosts import commands, findings, probe
from shufflelab.hosts.probe import HostFacts

DATA = {"node1": "10.9.0.1", "node2": "10.9.0.2", "node3": "10.9.0.3"}
SPEC = """
[experiment]
name = "t"
[topology]
kind = "{kind}"
bottleneck = {{ rate_mbps = 40 }}
[hosts]
master = {{ roles = ["spark-master"] }}
w1 = {{ roles = ["spark-worker"] }}
[workload]
name = "sort-aggregate"
params = {{ rows = 1000, partitions = 4 }}
[matrix]
"tcp.congestion_control" = ["cubic", "reno"]
"""


def _files(tmp_path: Path, kind: str = "star", allowed: str = "") -> tuple[Path, Path]:
    (tmp_path / "key").write_text("not read")
    (tmp_path / "known_hosts").write_text("")
    hosts = "".join(
        f'[hosts.{h}]\naddress = "192.0.2.{i}"\nkey_file = "key"\ndata_interface = "data0"\n'
        + ("control_interface_shaping_allowed = true\n" if h == allowed else "")
        for i, h in enumerate(DATA, start=1)
    )
    inv = tmp_path / "inv.toml"
    router = 'router = "node3"\n' if kind == "shared" else ""
    inv.write_text(f'{router}[ssh]\nknown_hosts = "known_hosts"\n{hosts}[map]\nmaster = "node1"\nw1 = "node2"\n')
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(kind=kind))
    return inv, spec


def _facts(**changes: dict[str, Any]) -> dict[str, HostFacts]:
    out = {}
    for h, addr in DATA.items():
        f = HostFacts(host=h, address=addr, kernel="6.1", root=True, qdiscs=["htb", "pfifo", "bfifo"])
        f.congestion_controls = ["reno", "cubic"]
        f.java, f.python, f.pyspark, f.iperf3 = "17.0.12", "3.11.2", "4.3.0", "3.12"
        f.data_interface, f.data_interface_present, f.data_interface_mtu = "data0", True, 1500
        f.data_address, f.cpus, f.control_interface = addr, 4, "ctl0"
        f.clock_offset_s, f.clock_uncertainty_s = 0.0001, 0.0001
        for k, v in changes.get(h, {}).items():
            setattr(f, k, v)
        out[h] = f
    return out


class _Session:
    """Answers the reachability script: ``silent`` addresses give no answer, ``noping``: no ping."""

    def __init__(self, name: str, silent: set[str], noping: bool, argvs: list[tuple[str, list[str]]]) -> None:
        self.name, self.host = name, SimpleNamespace(address=f"192.0.2.{name[-1]}")
        self._silent, self._noping, self._argvs = silent, noping, argvs

    async def run(self, step: str, argv: list[str], **kw: Any) -> Any:
        self._argvs.append((self.name, argv))
        addrs = argv[4:]
        out = "noping\n" if self._noping else "".join(f"{a} {'no' if a in self._silent else 'yes'}\n" for a in addrs)
        return SimpleNamespace(stdout=out, stderr="", exit_status=0)


def _doctor(
    monkeypatch: pytest.MonkeyPatch,
    inv: Path,
    spec: Path | None,
    facts: dict[str, HostFacts],
    silent: dict[str, set[str]] | None = None,
    noping: bool = False,
) -> tuple[int, dict[str, Any], list[tuple[str, list[str]]]]:
    argvs: list[tuple[str, list[str]]] = []

    @contextlib.asynccontextmanager
    async def connect(inv_: Any, names: Any = None) -> AsyncIterator[dict[str, Any]]:
        yield {h: _Session(h, (silent or {}).get(h, set()), noping, argvs) for h in inv_.hosts}

    async def probe_all(sessions: dict[str, Any]) -> dict[str, HostFacts]:
        return {h: facts[h] for h in sessions}

    async def no_deploy(inv_: Any, sessions: Any, cached: Any) -> list[findings.Finding]:
        return []

    monkeypatch.setattr(commands, "connect", connect)
    monkeypatch.setattr(probe, "probe_all", probe_all)
    monkeypatch.setattr(commands, "deploy_findings", no_deploy)
    out, err = io.StringIO(), io.StringIO()
    code = commands.doctor(inv, spec, True, Console(file=out, width=300), Console(file=err, width=300), lambda: ())
    assert not err.getvalue(), err.getvalue()
    return code, json.loads(out.getvalue()), argvs


def _rows(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(f["host"], f["check"]): f for f in doc["findings"]}


def test_everything_in_place_every_cell_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inv, spec = _files(tmp_path)
    code, doc, argvs = _doctor(monkeypatch, inv, spec, _facts())
    rows = _rows(doc)
    assert code == 0 and rows[("*", "cells")]["level"] == "ok"
    assert rows[("*", "cells")]["detail"] == "2 of 2 cells can run on these hosts"
    assert rows[("node1", "data network")]["detail"] == "reaches node2 (10.9.0.2)"
    # only the hosts the spec uses ping each other (node3 is not used by a star spec)
    assert sorted((h, a[4:]) for h, a in argvs) == [("node1", ["10.9.0.2"]), ("node2", ["10.9.0.1"])]


def test_the_cells_row_counts_only_cells_no_refusal_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: "cells ok 2 of 2" printed next to a refused row of a host every cell runs on."""
    inv, spec = _files(tmp_path)
    code, doc, _ = _doctor(monkeypatch, inv, spec, _facts(node1={"listening_ports": [7077]}))
    rows = _rows(doc)
    assert code == 1 and rows[("node1", "ports")]["level"] == "refuse"
    cells = rows[("*", "cells")]
    assert cells["level"] == "refuse" and cells["detail"].startswith("0 of 2 cells can run"), cells
    assert "node1 ports" in cells["detail"]
    # a refusal of one cell stops that cell only: reno missing on node2
    code, doc, _ = _doctor(monkeypatch, inv, spec, _facts(node2={"congestion_controls": ["cubic"]}))
    rows = _rows(doc)
    assert rows[("*", "cell cc=reno")]["level"] == "refuse"
    assert (rows[("*", "cells")]["level"], rows[("*", "cells")]["detail"]) == (
        "warn",
        "1 of 2 cells can run on these hosts",
    )
    # a refusal on a host no cell uses stops none
    code, doc, _ = _doctor(monkeypatch, inv, spec, _facts(node3={"root": False}))
    assert _rows(doc)[("node3", "privileges")]["level"] == "refuse"
    assert _rows(doc)[("*", "cells")]["detail"] == "2 of 2 cells can run on these hosts"


def test_shaping_the_ssh_interface_is_refused_where_a_run_shapes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: a warning, doctor exiting 0, and the run refusing it once it came to shape the link."""
    shares = {"node2": {"control_interface": "data0"}}
    inv, spec = _files(tmp_path, "star")
    code, doc, _ = _doctor(monkeypatch, inv, spec, _facts(**shares))
    rows = _rows(doc)
    assert code == 1 and rows[("node2", "data interface")]["level"] == "refuse"
    assert "control_interface_shaping_allowed" in rows[("node2", "data interface")]["detail"]
    assert "carries the SSH control connection" in rows[("*", "cell cc=cubic")]["detail"]
    assert rows[("*", "cells")]["detail"].startswith("0 of 2")
    # allowed in the inventory: a warning, every cell runs
    inv, spec = _files(tmp_path, "star", allowed="node2")
    code, doc, _ = _doctor(monkeypatch, inv, spec, _facts(**shares))
    rows = _rows(doc)
    assert code == 0 and rows[("node2", "data interface")]["level"] == "warn"
    assert rows[("*", "cells")]["detail"] == "2 of 2 cells can run on these hosts"
    # shared: only the router host's interface is shaped, so a worker's shared interface stops no cell
    inv, spec = _files(tmp_path, "shared")
    code, doc, _ = _doctor(monkeypatch, inv, spec, _facts(**shares))
    assert _rows(doc)[("*", "cells")]["detail"] == "2 of 2 cells can run on these hosts"
    code, doc, _ = _doctor(monkeypatch, inv, spec, _facts(node3={"control_interface": "data0"}))
    assert _rows(doc)[("*", "cells")]["detail"].startswith("0 of 2")


def test_a_link_down_fault_on_the_ssh_interface_is_refused_for_its_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link-down of a host whose data interface carries SSH would cut the controller off: doctor
    refuses the cells with that fault, as the run refuses them before changing anything."""
    inv, spec = _files(tmp_path, "shared")
    fault = '\n[cases.none]\n[cases.down]\nfaults = [{ kind = "link-down", at_s = 1, host = "w1", duration_s = 2 }]\n'
    spec.write_text(spec.read_text() + fault)
    code, doc, _ = _doctor(monkeypatch, inv, spec, _facts(node2={"control_interface": "data0"}))
    rows = _rows(doc)
    assert (
        code == 1 and "a link-down of w1 takes down node2's data0" in rows[("*", "cell cc=cubic,case=down")]["detail"]
    )
    assert rows[("*", "cells")]["detail"].startswith("2 of 4 cells")
    code, doc, _ = _doctor(monkeypatch, inv, spec, _facts())
    assert code == 0 and _rows(doc)[("*", "cells")]["detail"] == "4 of 4 cells can run on these hosts"


def test_data_addresses_that_do_not_answer_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: never checked (Spark then failed to connect, mid-run)."""
    inv, spec = _files(tmp_path, "shared")
    code, doc, argvs = _doctor(monkeypatch, inv, spec, _facts(), silent={"node1": {"10.9.0.3"}})
    rows = _rows(doc)
    assert code == 1
    bad = rows[("node1", "data network")]
    assert bad["level"] == "refuse" and "no answer from node3 (10.9.0.3)" in bad["detail"], bad
    assert rows[("node3", "data network")]["level"] == "ok"
    assert rows[("*", "cells")]["detail"].startswith("0 of 2")
    # the router host is used by a shared spec: all three ping the two others, once each
    assert sorted(h for h, _ in argvs) == ["node1", "node2", "node3"]
    assert all(a[:2] == ["sh", "-c"] and "ping -n -c1 -W1" in a[2] for _, a in argvs)
    # without ping on the hosts: a warning, nothing refused
    code, doc, _ = _doctor(monkeypatch, inv, spec, _facts(), noping=True)
    assert code == 0 and _rows(doc)[("node1", "data network")]["level"] == "warn"


def test_without_a_spec_every_host_checks_every_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inv, _ = _files(tmp_path)
    code, doc, argvs = _doctor(monkeypatch, inv, None, _facts(node2={"data_address": None}))
    rows = _rows(doc)
    assert (
        rows[("node2", "data interface")]["level"] == "refuse"
        and "no IPv4" in rows[("node2", "data interface")]["detail"]
    )
    # node2 has no data address: left out of the pings
    assert sorted((h, a[4:]) for h, a in argvs) == [("node1", ["10.9.0.3"]), ("node3", ["10.9.0.1"])]
    assert ("*", "cells") not in rows and code == 1


def test_reach_output_parsing() -> None:
    assert probe.parse_reach("10.0.0.2 yes\n10.0.0.3 no\n", ["10.0.0.2", "10.0.0.3", "10.0.0.4"]) == {
        "10.0.0.2": True,
        "10.0.0.3": False,
        "10.0.0.4": False,
    }
    assert probe.parse_reach("noping\n", ["10.0.0.2"]) == {"10.0.0.2": None}
