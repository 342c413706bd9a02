"""The runner's control logic with fakes of every seam (tests/fakes.py), without root: how a run
ends (ok, timeout, a dying switch, a failing driver, Ctrl-C), what is recorded, what is torn down,
what a resumed experiment does again, and a cluster that does not start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import fakes
from shufflelab import capabilities
from shufflelab import spec as S
from shufflelab.emulate import runner as R

CAPS = capabilities.Capabilities(root=True, netns=True, veth=True, tools={"java": "17", "iperf3": "3.16"})
TIMEOUT_S = 60


def _spec(spec_dict: dict[str, Any], reps: int = 2) -> S.ExperimentSpec:
    spec_dict["experiment"].update(repetitions=reps, run_timeout_s=TIMEOUT_S)
    spec_dict["spark"] = {"listener": False, "cds": False}
    spec_dict["telemetry"] = {"selftest": "off"}
    return S.parse(spec_dict)


def _runner(tmp_path: Path, spec: S.ExperimentSpec, backend: fakes.Backend) -> R.EmulateRunner:
    return R.EmulateRunner(spec, "t.toml", tmp_path / "results", caps=CAPS, backend=backend.seams())


def _runs(r: R.EmulateRunner) -> list[tuple[int, int, str, str | None]]:
    df = r.store.query("SELECT rep, attempt, status, cause FROM runs ORDER BY rep, attempt")
    return [
        (int(a), int(b), c, d if isinstance(d, str) else None) for a, b, c, d in df.itertuples(index=False, name=None)
    ]


@pytest.mark.parametrize("failures", [1, 3])
def test_a_failed_cluster_start_is_recorded_torn_down_and_retried(
    tmp_path: Path, spec_dict: dict[str, Any], failures: int
) -> None:
    b = fakes.Backend(tmp_path / "scratch", start_failures=failures)
    r = _runner(tmp_path, _spec(spec_dict), b)
    outcomes = r.run().outcomes
    gives_up = failures >= R.CLUSTER_START_ATTEMPTS
    made = b.clusters
    # every failed attempt was torn down, its scratch state too; each start ran under the run's settings
    assert all(c.stopped for c in made[:failures]) and not any(c.found_leftovers for c in made)
    ran = sum(o.status == "ok" for o in outcomes)
    assert len(b.fabrics[0].configured) == 1 + len(made) + ran  # the group's, each start's, each run's
    runs = _runs(r)
    failed = [x for x in runs if x[2] == "failed"]
    assert [x[1] for x in failed] == list(range(1, failures + 1))
    assert all(x[3].startswith("Spark cluster did not start (attempt ") for x in failed)  # type: ignore[union-attr]
    assert failed[0][3].startswith("Spark cluster did not start (attempt 1 of 3): ClusterError: Spark daemon")  # type: ignore[union-attr]
    if gives_up:  # the first run is given up (its last attempt is its outcome); the next run starts it again
        assert [o.status for o in outcomes] == ["failed", "ok"] and len(made) == 4
        assert outcomes[0].cause is not None and "attempt 3 of 3" in outcomes[0].cause
        assert [rep for _, rep in r.plan()] == [1]  # planned again on resume
    else:
        assert [o.status for o in outcomes] == ["ok", "ok"] and len(made) == failures + 1
        assert runs[-2:] == [(1, failures + 1, "ok", None), (2, 1, "ok", None)]
