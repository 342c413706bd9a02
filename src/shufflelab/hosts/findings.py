"""What the hosts' probes mean, in general and for a given spec (pure).

Each finding is ``ok``, ``warn`` (runs, with a caveat the report should carry) or ``refuse``
(the spec's cells that need it cannot run on these hosts), and says why in words. A refusal
about a cell names it (``scenarios``); any other refusal on a host the spec uses stops every
cell: :func:`cells` counts the cells no refusal stops.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from shufflelab import netplan
from shufflelab.hosts.lease import CGROUP_CPU_ROOT
from shufflelab.hosts.probe import HostFacts
from shufflelab.spec import ExperimentSpec, Scenario, SpecError, TpchParams, expand

Level = Literal["ok", "warn", "refuse"]
CLOCK_WARN_S = 0.010

# Ports the daemons of each role listen on (as the emulate backend runs them).
ROLE_PORTS: dict[str, tuple[int, ...]] = {
    "spark-master": (7077, 8080),
    "spark-worker": (7078, 8081),
    "traffic-sink": (5201, 5202),
}


@dataclass(frozen=True)
class Finding:
    host: str  # "*" for findings about all hosts
    check: str
    level: Level
    detail: str
    # a refusal of these cells only (scenario labels); None: of every cell that uses the host
    scenarios: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _versions(facts: Mapping[str, HostFacts], what: str, needed: bool) -> list[Finding]:
    seen = {h: getattr(f, what) for h, f in facts.items() if f.error is None}
    missing = [h for h, v in seen.items() if v is None]
    found = {v for v in seen.values() if v is not None}
    out = []
    if missing:
        level: Level = "refuse" if needed else "warn"
        out.append(Finding("*", what, level, f"missing on {', '.join(missing)}"))
    if len(found) > 1:
        by = ", ".join(f"{h}: {v}" for h, v in seen.items() if v is not None)
        out.append(Finding("*", what, "warn", f"versions differ ({by}); results may not compare across hosts"))
    elif found and not missing:
        out.append(Finding("*", what, "ok", f"{found.pop()} everywhere"))
    return out


def general(facts: Mapping[str, HostFacts], shaping_allowed: Collection[str] = ()) -> list[Finding]:
    """Findings that hold whatever the spec; ``shaping_allowed``: the hosts whose inventory entry
    sets ``control_interface_shaping_allowed``."""
    out: list[Finding] = []
    for h, f in facts.items():
        if f.error is not None:
            out.append(Finding(h, "probe", "refuse", f.error))
            continue
        if not (f.root or f.sudo):
            out.append(Finding(h, "privileges", "refuse", "neither root nor passwordless sudo: cannot shape or tune"))
        else:
            out.append(Finding(h, "privileges", "ok", "root" if f.root else "passwordless sudo"))
        if not f.data_interface_present:
            out.append(Finding(h, "data interface", "refuse", f"{f.data_interface}: no such interface"))
        elif f.data_address is None:
            out.append(Finding(h, "data interface", "refuse", f"{f.data_interface} has no IPv4 address to bind to"))
        elif f.control_interface == f.data_interface and h in shaping_allowed:
            out.append(
                Finding(
                    h,
                    "data interface",
                    "warn",
                    f"{f.data_interface} also carries the SSH control connection, and the inventory allows shaping "
                    "it (control_interface_shaping_allowed): a wrong rate could cut the controller off",
                )
            )
        elif f.control_interface == f.data_interface:
            # a refusal of the runs that shape this host (for_spec says which cells); alone it stops none
            out.append(
                Finding(
                    h,
                    "data interface",
                    "refuse",
                    f"{f.data_interface} also carries the SSH control connection: a run that shapes this host's "
                    f"link (its own with topology.kind = 'star', the shared bottleneck as the router host) is "
                    f"refused; use a separate data interface or set hosts.{h}.control_interface_shaping_allowed "
                    "= true",
                    scenarios=(),
                )
            )
        else:
            out.append(
                Finding(
                    h,
                    "data interface",
                    "ok",
                    f"{f.data_interface} (mtu {f.data_interface_mtu}); control over {f.control_interface}",
                )
            )
        if f.qdiscs is None:
            out.append(Finding(h, "qdiscs", "warn", "not tried (needs root or sudo)"))
        else:
            lacking = [k for k in ("htb", "bfifo", "pfifo") if k not in f.qdiscs]
            out.append(
                Finding(
                    h,
                    "qdiscs",
                    "refuse" if lacking else "ok",
                    f"has {' '.join(f.qdiscs) or 'none'}"
                    + (f"; lacks {', '.join(lacking)} for shaping" if lacking else ""),
                )
            )
        ccs = sorted(set(f.congestion_controls) | set(f.loadable_congestion_controls))
        out.append(
            Finding(
                h,
                "congestion controls",
                "ok",
                f"available {' '.join(f.congestion_controls)}; "
                f"loadable {' '.join(f.loadable_congestion_controls) or 'none'}"
                if ccs
                else "none",
            )
        )
        if f.clock_offset_s is not None and f.clock_uncertainty_s is not None:
            off, unc = f.clock_offset_s, f.clock_uncertainty_s
            shown = f"{off * 1e3:+.2f} ms ± {unc * 1e3:.2f} ms vs controller"
            if unc > CLOCK_WARN_S:
                out.append(Finding(h, "clock offset", "warn", f"{shown}: round trips too slow to tell"))
            elif abs(off) - unc > CLOCK_WARN_S:
                out.append(Finding(h, "clock offset", "warn", f"{shown}; cross-host timelines are shifted by this"))
            else:
                out.append(Finding(h, "clock offset", "ok", shown))
    good = {h: f for h, f in facts.items() if f.error is None}
    clocks = [
        (f.clock_offset_s, f.clock_uncertainty_s)
        for f in good.values()
        if f.clock_offset_s is not None and f.clock_uncertainty_s is not None
    ]
    if len(clocks) > 1:
        spread = max(o for o, _ in clocks) - min(o for o, _ in clocks)
        unc = 2 * max(u for _, u in clocks)
        at_least = max(o - u for o, u in clocks) - min(o + u for o, u in clocks)
        out.append(
            Finding(
                "*",
                "clock spread",
                "warn" if at_least > CLOCK_WARN_S else "ok",
                f"{spread * 1e3:.2f} ms ± {unc * 1e3:.2f} ms between the hosts' clocks",
            )
        )
    out += _versions(good, "java", needed=False)
    out += _versions(good, "python", needed=False)
    out += _versions(good, "pyspark", needed=False)
    out += _versions(good, "iperf3", needed=False)
    return out


def shaped_hosts(spec: ExperimentSpec, mapping: Mapping[str, str], router: str | None) -> list[str]:
    """The inventory hosts whose data interface a run of ``spec`` gives an HTB root qdisc (what
    :meth:`shufflelab.hosts.fabric.HostsFabric.configure` shapes): every mapped host's own link with
    ``star``; the router host's with ``shared`` on the kernel path (the switch queues by itself)."""
    if spec.topology.kind == "star":
        return sorted({mapping[h] for h in spec.hosts if h in mapping})
    if spec.topology.kind == "shared" and spec.datapath() != "switch" and router is not None:
        return [router]
    return []


def used_hosts(spec: ExperimentSpec, mapping: Mapping[str, str], router: str | None) -> list[str]:
    """The inventory hosts some cell of ``spec`` runs on: the mapped ones, and the router host when
    a cell has a shared bottleneck."""
    used = {mapping[h] for h in spec.hosts if h in mapping}
    if router is not None and any(sc.spec.topology.kind == "shared" for sc in expand(spec)):
        used.add(router)
    return sorted(used)


def for_spec(
    spec: ExperimentSpec,
    mapping: Mapping[str, str],
    facts: Mapping[str, HostFacts],
    router: str | None = None,
    shaping_allowed: Collection[str] = (),
) -> list[Finding]:
    """What the facts mean for ``spec`` run with ``mapping`` (spec host -> inventory host) and the
    inventory's ``router`` host (which runs the userspace switch where a cell needs it);
    ``shaping_allowed``: the hosts whose control interface the inventory allows to be shaped."""
    out: list[Finding] = []
    try:
        scenarios = expand(spec)
    except SpecError as exc:
        return [Finding("*", "spec", "refuse", str(exc))]
    for spec_host, inv_host in mapping.items():
        f = facts.get(inv_host)
        if f is None or f.error is not None:
            continue
        roles = spec.hosts[spec_host].roles
        busy = [p for r in roles for p in ROLE_PORTS.get(r, ()) if p in f.listening_ports]
        if busy:
            out.append(
                Finding(
                    inv_host,
                    "ports",
                    "refuse",
                    f"{spec_host} ({', '.join(roles)}) needs ports {', '.join(map(str, busy))}, which are in use",
                )
            )
        elif roles:
            out.append(Finding(inv_host, "ports", "ok", f"ports for {spec_host} ({', '.join(roles)}) are free"))
        if ({"spark-master", "spark-worker"} & set(roles)) and (f.java is None or f.pyspark is None):
            out.append(
                Finding(
                    inv_host,
                    "spark",
                    "refuse",
                    f"{spec_host} runs Spark but " + ("java" if f.java is None else "pyspark") + " is missing",
                )
            )
        if ({"traffic-source", "traffic-sink"} & set(roles)) and f.iperf3 is None:
            out.append(Finding(inv_host, "iperf3", "refuse", f"{spec_host} has a traffic role but iperf3 is missing"))
    refused: dict[str, list[str]] = {}
    for sc in scenarios:
        for spec_host, inv_host in mapping.items():
            f = facts.get(inv_host)
            if f is None or f.error is not None:
                continue
            # dctcp is the switch's DCTCP over the host's cubic (tcp_ecn = 1)
            cc = sc.spec.tcp_for(spec_host).kernel_congestion_control()
            if cc not in f.congestion_controls and cc not in f.loadable_congestion_controls:
                refused.setdefault(sc.label, []).append(f"{cc} missing on {inv_host} ({spec_host})")
            link = netplan.bottleneck(sc.spec)
            if sc.spec.datapath() == "switch":  # delay and RED are the switch's, on the router host
                continue
            if link.delay_ms > 0 and f.qdiscs is not None and "netem" not in f.qdiscs:
                refused.setdefault(sc.label, []).append(f"delay_ms needs netem, missing on {inv_host}")
            if link.discipline == "red" and f.qdiscs is not None and "red" not in f.qdiscs:
                refused.setdefault(sc.label, []).append(f"RED/ECN needs the red qdisc, missing on {inv_host}")
        for inv_host in shaped_hosts(sc.spec, mapping, router):
            f = facts.get(inv_host)
            shares = f is not None and f.error is None and f.control_interface == f.data_interface
            if shares and f is not None and inv_host not in shaping_allowed:
                refused.setdefault(sc.label, []).append(
                    f"shapes {inv_host}'s {f.data_interface}, which carries the SSH control connection "
                    f"(hosts.{inv_host}.control_interface_shaping_allowed is not set)"
                )
        for fault in sc.spec.faults:  # a link down takes the machine's data interface down
            f = facts.get(mapping.get(fault.host or "", ""))
            if (
                fault.kind == "link-down"
                and f is not None
                and f.error is None
                and f.control_interface == f.data_interface
            ):
                refused.setdefault(sc.label, []).append(
                    f"a link-down of {fault.host} takes down {mapping[fault.host or '']}'s {f.data_interface}, which "
                    "carries the SSH control connection"
                )
        r = facts.get(router) if router is not None else None
        if sc.spec.datapath() == "switch" and (router is None or sc.spec.topology.kind != "shared"):
            refused.setdefault(sc.label, []).append(
                "needs the userspace switch, which runs on the inventory's router host with topology.kind = 'shared'"
            )
        elif sc.spec.datapath() == "switch" and r is not None and r.error is None:
            if not r.switch:
                refused.setdefault(sc.label, []).append(f"needs the userspace switch, missing on router host {router}")
            if not r.ethtool:
                refused.setdefault(sc.label, []).append(
                    f"needs ethtool for the switch, missing on router host {router}"
                )
    r = facts.get(router) if router is not None else None
    if r is not None and r.error is None and any(sc.spec.datapath() == "switch" for sc in scenarios):
        if r.switch and r.ethtool:
            out.append(Finding(router or "", "switch", "ok", f"{r.switch_binary} (the userspace switch) and ethtool"))
        else:
            missing = [w for w, ok in ((f"{r.switch_binary}", r.switch), ("ethtool", r.ethtool)) if not ok]
            out.append(
                Finding(
                    router or "",
                    "switch",
                    "refuse",
                    f"missing: {', '.join(missing)} (the router host runs the userspace switch; build it at the "
                    "controller's checkout path: cargo build --release -p shufflelab-switch)",
                )
            )
    out += storage_cgroups(scenarios, mapping, facts)
    for label, why in refused.items():
        out.append(Finding("*", f"cell {label}", "refuse", "; ".join(sorted(set(why))), scenarios=(label,)))
    return out


def storage_cgroups(
    scenarios: list[Scenario], mapping: Mapping[str, str], facts: Mapping[str, HostFacts]
) -> list[Finding]:
    """Per TPC-H/NDP storage machine, whether it can cap its storage's CPUs: a cell whose
    ``storage_cores x core_scale`` is below the machine's CPU count caps them with a cgroup v1
    ``cpu`` group there (:class:`~shufflelab.hosts.lease.LeasedCgroup`), so a machine without that
    controller refuses those cells (the run would stop when the cap is set)."""
    needs: dict[str, list[str]] = {}  # inventory host -> the cells that cap its storage
    caps: dict[str, set[str]] = {}  # inventory host -> "storage host at CPUs" of those cells
    for sc in scenarios:
        p = sc.spec.workload_params()
        if not isinstance(p, TpchParams):
            continue
        cpus = p.storage_cores * p.core_scale
        for spec_host in sc.spec.hosts_with("storage"):
            inv_host = mapping.get(spec_host, "")
            f = facts.get(inv_host)
            if f is None or f.error is not None or f.cgroup_cpu is None:
                continue
            needs.setdefault(inv_host, [])
            if f.cpus is None or cpus < f.cpus:  # (a machine of fewer CPUs is the backend's refusal)
                needs[inv_host].append(sc.label)
                caps.setdefault(inv_host, set()).add(f"{spec_host} at {cpus:g}")
    out = []
    for inv_host, labels in needs.items():
        f = facts[inv_host]
        n = f"{f.cpus} CPUs" if f.cpus is not None else "CPU count (not read)"
        if f.cgroup_cpu:
            out.append(
                Finding(
                    inv_host,
                    "cpu cgroup",
                    "ok",
                    f"the cgroup v1 cpu controller at {CGROUP_CPU_ROOT} (caps the storage)",
                )
            )
        elif not labels:
            out.append(
                Finding(
                    inv_host, "cpu cgroup", "ok", f"no cgroup v1 cpu controller; no cell caps its storage below its {n}"
                )
            )
        else:
            out.append(
                Finding(
                    inv_host,
                    "cpu cgroup",
                    "refuse",
                    f"no cgroup v1 cpu controller at {CGROUP_CPU_ROOT} (cpu.cfs_quota_us missing), and "
                    f"{len(dict.fromkeys(labels))} cells cap its storage below its {n} with a group there "
                    f"({', '.join(sorted(caps[inv_host]))} CPUs: workload.params.storage_cores x core_scale): mount "
                    f"one (mount -t cgroup -o cpu cgroup {CGROUP_CPU_ROOT}), or give the storage as many CPUs as "
                    "the machine has",
                    scenarios=tuple(dict.fromkeys(labels)),
                )
            )
    return out


def cells(found: list[Finding], labels: list[str], used: Collection[str]) -> Finding:
    """How many of the cells ``labels`` no refusal in ``found`` stops: a refusal naming cells stops
    those; any other refusal on a host some cell uses (``used``), or on all hosts, stops every cell."""
    everything = [f for f in found if f.level == "refuse" and f.scenarios is None and (f.host == "*" or f.host in used)]
    stopped = set(labels) if everything else {s for f in found if f.level == "refuse" for s in f.scenarios or ()}
    runnable = len(labels) - len(stopped & set(labels))
    detail = f"{runnable} of {len(labels)} cells can run on these hosts"
    if everything:
        named = list(dict.fromkeys(f"{f.host} {f.check}" for f in everything))
        detail += f" (every cell needs what is refused for {', '.join(named[:8])}{', ...' if len(named) > 8 else ''})"
    level: Level = "ok" if runnable == len(labels) else "warn" if runnable else "refuse"
    return Finding("*", "cells", level, detail)


def reachability(facts: Mapping[str, HostFacts], reached: Mapping[str, Mapping[str, bool | None]]) -> list[Finding]:
    """Per host, whether it reached every other host's data address (``reached[host][other]``:
    True, False, or None when it could not try: no ``ping`` there). Spark binds to the data
    addresses and every worker fetches from every other: a pair that does not connect is refused."""
    out: list[Finding] = []
    for h, seen in reached.items():
        if not seen:
            continue
        tried = {o: ok for o, ok in seen.items() if ok is not None}
        if not tried:
            out.append(Finding(h, "data network", "warn", "cannot tell: no ping on this host"))
            continue
        shown = {o: f"{o} ({facts[o].data_address})" for o in seen}
        lost = [shown[o] for o, ok in tried.items() if not ok]
        if lost:
            out.append(
                Finding(
                    h,
                    "data network",
                    "refuse",
                    f"from {facts[h].data_address} no answer from {', '.join(lost)} (ping -c1 -W1; Spark binds to the "
                    "data addresses and every host must reach every other's)",
                )
            )
        else:
            out.append(Finding(h, "data network", "ok", f"reaches {', '.join(shown[o] for o in tried)}"))
    return out
