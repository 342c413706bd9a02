"""``shufflelab sim ...``: run simulation specs and report their results (a typer sub-app)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="Cluster-scale simulation (Rust core): seed-003 pushdown policies; all-to-all shuffles on "
    "data-center fabrics (specs with a [topology] table)."
)


@app.command()
def run(
    specs: Annotated[list[Path], typer.Argument(help="Simulation spec(s), e.g. experiments/sim-fig5.toml")],
    results: Annotated[Path, typer.Option(help="Directory for <experiment>.duckdb")] = Path("results/sim"),
) -> None:
    """Run every matrix point × policy × seed of each spec into RESULTS/<experiment>.duckdb; a fabric
    spec (one with a \\[topology]) into RESULTS/<experiment>.fabric.json, an application spec (one with
    \\[\\[app]] tables) into RESULTS/<experiment>.apps.json, each with its SIMULATED report."""
    from shufflelab.sim.app_spec import is_apps
    from shufflelab.sim.core import CoreMissingError
    from shufflelab.sim.fabric_spec import is_fabric
    from shufflelab.sim.runner import run_experiment
    from shufflelab.sim.spec import SimSpecError
    from shufflelab.spec import read_toml

    for spec in specs:
        try:
            data = read_toml(spec, SimSpecError)
            if is_apps(data):
                _run_apps(spec, results, data)
                continue
            if is_fabric(data):
                _run_fabric(spec, results, data)
                continue
            out = run_experiment(spec, results)
        except (SimSpecError, CoreMissingError) as err:
            typer.echo(str(err), err=True)
            raise typer.Exit(2) from None
        best = out.runs.groupby(["label", "policy"])["mean_job_s"].mean().unstack()
        typer.echo(f"{spec}: {len(out.runs)} runs -> {out.path}")
        typer.echo(best.round(1).to_string())


def _run_fabric(spec: Path, results: Path, data: dict[str, object]) -> None:
    from shufflelab.sim.fabric import run_experiment, summary_rows
    from shufflelab.sim.fabric_report import report as fabric_report

    out = run_experiment(spec, results, data)
    md = fabric_report(out.path, results / f"{out.doc['experiment']}-report", out.doc)
    typer.echo(f"{spec}: {len(out.doc['runs'])} runs -> {out.path} (SIMULATED)")
    for row in summary_rows(out.doc):
        done = row["shuffle completion s"]
        shown = "stranded fetches" if done is None else f"shuffle completes in {done:.4f} s (virtual)"
        typer.echo(f"  {row['scenario']} seed {row['seed']}: {row['hosts']} hosts, {shown}")
    typer.echo(f"report: {md}")


def _run_apps(spec: Path, results: Path, data: dict[str, object]) -> None:
    from shufflelab.sim.apps_report import report as apps_report
    from shufflelab.sim.apps_sim import run_experiment, summary_rows

    out = run_experiment(spec, results, data)
    md = apps_report(out.path, results / f"{out.doc['experiment']}-report", out.doc)
    typer.echo(f"{spec}: {len(out.doc['runs'])} runs -> {out.path} (SIMULATED)")
    for row in summary_rows(out.doc):
        done = row["job time s"]
        shown = "did not finish" if done is None else f"job time {done:.3f} s (virtual)"
        typer.echo(f"  {row['scenario']} seed {row['seed']} {row['application']}: {shown}")
    typer.echo(f"report: {md}")


@app.command()
def report(
    results: Annotated[list[Path], typer.Argument(help="Results file(s) (.duckdb) from `sim run`")],
    out: Annotated[Path, typer.Option(help="Directory for README.md and the PNG figures")] = Path("results/sim/report"),
) -> None:
    """Write figures (PNG) and a Markdown report for the experiments in the results file(s)
    (a fabric results file, *.fabric.json, gets its own report)."""
    from shufflelab.sim.report import report as make_report
    from shufflelab.sim.runner import NotSimResults

    try:
        fabric = [r for r in results if r.name.endswith((".fabric.json", ".apps.json"))]
        if fabric:
            from shufflelab.sim.fabric_report import report as fabric_report

            if len(results) > 1:
                typer.echo("give one fabric results file at a time", err=True)
                raise typer.Exit(2)
            if fabric[0].name.endswith(".apps.json"):
                from shufflelab.sim.apps_report import report as apps_report

                md = apps_report(fabric[0], out)
            else:
                md = fabric_report(fabric[0], out)
        else:
            md = make_report(results, out)
    except (FileNotFoundError, NotSimResults) as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(2) from None
    typer.echo(f"report: {md}")


if __name__ == "__main__":
    app()
