"""The fidelity of the box per run: /proc/stat and /proc/<pid>/stat parsed, the lab told from other
work, the run queue, softirq, nice and foreign shares from samples, the switch's lag from its status
CSV, and each threshold judged (synthetic /proc snapshots; one test reads the real /proc)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pandas as pd
import pytest

from conftest import BASE_SPEC
from shufflelab import spec as S
from shufflelab.emulate import boxload as B
from shufflelab.report.data import Data
from shufflelab.report.text import box_fact, box_verdict_note
from shufflelab.results import RunRow

PROC_STAT = """cpu  100 5 50 800 10 2 30 0 0 0
cpu0 50 2 25 400 5 1 15 0 0 0
intr 12345
procs_running 3
procs_blocked 0
"""


def _samples(runq: list[int], softirq_per_step: int, busy_per_step: int = 100, foreign: bool = True) -> pd.DataFrame:
    """Samples whose jiffies grow by ``busy_per_step`` a step, ``softirq_per_step`` of them softirq
    (``foreign``: with the lab/foreign columns, the lab using all the busy time)."""
    rows = []
    for k, r in enumerate(runq):
        rows.append(
            {"t": float(k), "procs_running": r, "user": k * (busy_per_step - softirq_per_step), "nice": 0,
             "system": 0, "idle": k * 100, "iowait": 0, "irq": 0, "softirq": k * softirq_per_step, "steal": 0}
        )  # fmt: skip
        if foreign:
            rows[-1] |= {"lab_cpu": k * (busy_per_step - softirq_per_step), "foreign_cpu": 0, "sampler_cpu_s": 0.0}
    return pd.DataFrame(rows)


def test_proc_stat_is_read_for_the_run_queue_and_the_cpu_modes() -> None:
    s = B.parse_proc_stat(PROC_STAT, 1.5)
    assert s.procs_running == 3 and s.jiffies["softirq"] == 30 and s.jiffies["idle"] == 800
    assert B.Sample(s, 7, 2, 0.25).row() == [1.5, 3, 100, 5, 50, 800, 10, 2, 30, 0, 7, 2, 0.25]


def test_a_sampler_thread_with_a_fake_proc_stat_writes_its_samples(tmp_path: Path) -> None:
    t = iter(range(1000))
    sampler = B.BoxSampler(
        period_s=0.01, read=lambda: PROC_STAT, clock=lambda: float(next(t)), procs=lambda inside: [],
        lab_netns=lambda root: set(),
    ).start()  # fmt: skip
    while len(sampler.samples) < 3:
        pass
    sampler.stop(tmp_path / "box_load.csv")
    df = pd.read_csv(tmp_path / "box_load.csv")
    assert list(df.columns) == list(B.CSV_HEADER) and len(df) >= 3 and set(df["procs_running"]) == {3}


def test_run_queue_per_core_and_softirq_share() -> None:
    load = B.from_samples(_samples([5, 5, 5, 5], softirq_per_step=40), ncpu=2)
    assert load.runq_per_core == 2.0  # (5 - the sampler) / 2 cores
    assert load.softirq_share == pytest.approx(40 / 200)  # 40 of 100 busy + 100 idle jiffies per step
    assert load.foreign_share == 0.0 and load.nice_share == 0.0
    assert B.from_samples(pd.DataFrame(), 2) == B.BoxLoad()
    older = B.from_samples(_samples([5, 5], softirq_per_step=40, foreign=False), ncpu=2)  # a CSV from before
    assert older.foreign_share is None and older.sampler_share is None and older.softirq_share is not None


@pytest.mark.parametrize(
    ("load", "reason"),
    [
        (B.BoxLoad(foreign_share=B.FOREIGN_SHARE + 0.01), "other work on the box: 11 % of its CPU time"),
        (B.BoxLoad(softirq_share=B.SOFTIRQ_SHARE + 0.01), "softirq"),
        (B.BoxLoad(switch_lag_mean_ms=B.SWITCH_LAG_MEAN_MS + 0.01), "behind its schedule"),
        (B.BoxLoad(selftest_failed=["sw: goodput 0.7 of the rate"]), "link self-test: sw"),
    ],
)
def test_each_sign_over_its_threshold_labels_the_run(load: B.BoxLoad, reason: str) -> None:
    bad, why = load.verdict()
    assert bad and len(why) == 1 and reason in why[0], why


def test_a_box_at_its_thresholds_is_not_the_bottleneck() -> None:
    at = B.BoxLoad(
        foreign_share=B.FOREIGN_SHARE, softirq_share=B.SOFTIRQ_SHARE, switch_lag_mean_ms=B.SWITCH_LAG_MEAN_MS,
        switch_lag_p99_ms=50.0,  # spikes are recorded, not judged
        runq_per_core=4.0, nice_share=0.9,  # nor are the run queue and niced work
    )  # fmt: skip
    assert at.verdict() == (False, [])
    assert B.BoxLoad().verdict() == (False, [])  # nothing known: no label


def test_the_switch_lag_is_the_event_weighted_mean(tmp_path: Path) -> None:
    status = pd.DataFrame(
        {"lag_events": [0, 100, 300], "lag_mean_us": [0.0, 2000.0, 200.0], "lag_max_us": [0.0, 9000.0, 800.0]}
    )
    mean, p99 = B.switch_lag_ms(status)
    assert mean == pytest.approx((100 * 2.0 + 300 * 0.2) / 400)
    assert p99 == pytest.approx(8.918)


def test_a_run_folder_is_assessed_and_becomes_runs_columns(tmp_path: Path) -> None:
    _samples([4] * 5, softirq_per_step=10).to_csv(tmp_path / "box_load.csv", index=False)
    pd.DataFrame({"lag_events": [10], "lag_mean_us": [30.0], "lag_max_us": [90.0]}).to_csv(
        tmp_path / "switch_status.csv", index=False
    )
    cols = B.columns(B.assess(tmp_path, ncpu=2, selftest=[{"port": "sw", "ok": True}]))
    assert cols["box_runq_per_core"] == 1.5 and cols["box_bottleneck"] is False and cols["box_reasons"] is None
    assert cols["box_foreign_share"] == 0.0 and cols["box_switch_lag_ms"] == pytest.approx(0.03)
    assert RunRow.of({"run_id": "r", "scenario_id": "s", "rep": 1, "status": "ok", **cols}).box_nice_share == 0.0
    cols = B.columns(B.assess(tmp_path, ncpu=1, selftest=[{"port": "sw", "ok": False, "problem": "goodput 0.7"}]))
    assert cols["box_runq_per_core"] == 3.0 and cols["box_reasons"] == "link self-test: sw: goodput 0.7"
    empty = B.columns(B.assess(tmp_path / "none", ncpu=2, selftest=[]))
    assert empty["box_bottleneck"] is False and empty["box_runq_per_core"] is None


def _data(rows: list[dict[str, object]]) -> Data:
    return Data("t", "", S.parse(BASE_SPEC), pd.DataFrame(rows), [], {})


def test_the_report_says_which_verdicts_rest_on_runs_of_an_overloaded_box() -> None:
    rows = [
        {
            "label": "udp=100",
            "status": "ok",
            "box_bottleneck": True,
            "box_reasons": "softirq 31 % of CPU time (> 25 %)",
        },
        {"label": "udp=100", "status": "ok", "box_bottleneck": False, "box_reasons": None},
        {
            "label": "udp=0",
            "status": "ok",
            "box_bottleneck": True,
            "box_reasons": "link self-test: r:w4: delivered 0.63 (goodput 12.0 Mbit/s; allowed 0.85-1.08)",
        },
        {"label": "udp=50", "status": "ok", "box_bottleneck": False, "box_reasons": None},
        {"label": "udp=50", "status": "failed", "box_bottleneck": True, "box_reasons": "run queue 2.1 ..."},
    ]
    d = _data(rows)
    note = box_verdict_note(d, "udp=100", "udp=0")
    assert "built on 2 of 3 runs where the emulation host was itself the bottleneck (softirq, link self-test)" in note
    assert "built on 1 of 2 runs" in box_verdict_note(d, "udp=50", "udp=0")  # the failed one is in no verdict
    assert "in 2 of 4 ok runs" in (box_fact(d) or "")
    older = _data([{"label": "a", "status": "ok"}])  # a store from before the columns
    assert box_fact(older) is None and box_verdict_note(older, "a", "a") == ""


def _pid_stat(
    pid: int,
    ppid: int,
    utime: int,
    *,
    stime: int = 0,
    reaped: int = 0,
    start: int = 500,
    comm: str = "java",
    kthread: bool = False,
) -> str:
    """A ``/proc/<pid>/stat`` line (proc(5) field order)."""
    flags = B.PF_KTHREAD | 0x40 if kthread else 0x400100
    return (
        f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 {flags} 10 0 0 0 {utime} {stime} {reaped} 0 20 0 1 0 {start} "
        "1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
    )  # fmt: skip


def test_a_pid_stat_line_is_read_whatever_its_command_name_holds() -> None:
    p = B.parse_pid_stat(_pid_stat(42, 7, 120, stime=30, reaped=9, start=777, comm="a) (b c"), netns=5)
    assert (p.pid, p.ppid, p.cpu, p.reaped, p.start, p.kthread, p.netns) == (42, 7, 150, 9, 777, False, 5)
    assert B.parse_pid_stat(_pid_stat(12, 2, 0, comm="ksoftirqd/0", kthread=True)).kthread


LAB_NS, HOST_NS, OTHER_RUN_NS = 4026532177, 4026531833, 4026539999
ROOT = 100  # the running shufflelab process


def _proc(pid: int, ppid: int, netns: int, cpu: int = 0, *, reaped: int = 0, start: int = 500) -> B.Proc:
    return B.Proc(pid, ppid, start, cpu, reaped, False, netns)


def test_the_lab_is_the_process_tree_and_the_leased_namespaces() -> None:
    procs = [
        _proc(1, 0, HOST_NS),
        _proc(ROOT, 1, HOST_NS),
        _proc(101, ROOT, HOST_NS),  # e.g. the switch, a child
        _proc(102, 101, LAB_NS),  # ... and its child, inside a namespace
        _proc(200, 1, LAB_NS),  # a Spark daemon: left the tree, not its namespace
        _proc(201, 200, LAB_NS),  # its executor
        _proc(300, 1, HOST_NS),  # an editor, a compiler: other work
        _proc(400, 1, OTHER_RUN_NS),  # another run's executor (another lease): other work too
    ]
    lab = B.lab_of(procs, ROOT, {LAB_NS})
    assert {pid for pid, _ in lab} == {ROOT, 101, 102, 200, 201}


def test_cpu_between_counts_new_processes_from_their_start_and_reaped_children_once() -> None:
    prev = B.snapshot(
        [
            _proc(ROOT, 1, HOST_NS, 1000),
            _proc(300, 1, HOST_NS, 50, reaped=0),  # a shell (other work)...
            _proc(301, 300, HOST_NS, 40),  # ... whose child is seen alive, then reaped
            _proc(500, 1, HOST_NS, 70, start=100),  # exits; its pid comes back as a new process
        ],
        ROOT, {LAB_NS},
    )  # fmt: skip
    cur = B.snapshot(
        [
            _proc(ROOT, 1, HOST_NS, 1010),  # +10 (lab)
            # +5 own; reaped 301 (it had 40, used 6 more) and a child never seen alive (20): 66, of which 40 counted
            _proc(300, 1, HOST_NS, 55, reaped=66),
            _proc(500, 1, HOST_NS, 8, start=900),  # a new process under a reused pid: from its start, 8
            B.Proc(2, 0, 0, 999, 0, True, None),  # a kernel thread: counted nowhere
        ],
        ROOT, {LAB_NS},
    )  # fmt: skip
    assert B.cpu_between(prev, cur)[:2] == (10, 5 + 26 + 8)


def test_a_subtree_that_exits_between_two_samples_is_not_counted_twice() -> None:
    # a shell runs a command (B) that ran a compiler (C): all seen alive, then B and C exit together;
    # C's time reaches the shell's cutime through B's, and C had reaped children before the first sample
    prev = B.snapshot(
        [
            _proc(300, 1, HOST_NS, 50),
            _proc(301, 300, HOST_NS, 3),  # B
            _proc(302, 301, HOST_NS, 31, reaped=17_000),  # C: 170 s of children reaped long ago
        ],
        ROOT, {LAB_NS},
    )  # fmt: skip
    # since prev: B used 1 more tick, C 4 more and its children 6 more: the shell reaped 3+1 + 31+4 + 17_000+6
    cur = B.snapshot([_proc(300, 1, HOST_NS, 50, reaped=3 + 1 + 31 + 4 + 17_000 + 6)], ROOT, {LAB_NS})
    assert B.cpu_between(prev, cur)[:2] == (0, 1 + 4 + 6)


def test_a_child_gone_a_sample_before_its_parent_shows_the_reap_is_not_counted_twice() -> None:
    # the scan read the parent before the child was reaped and the child's entry after it: the child is
    # gone from one sample, and the parent's cutime grows only in the next
    s0 = B.snapshot([_proc(300, 1, HOST_NS, 50), _proc(301, 300, HOST_NS, 40)], ROOT, {LAB_NS})
    s1 = B.snapshot([_proc(300, 1, HOST_NS, 52)], ROOT, {LAB_NS})
    s2 = B.snapshot([_proc(300, 1, HOST_NS, 53, reaped=45)], ROOT, {LAB_NS})
    lab1, other1, owed = B.cpu_between(s0, s1)
    assert owed == {(300, 500): 40}  # what the parent's cutime will bring that was counted already
    lab2, other2, owed = B.cpu_between(s1, s2, owed)
    assert (lab1 + lab2, other1 + other2, owed) == (0, 2 + 1 + 5, {})


class FakeBox:
    """A synthetic /proc: processes whose CPU ticks grow by a set amount per sample, and /proc/stat
    whose jiffies (2 cores, 100 ticks a sample) are what they used, the rest idle."""

    def __init__(self, running: int) -> None:
        self.running = running
        self.jiffies = dict.fromkeys(B.MODES, 0)
        self.procs: dict[int, dict[str, int]] = {}

    def add(self, pid: int, ppid: int, netns: int, per_step: int, *, kthread: bool = False, nice: bool = False) -> None:
        self.procs[pid] = {"ppid": ppid, "netns": netns, "per": per_step, "cpu": 0, "k": kthread, "nice": nice}

    def step(self) -> None:
        used = 0
        for p in self.procs.values():
            p["cpu"] += p["per"]
            used += p["per"]
            self.jiffies["system" if p["k"] else "nice" if p["nice"] else "user"] += p["per"]
        self.jiffies["idle"] += 100 - used

    def proc_stat(self) -> str:
        j = self.jiffies
        return f"cpu  {' '.join(str(j[m]) for m in B.MODES)} 0 0\nprocs_running {self.running}\n"

    def pid_stats(self, inside: object) -> list[B.Proc]:
        return [
            B.parse_pid_stat(_pid_stat(pid, p["ppid"], p["cpu"], kthread=bool(p["k"])), p["netns"])
            for pid, p in self.procs.items()
        ]


def _assess(box: FakeBox, tmp_path: Path, steps: int = 10) -> B.BoxLoad:
    t = iter(range(1000))
    sampler = B.BoxSampler(
        read=box.proc_stat, clock=lambda: float(next(t)), procs=box.pid_stats, lab_netns=lambda root: {LAB_NS},
        root=ROOT,
    )  # fmt: skip
    for _ in range(steps):
        sampler.sample()
        box.step()
    sampler.sample()
    sampler.stop(tmp_path / "box_load.csv")
    return B.assess(tmp_path, ncpu=2, selftest=[])


def _lab(box: FakeBox, per_executor: int) -> None:
    box.add(1, 0, HOST_NS, 1)  # init and the like
    box.add(2, 0, 0, 0, kthread=True)
    box.add(12, 2, 0, 4, kthread=True)  # ksoftirqd: the softirq sign's, not other work
    box.add(ROOT, 1, HOST_NS, 2)
    box.add(150, ROOT, HOST_NS, 6)  # the switch
    box.add(200, 1, LAB_NS, 1)  # a worker daemon (reparented)
    for k in range(4):  # four one-core executors and the driver
        box.add(201 + k, 200, LAB_NS, per_executor)
    box.add(210, ROOT, LAB_NS, per_executor)


def test_a_box_busy_with_the_lab_alone_is_not_labelled_however_long_its_run_queue(tmp_path: Path) -> None:
    box = FakeBox(running=8)  # 3.5 runnable threads per core: the lab's design on two cores
    _lab(box, per_executor=17)
    load = _assess(box, tmp_path)
    assert load.runq_per_core == 3.5 and load.foreign_share == pytest.approx(0.01)
    assert load.verdict() == (False, [])


def test_other_work_on_the_box_labels_the_run(tmp_path: Path) -> None:
    box = FakeBox(running=8)
    _lab(box, per_executor=12)
    box.add(400, 1, OTHER_RUN_NS, 20)  # another run's executor
    box.add(500, 1, HOST_NS, 10, nice=True)  # a niced build
    load = _assess(box, tmp_path)
    assert load.foreign_share == pytest.approx(0.31) and load.nice_share == pytest.approx(0.10)
    bad, why = load.verdict()
    assert bad and why == ["other work on the box: 31 % of its CPU time outside the lab (> 10 %)"]


def test_an_older_store_labelled_for_its_run_queue_alone_reads_as_unlabelled(tmp_path: Path) -> None:
    import duckdb
    import synthetic_store

    from shufflelab import report

    db = synthetic_store.build(tmp_path / "s.duckdb", 3)
    con = duckdb.connect(str(db))  # as written before other work was measured: the run queue judged
    con.execute(
        "UPDATE runs SET box_runq_per_core = 2.2 + rep / 2, box_bottleneck = true, box_reasons = "
        "'run queue ' || CAST(2.2 + rep / 2 AS VARCHAR) || ' runnable threads per core (> 1.5)'"
    )
    con.execute(
        "UPDATE runs SET box_reasons = box_reasons || '; softirq 31 % of CPU time (> 25 %)' WHERE run_id = 'udp=75-r1'"
    )
    for col in ("box_foreign_share", "box_nice_share", "box_sampler_share"):
        con.execute(f"ALTER TABLE runs DROP COLUMN {col}")
    con.close()
    paths = report.write(db, tmp_path / "out")  # read only: the store keeps its old columns
    text = paths.markdown.read_text()
    assert "in 1 of 6 ok runs the emulation host was itself the bottleneck (softirq over threshold" in text
    assert "Mean run queue 2.7-3.7 runnable threads per core, recorded but not judged" in text
    assert "other work on the box not measured in these runs" in text
    assert "built on 1 of 6 runs where the emulation host was itself the bottleneck (softirq)" in text
    assert "run queue over threshold" not in text and "(run queue" not in text


def _real(pid: int | str) -> B.Proc:
    return B.parse_pid_stat(Path(f"/proc/{pid}/stat").read_text())


def test_on_the_real_proc_an_orphaned_busy_process_is_other_work_and_this_one_is_the_lab(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    stop = tmp_path / "stop"
    spin = tmp_path / "spin.py"  # busy until told to stop (30 s at most)
    spin.write_text(
        "import os, time\nend = time.monotonic() + 30\n"
        f"while time.monotonic() < end and not os.path.exists({str(stop)!r}): pass\n"
    )
    # started by a child that exits at once: reparented out of this process's tree, in no leased namespace
    launcher = (
        "import subprocess, sys\nquiet = subprocess.DEVNULL\n"
        f"print(subprocess.Popen([sys.executable, {str(spin)!r}], stdout=quiet, stderr=quiet).pid)\n"
    )
    out = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, check=True, timeout=30)
    orphan = int(out.stdout.split()[0])
    try:
        sampler = B.BoxSampler(lab_netns=lambda root: set())
        sampler.sample()
        assert sampler.last is not None
        assert _real(orphan).key in sampler.last.procs and _real(orphan).key not in sampler.last.lab
        assert _real("self").key in sampler.last.lab
        deadline = time.monotonic() + 60
        while _real(orphan).cpu < 20 and time.monotonic() < deadline:  # 0.2 s of CPU, however loaded the box
            time.sleep(0.05)
        sampler.sample()
        assert sampler.samples[-1].foreign_cpu >= 20
    finally:
        stop.touch()
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan, signal.SIGKILL)
