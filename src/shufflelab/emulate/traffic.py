"""Cross traffic with iperf3: UDP at a share of the bottleneck rate and/or long-lived TCP flows.

Started before the job and stopped after it; iperf3's JSON result of each client is kept. The
UDP share is defined on the wire: ``udp_percent`` of the bottleneck rate counts Ethernet + IP +
UDP headers (what HTB meters), so iperf3's payload rate is scaled by ``L / (L + 42)``.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shufflelab.emulate import netns
from shufflelab.shaping import UDP_PAYLOAD_BYTES
from shufflelab.shaping import udp_payload_rate_bps as udp_payload_rate_bps  # iperf3's rate, checked by the spec

if TYPE_CHECKING:
    from shufflelab.emulate.protocols import CommandRunner, Process, ProcessLauncher


@dataclass
class Flowset:
    kind: str  # "udp" | "tcp"
    server: Process
    client: Process
    result_path: Path
    configured_bps: int | None = None  # the payload rate asked of iperf3 (UDP); TCP flows are elastic
    launched_at: float = 0.0  # wall clock when the client was started


class CrossTraffic:
    """iperf3 servers on the sink host and clients on the source host, for one run.

    ``src_ns``/``dst_ns`` are the two hosts' places; the processes start through ``launch`` and the
    server's readiness is checked through ``run`` (the backend's seams: namespaces here by default,
    inventory hosts over SSH with the hosts backend, which fetches each process's output -- iperf3's
    JSON result -- back to its local log path when it stops)."""

    def __init__(
        self,
        src_ns: str,
        dst_ns: str,
        dst_ip: str,
        out_dir: Path,
        max_duration_s: float,
        launch: ProcessLauncher | None = None,
        run: CommandRunner | None = None,
    ) -> None:
        self.src_ns, self.dst_ns, self.dst_ip = src_ns, dst_ns, dst_ip
        self._launch: ProcessLauncher = launch or netns.launch_at
        self._run: CommandRunner = run or netns.run_at
        self.out_dir = out_dir
        self.max_duration_s = max(1, int(max_duration_s))
        self.flows: list[Flowset] = []

    def _start(self, kind: str, port: int, client_args: list[str], configured_bps: int | None = None) -> None:
        server = self._launch(
            self.dst_ns,
            ["iperf3", "-s", "-1", "-B", self.dst_ip, "-p", str(port), "-J"],
            self._server_log(kind),
        )
        deadline = time.monotonic() + 10
        while not self._listening(port):  # the client must not race the server's bind
            if server.poll() is not None:
                server.stop()  # fetches its output (over SSH) before it is pointed to
                raise RuntimeError(f"iperf3 server exited early, see {self._server_log(kind)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"iperf3 server did not listen on {self.dst_ip}:{port} within 10 s")
            time.sleep(0.05)
        result = self.out_dir / f"iperf3-{kind}-client.json"
        launched_at = time.time()
        client = self._launch(
            self.src_ns,
            [
                "iperf3",
                "-c",
                self.dst_ip,
                "-p",
                str(port),
                "-J",
                "-t",
                str(self.max_duration_s),
                *client_args,
            ],
            result,
        )
        self.flows.append(Flowset(kind, server, client, result, configured_bps, launched_at))

    def _server_log(self, kind: str) -> Path:
        return self.out_dir / f"iperf3-{kind}-server.json"

    def _listening(self, port: int) -> bool:
        out = self._run(["ss", "-Hltn", f"sport = :{port}"], place=self.dst_ns, check=False)
        return bool(out.strip())

    def start(self, udp_rate_bps: int, tcp_pairs: int) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if udp_rate_bps > 0:
            self._start("udp", 5201, ["-u", "-b", str(udp_rate_bps), "-l", str(UDP_PAYLOAD_BYTES)], udp_rate_bps)
        if tcp_pairs > 0:
            self._start("tcp", 5202, ["-P", str(tcp_pairs)])
        for f in self.flows:
            if f.client.poll() not in (None, 0):
                raise RuntimeError(f"iperf3 {f.kind} client failed, see {f.result_path}")

    def stop(self) -> list[dict[str, Any]]:
        """Stop every client (SIGINT makes iperf3 print its JSON summary) and collect results.

        Each row also says whether the client was still running when it was stopped (a client that
        died during the run stopped sending then) and when its test started (wall clock), so that
        what it sent during the job can be cut out of its per-second intervals (:func:`sent_between`).
        """
        results = []
        for f in self.flows:
            alive = f.client.poll() is None
            stopped_at = time.time()
            f.client.stop(signal.SIGINT, grace_s=5)
            f.server.stop(signal.SIGTERM, grace_s=3)
            row = summarize(f.kind, f.result_path)
            row["configured_bps"] = f.configured_bps
            row["alive_at_end"] = alive
            row["received_bytes"] = received_bytes(self._server_log(f.kind))
            # SIGINT ends the test at once, so its duration counts back from the signal; a client that
            # ended by itself is placed at its launch (its start is after that by the connection setup)
            duration = row.get("seconds")
            row["started_at"] = stopped_at - duration if alive and duration is not None else f.launched_at
            results.append(row)
        self.flows.clear()
        return results


def summarize(kind: str, path: Path) -> dict[str, Any]:
    """The fields shufflelab stores from one iperf3 client JSON result (missing ones are None)."""
    row: dict[str, Any] = {"kind": kind, "result_file": path.name}
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        row["error"] = "no JSON result"
        return row
    end = doc.get("end", {})
    if kind == "udp":
        s = end.get("sum", {})
        row.update(
            seconds=s.get("seconds"),
            bytes=s.get("bytes"),
            bits_per_second=s.get("bits_per_second"),
            lost_packets=s.get("lost_packets"),
            packets=s.get("packets"),
            lost_percent=s.get("lost_percent"),
        )
    else:
        s = end.get("sum_sent", {})
        r = end.get("sum_received", {})
        row.update(
            seconds=s.get("seconds"),
            bytes=s.get("bytes"),
            bits_per_second=r.get("bits_per_second", s.get("bits_per_second")),
            retransmits=s.get("retransmits"),
        )
    error = doc.get("error")
    # SIGINT is how shufflelab ends a client at the end of a run: not a failure
    row["error"] = None if error is None or str(error).startswith("interrupt") else error
    return row


def _load(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def received_bytes(server_json: Path) -> int | None:
    """Bytes the iperf3 server received (its JSON result; None without one)."""
    doc = _load(server_json)
    if doc is None:
        return None
    got = doc.get("end", {}).get("sum_received", {}).get("bytes")
    return int(got) if got is not None else None


def sent_intervals(path: Path, started_at: float) -> list[tuple[float, float, int]]:
    """The client's per-interval bytes sent, as (start, end, bytes) on the wall clock (its test
    starting at ``started_at``); empty without a JSON result."""
    doc = _load(path)
    if doc is None:
        return []
    out = []
    for iv in doc.get("intervals", []):
        s = iv.get("sum", {})
        if s.get("start") is None or s.get("end") is None or s.get("bytes") is None:
            continue
        out.append((started_at + float(s["start"]), started_at + float(s["end"]), int(s["bytes"])))
    return out


def sent_between(intervals: list[tuple[float, float, int]], a: float, b: float) -> tuple[int, float]:
    """Bytes sent within [a, b] (an interval cut by the window counts pro rata) and the seconds of
    that window the intervals cover."""
    total = 0.0
    covered = 0.0
    for s, e, n in intervals:
        lo, hi = max(s, a), min(e, b)
        if hi <= lo or e <= s:
            continue
        total += n * (hi - lo) / (e - s)
        covered += hi - lo
    return int(round(total)), covered
