"""The userspace switch's telemetry and status CSVs as ``shufflelab-switch`` writes them: their
headers, a CSV's complete rows (the switch may be writing the last one), the last row of each port.
Pure: the switch's control (:mod:`shufflelab.switch.controller`) and the fabrics that read what it
wrote (the hosts backend's router host, over SSH) share them."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping

TELEMETRY_HEADER = (
    "t,dev,backlog_bytes,backlog_packets,drops,sent_bytes,sent_packets,overlimits,tx_bytes,rx_bytes,marks"
)
# the switch's own state per telemetry sample (telemetry.status_path): lag behind its schedule since the
# previous row, and its in-switch sources' cumulative counters
STATUS_HEADER = (
    "t,lag_events,lag_mean_us,lag_max_us,cross_offered_packets,cross_offered_bytes,cross_delivered_packets,"
    "cross_delivered_bytes,cross_drops,cross_marks,cross_running"
)


def parse_telemetry(text: str) -> list[dict[str, float | str]]:
    """Rows of a switch telemetry CSV's text; numbers as float, ``dev`` as str. Pure."""
    return [{k: (v if k == "dev" else float(v)) for k, v in rec.items()} for rec in csv.DictReader(io.StringIO(text))]


def complete_rows(text: str, header: str, rename: Mapping[str, str] | None = None) -> str:
    """A telemetry or status CSV's complete rows (the switch may be writing the last one) under
    ``header``; ``rename``: a ``dev`` (second column) -> the name to give it. Pure."""
    complete = text[: text.rfind("\n") + 1] if "\n" in text else ""
    if not rename:
        return complete or header + "\n"
    width = len(header.split(","))
    out = io.StringIO()
    out.write(header + "\n")
    w = csv.writer(out, lineterminator="\n")
    for r in csv.reader(io.StringIO(complete)):
        if len(r) == width and r[0] != "t":
            w.writerow([r[0], rename.get(r[1], r[1]), *r[2:]])
    return out.getvalue()


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
