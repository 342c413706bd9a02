"""What the ``shufflelab`` command's modules share: the Typer app, the consoles, errors as exit codes,
and the signal handling that turns SIGTERM/SIGHUP/SIGINT into exceptions so every run tears down."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console

from shufflelab import interrupts

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="shufflelab: real Spark on an emulated data-center network -- run, diagnose, report.",
)
console = Console()
err = Console(stderr=True)

DEFAULT_RESULTS = Path("results")


_MAIN_PID = os.getpid()


def _raise_interrupt(signum: int, frame: object) -> NoReturn:
    if os.getpid() != _MAIN_PID:
        # a forked helper (pyroute2's netns workers are forks of this process) must never run
        # the runner's teardown: just end it
        os._exit(128 + signum)
    from shufflelab.emulate.runner import Interrupted

    raise Interrupted(f"signal {signum}")


def _raise_keyboard_interrupt(signum: int, frame: object) -> NoReturn:
    if os.getpid() != _MAIN_PID:  # see _raise_interrupt
        os._exit(128 + signum)
    raise KeyboardInterrupt


def _install_signal_handlers() -> None:
    # SIGTERM/SIGHUP become exceptions, so every context manager tears down what it built.
    global _MAIN_PID
    _MAIN_PID = os.getpid()
    interrupts.install()  # a signal Python swallowed is raised again at the next safe point
    signal.signal(signal.SIGTERM, _raise_interrupt)
    # A shell starting us in the background may have set SIGINT to "ignore", which Python then
    # keeps; a run must always be stoppable with SIGINT (and tear down), so take it back.
    signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # respect nohup
        signal.signal(signal.SIGHUP, _raise_interrupt)


def _fail(message: str, code: int = 2) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)
