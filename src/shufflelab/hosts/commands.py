"""The SSH backend's commands: ``doctor --hosts`` and ``clean --hosts`` (the CLI calls these)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from shufflelab.hosts import findings, inventory, lease, probe
from shufflelab.hosts.control import HostError, connect
from shufflelab.hosts.safety import SafetyError
from shufflelab.spec import ExperimentSpec, SpecError

if TYPE_CHECKING:
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


def doctor(inv_path: Path, spec_path: Path | None, as_json: bool, console: Console, err: Console) -> int:
    """Probe every inventory host; 0 when nothing is refused, 1 when something is, 2 on bad input."""
    try:
        inv, spec = _load(inv_path, spec_path)
    except SpecError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2

    async def gather() -> dict[str, probe.HostFacts]:
        async with connect(inv) as sessions:
            return await probe.probe_all(sessions)

    try:
        facts = asyncio.run(gather())
    except (HostError, SafetyError) as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2
    found = findings.general(facts)
    if spec is not None:
        found += findings.for_spec(spec, inventory.check_mapping(inv, spec), facts, inv.router)
        for problem, labels in backend_refusals(inv, spec, str(spec_path)).items():
            found.append(findings.Finding("*", "backend", "refuse", f"{problem} (scenarios: {', '.join(labels)})"))
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


def backend_refusals(inv: inventory.Inventory, spec: ExperimentSpec, spec_path: str) -> dict[str, list[str]]:
    """What in ``spec`` the hosts backend cannot run: each problem (naming the spec field) with the
    labels of the scenarios that have it; empty when every scenario can run."""
    from shufflelab.hosts.fabric import refusals
    from shufflelab.spec import expand

    scenarios: dict[str, list[str]] = {}
    for sc in expand(spec, spec_path):
        for p in refusals(sc.spec, router=inv.router is not None):
            scenarios.setdefault(p, []).append(sc.label)
    return scenarios


def open_backend(inv_path: Path, spec: ExperimentSpec, spec_path: str) -> HostsBackend:
    """The backend for ``shufflelab run --hosts``: the inventory read, the spec's hosts mapped,
    every scenario checked against what the hosts backend can do (a :class:`SpecError` naming the
    scenario and the field otherwise). Use it as a context manager (it connects on entry)."""
    from shufflelab.hosts.backend import HostsBackend

    inv = inventory.load(inv_path)
    inventory.check_mapping(inv, spec, str(inv_path))
    scenarios = backend_refusals(inv, spec, spec_path)
    if scenarios:
        lines = [f"{p} (scenarios: {', '.join(labels)})" for p, labels in scenarios.items()]
        raise SpecError(f"{spec_path}: the hosts backend cannot run this experiment:\n  - " + "\n  - ".join(lines))
    return HostsBackend(inv)
