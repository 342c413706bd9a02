"""SIGTERM and SIGHUP stop a command as Ctrl-C does: each becomes a KeyboardInterrupt in the main
thread, so every context manager tears down what it built (the runs' fabrics, the hosts' leases)
and the command exits 130. The SSH stop tests run the SIGINT and SIGKILL cases end to end; this
is what makes the SIGTERM case the same path (one process per signal: handlers are global)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

PROGRAM = """
import os, signal, sys, time
from shufflelab import cli_base
cli_base._install_signal_handlers()
try:
    os.kill(os.getpid(), signal.{sig})
    time.sleep(10)
except KeyboardInterrupt as exc:
    print(type(exc).__name__)
    sys.exit(130)
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stopping_signal_becomes_a_keyboard_interrupt(sig: str) -> None:
    # the handlers leave an ignored SIGHUP ignored (nohup): the child starts with the default, as from
    # a terminal, whatever this test run was started under
    p = subprocess.run([sys.executable, "-c", PROGRAM.format(sig=sig)], capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))  # fmt: skip
    assert p.returncode == 130, (p.returncode, p.stdout, p.stderr)
    assert p.stdout.strip() == ("KeyboardInterrupt" if sig == "SIGINT" else "Interrupted"), p.stdout
    assert getattr(signal, sig)  # a real signal name
