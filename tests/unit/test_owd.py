"""The one-way delay probe over loopback: every datagram timed, delays small and non-negative."""

from __future__ import annotations

import subprocess
import sys
import time


def test_owd_probe_over_loopback() -> None:
    rx = subprocess.Popen([sys.executable, "-m", "shufflelab.switch.owd", "recv", "17399", "20"],
                          stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "shufflelab.switch.owd", "send", "127.0.0.1", "17399", "20", "0.002"],
                       check=True, timeout=30)  # fmt: skip
        out, _ = rx.communicate(timeout=30)
    finally:
        if rx.poll() is None:
            rx.kill()
    ns = [int(x) for x in out.split()]
    assert len(ns) == 20
    assert all(-1_000_000 < x < 50_000_000 for x in ns)  # within (-1 ms, 50 ms): one clock, loopback
    assert time.monotonic() - t0 < 20
