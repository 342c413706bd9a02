"""The ``shufflelab`` command: run | report | doctor | clean | demo here, the analysis commands
(diagnose | tune | whatif | analyze | calibrate) in ``cli_analysis``, ``sim`` when present."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from shufflelab import interrupts
from shufflelab.cli_base import DEFAULT_RESULTS, _fail, _install_signal_handlers, app, console, err

if TYPE_CHECKING:
    from shufflelab.artifacts import Cached


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
    deploy: Annotated[
        bool, typer.Option("--deploy", help="With --hosts: first bring the hosts what is missing (shufflelab deploy).")
    ] = False,
    until_decided: Annotated[
        bool,
        typer.Option(
            "--until-decided",
            help="Add interleaved repetitions to the comparisons whose starvation verdict is still open, each "
            "stopped when decided at a look of a group-sequential design (Lan-DeMets alpha spending) or at --max-reps.",
        ),
    ] = False,
    max_reps: Annotated[
        int | None, typer.Option(help="With --until-decided: the most runs a side (default 10).")
    ] = None,
    spending: Annotated[
        str, typer.Option(help="With --until-decided: the alpha-spending function, pocock or obf.")
    ] = "pocock",
) -> None:
    """Run every missing run of an experiment (finished runs are kept: re-running resumes).

    Exits 1 when a run of this invocation did not end ok (failed or timed out), 2 on a bad spec."""
    from shufflelab import spec as specmod
    from shufflelab.emulate import runner as runmod
    from shufflelab.kinds import DRIVERS
    from shufflelab.results import StoreError
    from shufflelab.spec import SpecError

    try:
        spec = specmod.load(spec_path)
    except SpecError as exc:
        _fail(str(exc))
    if reps is not None:
        spec = spec.model_copy(update={"experiment": spec.experiment.model_copy(update={"repetitions": reps})})
    if not until_decided and (max_reps is not None or spending != "pocock"):
        _fail("--max-reps and --spending go with --until-decided")
    if until_decided:
        from shufflelab import sequential
        from shufflelab.stats import MIN_N

        try:
            sequential.Design(max(MIN_N, spec.experiment.repetitions), max_reps or 10, 0.05, spending)
        except ValueError as exc:
            _fail(str(exc))
    if deploy:
        if hosts is None:
            _fail("--deploy needs --hosts (it brings the inventory's hosts what a run there needs)")
        from shufflelab.hosts import commands as hostcmds

        code = hostcmds.deploy(hosts, False, console, err, cached_on_hosts)
        if code:
            raise typer.Exit(code)
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
                from shufflelab.switch import Switch  # the fabrics' userspace switch, handed to the backend

                if hosts is not None:
                    from shufflelab.hosts import commands as hostcmds

                    opened = hostcmds.open_backend(hosts, spec, str(spec_path), select, switches=Switch)
                    backend = stack.enter_context(opened).backend()
                else:
                    from shufflelab.emulate import local

                    backend = local.backend(switches=Switch)
                if until_decided:
                    r = _until_decided(spec, spec_path, results, progress, select, backend, max_reps or 10, spending)
                else:
                    runner = runmod.EmulateRunner(
                        spec, str(spec_path), results, progress, select=select, backend=backend, kinds=DRIVERS
                    )
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


def _until_decided(
    spec: Any,
    spec_path: Path,
    results: Path,
    progress: Any,
    select: list[str] | None,
    backend: Any,
    max_reps: int,
    spending: str,
) -> Any:
    """``run --until-decided``: the loop of ``emulate.until_decided`` with this command's runner."""
    from shufflelab.emulate import runner as runmod
    from shufflelab.emulate import until_decided as ud
    from shufflelab.kinds import DRIVERS

    def make(sp: Any, labels: set[str] | None) -> Any:
        return ud.only(runmod.EmulateRunner(sp, str(spec_path), results, progress, select=select, backend=backend,
                                            kinds=DRIVERS), labels)  # fmt: skip

    def look(n: int, found: list[Any]) -> None:
        open_ = [d.scenario for d in found if not d.decided]
        console.print(f"look at n = {n}: {len(found) - len(open_)} decided, {len(open_)} open"
                      + (f" ({', '.join(open_)})" if open_ else ""))  # fmt: skip

    res = ud.run(spec, make, max_reps, spending=spending, on_look=look)
    return runmod.ExperimentResult(res.store_path, res.outcomes, res.skipped)


def _write_report(db: Path, out: Path | None) -> None:
    from shufflelab import appreport
    from shufflelab import report as reportmod

    if appreport.is_eventlog_store(db):  # applications read from event logs: their own report
        html_path, md_path = appreport.write(db, out or db.with_name(db.stem + "-report"))
        console.print(f"report: {html_path}\n        {md_path}")
        if len(appreport.applications(appreport.Store(db))) > 1:  # and the fleet page beside it
            console.print(f"fleet:  {html_path.with_name('fleet.html')}\n        {md_path.with_name('fleet.md')}")
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
def doctor(
    hosts: Annotated[Path | None, typer.Option(help="Inventory TOML: probe those hosts over SSH instead.")] = None,
    spec: Annotated[Path | None, typer.Option(help="With --hosts: what the findings mean for this experiment.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="With --hosts: print JSON.")] = False,
) -> None:
    """Show what this host (or, with --hosts, each inventory host) can and cannot emulate."""
    if hosts is not None:
        from shufflelab.hosts import commands

        raise typer.Exit(commands.doctor(hosts, spec, as_json, console, err, cached_on_hosts))
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


def cached_on_hosts() -> tuple[Cached, ...]:
    """The workloads' artifacts in this machine's cache that runs read on every host, which ``deploy
    --hosts`` brings there (and ``doctor --hosts`` says whether it would): TPC-H/NDP's jars, Hadoop's
    for the storage hosts' daemons and the NDP connector's for Spark. Named here, where the hosts
    backend is given what it runs, so that the backend imports none of ``ndp/``."""
    from shufflelab.ndp import connector, hadoop_jars

    return (hadoop_jars.cached(), connector.cached())


@app.command()
def deploy(
    hosts: Annotated[Path, typer.Option(help="Inventory TOML: the hosts to bring what a run needs.")],
    remove: Annotated[
        bool, typer.Option("--remove", help="Remove exactly what deploy brought (each host's manifest).")
    ] = False,
) -> None:
    """Copy to each inventory host (SFTP) what `run --hosts` needs there and it lacks: the source
    tree, the Python packages, the listener jar, the switch (docs/hosts.md, "Deploying")."""
    from shufflelab.hosts import commands

    raise typer.Exit(commands.deploy(hosts, remove, console, err, cached_on_hosts))


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
    for d in r.resolvers:
        console.print(f"  resolver folder of a namespace already gone: {d}")
    if r.skipped_live:
        console.print(f"kept {len(r.skipped_live)} namespaces of live runs (use --force): {' '.join(r.skipped_live)}")


DEMO_MAX_REPS = 6  # the demo's 3 runs a side, and up to 3 more while its verdict is open (about 2 min each)


@app.command()
def demo(
    results: Annotated[Path, typer.Option(help="Folder for results and the report.")] = DEFAULT_RESULTS,
) -> None:
    """Run experiments/quickstart.toml (real Spark, shaped bottleneck, with/without UDP) and report; the
    comparison gets repetitions until its starvation verdict is decided (at most 6 runs a side)."""
    spec = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.toml"
    if not spec.exists():
        spec = Path("experiments/quickstart.toml")
    t0 = time.monotonic()
    run(spec, results=results, report=True, reps=None, select=None, until_decided=True, max_reps=DEMO_MAX_REPS)
    console.print(f"demo finished in {time.monotonic() - t0:.0f} s")


# the analysis commands, listed after these
from shufflelab import cli_analysis as _analysis  # noqa: E402, F401

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
