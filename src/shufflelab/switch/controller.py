"""Start and stop ``shufflelab-switch`` in a router namespace of a lease, and read its telemetry.

The config is plain data (:mod:`shufflelab.switch.config`, units in the field names) written as
JSON to the lease's scratch folder; the process is a :class:`shufflelab.emulate.netns.Process`, so a lease's
teardown (and ``shufflelab clean``) stops it like any other process of the run. Before starting,
the router namespace's own forwarding is turned off (the switch forwards; the kernel keeps
answering ARP and ICMP for the router's addresses) and offloads are turned off on the ports.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from shufflelab.emulate.netns import Lease, Process, run
from shufflelab.switch.config import SwitchConfig

TELEMETRY_HEADER = (
    "t,dev,backlog_bytes,backlog_packets,drops,sent_bytes,sent_packets,overlimits,tx_bytes,rx_bytes,marks"
)
# the switch's own state per telemetry sample (telemetry.status_path): lag behind its schedule since the
# previous row, and its in-switch sources' cumulative counters
STATUS_HEADER = (
    "t,lag_events,lag_mean_us,lag_max_us,cross_offered_packets,cross_offered_bytes,cross_delivered_packets,"
    "cross_delivered_bytes,cross_drops,cross_marks,cross_running"
)
BINARY_NAME = "shufflelab-switch"
_REPO = Path(__file__).resolve().parents[3]


class SwitchError(RuntimeError):
    """The switch could not start, or died; the message carries its log's tail."""


def binary_path() -> Path | None:
    """The switch binary: ``$SHUFFLELAB_SWITCH``, the workspace's release build, or ``PATH``."""
    env = os.environ.get("SHUFFLELAB_SWITCH")
    candidates = [Path(env)] if env else []
    candidates.append(_REPO / "target" / "release" / BINARY_NAME)
    which = shutil.which(BINARY_NAME)
    if which:
        candidates.append(Path(which))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


def interface_mac(ns: str, ifname: str) -> str:
    """MAC address of ``ifname`` in namespace ``ns``."""
    info = json.loads(run(["ip", "-j", "link", "show", "dev", ifname], ns=ns))
    return str(info[0]["address"])


def read_telemetry(path: Path) -> list[dict[str, float | str]]:
    """Rows of a switch telemetry CSV; numbers as float, ``dev`` as str."""
    rows: list[dict[str, float | str]] = []
    with open(path, newline="") as fh:
        for rec in csv.DictReader(fh):
            rows.append({k: (v if k == "dev" else float(v)) for k, v in rec.items()})
    return rows


def last_rows(path: Path, devs: list[str], tail_bytes: int = 65_536) -> dict[str, dict[str, float | str]]:
    """The last complete telemetry row of each of ``devs`` (fewer if the file has none for a dev).

    Reads only the file's tail while it holds a row of every dev, so it stays cheap on a CSV that
    grows for the length of a run; a row being written (no newline yet) is ignored."""
    if not path.exists():
        return {}
    size = path.stat().st_size
    while True:
        start = max(0, size - tail_bytes)
        with open(path, "rb") as fh:
            fh.seek(start)
            text = fh.read(size - start).decode(errors="replace")
        found = rows_at_end(text, devs, whole=start == 0)
        if len(found) == len(devs) or start == 0:
            return found
        tail_bytes *= 8


def rows_at_end(text: str, devs: list[str], whole: bool) -> dict[str, dict[str, float | str]]:
    """The last complete row of each of ``devs`` in ``text``, the end of a telemetry CSV (``whole``:
    the entire file; otherwise its first line may be cut and is skipped). A last line without a
    newline is being written and is ignored. Pure."""
    lines = text.split("\n")[:-1]  # the last piece has no newline: incomplete or empty
    if not whole:
        lines = lines[1:]  # may start mid-line
    names = TELEMETRY_HEADER.split(",")
    found: dict[str, dict[str, float | str]] = {}
    for line in reversed(lines):
        cells = line.split(",")
        if len(cells) != len(names) or cells[0] == "t" or cells[1] in found or cells[1] not in devs:
            continue
        found[cells[1]] = {k: (v if k == "dev" else float(v)) for k, v in zip(names, cells, strict=True)}
        if len(found) == len(devs):
            break
    return found


def rps_mask_without(cpu: int, ncpu: int | None = None) -> str:
    """Hex CPU mask of every CPU but ``cpu`` (for /sys/class/net/IF/queues/rx-N/rps_cpus)."""
    n = ncpu or os.cpu_count() or 1
    return format(((1 << n) - 1) & ~(1 << cpu), "x")


def steer_rx(ns: str, ifname: str, mask: str) -> None:
    """Receive packet steering on ``ifname`` in ``ns``: its receive processing runs on the CPUs of
    ``mask`` ("0" = where the packet arrived). On a veth the receive side of a frame the switch
    sends runs inside the switch's own send() unless steered away; measured: 1.1-1.3 Gbit/s of one
    TCP flow through the switch without, 2.3-2.5 Gbit/s with (docs/design-switch.md)."""
    run(["sh", "-c", f'for f in /sys/class/net/"$1"/queues/rx-*/rps_cpus; do echo {mask} > "$f"; done', "sh",
         ifname], ns=ns, check=False)  # fmt: skip


class Switch:
    """``shufflelab-switch`` running in namespace ``lease.ns(node)``; a context manager.

    Its config, log and telemetry CSV live in the lease's scratch folder. Starting again after
    :meth:`stop` (or a new ``Switch`` for the same node) reconfigures it: the CSV starts afresh and
    the counters start at zero; the log is appended to."""

    def __init__(self, lease: Lease, node: str, config: SwitchConfig, binary: Path | None = None) -> None:
        self.lease = lease
        self.node = node
        self.ns = lease.ns(node)
        self.config = config
        self.binary = binary or binary_path()
        self.config_path = lease.scratch / f"switch-{node}.json"
        self.telemetry_path = lease.scratch / f"switch-{node}-queues.csv"
        self.status_path = lease.scratch / f"switch-{node}-status.csv"
        self.log = lease.scratch / f"switch-{node}.log"
        self.process: Process | None = None
        self.summary: dict[str, Any] | None = None

    def start(self, timeout_s: float = 10.0, offloads: bool = False) -> None:
        if self.binary is None:
            raise SwitchError(f"{BINARY_NAME} is not built (run the setup: make setup)")
        run(
            [
                "sysctl",
                "-q",
                "-w",
                "net.ipv4.ip_forward=0",
                "net.ipv4.conf.all.send_redirects=0",
                "net.ipv4.conf.default.send_redirects=0",
            ],
            ns=self.ns,
        )
        if not offloads:
            for p in self.config.ports:
                run(["ethtool", "-K", p.ifname, "tso", "off", "gso", "off", "gro", "off"], ns=self.ns, check=False)
        self.config_path.write_text(json.dumps(self.config.to_json(self.telemetry_path, self.status_path), indent=2))
        offset = self.log.stat().st_size if self.log.exists() else 0  # the log is appended to across restarts
        self.summary = None
        self.process = Process(self.ns, [str(self.binary), str(self.config_path)], self.log)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "ready" in self._log_since(offset):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.process.stop()
        self.process = None
        raise SwitchError(f"{BINARY_NAME} did not start in {self.ns}: {self._log_since(offset)[-2000:].strip()}")

    def _log_since(self, offset: int) -> str:
        if not self.log.exists():
            return ""
        with open(self.log, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")

    def log_tail(self, chars: int = 2000) -> str:
        return self._log_since(0)[-chars:].strip()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> dict[str, Any] | None:
        """SIGTERM the switch and return its final summary (per-port and flow counters)."""
        if self.process is None:
            return self.summary
        self.process.stop()
        self.process = None
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("summary "):
                self.summary = json.loads(line[len("summary ") :])
        return self.summary

    def telemetry(self) -> list[dict[str, float | str]]:
        return read_telemetry(self.telemetry_path) if self.telemetry_path.exists() else []

    def save_telemetry(self, dest: Path) -> None:
        """Copy the telemetry CSV so far to ``dest`` (complete rows only; the switch keeps writing)."""
        text = self.telemetry_path.read_text(errors="replace") if self.telemetry_path.exists() else ""
        dest.write_text(text[: text.rfind("\n") + 1] if text else TELEMETRY_HEADER + "\n")

    def save_status(self, dest: Path) -> None:
        """Copy the status CSV so far (lag, in-switch sources) to ``dest``, complete rows only."""
        text = self.status_path.read_text(errors="replace") if self.status_path.exists() else ""
        dest.write_text(text[: text.rfind("\n") + 1] if text else STATUS_HEADER + "\n")

    def start_cross(self) -> None:
        """Start the in-switch sources (SIGUSR2; a config with sources starts them paused)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGUSR2)

    def stop_cross(self) -> None:
        """Stop the in-switch sources (SIGUSR1); the switch keeps forwarding."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGUSR1)

    def last_telemetry(self) -> dict[str, dict[str, float | str]]:
        """The latest telemetry row of every port (cumulative counters since this start)."""
        return last_rows(self.telemetry_path, [p.ifname for p in self.config.ports])

    def __enter__(self) -> Switch:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
