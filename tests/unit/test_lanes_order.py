"""The order in which the root/Spark lanes are handed test files (tests/conftest.py's
LONGEST_FIRST): named files exist and start root or Spark work, and the reordering keeps every test
and each file's own order."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from conftest import LONGEST_FIRST, longest_first

ROOT = Path(__file__).resolve().parents[2]


def _marks(path: Path) -> set[str]:
    """The names in the file's module-level ``pytestmark`` (``pytest.mark.root`` -> ``root``)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            return {
                n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute) and n.attr in ("root", "spark")
            }
    return set()


@pytest.mark.parametrize("rel", LONGEST_FIRST)
def test_each_named_file_exists_and_is_a_root_or_spark_file(rel: str) -> None:
    path = ROOT / rel
    assert path.is_file(), f"{rel} in LONGEST_FIRST does not exist"
    assert _marks(path), f"{rel} is not marked root or spark: the lanes never run it"


def test_the_list_names_each_file_once() -> None:
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_named_files_go_first_in_the_lists_order_and_nothing_else_moves() -> None:
    names = [
        "tests/hosts/test_ssh_hosts.py::a",
        "tests/integration/test_run_validity_fabric.py::b",
        "tests/hosts/test_hosts_quickstart.py::c",
        "tests/integration/test_run_validity_fabric.py::a",
        "tests/unit/test_x.py::a",
        "tests/hosts/test_hosts_quickstart.py::a",
        "tests/hosts/test_ssh_hosts.py::b",
    ]
    items = [SimpleNamespace(path=ROOT / n.split("::")[0], nodeid=n) for n in names]
    longest_first(ROOT, cast(list[Any], items))
    assert [i.nodeid for i in items] == [
        "tests/hosts/test_hosts_quickstart.py::c",
        "tests/hosts/test_hosts_quickstart.py::a",
        "tests/integration/test_run_validity_fabric.py::b",
        "tests/integration/test_run_validity_fabric.py::a",
        "tests/hosts/test_ssh_hosts.py::a",
        "tests/unit/test_x.py::a",
        "tests/hosts/test_ssh_hosts.py::b",
    ]
