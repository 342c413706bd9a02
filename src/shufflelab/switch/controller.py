"""Start and stop ``shufflelab-switch`` and read its telemetry, wherever it runs: in the router
namespace of a local fabric or on the router host of machines reached over SSH.

:class:`Switch` reaches its place only through the backend's seams
(:class:`~shufflelab.emulate.protocols.CommandRunner` and
:class:`~shufflelab.emulate.protocols.ProcessLauncher`): the config is plain data
(:mod:`shufflelab.switch.config`, units in the field names) written as JSON to a scratch folder at
the place, the process is started by the backend's launcher (so a lease's teardown, and
``shufflelab clean``, stops it like any other process of the run), and its log and telemetry CSVs
are read there with ``tail``/``cat``. What must be true of the place before it starts (the kernel
not forwarding, offloads off on the ports) is the fabric's to make, under its lease.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shufflelab import artifacts
from shufflelab.emulate.protocols import CommandRunner, Process, ProcessLauncher, SwitchError
from shufflelab.switch.config import SwitchConfig
from shufflelab.switch_telemetry import STATUS_HEADER, TELEMETRY_HEADER, complete_rows, parse_telemetry, rows_at_end

BINARY_NAME = artifacts.SWITCH_BINARY_NAME
# the switch binary: ``$SHUFFLELAB_SWITCH``, the workspace's release build, or ``PATH``
binary_path = artifacts.switch_binary


def read_telemetry(path: Path) -> list[dict[str, float | str]]:
    """Rows of a switch telemetry CSV; numbers as float, ``dev`` as str."""
    return parse_telemetry(path.read_text(errors="replace"))


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


# the switch's shell at its place: its output appended to its log there (kept across restarts)
_LOGGED = 'exec "$0" "$@" >>"$SHUFFLELAB_SWITCH_LOG" 2>&1 </dev/null'
_TAIL_BYTES = 65_536


class Switch:
    """``shufflelab-switch`` at ``place``, reached through ``run`` and ``launch``; a context manager.
    The fabrics run it as a :class:`~shufflelab.emulate.protocols.UserspaceSwitch`, and the class
    itself is the :class:`~shufflelab.emulate.protocols.Switches` they are handed.

    Its config (``<scratch>/<name>.json``), log (``<name>.log``, appended to across restarts) and
    telemetry CSVs (``<name>-queues.csv``, ``<name>-status.csv``) live in ``scratch``, a folder as
    the place sees it; ``local`` is a folder on this machine for the launcher's own log. Starting
    again after :meth:`stop` reconfigures it: the CSVs start afresh and the counters at zero."""

    def __init__(
        self,
        config: SwitchConfig,
        place: str,
        scratch: str,
        local: Path,
        run: CommandRunner,
        launch: ProcessLauncher,
        *,
        binary: str | None = None,
        name: str = "switch",
    ) -> None:
        self.config, self.place, self.local = config, place, local
        self._run, self._launch = run, launch
        found = binary_path() if binary is None else binary
        self.binary = str(found) if found is not None else None
        self.config_path = f"{scratch}/{name}.json"
        self.telemetry_path = f"{scratch}/{name}-queues.csv"
        self.status_path = f"{scratch}/{name}-status.csv"
        self.log = f"{scratch}/{name}.log"
        self.name = name
        self.process: Process | None = None
        self.summary: dict[str, Any] | None = None

    def _read(self, path: str, tail_bytes: int | None = None) -> str:
        """A file at the place ('' if it is not there); ``tail_bytes``: its end only."""
        argv = ["cat", path] if tail_bytes is None else ["tail", "-c", str(tail_bytes), path]
        return self._run(argv, place=self.place, check=False)

    def start(self, timeout_s: float = 10.0) -> None:
        if self.binary is None:
            raise SwitchError(f"{BINARY_NAME} is not built (run the setup: make setup)")
        doc = json.dumps(self.config.to_json(Path(self.telemetry_path), Path(self.status_path)), indent=2)
        write = 'printf "%s\\n" "$1" > "$2" || exit 1; wc -c < "$3" 2>/dev/null || echo 0'
        offset = int(
            (self._run(["sh", "-c", write, "sh", doc, self.config_path, self.log], place=self.place) or "0").split()[0]
        )  # the log is appended to across restarts: this start's lines come after ``offset``
        self.summary = None
        argv = ["env", f"SHUFFLELAB_SWITCH_LOG={self.log}", "sh", "-c", _LOGGED, self.binary, self.config_path]
        self.process = self._launch(self.place, argv, self.local / f"{self.name}.launch.log")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "ready" in self._log_since(offset):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.process.stop()
        self.process = None
        raise SwitchError(
            f"{BINARY_NAME} did not start at {self.place} within {timeout_s:g} s: "
            f"{self._log_since(offset)[-2000:].strip() or 'no output'}"
        )

    def _log_since(self, offset: int) -> str:
        return self._run(["tail", "-c", f"+{offset + 1}", self.log], place=self.place, check=False)

    def log_tail(self, chars: int = 2000) -> str:
        return self._read(self.log, chars).strip()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> dict[str, Any] | None:
        """SIGTERM the switch and return its final summary (per-port and flow counters)."""
        if self.process is None:
            return self.summary
        self.process.stop()
        self.process = None
        for line in self._read(self.log).splitlines():
            if line.startswith("summary "):
                self.summary = json.loads(line[len("summary ") :])
        return self.summary

    def telemetry(self) -> list[dict[str, float | str]]:
        return parse_telemetry(complete_rows(self._read(self.telemetry_path), TELEMETRY_HEADER))

    def save_telemetry(self, dest: Path, rename: Mapping[str, str] | None = None) -> None:
        """Copy the telemetry CSV so far to ``dest`` (complete rows only; the switch keeps writing);
        ``rename``: a port's name in the switch -> the name the record gives it."""
        dest.write_text(complete_rows(self._read(self.telemetry_path), TELEMETRY_HEADER, rename))

    def save_status(self, dest: Path) -> None:
        """Copy the status CSV so far (lag, in-switch sources) to ``dest``, complete rows only."""
        dest.write_text(complete_rows(self._read(self.status_path), STATUS_HEADER))

    def save_config_and_log(self, run_dir: Path) -> None:
        """The config the switch runs (``switch.json``) and its log so far (``switch.log``) in ``run_dir``."""
        (run_dir / "switch.json").write_text(self._read(self.config_path))
        (run_dir / "switch.log").write_text(self._read(self.log))

    def _signal(self, name: str) -> None:
        if self.process is not None and self.process.poll() is None:
            # the shell's kill: procps-ng's misreads `-- -N` when N is a signal's number (a small pid)
            self._run(["sh", "-c", 'kill -s "$0" -- "-$1"', name, str(self.process.pid)], place=self.place, check=False)

    def start_cross(self) -> None:
        """Start the in-switch sources (SIGUSR2; a config with sources starts them paused)."""
        self._signal("USR2")

    def stop_cross(self) -> None:
        """Stop the in-switch sources (SIGUSR1); the switch keeps forwarding."""
        self._signal("USR1")

    def last_telemetry(self) -> dict[str, dict[str, float | str]]:
        """The latest telemetry row of every port (cumulative counters since this start): the end
        of the CSV only, while it holds a row of every port (it grows for the length of a run)."""
        devs = [p.port_name for p in self.config.ports]
        tail = _TAIL_BYTES
        while True:
            text = self._read(self.telemetry_path, tail)
            whole = len(text.encode()) < tail
            found = rows_at_end(text, devs, whole=whole)
            if len(found) == len(devs) or whole:
                return found
            tail *= 8

    def __enter__(self) -> Switch:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
