"""The hosts tests' rule for running a starvation cell again: only when every run failed, and failed
only because the iperf3 UDP sender fell short of its rate during the job (``udp_rate_missed``)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from hosts.test_hosts_run import udp_rate_missed

SHORT = "UDP cross traffic: sent 0.934 of its 30 Mbit/s during the job"


def _store(path: Path, rows: list[tuple[str, str | None]]) -> Path:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE runs (status VARCHAR, cause VARCHAR)")
        if rows:
            con.executemany("INSERT INTO runs VALUES (?, ?)", rows)
    return path


@pytest.mark.parametrize(
    ("rows", "want"),
    [
        ([("failed", f"scenario not delivered: {SHORT}")], SHORT),
        ([("failed", f"scenario not delivered: {SHORT}; {SHORT}")], f"{SHORT}; {SHORT}"),
        ([], None),  # no run at all
        ([("ok", None)], None),
        ([("failed", f"scenario not delivered: {SHORT}"), ("ok", None)], None),  # not every run failed
        ([("failed", f"scenario not delivered: {SHORT}; shaping: rate 0.8 of the spec")], None),  # another promise too
        ([("failed", "Spark cluster did not start (attempt 3 of 3)")], None),
        ([("failed", None)], None),
    ],
)
def test_only_runs_that_failed_on_the_udp_rate_alone_are_run_again(
    tmp_path: Path, rows: list[tuple[str, str | None]], want: str | None
) -> None:
    assert udp_rate_missed(_store(tmp_path / "s.duckdb", rows)) == want
