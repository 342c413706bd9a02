"""What runs around every job, whatever the workload: the fabric set up for the run, the link
self-test, the queue sampler, the cross traffic, and the bottleneck counters before and after."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from shufflelab.emulate.boxload import BoxSampler
from shufflelab.emulate.protocols import Backend, Fabric, Process
from shufflelab.emulate.traffic import CrossTraffic
from shufflelab.netplan import NetPlan, PortCounters


@dataclass
class Telemetry:
    """What a run started around its job (filled step by step, so a failure stops what exists) and
    what it observed: the bottleneck counters before and after, the cross traffic's results."""

    before: dict[str, PortCounters] = field(default_factory=dict)
    after: dict[str, PortCounters] = field(default_factory=dict)
    traffic_rows: list[dict[str, Any]] = field(default_factory=list)
    sampler: Process | None = None
    traffic: CrossTraffic | None = None
    box: BoxSampler | None = None  # this machine's load (local fabric: the emulation host)


def start(
    plan: NetPlan,
    fabric: Fabric,
    run_dir: Path,
    tel: Telemetry,
    phase: Callable[[str], None],
    backend: Backend,
) -> None:
    """Configure the fabric for this run (its scenario's ``plan``), start the queue sampler (kernel
    datapath; the switch samples itself) and the cross traffic, and record the bottleneck counters."""
    spec, net = plan.spec, fabric.network
    # the userspace switch (if this spec needs it) restarts: its telemetry and counters are this run's
    fabric.configure(plan, restart_switch=True)
    if spec.telemetry.selftest != "off":  # the idle fabric, before telemetry and traffic start
        phase("self-testing the links")
        fabric.selftest(plan, run_dir)  # -> run_dir/selftest.json
    tel.before = {p.ifname: fabric.counters(p) for p in net.bottlenecks}
    if not backend.machines():  # the fabric is this machine: watch whether it keeps up
        tel.box = BoxSampler().start()
    tel.sampler = fabric.start_queue_sampler(spec, run_dir / "queue_samples.csv", backend.launch)
    ct = plan.cross
    if ct is not None and ct.generator == "switch":  # the switch's own UDP source, paused until now
        phase("starting the switch's cross traffic")
        fabric.start_cross_traffic()
        backend.sleep(spec.cross_traffic.warmup_s)
    elif ct is not None:
        phase("starting cross traffic")
        tel.traffic = CrossTraffic(
            fabric.places[ct.src], fabric.places[ct.dst], ct.dst_address, run_dir / "traffic",
            spec.experiment.run_timeout_s + 60, launch=backend.launch, run=backend.run,
        )  # fmt: skip
        tel.traffic.start(ct.udp_payload_bps, ct.tcp_pairs)
        backend.sleep(spec.cross_traffic.warmup_s)


class SamplerFailed(RuntimeError):
    """The queue sampler ended before the run stopped it, with a failure: the run's queue samples
    are missing, so the run is not what it promised."""


def stop(fabric: Fabric, run_dir: Path, tel: Telemetry) -> None:
    """Stop what :func:`start` started; keep the traffic results and the bottleneck counters after
    the run in ``tel``; save the datapath's own telemetry and config with the run."""
    tel.traffic_rows = tel.traffic.stop() if tel.traffic is not None else []
    if tel.box is not None:
        tel.box.stop(run_dir / "box_load.csv")
    sampler_failed = None
    if tel.sampler is not None:
        # it samples until stopped: ended on its own with a failure, it could not sample (its
        # module or library missing on a host, a device gone) and the run lacks its queue samples
        sampler_failed = tel.sampler.poll()
        tel.sampler.stop()
    try:
        tel.after = {p.ifname: fabric.counters(p) for p in fabric.network.bottlenecks}
    except Exception:  # noqa: BLE001 - fabric may be half gone on interrupt
        tel.after = {}
    fabric.save_telemetry(run_dir)
    if sampler_failed:
        logs = sorted(run_dir.glob("sampler*.log"))
        said = " ".join(" ".join(p.read_text(errors="replace").split()[-40:]) for p in logs)
        raise SamplerFailed(f"the queue sampler ended by itself with exit status {sampler_failed}: {said[-300:]}")


def load_samples(path: Path, t0: float) -> pd.DataFrame:
    """The queue samples a run wrote (``t_rel_s``: seconds since ``t0``); empty if none."""
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame()
    df = pd.read_csv(path)
    if df.empty:
        return df
    df["t_rel_s"] = df["t"] - t0
    return df
