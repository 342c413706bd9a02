"""The ``shufflelab`` commands that analyse results: diagnose | tune | whatif | analyze | calibrate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from shufflelab import interrupts
from shufflelab.cli_base import DEFAULT_RESULTS, _fail, _install_signal_handlers, app, console, err


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
    min_reps: Annotated[
        int,
        typer.Option(
            min=2,
            help="Fewer successful runs than this on either side: inconclusive (at least 2: one run has no spread).",
        ),
    ] = 3,
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
    hosts: Annotated[
        Path | None,
        typer.Option(help="Inventory TOML: every trial on those machines over SSH instead of namespaces here."),
    ] = None,
) -> None:
    """Search shuffle and network knobs on the emulated fabric (every trial is stored runs)."""
    import contextlib

    from shufflelab import tune as tunemod
    from shufflelab.spec import SpecError

    try:
        base, cfg = tunemod.load(tune_path)
    except SpecError as exc:
        _fail(str(exc))
    _install_signal_handlers()
    with contextlib.ExitStack() as stack:
        from shufflelab.emulate import local
        from shufflelab.switch import Switch  # the fabrics' userspace switch, handed to the backend

        backend = local.backend(switches=Switch)
        if hosts is not None:
            from shufflelab.hosts import commands as hostcmds

            try:  # what the machines cannot run at any knob's extreme is refused before connecting
                probe = tunemod.extremes_spec(base, cfg, str(tune_path))
                opened = hostcmds.open_backend(hosts, probe, str(tune_path), switches=Switch)
                backend = stack.enter_context(opened).backend()
            except SpecError as exc:
                _fail(str(exc))
            except hostcmds.HOST_ERRORS as exc:
                _fail(hostcmds.describe(exc), 1)
        try:
            _tune(tunemod, base, cfg, results, out, backend)
        except Exception as exc:
            if hosts is None:
                raise
            from shufflelab.hosts import commands as hostcmds

            if not isinstance(exc, hostcmds.HOST_ERRORS):
                raise
            _fail(hostcmds.describe(exc), 1)


def _tune(tunemod: Any, base: dict[str, Any], cfg: Any, results: Path, out: Path | None, backend: Any) -> None:
    from shufflelab.spec import SpecError

    evaluate, confirm_runs = tunemod.emulate_evaluator(base, results, backend=backend)

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
    if any(s is not None and s.workload.name == "mapreduce" for s in specs.values()):
        _fail(
            f"{db}: a MapReduce replay has no Spark tasks and no stage DAG: the what-if replay needs them "
            "(the report's seed 002 section compares the MapReduce job times)"
        )
    runs = runs[[all(p in lbl for p in (select or [])) for lbl in runs["label"]]]
    if runs.empty:
        _fail("no successful single-application run matches")
    t = Table(title=f"what if the network were {speedup:g}x faster"
              + (f" and {cpu_saving_per_gb_s:g} CPU-s/GB cheaper" if cpu_saving_per_gb_s else ""))  # fmt: skip
    t.add_column("scenario", overflow="fold")
    for col in ("n", "observed job (s)", "predicted (s)", "change"):
        t.add_column(col, justify="right")
    skipped: list[str] = []
    for label, g in runs.groupby("label", sort=False):
        obs, pred = [], []
        lab_cores = wi.spec_cores(specs.get(str(label)))
        for run_id in g["run_id"]:
            tasks, stages, jobs = wi.run_inputs(store, run_id)
            cores = lab_cores if lab_cores is not None else wi.recorded_cores(store, run_id)
            try:
                p = wi.predict(tasks, stages, jobs, speedup, cpu_saving_per_gb_s, cores=cores)
            except ValueError as exc:  # a run without tasks or ended jobs: named below, the others replayed
                skipped.append(f"{run_id} ({label}): {exc}")
                continue
            obs.append(p.observed_s)
            pred.append(p.predicted_s)
        if not obs:
            t.add_row(str(label), "0", "–", "–", "not replayed")
            continue
        o, q = stats.summarize(obs), stats.summarize(pred)
        t.add_row(str(label), str(o.n), f"{o.mean:.1f}", f"{q.mean:.1f}", f"{q.mean / o.mean - 1:+.1%}")
    console.print(t)
    for line in skipped:
        err.print(f"[yellow]not replayed:[/] {line}", highlight=False, soft_wrap=True)
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
            recorded = f"{r.recorded_s:.1f}" if r.recorded_s == r.recorded_s else "–"  # NaN: no job ended
            t.add_row(str(r.application), recorded, "", "", f"not replayed: {r.note}")
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
        list[str] | None,
        typer.Argument(
            help="Event logs: files (any Spark codec), rolling log directories, directories of logs, zips; "
            "with --engine spark also hdfs://host/path (or webhdfs://host:port/path) URLs.",
            show_default=False,
        ),
    ] = None,
    db: Annotated[
        Path | None,
        typer.Option(
            help="DuckDB file to write (re-running adds only new or grown logs; default results/eventlogs.duckdb); "
            "with --engine spark, the folder of Parquet tables (default results/eventlogs.parquet; replaced)."
        ),
    ] = None,
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
    workers: Annotated[
        int | None, typer.Option(min=1, help="Processes parsing logs (default: one per core; one on 1-2 cores).")
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            help="local: this machine's cores, into a DuckDB file; spark: a Spark application on --master "
            "(logs on a local path or hdfs://), into Parquet tables that report reads directly.",
        ),
    ] = "local",
    master: Annotated[
        str | None, typer.Option(help="With --engine spark: the Spark master URL (spark://host:port, local[N], yarn).")
    ] = None,
    spark_conf: Annotated[
        list[str] | None,
        typer.Option(help="With --engine spark: a Spark setting spark.KEY=VALUE (repeatable).", show_default=False),
    ] = None,
) -> None:
    """Read Spark event logs of any application into the lab's tables (apps, jobs, stages, tasks,
    executors, sql_executions); with --out, write the analysis: network cost, bounds, what pays off."""
    from shufflelab.eventlog import command

    if out is None and (link_gbps is not None or baseline):
        _fail("--link-gbps and --baseline shape the report: give --out DIR too")
    if engine not in ("local", "spark"):
        _fail(f"--engine: {engine!r} is not local or spark")
    if engine == "spark":
        from shufflelab.eventlog import spark_engine

        if master is None:
            _fail("--engine spark needs --master URL (spark://host:port, local[N], yarn)")
        if history_server is not None or workers is not None:
            _fail("--history-server and --workers are for --engine local (Spark's executors parse the logs)")
        db = db or Path("results/eventlogs.parquet")
        code = spark_engine.run(logs or [], db, master, spark_conf or [], console, err)
    else:
        if master is not None or spark_conf:
            _fail("--master and --spark-conf go with --engine spark")
        remote = [p for p in logs or [] if "://" in p and not p.startswith("file://")]
        if remote:
            _fail(f"{remote[0]}: logs at a URL are read with --engine spark --master URL")
        db = db or Path("results/eventlogs.duckdb")
        local = [Path(p.removeprefix("file://")) for p in logs or []]
        code = command.run(local, db, history_server, app_id, force, console, err, workers=workers)
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
    if len(appreport.applications(appreport.Store(db))) > 1:  # appreport.write added the fleet page
        console.print(f"fleet:  {out / 'fleet.html'}\n        {out / 'fleet.md'}")


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
    from shufflelab.spec import SpecError

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
