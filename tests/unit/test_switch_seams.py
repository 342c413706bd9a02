"""The one switch control (:class:`shufflelab.switch.controller.Switch`) through the backend's seams
alone, without root: a command runner and a process launcher on this machine (a place is only a
name here) and a stand-in for the binary that reads the config as the switch does, says "ready",
writes telemetry rows for its ports, and its summary when stopped. What the local fabric and the
router host over SSH both rely on: ready only after *this* start's "ready" (the log is appended
to), counters from the telemetry's last rows, samples renamed to the record's port name, the
summary, and a failed start naming the log."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

import fakes
from shufflelab.switch import SwitchConfig, SwitchHost, SwitchPort
from shufflelab.switch.controller import TELEMETRY_HEADER, Switch, SwitchError

STAND_IN = f"""#!{sys.executable}
import json, signal, sys, time
cfg = json.load(open(sys.argv[1]))
ports = [p["ifname"] for p in cfg["ports"]]
if cfg.get("fail"):
    print("error: cannot open a packet socket on " + ports[0], flush=True)
    sys.exit(1)
def bye(*_):
    print("summary " + json.dumps({{"ports": ports}}), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
signal.signal(signal.SIGUSR2, lambda *_: print("cross started", flush=True))
with open(cfg["telemetry"]["path"], "w") as fh:
    fh.write("{TELEMETRY_HEADER}\\n")
    for k in (1, 2):
        for p in ports:
            fh.write(f"{{k}}.0,{{p}},{{100 * k}},1,0,{{1000 * k}},{{10 * k}},0,0,0,{{k}}\\n")
    fh.write("3.0," + ports[0] + ",5")  # a row being written
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def _switch(tmp_path: Path, seams: fakes.Here, **extra: object) -> Switch:
    binary = tmp_path / "stand-in-switch"
    binary.write_text(STAND_IN)
    binary.chmod(0o755)
    scratch = tmp_path / "at-the-place"
    scratch.mkdir(exist_ok=True)
    cfg = SwitchConfig(
        ports=[SwitchPort("data0", rate_mbps=40)], hosts=[SwitchHost("10.0.0.1", "02:00:00:00:00:01", "data0")],
        extra=dict(extra),
    )  # fmt: skip
    return Switch(cfg, "router", str(scratch), tmp_path, seams.run, seams.launch, binary=str(binary))


def test_the_switch_runs_read_and_stops_through_the_seams(tmp_path: Path) -> None:
    seams = fakes.Here()
    sw = _switch(tmp_path, seams)
    try:
        sw.start(timeout_s=20)
        assert sw.alive() and seams.places == {"router"}  # every command at the switch's place
        (row,) = sw.last_telemetry().values()  # the last complete row, not the one being written
        assert (row["t"], row["sent_bytes"], row["marks"]) == (2.0, 2000.0, 2.0)
        sw.save_telemetry(tmp_path / "queue_samples.csv", rename={"data0": "sw"})
        lines = (tmp_path / "queue_samples.csv").read_text().splitlines()
        assert lines[0] == TELEMETRY_HEADER and [r.split(",")[1] for r in lines[1:]] == ["sw", "sw"]
        sw.start_cross()  # its own UDP source: a signal to its process group, sent at its place
        for _ in range(100):
            if "cross started" in sw.log_tail():
                break
            time.sleep(0.05)
        assert "cross started" in sw.log_tail()
        assert sw.stop() == {"ports": ["data0"]} and not sw.alive()
        # started again: the log is appended to, and only this start's "ready" counts
        sw.start(timeout_s=20)
        assert sw.log_tail().count("ready") == 2 and sw.alive()
        sw.save_config_and_log(tmp_path)
        assert json.loads((tmp_path / "switch.json").read_text())["ports"][0]["ifname"] == "data0"
    finally:
        sw.stop()


def test_a_switch_that_does_not_start_names_its_log(tmp_path: Path) -> None:
    sw = _switch(tmp_path, fakes.Here(), fail=True)
    with pytest.raises(SwitchError, match="did not start at router.*cannot open a packet socket on data0"):
        sw.start(timeout_s=20)
    assert sw.process is None
