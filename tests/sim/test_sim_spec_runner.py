"""Simulation specs (validation, errors naming file and field, matrix) and the runner, store,
report and CLI end to end on a tiny experiment."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from shufflelab.sim import spec as simspec

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

TINY = """
[experiment]
name = "sim-tiny"
description = "tiny"
figure = "test"
policies = ["no-pushdown", "filter", "full", "net-aware", "oracle"]
seeds = 2
x = "cluster.storage.cores_per_machine"

[cluster.compute]
machines = 4
cores_per_machine = 2
core_ghz = 2.0

[cluster.storage]
machines = 2
cores_per_machine = 1
core_ghz = 2.0

[network]
inter_cluster_gbps = 4

[workload]
jobs = 3
interarrival_s = 5
input_gib = 2
task_input_mib = 256
cpu_jitter = 0.1

[[workload.operators]]
name = "filter"
cycles_per_byte = 20
reduction_factor = 60

[[workload.operators]]
name = "aggregate"
cycles_per_byte = 10
reduction_factor = 1000

[matrix]
"cluster.storage.cores_per_machine" = [1, 4]
"""


def test_every_committed_sim_spec_loads() -> None:
    from shufflelab.sim.app_spec import is_apps
    from shufflelab.sim.fabric_spec import is_fabric
    from shufflelab.spec import read_toml

    # fabric specs (a [topology]) load in test_sim_fabric.py, application specs in test_sim_apps.py
    paths = [p for p in sorted(EXPERIMENTS.glob("sim-*.toml")) if not (is_fabric(d := read_toml(p)) or is_apps(d))]
    assert len(paths) >= 5
    for p in paths:
        sp = simspec.load(p)
        assert simspec.expand(sp)


def test_errors_name_the_file_the_field_and_why(tmp_path: Path) -> None:
    bad = tmp_path / "sim-bad.toml"
    bad.write_text(TINY.replace("machines = 4", "machines = 0"))
    with pytest.raises(simspec.SimSpecError) as err:
        simspec.load(bad)
    assert str(bad) in str(err.value)
    assert "cluster.compute.machines" in str(err.value)
    assert "greater than or equal to 1" in str(err.value)

    bad.write_text(
        TINY.replace('"cluster.storage.cores_per_machine" = [1, 4]', '"cluster.storage.cores_per_machine" = [1, -4]')
    )
    with pytest.raises(simspec.SimSpecError, match=r"cores_per_machine=-4.*cores_per_machine"):
        simspec.load(bad)

    bad.write_text(TINY.replace('"no-pushdown", "filter"', '"no-pushdown", "filter+project"'))
    with pytest.raises(simspec.SimSpecError, match="needs an operator named 'project'"):
        simspec.load(bad)


def test_named_policies_map_to_prefixes() -> None:
    sp = simspec.load(EXPERIMENTS / "sim-fig7c.toml")
    w = sp.workload  # decompress, filter, project, aggregate
    assert [simspec.pushed_ops_for(p, w) for p in ("no-pushdown", "filter", "filter+project", "full")] == [0, 2, 3, 4]
    assert simspec.pushed_ops_for("net-aware", w) is None


def test_run_store_report_and_cli(tmp_path: Path) -> None:
    pytest.importorskip("shufflelab_simcore", reason="simulator core not built")
    from shufflelab.sim.cli import app

    spec = tmp_path / "sim-tiny.toml"
    spec.write_text(TINY)
    runner = CliRunner()
    res = runner.invoke(app, ["run", str(spec), "--results", str(tmp_path / "res")])
    assert res.exit_code == 0, res.output
    db = tmp_path / "res" / "sim-tiny.duckdb"
    con = duckdb.connect(str(db), read_only=True)
    try:
        n_runs = con.execute("SELECT count(*) FROM sim_runs").fetchone()[0]
        n_jobs = con.execute("SELECT count(*) FROM sim_jobs").fetchone()[0]
        n_plan = con.execute("SELECT count(*) FROM sim_planner").fetchone()[0]
    finally:
        con.close()
    assert n_runs == 2 * 5 * 2  # points × policies × seeds
    assert n_jobs == n_runs * 3
    assert n_plan == 2 * 2 * 3 * 2  # net-aware runs × jobs × operators
    # Running again replaces the experiment's rows instead of adding to them.
    assert runner.invoke(app, ["run", str(spec), "--results", str(tmp_path / "res")]).exit_code == 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM sim_runs").fetchone()[0] == n_runs
    finally:
        con.close()
    res = runner.invoke(app, ["report", str(db), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "rep" / "README.md").read_text()
    assert "## sim-tiny" in md
    assert "| point | No-Pushdown | Filter | λFlow | Net-Aware | Oracle | winner |" in md
    assert "| cores_per_machine=1 |" in md and "| cores_per_machine=4 |" in md
    assert (tmp_path / "rep" / "sim-tiny.png").stat().st_size > 1000


def test_cli_reports_spec_errors(tmp_path: Path) -> None:
    from shufflelab.sim.cli import app

    res = CliRunner().invoke(app, ["run", str(tmp_path / "missing.toml")])
    assert res.exit_code == 2
    assert "no such file" in res.output


def test_report_on_a_file_that_is_not_a_simulator_store_is_named_and_creates_nothing(tmp_path: Path) -> None:
    from shufflelab.results import Store
    from shufflelab.sim.cli import app

    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database\n")
    lab = tmp_path / "lab.duckdb"
    Store(lab).init_experiment("lab", "a lab store", "{}", "lab.toml")  # DuckDB, but no sim_ tables
    for bad, why in ((junk, "not a valid DuckDB database file"), (lab, "it has no table sim_experiments"),
                     (tmp_path, "Is a directory")):  # fmt: skip
        out = tmp_path / "rep"
        res = CliRunner().invoke(app, ["report", str(bad), "--out", str(out)])
        assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output  # no traceback
        said = " ".join(res.output.split())
        assert f"{bad}: not a simulator results file (written by `shufflelab sim run`)" in said and why in said
        assert not out.exists()


def test_a_matrix_value_given_twice_is_refused_by_every_sim_spec(tmp_path: Path) -> None:
    from shufflelab.sim import app_spec, fabric_spec

    bad = tmp_path / "twice.toml"
    bad.write_text(
        TINY.replace('"cluster.storage.cores_per_machine" = [1, 4]', '"cluster.storage.cores_per_machine" = [1, 1.0]')
    )
    with pytest.raises(simspec.SimSpecError, match=r"matrix.cluster.storage.cores_per_machine: 1 and 1.0 are the same"):
        simspec.load(bad)
    for module, spec_file in ((fabric_spec, "sim-alltoall-k8.toml"), (app_spec, "sim-app-1000.toml")):
        s = module.load(EXPERIMENTS / spec_file)
        key = next(iter(s.matrix), None) or "topology.host_gbps"
        first = s.matrix.get(key, [10.0])[0]
        twice = s.model_copy(update={"matrix": {key: [first, -first if first == 0 else float(first)]}})
        with pytest.raises(simspec.SimSpecError, match=f"matrix.{key}: .* are the same value"):
            module.expand(twice, spec_file)
