"""One source of truth for a stored spec: analyses get ExperimentSpec objects from the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import synthetic_store

from shufflelab import report
from shufflelab.results import Store, StoreError
from shufflelab.spec import ExperimentSpec


def test_a_lab_store_gives_validated_specs(tmp_path: Path) -> None:
    st = Store(synthetic_store.build(tmp_path / "s.duckdb", 1))
    exp = st.experiment_spec()
    assert isinstance(exp, ExperimentSpec) and exp.experiment.name == "synthetic"
    specs = st.scenario_specs()
    assert list(specs) == ["udp=0", "udp=75"]
    assert [s.cross_traffic.active for s in specs.values() if s is not None] == [False, True]
    assert all(s is not None and s.topology.kind == "shared" for s in specs.values())  # a default, not JSON


def _eventlog_store(path: Path) -> Store:
    """What ``shufflelab analyze`` writes: an experiment and scenarios that are event logs, not lab specs."""
    st = Store(path)
    st.init_experiment("eventlogs", "", json.dumps({"source": "eventlog"}), "")
    row = {"scenario_id": "app:x", "label": "x", "values": {"app": "x"}, "backend": "eventlog",
           "spec_json": json.dumps({"source": "eventlog", "app_name": "x"})}  # fmt: skip
    st.add_scenarios([row])
    return st


def test_an_imported_event_log_store_has_no_lab_spec(tmp_path: Path) -> None:
    st = _eventlog_store(tmp_path / "e.duckdb")
    assert st.experiment_spec() is None
    assert st.scenario_specs() == {"x": None}
    with pytest.raises(StoreError, match="not a lab experiment"):
        report.load(st.path)


def test_a_stored_spec_that_no_longer_validates_is_named(tmp_path: Path) -> None:
    st = Store(tmp_path / "b.duckdb")
    bad = synthetic_store.spec(0)
    bad["topology"]["bottleneck"]["rate_mbps"] = -1
    st.init_experiment("b", "", json.dumps(bad), "b.toml")
    with pytest.raises(StoreError, match=r"b\.duckdb: the experiment: its stored spec does not validate.*rate_mbps"):
        st.experiment_spec()
    empty = Store(tmp_path / "empty.duckdb")
    with empty.connect():  # the schema, no experiment
        pass
    with pytest.raises(StoreError, match="no experiment recorded"):
        empty.experiment_spec()
