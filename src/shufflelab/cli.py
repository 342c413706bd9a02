"""The ``shufflelab`` command: run | report | analyze | doctor | clean | demo (and ``sim`` when present)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from shufflelab import interrupts
from shufflelab.spec import SpecError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="shufflelab: real Spark on an emulated data-center network -- run, diagnose, report.",
)
console = Console()
err = Console(stderr=True)

DEFAULT_RESULTS = Path("results")


_MAIN_PID = os.getpid()


def _raise_interrupt(signum: int, frame: object) -> NoReturn:
    if os.getpid() != _MAIN_PID:
        # a forked helper (pyroute2's netns workers are forks of this process) must never run
        # the runner's teardown: just end it
        os._exit(128 + signum)
    from shufflelab.emulate.runner import Interrupted

    raise Interrupted(f"signal {signum}")


def _raise_keyboard_interrupt(signum: int, frame: object) -> NoReturn:
    if os.getpid() != _MAIN_PID:  # see _raise_interrupt
        os._exit(128 + signum)
    raise KeyboardInterrupt


def _install_signal_handlers() -> None:
    # SIGTERM/SIGHUP become exceptions, so every context manager tears down what it built.
    global _MAIN_PID
    _MAIN_PID = os.getpid()
    interrupts.install()  # a signal Python swallowed is raised again at the next safe point
    signal.signal(signal.SIGTERM, _raise_interrupt)
    # A shell starting us in the background may have set SIGINT to "ignore", which Python then
    # keeps; a run must always be stoppable with SIGINT (and tear down), so take it back.
    signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # respect nohup
        signal.signal(signal.SIGHUP, _raise_interrupt)


def _fail(message: str, code: int = 2) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


@app.command()
def run(
    spec_path: Annotated[Path, typer.Argument(help="Experiment TOML file.")],
    results: Annotated[Path, typer.Option(help="Folder for the DuckDB file and run artifacts.")] = DEFAULT_RESULTS,
    report: Annotated[bool, typer.Option(help="Write the report when the runs are done.")] = True,
    reps: Annotated[
        int | None, typer.Option(min=1, help="Override experiment.repetitions (more can be added later).")
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option(help="Run only scenarios whose label has this part, e.g. apps=1 (repeatable: all must match)."),
    ] = None,
    hosts: Annotated[
        Path | None,
        typer.Option(help="Inventory TOML: run on those machines over SSH instead of namespaces here (docs/hosts.md)."),
    ] = None,
) -> None:
    """Run every missing run of an experiment (finished runs are kept: re-running resumes).

    Exits 1 when a run of this invocation did not end ok (failed or timed out), 2 on a bad spec."""
    from shufflelab import spec as specmod
    from shufflelab.emulate import runner as runmod
    from shufflelab.results import StoreError

    try:
        spec = specmod.load(spec_path)
    except SpecError as exc:
        _fail(str(exc))
    if reps is not None:
        spec = spec.model_copy(update={"experiment": spec.experiment.model_copy(update={"repetitions": reps})})
    _install_signal_handlers()
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[phase]}"),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(spec.experiment.name, total=1, phase="preflight")

        def on_start(total: int, done: int) -> None:
            bar.update(task, total=total, completed=done)
            if done:
                console.print(f"resuming: {done} of {total} runs already in the results")

        def on_done(label: str, status: str, job_s: float | None) -> None:
            colour = "green" if status == "ok" else "red"
            shown = f"{job_s:.1f} s" if job_s is not None else "-"
            console.print(f"  [{colour}]{status:<11}[/] {label:<40} job {shown}")
            bar.advance(task)

        progress = runmod.Progress(
            on_start=on_start,
            on_run=lambda label, rep: bar.update(task, phase=f"{label} rep {rep}"),
            on_phase=lambda text: bar.update(task, phase=text),
            on_done=on_done,
        )
        try:
            with contextlib.ExitStack() as stack:
                backend = None
                if hosts is not None:
                    from shufflelab.hosts import commands as hostcmds

                    backend = stack.enter_context(hostcmds.open_backend(hosts, spec, str(spec_path))).backend()
                runner = runmod.EmulateRunner(spec, str(spec_path), results, progress, select=select, backend=backend)
                r = runner.run()
            interrupts.check()
        except (SpecError, StoreError) as exc:
            _fail(str(exc))
        except Exception as exc:
            if hosts is None:
                raise
            from shufflelab.hosts import commands as hostcmds

            if not isinstance(exc, hostcmds.HOST_ERRORS):
                raise
            _fail(hostcmds.describe(exc), 1)
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]: finished runs are stored; run the same command to resume")
            raise typer.Exit(130) from None
    failed = [o for o in r.outcomes if o.status != "ok"]
    console.print(f"results: {r.store_path} ({len(r.outcomes)} runs now, {r.skipped} kept, {len(failed)} not ok)")
    for o in failed:
        console.print(f"  [red]{o.status}[/] {o.label} rep {o.rep}: {o.cause}")
    if report:
        _write_report(r.store_path, None)
    if failed:  # the results and the report are kept; the command says that runs failed
        err.print(
            f"[bold red]{len(failed)} of {len(r.outcomes)} runs of this invocation did not end ok[/]"
            " (run the same command to retry them)",
            highlight=False,
        )
        raise typer.Exit(1)


def _write_report(db: Path, out: Path | None) -> None:
    from shufflelab import appreport
    from shufflelab import report as reportmod

    if appreport.is_eventlog_store(db):  # applications read from event logs: their own report
        html_path, md_path = appreport.write(db, out or db.with_name(db.stem + "-report"))
        console.print(f"report: {html_path}\n        {md_path}")
        return
    paths = reportmod.write(db, out)
    for line in paths.headline:
        console.print(f"finding: {line}", highlight=False)
    console.print(f"report: {paths.html}\n        {paths.markdown}")


@app.command()
def report(
    db: Annotated[Path, typer.Argument(help="Results file (.duckdb).")],
    out: Annotated[Path | None, typer.Option(help="Output folder (default: next to the results).")] = None,
    tables: Annotated[
        bool,
        typer.Option(help="Also export every results table as Parquet to OUT/data (a report can be rebuilt from it)."),
    ] = False,
) -> None:
    """Write the HTML + Markdown report (tables and figures) of an experiment's results."""
    from shufflelab.results import StoreError

    if not db.exists():
        _fail(f"{db}: no such results file")
    try:
        _write_report(db, out)
    except StoreError as exc:
        _fail(str(exc))
    if tables:
        from shufflelab.results import Store

        dest = (out or db.with_name(db.stem + "-report")) / "data"
        written = Store(db).export_parquet(dest)
        console.print(f"tables: {dest} ({', '.join(written)})")


@app.command()
def diagnose(
    db: Annotated[Path, typer.Argument(help="Results file (.duckdb).")],
    scenario: Annotated[
        str | None, typer.Option(help="Scenario label (default: every one with cross traffic).")
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            help="Baseline label (default: the same scenario without traffic); without --scenario, every "
            "scenario with cross traffic is compared with it. On a store of event logs: the store of baseline "
            "logs of the same application(s)."
        ),
    ] = None,
    min_reps: Annotated[int, typer.Option(help="Fewer successful runs than this on either side: inconclusive.")] = 3,
) -> None:
    """Is the job starving for the network? Compare scenarios with their no-traffic baselines."""
    from shufflelab import appreport
    from shufflelab import diagnose as dg
    from shufflelab.appreport import starvation

    if not db.exists():
        _fail(f"{db}: no such results file")
    try:
        if appreport.is_eventlog_store(db):  # applications read from event logs: --baseline names a store
            found = starvation.diagnose_command(db, scenario, baseline, min_reps)
        else:
            found = dg.diagnose_store(db, scenario, baseline, min_reps=min_reps)
    except ValueError as exc:
        _fail(str(exc))
    if not found:
        _fail("no scenario with cross traffic has a baseline without it in this experiment")
    colours = {"starved": "red", "not starved": "green", "inconclusive": "yellow"}
    for d in found:
        console.print(
            f"[bold]{d.scenario}[/] vs [bold]{d.baseline}[/]: [{colours[d.verdict]}]{d.verdict}[/]"
            f"  (n = {d.n_baseline}/{d.n_scenario})"
        )
        for reason in d.reasons:
            console.print(f"    - {reason}")


@app.command()
def tune(
    tune_path: Annotated[Path, typer.Argument(help="Experiment TOML with a \\[tune] table.")],
    results: Annotated[Path, typer.Option(help="Folder for the DuckDB file and run artifacts.")] = DEFAULT_RESULTS,
    out: Annotated[Path | None, typer.Option(help="Where tune.md/tune.json go (default results/<name>-tune).")] = None,
) -> None:
    """Search shuffle and network knobs on the emulated fabric (every trial is stored runs)."""
    from shufflelab import tune as tunemod

    try:
        base, cfg = tunemod.load(tune_path)
    except SpecError as exc:
        _fail(str(exc))
    _install_signal_handlers()
    evaluate, confirm_runs = tunemod.emulate_evaluator(base, results)

    def on_trial(row: dict) -> None:
        v = f"{row['value']:.2f} s" if row["value"] is not None else "[red]failed[/]"
        console.print(f"  trial {row['trial']}: {v}  {row['params'] or '(default configuration)'}")

    try:
        res = tunemod.search(base, cfg, evaluate, on_trial)
        if res.best_params:
            console.print(f"confirming default vs best ({cfg.confirm_reps} runs each, interleaved)")
            d, b = confirm_runs(res.best_params, cfg.confirm_reps)
            if len(d) >= 2 and len(b) >= 2:
                res.confirm = tunemod.confirm(d, b)
        interrupts.check()
    except SpecError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]: finished runs are stored; the same command reuses them")
        raise typer.Exit(130) from None
    path = tunemod.write(res, out or results / f"{base['experiment']['name']}-tune", cfg)
    console.print(f"tuning result: {path}")


@app.command()
def whatif(
    db: Annotated[Path, typer.Argument(help="Results file (.duckdb).")],
    speedup: Annotated[float, typer.Option(min=0.01, help="Network speed-up (2 = twice as fast).")] = 2.0,
    cpu_saving_per_gb_s: Annotated[
        float, typer.Option(min=0.0, help="CPU seconds saved per GB of remote shuffle data (an RDMA-like path).")
    ] = 0.0,
    select: Annotated[list[str] | None, typer.Option(help="Only scenarios whose label has this part.")] = None,
) -> None:
    """What would a faster shuffle path buy? Replays every successful single-application run."""
    from shufflelab import stats
    from shufflelab import whatif as wi
    from shufflelab.results import Store, StoreError

    if not db.exists():
        _fail(f"{db}: no such results file")
    if _whatif_eventlogs(db, speedup, cpu_saving_per_gb_s, select):
        return
    store = Store(db)
    try:
        runs = store.query(
            "SELECT r.run_id, s.label FROM runs r JOIN scenarios s USING (scenario_id) "
            "WHERE r.status = 'ok' AND coalesce(r.n_apps, 1) = 1 ORDER BY s.label, r.rep"
        )
        specs = store.scenario_specs()
    except StoreError as exc:
        _fail(str(exc))
    runs = runs[[all(p in lbl for p in (select or [])) for lbl in runs["label"]]]
    if runs.empty:
        _fail("no successful single-application run matches")
    t = Table(title=f"what if the network were {speedup:g}x faster"
              + (f" and {cpu_saving_per_gb_s:g} CPU-s/GB cheaper" if cpu_saving_per_gb_s else ""))  # fmt: skip
    t.add_column("scenario", overflow="fold")
    for col in ("n", "observed job (s)", "predicted (s)", "change"):
        t.add_column(col, justify="right")
    for label, g in runs.groupby("label", sort=False):
        obs, pred = [], []
        lab_cores = wi.spec_cores(specs.get(str(label)))
        for run_id in g["run_id"]:
            tasks, stages, jobs = wi.run_inputs(store, run_id)
            cores = lab_cores if lab_cores is not None else wi.recorded_cores(store, run_id)
            p = wi.predict(tasks, stages, jobs, speedup, cpu_saving_per_gb_s, cores=cores)
            obs.append(p.observed_s)
            pred.append(p.predicted_s)
        o, q = stats.summarize(obs), stats.summarize(pred)
        t.add_row(str(label), str(o.n), f"{o.mean:.1f}", f"{q.mean:.1f}", f"{q.mean / o.mean - 1:+.1%}")
    console.print(t)
    console.print(
        "Model: shufflelab.whatif (network waits / speed-up on the observed stage DAG); a prediction, not a run."
    )


def _whatif_eventlogs(db: Path, speedup: float, cpu_saving: float, select: list[str] | None) -> bool:
    """``whatif`` on a store of event logs (False for a lab store): one row per application."""
    from shufflelab import appreport

    if not appreport.is_eventlog_store(db):
        return False
    rows = appreport.whatif_table(db, speedup, cpu_saving, select)
    if rows.empty:
        _fail("no application matches")
    t = Table(title=f"what if the network were {speedup:g}x faster"
              + (f" and {cpu_saving:g} CPU-s/GB cheaper" if cpu_saving else ""))  # fmt: skip
    for col, just in (("application", "left"), ("recorded job (s)", "right"), ("replay at 1x (s)", "right"),
                      ("predicted (s)", "right"), ("change", "right")):  # fmt: skip
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for r in rows.itertuples(index=False):
        if r.note:
            t.add_row(str(r.application), f"{r.recorded_s:.1f}", "", "", f"not replayed: {r.note}")
        else:
            t.add_row(str(r.application), f"{r.recorded_s:.1f}", f"{r.replay_at_1x_s:.1f}", f"{r.predicted_s:.1f}",
                      f"{r.change:+.1%}")  # fmt: skip
    console.print(t)
    console.print(
        "Model estimate (shufflelab.whatif): the recorded schedule replayed with each task's fetch wait / k, "
        "scaled by the replay's own answer at 1x; a prediction, not a run."
    )
    return True


@app.command()
def analyze(
    logs: Annotated[
        list[Path] | None,
        typer.Argument(help="Event logs: files (any Spark codec), rolling log directories, directories of logs, zips."),
    ] = None,
    db: Annotated[Path, typer.Option(help="DuckDB file to write (re-running adds only new or grown logs).")] = Path(
        "results/eventlogs.duckdb"
    ),
    history_server: Annotated[str | None, typer.Option(help="A Spark History Server's URL (with --app).")] = None,
    app_id: Annotated[
        str | None, typer.Option("--app", help="Application id to fetch from the History Server.")
    ] = None,
    force: Annotated[bool, typer.Option(help="Read every log again, even unchanged ones.")] = False,
    out: Annotated[
        Path | None, typer.Option(help="Write the analysis report (HTML + Markdown) to this folder.")
    ] = None,
    link_gbps: Annotated[
        float | None, typer.Option(min=0.001, max=10_000, help="The cluster's link rate, for network efficiency.")
    ] = None,
    baseline: Annotated[
        list[Path] | None,
        typer.Option(help="Logs of the same application on a quiet network: the starvation verdict (repeatable)."),
    ] = None,
) -> None:
    """Read Spark event logs of any application into the lab's tables (apps, jobs, stages, tasks,
    executors, sql_executions); with --out, write the analysis: network cost, bounds, what pays off."""
    from shufflelab.eventlog import command

    if out is None and (link_gbps is not None or baseline):
        _fail("--link-gbps and --baseline shape the report: give --out DIR too")
    code = command.run(logs or [], db, history_server, app_id, force, console, err)
    if code:
        raise typer.Exit(code)
    if out is None:
        return
    from shufflelab import appreport
    from shufflelab.results import StoreError

    base_db = command.baseline_store(baseline, db, console, err) if baseline else None
    no_base = "none of the baseline logs could be read" if baseline and base_db is None else None
    try:
        html_path, md_path = appreport.write(db, out, link_gbps, base_db, no_base)
    except StoreError as exc:
        _fail(str(exc))
    console.print(f"report: {html_path}\n        {md_path}")


@app.command()
def doctor(
    hosts: Annotated[Path | None, typer.Option(help="Inventory TOML: probe those hosts over SSH instead.")] = None,
    spec: Annotated[Path | None, typer.Option(help="With --hosts: what the findings mean for this experiment.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="With --hosts: print JSON.")] = False,
) -> None:
    """Show what this host (or, with --hosts, each inventory host) can and cannot emulate."""
    if hosts is not None:
        from shufflelab.hosts import commands

        raise typer.Exit(commands.doctor(hosts, spec, as_json, console, err))
    from shufflelab import capabilities

    caps = capabilities.probe()
    t = Table(title="shufflelab doctor", show_lines=False)
    t.add_column("check")
    t.add_column("status")
    t.add_column("notes")

    def row(name: str, ok: bool, note: str = "") -> None:
        t.add_row(name, "[green]ok[/]" if ok else "[red]missing[/]", note)

    row("root", caps.root, "needed for namespaces, qdiscs, sysctls")
    row("network namespaces + veth", caps.netns and caps.veth)
    sw = caps.userspace_switch
    row(
        "userspace switch",
        sw,
        f"{caps.switch_binary}: delay, RED/ECN, DCTCP in the switch, VCC"
        if sw
        else "make setup builds it (cargo); without it delay, RED, dctcp and vcc are refused",
    )
    for kind in capabilities.QDISC_KINDS:
        note = {
            "htb": "rate shaping (kernel datapath)",
            "bfifo": "queue limit in bytes (kernel datapath)",
            "pfifo": "queue limit in packets (kernel datapath)",
            "netem": "not needed: the userspace switch adds delay" if sw else "delay: needs the userspace switch",
            "red": "not needed: the userspace switch does RED/ECN" if sw else "RED/ECN: needs the userspace switch",
            "tbf": "not needed (HTB shapes)",
            "fq_codel": "not needed",
            "prio": "not needed",
        }[kind]
        row(f"qdisc {kind}", kind in caps.qdiscs, note)
    for cc in ("cubic", "reno", "bbr", "dctcp"):
        in_kernel = cc in caps.congestion_controls
        note = ""
        if cc == "dctcp":
            note = f"specs' dctcp = {capabilities.DCTCP_MEANS}" if sw else "needs the userspace switch (over cubic)"
        row(f"congestion control {cc}", in_kernel or (cc == "dctcp" and sw), note)
    for tool, version in caps.tools.items():
        row(f"tool {tool}", version is not None, version or "make setup installs it")
    row("/dev/net/tun", caps.tun, "not needed (the switch uses packet sockets)")
    row("cgroup cpu controller", caps.cgroup_cpu, "weak storage nodes (NDP)")
    irq = caps.irq_time_accounting
    row(
        "IRQ time accounting",
        bool(irq),
        "interrupt work is not charged to threads"
        if irq
        else "off: packet forwarding is charged to whatever thread runs, so executor CPU time from the event "
        "log grows with traffic; shufflelab also measures task user CPU (executor plugin) and judges on it",
    )
    try:
        from shufflelab.jvm import spark_version

        row("pyspark", True, spark_version())
    except ImportError:
        row("pyspark", False, "make setup installs it")
    console.print(t)
    if sw:
        console.print(
            "The kernel datapath shapes rate and queue size with HTB + bfifo/pfifo. Specs that ask for delay,\n"
            "RED/ECN, dctcp or vcc run on the userspace switch instead (topology.bottleneck.datapath = 'auto'),\n"
            f"where dctcp = {capabilities.DCTCP_MEANS} (this kernel has no dctcp module)."
        )
    else:
        console.print(
            "This host shapes rate and queue size with HTB + bfifo/pfifo; it cannot add delay, RED/ECN or\n"
            "DCTCP in the kernel, and the userspace switch that provides them is not built: specs asking for\n"
            "them are refused with the reason."
        )


@app.command()
def clean(
    force: Annotated[bool, typer.Option(help="Also remove resources of runs that are still alive.")] = False,
    hosts: Annotated[
        Path | None, typer.Option(help="Inventory TOML: restore what the lease files on those hosts record.")
    ] = None,
) -> None:
    """Remove every namespace, process and scratch folder shufflelab left behind (--hosts: on inventory hosts)."""
    if hosts is not None:
        from shufflelab.hosts import commands

        raise typer.Exit(commands.clean(hosts, force, console, err))
    from shufflelab.emulate import netns

    r = netns.clean(force=force)
    console.print(
        f"removed {len(r.namespaces)} namespaces, {len(r.scratch_dirs)} scratch folders, {len(r.cgroups)} CPU cgroups"
    )
    for n in r.namespaces:
        console.print(f"  namespace {n}")
    if r.skipped_live:
        console.print(f"kept {len(r.skipped_live)} namespaces of live runs (use --force): {' '.join(r.skipped_live)}")


@app.command()
def demo(
    results: Annotated[Path, typer.Option(help="Folder for results and the report.")] = DEFAULT_RESULTS,
) -> None:
    """Run experiments/quickstart.toml (real Spark, shaped bottleneck, with/without UDP) and report."""
    spec = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.toml"
    if not spec.exists():
        spec = Path("experiments/quickstart.toml")
    t0 = time.monotonic()
    run(spec, results=results, report=True, reps=None, select=None)
    console.print(f"demo finished in {time.monotonic() - t0:.0f} s")


@app.command()
def calibrate(
    results: Annotated[Path, typer.Argument(help="Results file (.duckdb) of an emulated experiment.")],
    spec: Annotated[Path | None, typer.Option(help="Experiment spec (default: the scenarios in RESULTS).")] = None,
    out: Annotated[Path | None, typer.Option(help="Folder for calibration.md/.csv.")] = None,
    fit_run: Annotated[str | None, typer.Option(help="Run to fit from (default: median run without UDP).")] = None,
    cores: Annotated[float | None, typer.Option(help="Host cores (default: as recorded by the runs).")] = None,
    cross_cpu: Annotated[
        float | None, typer.Option(help="CPU cores per Gbit/s of UDP (default: the host profile, measured).")
    ] = None,
    control_loss: Annotated[
        float | None, typer.Option(help="Loss recovery per control round trip at a full FIFO, s (default: measured).")
    ] = None,
    ensemble: Annotated[
        bool, typer.Option(help="Fit from every run without UDP; simulated = median over the fits.")
    ] = False,
) -> None:
    """Simulate every scenario of an emulated experiment (sim backend) and report sim-vs-real job time."""
    from shufflelab.sim.calibrate import CalibrationError, command

    try:
        cal, md = command(results, spec, out, fit_run, cores, cross_cpu, control_loss, ensemble)
    except (CalibrationError, FileNotFoundError, SpecError) as e:
        err.print(f"[red]error[/]: {e}")
        raise typer.Exit(2) from None
    t = cal.table
    for _, r in t.iterrows():
        console.print(
            f"{r['scenario']:<28} real {r['real_mean_s']:7.1f} s (n={r['n']})  sim {r['sim_s']:7.1f} s  "
            f"error {r['rel_error'] * 100:+6.1f} %"
        )
    console.print(f"median absolute error {cal.median_abs_error * 100:.1f} % over {len(t)} scenarios -> {md}")


try:  # the simulator backend mounts its own sub-commands
    from shufflelab.sim.cli import app as _sim_app

    app.add_typer(_sim_app, name="sim", help="The cluster-scale simulator backend.")
except ImportError:
    pass


def main() -> None:
    try:
        app()
    except BrokenPipeError:
        sys.exit(1)


if __name__ == "__main__":
    main()
