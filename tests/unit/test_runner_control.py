"""The runner's control logic with fakes of every seam (tests/fakes.py), without root: how a run
ends (ok, timeout, a dying switch, a failing driver, Ctrl-C), what is recorded, what is torn down,
what a resumed experiment does again, and a cluster that does not start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import fakes
from shufflelab import capabilities
from shufflelab import spec as S
from shufflelab.emulate import runner as R
from shufflelab.emulate.protocols import MachineLost

CAPS = capabilities.Capabilities(root=True, netns=True, veth=True, tools={"java": "17", "iperf3": "3.16"})
TIMEOUT_S = 60


def _spec(spec_dict: dict[str, Any], reps: int = 2, selftest: str = "off") -> S.ExperimentSpec:
    spec_dict["experiment"].update(repetitions=reps, run_timeout_s=TIMEOUT_S)
    spec_dict["spark"] = {"listener": False, "cds": False}
    spec_dict["telemetry"] = {"selftest": selftest}
    return S.parse(spec_dict)


def _runner(tmp_path: Path, spec: S.ExperimentSpec, backend: fakes.Backend) -> R.EmulateRunner:
    return R.EmulateRunner(spec, "t.toml", tmp_path / "results", caps=CAPS, backend=backend.seams())


def _runs(r: R.EmulateRunner) -> list[tuple[int, int, str, str | None]]:
    df = r.store.query("SELECT rep, attempt, status, cause FROM runs ORDER BY rep, attempt")
    return [
        (int(a), int(b), c, d if isinstance(d, str) else None) for a, b, c, d in df.itertuples(index=False, name=None)
    ]


def test_runs_that_end_ok_are_recorded_and_skipped_on_resume(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    b = fakes.Backend(tmp_path / "scratch")
    r = _runner(tmp_path, _spec(spec_dict), b)
    res = r.run()
    assert [(o.rep, o.status) for o in res.outcomes] == [(1, "ok"), (2, "ok")] and res.skipped == 0
    assert _runs(r) == [(1, 1, "ok", None), (2, 1, "ok", None)]
    # the record was assembled from what the driver left: the fixture's 15 tasks, its job time
    row = r.store.query("SELECT n_tasks, job_time_s, app_id, setup_s FROM runs WHERE rep = 1").iloc[0]
    assert row["n_tasks"] == 15 and row["job_time_s"] == pytest.approx(33.771) and row["app_id"] == "app-fake-0000"
    # one fabric and one cluster for the group, both gone at the end; every driver ended by itself
    assert len(b.fabrics) == 1 and b.fabrics[0].closed and len(b.clusters) == 1 and b.clusters[0].stopped
    assert all(d.code == 0 for d in b.drivers) and len(b.drivers) == 2
    # resume: nothing left to do, no fabric is built
    again = fakes.Backend(tmp_path / "scratch2")
    res2 = _runner(tmp_path, _spec(spec_dict), again).run()
    assert res2.outcomes == [] and res2.skipped == 2 and again.fabrics == []


def test_a_job_past_its_deadline_is_stopped_and_recorded_as_a_timeout(
    tmp_path: Path, spec_dict: dict[str, Any]
) -> None:
    b = fakes.Backend(tmp_path / "scratch", behaviours=[fakes.Behaviour(ends_after=None), fakes.Behaviour()])
    r = _runner(tmp_path, _spec(spec_dict), b)
    res = r.run()
    assert [o.status for o in res.outcomes] == ["timeout", "ok"]  # the next run goes on
    assert _runs(r)[0] == (1, 1, "timeout", f"job exceeded run_timeout_s={TIMEOUT_S}")
    assert b.drivers[0].stopped_with[0] == 10.0 and b.drivers[0].code == -15  # stopped, with the grace
    assert TIMEOUT_S < b.drivers[1].ends_at - 3.0 < TIMEOUT_S + 1  # type: ignore[operator]
    assert [(s.scenario_id, rep) for s, rep in r.plan()] == [(r.scenarios[0].scenario_id, 1)]  # done again


def test_a_dying_switch_fails_the_run_at_once_with_its_cause(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    b = fakes.Backend(tmp_path / "scratch", behaviours=[fakes.Behaviour(ends_after=None)], switch_dies_at=5.0)
    r = _runner(tmp_path, _spec(spec_dict, reps=1), b)
    (out,) = r.run().outcomes
    assert out.status == "failed" and out.cause == b.fabrics[0].why
    assert b.drivers[0].stopped_with[0] == 5.0 and 5.0 <= b.clock.now < 6.0  # not at the deadline
    assert _runs(r) == [(1, 1, "failed", b.fabrics[0].why)]


@pytest.mark.parametrize(
    ("result", "cause"),
    [("error", "Py4JJavaError: boom"), ("none", "driver 0 exited without a result; see {run_dir}/driver_0.log")],
)
def test_a_failing_driver_fails_its_run_with_its_first_line(
    tmp_path: Path, spec_dict: dict[str, Any], result: str, cause: str
) -> None:
    b = fakes.Backend(tmp_path / "scratch", behaviours=[fakes.Behaviour(result=result), fakes.Behaviour()])
    r = _runner(tmp_path, _spec(spec_dict), b)
    outcomes = r.run().outcomes
    assert [o.status for o in outcomes] == ["failed", "ok"]
    run_dir = r.store.query("SELECT run_dir FROM runs WHERE rep = 1")["run_dir"][0]
    assert _runs(r)[0] == (1, 1, "failed", cause.format(run_dir=run_dir))
    apps = r.store.query("SELECT app_index, status FROM apps ORDER BY run_id")
    assert apps["status"].tolist() == ["failed", "ok"]  # the failed run's application too


def test_ctrl_c_records_the_run_as_interrupted_tears_down_and_loses_nothing(
    tmp_path: Path, spec_dict: dict[str, Any]
) -> None:
    b = fakes.Backend(tmp_path / "scratch", behaviours=[fakes.Behaviour(ends_after=3.0)])
    b.clock.interrupt_at = 5.0  # during the second run's job (the first ends at ~3 s)
    r = _runner(tmp_path, _spec(spec_dict, reps=3), b)
    with pytest.raises(KeyboardInterrupt):
        r.run()
    assert _runs(r) == [(1, 1, "ok", None), (2, 1, "interrupted", "runner interrupted")]
    # the interrupted run's driver, the cluster and the fabric were stopped on the way out
    assert b.drivers[1].stopped_with and b.clusters[0].stopped and b.fabrics[0].closed
    # resumed: the interrupted run and the one never started are done, the finished one is kept
    again = fakes.Backend(tmp_path / "scratch2")
    r2 = _runner(tmp_path, _spec(spec_dict, reps=3), again)
    res = r2.run()
    assert [(o.rep, o.status) for o in res.outcomes] == [(2, "ok"), (3, "ok")] and res.skipped == 1
    assert _runs(r2)[1:] == [(2, 1, "interrupted", "runner interrupted"), (2, 2, "ok", None), (3, 1, "ok", None)]


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


def test_a_cluster_that_died_between_runs_is_started_again(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    b = fakes.Backend(tmp_path / "scratch")
    spec = _spec(spec_dict)
    r = _runner(tmp_path, spec, b)
    real_run = r._run

    def run_then_kill(*args: Any, **kw: Any) -> R.RunOutcome:
        out = real_run(*args, **kw)
        b.clusters[-1].dies = True  # a worker daemon exited after the run
        return out

    r._run = run_then_kill  # type: ignore[method-assign]
    assert [o.status for o in r.run().outcomes] == ["ok", "ok"]
    assert len(b.clusters) == 2 and b.clusters[0].stopped and b.clusters[1].started


@pytest.mark.parametrize("alive", [False, True], ids=["worker-lost", "router-lost"])
def test_a_machine_lost_fails_its_run_at_once_and_ends_the_experiment(
    tmp_path: Path, spec_dict: dict[str, Any], alive: bool
) -> None:
    b = fakes.Backend(tmp_path / "scratch", behaviours=[fakes.Behaviour(ends_after=None)], machine_lost_at=5.0)
    r = _runner(tmp_path, _spec(spec_dict, reps=3), b)
    real_run = r._run

    def run_then(*args: Any, **kw: Any) -> R.RunOutcome:
        out = real_run(*args, **kw)
        b.clusters[-1].dies = not alive  # a worker's machine lost: its daemon is gone with it
        return out

    r._run = run_then  # type: ignore[method-assign]
    with pytest.raises(MachineLost, match="configure: host w1"):
        r.run()
    why = b.fabrics[0].lost_why
    runs = _runs(r)
    assert runs[0] == (1, 1, "failed", why)  # at once, not at the deadline
    assert b.drivers[0].stopped_with[0] == 5.0 and 5.0 <= b.clock.now < TIMEOUT_S
    if alive:  # the next run starts on the live cluster and fails configuring the lost machine (recorded)
        assert runs[1:] == [(2, 1, "failed", f"MachineLost: configure: {why}")]
    else:  # the cluster is not started again on a lost machine (no attempts recorded)
        assert runs[1:] == [] and len(b.clusters) == 1
    assert b.fabrics[0].closed and all(c.stopped for c in b.clusters)  # everything else torn down
    assert len(b.drivers) == 1  # the third run never started


def test_a_failure_while_keeping_artifacts_still_records_the_run(tmp_path: Path, spec_dict: dict[str, Any]) -> None:
    b = fakes.Backend(tmp_path / "scratch", logs_error=RuntimeError("host w1 (192.0.2.2): run tail: exited 1"))
    r = _runner(tmp_path, _spec(spec_dict, reps=1), b)
    (out,) = r.run().outcomes
    cause = "RuntimeError while keeping the artifacts: host w1 (192.0.2.2): run tail: exited 1"
    assert (out.status, out.cause) == ("failed", cause) and _runs(r) == [(1, 1, "failed", cause)]


def test_each_runs_link_self_test_compares_against_its_own_rate_on_a_shared_fabric(
    tmp_path: Path, spec_dict: dict[str, Any]
) -> None:
    # two rates on one structure: one fabric for both scenarios (shaping is not part of its structure);
    # the fake link delivers what each run configured, so every check must pass against its own rate
    spec_dict["matrix"] = {"topology.bottleneck.rate_mbps": [100, 1000]}
    b = fakes.Backend(tmp_path / "scratch")
    r = _runner(tmp_path, _spec(spec_dict, selftest="warn"), b)
    assert [o.status for o in r.run().outcomes] == ["ok"] * 4 and len(b.fabrics) == 1
    runs = r.store.query("SELECT r.environment_json, s.spec_json FROM runs r JOIN scenarios s USING (scenario_id)")
    seen = set()
    for env, spec_json in runs.itertuples(index=False, name=None):
        own = S.parse(json.loads(spec_json)).topology.bottleneck.rate_mbps
        (check,) = json.loads(env)["selftest"]
        assert (check["rate_mbps"], check["ok"], check["problem"]) == (own, True, None)
        assert check["rate_ratio"] == pytest.approx(1.0)
        seen.add(own)
    assert seen == {100, 1000}
