"""``shufflelab sim ...``: run simulation specs and report their results (a typer sub-app)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Cluster-scale simulation (Rust core): seed-003 pushdown policies.")


@app.command()
def run(
    specs: Annotated[list[Path], typer.Argument(help="Simulation spec(s), e.g. experiments/sim-fig5.toml")],
    results: Annotated[Path, typer.Option(help="Directory for <experiment>.duckdb")] = Path("results/sim"),
) -> None:
    """Run every matrix point × policy × seed of each spec into RESULTS/<experiment>.duckdb."""
    from shufflelab.sim.core import CoreMissingError
    from shufflelab.sim.runner import run_experiment
    from shufflelab.sim.spec import SimSpecError

    for spec in specs:
        try:
            out = run_experiment(spec, results)
        except (SimSpecError, CoreMissingError) as err:
            typer.echo(str(err), err=True)
            raise typer.Exit(2) from None
        best = out.runs.groupby(["label", "policy"])["mean_job_s"].mean().unstack()
        typer.echo(f"{spec}: {len(out.runs)} runs -> {out.path}")
        typer.echo(best.round(1).to_string())


@app.command()
def report(
    results: Annotated[list[Path], typer.Argument(help="Results file(s) (.duckdb) from `sim run`")],
    out: Annotated[Path, typer.Option(help="Directory for README.md and the PNG figures")] = Path("results/sim/report"),
) -> None:
    """Write figures (PNG) and a Markdown report for the experiments in the results file(s)."""
    from shufflelab.sim.report import report as make_report

    try:
        md = make_report(results, out)
    except FileNotFoundError as err:
        typer.echo(str(err), err=True)
        raise typer.Exit(2) from None
    typer.echo(f"report: {md}")


if __name__ == "__main__":
    app()
