"""Every name the lab validates is matched whole: a trailing newline (which Python's ``$`` lets
through: ``re.match(r"^[a-z]+$", "w3\\n")`` matches) or any other surrounding whitespace is refused.

A spec host ``"w3\\n"`` used to become a namespace ``sl<id>-w3\\n`` that ``shufflelab clean``, reading
``ip netns list`` word by word, never removes; the same held for the inventory's host names, users
and data interfaces, Spark memory sizes, lease ids, sysctl and interface names. The table below is
every validated name field; the gate at the end keeps ``$`` out of the source's regular expressions.
"""

from __future__ import annotations

import ast
import asyncio
import copy
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shufflelab import names
from shufflelab import spec as S
from shufflelab.hosts import inventory, lease
from shufflelab.ndp import plan as P
from shufflelab.sim import fabric_spec
from shufflelab.sim import spec as sim_spec

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"
BASE_SPEC: dict[str, Any] = {
    "experiment": {"name": "t"},
    "topology": {"kind": "shared", "bottleneck": {"rate_mbps": 50}},
    "hosts": {
        "master": {"roles": ["spark-master"]},
        "w1": {"roles": ["spark-worker"]},
        "w2": {"roles": ["spark-worker"]},
    },
    "workload": {"name": "sort-aggregate", "params": {"rows": 1000, "partitions": 4}},
}


def _spec(edit: Callable[[dict[str, Any]], None]) -> None:
    d = copy.deepcopy(BASE_SPEC)
    edit(d)
    S.parse(d)


def _spec_host(v: str) -> None:
    _spec(lambda d: d["hosts"].__setitem__(v, d["hosts"].pop("w2")))


def _spark(field: str) -> Callable[[str], None]:
    return lambda v: _spec(lambda d: d.setdefault("spark", {}).__setitem__(field, v))


def _conf_key(v: str) -> None:
    _spec(lambda d: d.setdefault("spark", {}).__setitem__("conf", {v: "true"}))


def _experiment_name(v: str) -> None:
    _spec(lambda d: d["experiment"].__setitem__("name", v))


def _sim_name(file: str, parse: Callable[[dict[str, Any]], object]) -> Callable[[str], None]:
    def check(v: str) -> None:
        data = tomllib.loads((EXPERIMENTS / file).read_text())
        data["experiment"]["name"] = v
        parse(data)

    return check


INVENTORY: dict[str, Any] = {
    "hosts": {
        "node1": {"address": "192.0.2.10", "agent": True, "data_interface": "eth1"},
        "node2": {"address": "192.0.2.11", "agent": True, "data_interface": "eth1", "user": "lab"},
    }
}


def _inventory(edit: Callable[[dict[str, Any]], None]) -> None:
    d = copy.deepcopy(INVENTORY)
    edit(d)
    inventory.parse(d)


def _inventory_host(v: str) -> None:
    _inventory(lambda d: d["hosts"].__setitem__(v, d["hosts"].pop("node2")))


def _inventory_field(field: str) -> Callable[[str], None]:
    return lambda v: _inventory(lambda d: d["hosts"]["node2"].__setitem__(field, v))


class _Session:
    """Just enough of a host session for a lease to record a sysctl."""

    name = "node1"
    host = SimpleNamespace(address="192.0.2.10")

    async def run(self, step: str, argv: list[str], privileged: bool = False) -> Any:
        return SimpleNamespace(stdout="0\n")

    async def write_file(self, step: str, path: str, text: str) -> None:
        return None


def _sysctl(v: str) -> None:
    held = lease.HostLease(_Session(), "0123456789ab", "/var/lib/shufflelab/leases")  # type: ignore[arg-type]
    asyncio.run(held.set_sysctl(v, "1"))


def _plan_name(v: str) -> None:
    P.parse(f'{{"aggregates": [{{"fn": "count", "alias": "{v.encode("unicode_escape").decode()}"}}]}}')


# field -> (a check that raises for a refused value, a valid value, the rule it applies, if one)
FIELDS: dict[str, tuple[Callable[[str], object], str, re.Pattern[str] | None]] = {
    "spec hosts.<name>": (_spec_host, "w3", S.base.NAME_PATTERN),
    "spec spark.worker_memory": (_spark("worker_memory"), "512m", S.base.MEMORY_PATTERN),
    "spec spark.executor_memory": (_spark("executor_memory"), "2g", S.base.MEMORY_PATTERN),
    "spec spark.driver_memory": (_spark("driver_memory"), "1024k", S.base.MEMORY_PATTERN),
    "spec spark.conf key": (_conf_key, "spark.hadoop.fs.s3a.bucket.my-bucket.endpoint", None),
    "spec experiment.name": (_experiment_name, "cc-under.udp_2", None),
    "sim experiment.name": (_sim_name("sim-fig6.toml", sim_spec.parse), "sim-fig6b", None),
    "sim fabric experiment.name": (_sim_name("sim-alltoall-k8.toml", fabric_spec.parse), "sim-k8-b", None),
    "inventory hosts.<name>": (_inventory_host, "node-3_b", inventory.HOST_NAME),
    "inventory hosts.N.user": (_inventory_field("user"), "lab.user-1", inventory.USER_NAME),
    "inventory hosts.N.data_interface": (_inventory_field("data_interface"), "eth1.100", inventory.INTERFACE),
    "lease id": (lease.scratch_path, "0123456789ab", lease.LEASE_ID),
    "lease ethtool interface": (lambda v: lease.offload_args(v, {"gro": "off"}), "eth1", lease.INTERFACE),
    "lease sysctl name": (_sysctl, "net.ipv4.tcp_ecn", lease.SYSCTL),
    "ndp plan alias": (_plan_name, "l_qty", None),
}


def _accepted(field: str, value: str) -> bool:
    check = FIELDS[field][0]
    try:
        check(value)
    except (ValueError, S.SpecError):  # SpecError, InventoryError, PlanError, SimSpecError: all refusals
        return False
    return True


@pytest.mark.parametrize("field", list(FIELDS))
def test_a_name_with_a_newline_or_space_around_it_is_refused(field: str) -> None:
    good = FIELDS[field][1]
    assert _accepted(field, good), f"{field}: {good!r} should be accepted"
    for bad in (good + "\n", good + "\r\n", good + " ", good + "\t", "\n" + good, good[:1] + "\n" + good[1:]):
        assert not _accepted(field, bad), f"{field}: {bad!r} was accepted"


RULED = [f for f, (_, _, rule) in FIELDS.items() if rule is not None]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(RULED).flatmap(lambda f: st.tuples(st.just(f), st.from_regex(FIELDS[f][2], fullmatch=True))))
def test_what_a_rule_admits_is_accepted_and_with_a_trailing_newline_refused(drawn: tuple[str, str]) -> None:
    """Property: any name a field's rule admits is accepted by the field (unless the field reserves
    it), and the same name followed by a newline never is."""
    field, name = drawn
    if field == "spec hosts.<name>" and name in ("r", "sw", "sw1", "sw2", "master", "w1"):
        return  # the fabric's and the base spec's own names
    if field == "inventory hosts.<name>" and name == "node1":
        return
    assert _accepted(field, name), (field, name)
    assert not _accepted(field, name + "\n"), (field, name)


def _dollar_patterns(tree: ast.AST) -> list[tuple[int, str]]:
    """Regular expressions given to ``re`` (or to ``names.whole``) that end in an unescaped ``$``."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        callee = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
        if (owner, callee) not in {("re", c) for c in ("compile", "match", "search", "fullmatch")} | {
            ("names", "whole"),
            ("", "whole"),
        }:
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            text = arg.value
            if text.endswith("$") and not text.endswith("\\$"):
                out.append((node.lineno, text))
    return out


def test_no_regular_expression_in_the_source_ends_in_dollar() -> None:
    """``$`` also matches before a final newline: a whole-name rule is ``names.whole(...)``
    (``\\A...\\Z``) or ``re.fullmatch``. (Pydantic's ``Field(pattern=...)`` is a Rust regex, whose
    ``$`` is the very end: those are covered by the table above.)"""
    found = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        for line, text in _dollar_patterns(ast.parse(path.read_text(), str(path))):
            found.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert not found, "use names.whole or re.fullmatch:\n" + "\n".join(found)


def test_the_gate_finds_a_dollar() -> None:
    assert _dollar_patterns(ast.parse('import re\nX = re.compile(r"^[a-z]+$")\nre.match("a$", s)')) == [
        (2, "^[a-z]+$"),
        (3, "a$"),
    ]
    assert _dollar_patterns(ast.parse('re.compile(r"cost \\$")\nre.fullmatch("[a-z]+", s)')) == []


def test_whole_matches_the_whole_string_only() -> None:
    rule = names.whole("[a-z][a-z0-9]{0,7}")
    assert rule.match("w3") and rule.search("w3") and rule.fullmatch("w3")
    assert not rule.match("w3\n") and not rule.search("x w3") and not rule.match("w3 ")
    with pytest.raises(ValueError, match="anchor"):
        names.whole("^[a-z]+$")
