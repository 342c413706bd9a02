"""The Rust core against the independent SimPy reference: job times within 1 % on the seed-003
scenarios (reduced job counts and sizes where the full size would make the suite slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("shufflelab_simcore", reason="simulator core not built: run scripts/setup.sh")
pytest.importorskip("simpy", reason="simpy is a dev dependency: pip install -e .[dev]")

from shufflelab.sim import reference  # noqa: E402
from shufflelab.sim import spec as simspec  # noqa: E402
from shufflelab.sim.core import simulate  # noqa: E402

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

# (spec, jobs kept, input scale, network mode)
CASES = [
    ("sim-fig5.toml", 1, 1.0, "flow"),
    ("sim-fig5.toml", 1, 0.25, "chunk"),
    ("sim-fig6.toml", 20, 0.5, "flow"),
    ("sim-fig6.toml", 5, 0.1, "chunk"),
    ("sim-fig7c.toml", 12, 0.5, "flow"),
    ("sim-fig7a.toml", 4, 0.1, "chunk"),
]


@pytest.mark.parametrize(("name", "jobs", "scale", "mode"), CASES)
def test_rust_and_simpy_agree_within_one_percent(name: str, jobs: int, scale: float, mode: str) -> None:
    sp = simspec.load(EXPERIMENTS / name)
    scenarios = simspec.expand(sp)
    for scenario in (scenarios[0], scenarios[-1]):
        for policy in ("no-pushdown", "filter", "full"):
            cfg = simspec.core_config(scenario.spec, policy, 0, mode=mode)
            cfg["cpu_jitter"] = 0.0
            cfg["network"]["chunk_bytes"] = 4 << 20
            cfg["jobs"] = cfg["jobs"][:jobs]
            for job in cfg["jobs"]:
                job["input_bytes"] *= scale
            rust = simulate(cfg)["jobs"]
            ref = reference.simulate(cfg)["jobs"]
            assert len(rust) == len(ref) == jobs
            for r, s in zip(rust, ref, strict=True):
                assert r["duration_s"] == pytest.approx(s["duration_s"], rel=0.01), (scenario.label, policy, r["job"])


def test_reference_refuses_what_it_does_not_model() -> None:
    sp = simspec.load(EXPERIMENTS / "sim-fig5.toml")
    cfg = simspec.core_config(simspec.expand(sp)[0].spec, "net-aware", 0)
    with pytest.raises(ValueError, match="fixed policy"):
        reference.simulate(cfg)
