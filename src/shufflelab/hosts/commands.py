"""The SSH backend's commands: ``doctor --hosts`` and ``clean --hosts`` (the CLI calls these)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from shufflelab.hosts import findings, inventory, lease, probe
from shufflelab.hosts.control import HostError, connect
from shufflelab.hosts.safety import SafetyError
from shufflelab.spec import ExperimentSpec, SpecError, expand

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from shufflelab.artifacts import Cached
    from shufflelab.emulate.protocols import Switches
    from shufflelab.hosts.backend import HostsBackend

# what a run on inventory hosts may fail with besides a bad spec (each names the host and the step)
HOST_ERRORS: tuple[type[Exception], ...] = (HostError, SafetyError, lease.RestoreError)

_COLOURS = {"ok": "green", "warn": "yellow", "refuse": "red"}


def describe(exc: BaseException) -> str:
    """What a run on inventory hosts failed with: the host error and the host errors it happened
    while handling (e.g. a host lost, then the restore that could not reach it), first cause first."""
    chain: list[str] = []
    seen: BaseException | None = exc
    while isinstance(seen, HOST_ERRORS) and str(seen) not in chain:
        chain.insert(0, str(seen))
        seen = seen.__cause__ or seen.__context__
    return "\n  then: ".join(chain) if chain else str(exc)


def _load(inv_path: Path, spec_path: Path | None) -> tuple[inventory.Inventory, ExperimentSpec | None]:
    inv = inventory.load(inv_path)
    spec = None
    if spec_path is not None:
        from shufflelab import spec as specmod

        spec = specmod.load(spec_path)
        inventory.check_mapping(inv, spec, str(inv_path))
    return inv, spec


def doctor(
    inv_path: Path,
    spec_path: Path | None,
    as_json: bool,
    console: Console,
    err: Console,
    cached: Callable[[], Sequence[Cached]],
) -> int:
    """Probe every inventory host; 0 when nothing is refused, 1 when something is, 2 on bad input.
    ``cached``: the workloads' artifacts in the cache deploy brings too (:func:`deploy`)."""
    try:
        inv, spec = _load(inv_path, spec_path)
    except SpecError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2

    mapping = inventory.check_mapping(inv, spec) if spec is not None else {}
    used = findings.used_hosts(spec, mapping, inv.router) if spec is not None else sorted(inv.hosts)

    async def gather() -> tuple[dict[str, probe.HostFacts], list[findings.Finding], dict[str, Any]]:
        async with connect(inv) as sessions:
            facts = await probe.probe_all(sessions)
            reached = await probe.reach_all({h: s for h, s in sessions.items() if h in used}, facts)
            return facts, await deploy_findings(inv, sessions, cached), reached

    try:
        facts, deploying, reached = asyncio.run(gather())
    except (HostError, SafetyError) as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2
    allowed = [h for h, ih in inv.hosts.items() if ih.control_interface_shaping_allowed]
    found = findings.general(facts, allowed) + findings.reachability(facts, reached) + deploying
    if spec is not None:
        found += findings.for_spec(spec, mapping, facts, inv.router, allowed)
        for problem, labels in backend_refusals(inv, spec, str(spec_path)).items():
            found.append(
                findings.Finding(
                    "*", "backend", "refuse", f"{problem} (scenarios: {', '.join(labels)})", scenarios=tuple(labels)
                )
            )
        found.append(findings.cells(found, [sc.label for sc in expand(spec, str(spec_path))], used))
    refused = any(f.level == "refuse" for f in found)
    if as_json:
        doc = {
            "inventory": str(inv_path),
            "spec": str(spec_path) if spec_path else None,
            "hosts": {h: f.to_dict() for h, f in facts.items()},
            "findings": [f.to_dict() for f in found],
        }
        console.print_json(json.dumps(doc))
        return 1 if refused else 0
    t = Table(title=f"shufflelab doctor --hosts {inv_path}")
    for col in ("host", "address", "kernel", "java", "python", "pyspark", "qdiscs", "congestion controls", "clock"):
        t.add_column(col)
    for h, f in facts.items():
        clock = (
            f"{f.clock_offset_s * 1e3:+.2f} ± {f.clock_uncertainty_s * 1e3:.2f} ms"
            if f.clock_offset_s is not None and f.clock_uncertainty_s is not None
            else "-"
        )
        t.add_row(
            h,
            f.address,
            f.kernel,
            f.java or "-",
            f.python or "-",
            f.pyspark or "-",
            " ".join(f.qdiscs) if f.qdiscs is not None else "?",
            " ".join(f.congestion_controls),
            clock,
        )
    console.print(t)
    ft = Table(title="what it means" + (f" for {spec_path}" if spec_path else ""))
    for col in ("host", "check", "status", "detail"):
        ft.add_column(col)
    for g in found:
        ft.add_row(g.host, g.check, f"[{_COLOURS[g.level]}]{g.level}[/]", g.detail)
    console.print(ft)
    return 1 if refused else 0


async def deploy_findings(
    inv: inventory.Inventory, sessions: dict[str, Any], cached: Callable[[], Sequence[Cached]]
) -> list[findings.Finding]:
    """Per host, what ``shufflelab deploy`` would bring (warn), nothing (ok), or cannot (refuse)."""
    from shufflelab.hosts import deploy as dep

    try:
        ctl = await asyncio.to_thread(dep.controller, cached)
    except dep.DeployError as exc:
        return [findings.Finding("*", "deploy", "warn", f"cannot tell what deploy would bring: {exc}")]
    results = await asyncio.gather(*(dep.plan_on(s, inv, ctl) for s in sessions.values()), return_exceptions=True)
    out = []
    for name, r in zip(sessions, results, strict=True):
        if isinstance(r, HostError):
            out.append(findings.Finding(name, "deploy", "warn", f"cannot tell what deploy would bring: {r.reason}"))
        elif isinstance(r, BaseException):
            raise r
        elif r.refusals:
            out += [findings.Finding(name, "deploy", "refuse", f"cannot be brought: {x}") for x in r.refusals]
        elif r.nothing:
            out.append(findings.Finding(name, "deploy", "ok", "has what a run needs (deploy would copy nothing)"))
        else:
            what = "; ".join(f"{ip.name}: {ip.summary()}" for ip in r.items if not ip.empty)
            out.append(findings.Finding(name, "deploy", "warn", f"missing or different (shufflelab deploy): {what}"))
    return out


def clean(inv_path: Path, force: bool, console: Console, err: Console) -> int:
    """Restore what every host's lease files record; 0 when every host is back, 1 otherwise."""
    try:
        inv = inventory.load(inv_path)
    except SpecError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2

    async def work() -> list[lease.CleanReport]:
        async with connect(inv) as sessions:
            return list(
                await asyncio.gather(*(lease.clean_host(s, inv.ssh.lease_dir, force) for s in sessions.values()))
            )

    try:
        reports = asyncio.run(work())
    except (HostError, SafetyError) as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 1
    restored = [r for rep in reports for r in rep.restored]
    lease.remove_local_folders(i for rep in reports for i in rep.restored_ids)
    live = [r for rep in reports for r in rep.skipped_live]
    problems = [p for rep in reports for p in rep.problems]
    console.print(f"restored {len(restored)} leases on {len(reports)} hosts")
    for r in restored:
        console.print(f"  {r}")
    if live:
        console.print(f"kept {len(live)} leases of controllers still running here (use --force):")
        for r in live:
            console.print(f"  {r}")
    for p in problems:
        err.print(f"[red]problem:[/] {p}", highlight=False)
    return 1 if problems else 0


def backend_refusals(
    inv: inventory.Inventory,
    spec: ExperimentSpec,
    spec_path: str,
    select: list[str] | None = None,
    router_line: tuple[str, float | None] | None = None,
    cpus: Mapping[str, int | None] | None = None,
) -> dict[str, list[str]]:
    """What in ``spec`` (its scenarios chosen by ``select``, as ``run --select`` does; None: all) the
    hosts backend cannot run: each problem (naming the spec field) with the labels of the scenarios
    that have it; empty when every one of them can run. ``router_line``: the router host's data
    interface and line rate, once read (before: None); ``cpus``: each inventory host's CPU count,
    once read."""
    from shufflelab.hosts.fabric import refusals
    from shufflelab.spec import selected

    mapping = inventory.check_mapping(inv, spec, spec_path)
    sharing = inventory.machine_groups(mapping)
    machine_cpus = {h: (m, cpus.get(m)) for h, m in mapping.items()} if cpus is not None else None
    scenarios: dict[str, list[str]] = {}
    for sc in selected(spec, select, spec_path):
        for p in refusals(
            sc.spec, router=inv.router is not None, sharing=sharing, router_line=router_line, machine_cpus=machine_cpus
        ):
            scenarios.setdefault(p, []).append(sc.label)
    return scenarios


def _refused(spec_path: str, scenarios: dict[str, list[str]]) -> str | None:
    """The message refusing the run of ``spec_path`` for ``scenarios`` (:func:`backend_refusals`)."""
    if not scenarios:
        return None
    lines = [f"{p} (scenarios: {', '.join(labels)})" for p, labels in scenarios.items()]
    return f"{spec_path}: the hosts backend cannot run this experiment:\n  - " + "\n  - ".join(lines)


def open_backend(
    inv_path: Path,
    spec: ExperimentSpec,
    spec_path: str,
    select: list[str] | None = None,
    switches: Switches | None = None,
) -> HostsBackend:
    """The backend for ``shufflelab run --hosts`` (its fabric's userspace switch made by ``switches``,
    see :class:`~shufflelab.hosts.backend.HostsBackend`): the inventory read, the spec's hosts mapped,
    every scenario the run selects (``select`` as ``run --select``; None: all) checked against what
    the hosts backend can do (a :class:`SpecError` naming the scenario and the field otherwise),
    and again on entry, once connected and before anything is changed, against the router host's
    line rate (read there) and each machine's CPU count. Use it as a context manager (it connects on entry)."""
    from shufflelab.hosts.backend import HostsBackend

    inv = inventory.load(inv_path)
    inventory.check_mapping(inv, spec, str(inv_path))
    refused = _refused(spec_path, backend_refusals(inv, spec, spec_path, select))
    if refused:
        raise SpecError(refused)
    # once connected, before anything changes: what the router host's line rate cannot hold
    return HostsBackend(
        inv,
        lambda line, cpus: _refused(spec_path, backend_refusals(inv, spec, spec_path, select, line, cpus)),
        switches,
    )


def deploy(inv_path: Path, remove: bool, console: Console, err: Console, cached: Callable[[], Sequence[Cached]]) -> int:
    """``shufflelab deploy --hosts``: bring every inventory host what a run needs (or, with
    ``remove``, remove exactly what deploy brought); 0 when done, 1 when refused or failed, 2 on
    a bad inventory. ``cached()``: the workloads' artifacts in this machine's cache the hosts read in
    theirs (:func:`shufflelab.hosts.deploy.controller`)."""
    from shufflelab.hosts import deploy as dep

    try:
        inv = inventory.load(inv_path)
    except SpecError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2
    try:
        if remove:
            return _remove(inv, console, err)
        ctl = dep.controller(cached)
        return _deploy(inv, ctl, console, err)
    except (HostError, SafetyError, dep.DeployError) as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 1


def _remove(inv: inventory.Inventory, console: Console, err: Console) -> int:
    from shufflelab.hosts import deploy as dep

    async def work() -> list[dep.Removed]:
        async with connect(inv) as sessions:
            return list(await asyncio.gather(*(dep.remove_host(s, inv) for s in sessions.values())))

    for r in asyncio.run(work()):
        if not r.files and not r.dirs and not r.kept:
            console.print(f"{r.host}: nothing deployed here")
            continue
        console.print(f"{r.host}: removed {r.files} files and links, {r.dirs} folders")
        for k in r.kept:
            console.print(f"  [yellow]kept[/] {k} (not empty: holds files deploy did not put there)")
    return 0


def plan_table(plans: list[Any], title: str = "what deploy brings") -> Table:
    from shufflelab.hosts.deploy import describe_plan

    t = Table(title=title)
    for col in ("host", "item", "status"):
        t.add_column(col)
    for p in plans:
        for name, what in describe_plan(p):
            t.add_row(p.host, name, what)
    return t


def _deploy(inv: inventory.Inventory, ctl: Any, console: Console, err: Console) -> int:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    from shufflelab.hosts import deploy as dep

    async def work() -> tuple[list[dep.HostPlan], int]:
        async with connect(inv) as sessions:
            plans = list(await asyncio.gather(*(dep.plan_on(s, inv, ctl) for s in sessions.values())))
            refusals = [f"host {p.host}: {r}" for p in plans for r in p.refusals]
            if refusals:
                console.print(plan_table(plans))
                for r in refusals:
                    err.print(f"[bold red]refused:[/] {r}", highlight=False)
                return plans, 1
            todo = [p for p in plans if not p.nothing]
            if not todo:
                console.print(plan_table(plans))
                console.print("nothing to copy: every host has what a run needs")
                return plans, 0
            columns = (TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(), TimeElapsedColumn())
            with Progress(*columns, console=console) as bar:
                tasks = {p.host: bar.add_task(f"{p.host} ({p.files} files)", total=p.bytes) for p in todo}

                def advance(host: str) -> Any:
                    return lambda n: bar.advance(tasks[host], n)

                await asyncio.gather(*(dep.apply_plan(sessions[p.host], inv, p, advance(p.host)) for p in todo))
            console.print(plan_table(plans, "what deploy brought"))
            total = sum(p.bytes for p in todo)
            console.print(
                f"deployed: {sum(p.files for p in todo)} files ({total / 1e6:.1f} MB) to {len(todo)} hosts; "
                f"the manifests ({dep.manifest_path(inv)} on each host) record them for deploy --remove"
            )
            return plans, 0

    for item in ctl.items:
        if item.skip and item.name != "switch":
            console.print(f"[yellow]{item.name}[/]: {item.skip}")
    return asyncio.run(work())[1]
