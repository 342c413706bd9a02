"""A run whose queue sampler could not sample is not ok: the SSH backend's samplers (one per host
holding a bottleneck, :class:`shufflelab.hosts.sampling.HostSamplers`) with one that ended at once
(as when its netlink library is missing on a deployed host), through the runner with fakes of every
other seam (tests/fakes.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import fakes
from shufflelab import capabilities
from shufflelab import spec as S
from shufflelab.emulate import runner as R
from shufflelab.hosts.sampling import HostSamplers

CAPS = capabilities.Capabilities(root=True, netns=True, veth=True, tools={"java": "17", "iperf3": "3.16"})


class _Loop:
    def call(self, coro: Any) -> None:
        coro.close()  # fetching a host's CSV: nothing was written


class _Session:
    host = SimpleNamespace(deploy_dir="/opt/shufflelab", name="host1")

    async def get(self, step: str, remote: str, local: Path) -> None:
        return None


def _run(
    tmp_path: Path, spec_dict: dict[str, Any], monkeypatch: pytest.MonkeyPatch, codes: Sequence[int | None]
) -> Any:
    spec_dict["experiment"].update(repetitions=1, run_timeout_s=60)
    spec_dict["spark"] = {"listener": False, "cds": False}
    spec_dict["telemetry"] = {"selftest": "off"}
    b = fakes.Backend(tmp_path / "scratch")
    started: list[fakes.FakeProcess] = []

    def start_queue_sampler(self: fakes.FakeFabric, spec: S.ExperimentSpec, out: Path, launch: Any) -> HostSamplers:
        samplers = HostSamplers(_Loop(), out)  # type: ignore[arg-type]
        for i, code in enumerate(codes):

            def launched(place: str, argv: Sequence[str], log: Path, /, env: Any = None, code: Any = code) -> Any:
                p = fakes.FakeProcess(b.clock, None, code=code)
                if code:
                    log.write_text("ModuleNotFoundError: No module named 'pyroute2'\n")
                started.append(p)
                return p

            samplers.start(launched, f"host{i}", _Session(), "/scratch", {"data0": f"h{i}"}, 100, 600)  # type: ignore[arg-type]
        return samplers

    monkeypatch.setattr(fakes.FakeFabric, "start_queue_sampler", start_queue_sampler)
    r = R.EmulateRunner(S.parse(spec_dict), "t.toml", tmp_path / "results", caps=CAPS, backend=b.seams())
    (out,) = r.run().outcomes
    assert started and all(p.stopped_with for p in started)  # every sampler stopped all the same
    return out


def test_a_run_whose_sampler_on_a_host_could_not_start_is_not_ok(
    tmp_path: Path, spec_dict: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _run(tmp_path, spec_dict, monkeypatch, codes=[None, 1])  # host0 samples; host1's ended at once
    assert out.status == "failed", out
    assert "queue sampler" in out.cause and "exit status 1" in out.cause and "pyroute2" in out.cause, out.cause


def test_a_run_whose_samplers_sampled_until_stopped_is_ok(
    tmp_path: Path, spec_dict: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _run(tmp_path, spec_dict, monkeypatch, codes=[None, None])
    assert out.status == "ok", out
