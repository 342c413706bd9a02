"""Ctrl-C and SIGTERM that Python swallowed, delivered again at the next safe point.

The CLI turns SIGINT/SIGTERM/SIGHUP into exceptions so that every context manager tears down
what it built. Python runs a signal handler between any two bytecodes of the main thread --
including inside an at-fork callback (pyroute2's netns workers and ``multiprocessing`` fork this
process), a ``__del__`` or a weakref callback. An exception raised there is "unraisable": Python
prints "Exception ignored in ..." and goes on as if the signal never came, so a run would finish
with exit 0 after the user pressed Ctrl-C.

:func:`install` hooks ``sys.unraisablehook``: a swallowed ``KeyboardInterrupt`` (or subclass) is
kept, and :func:`check` -- called by the run's wait loop and once a command's work is done --
raises it again. Every other unraisable exception goes to the hook that was there before.
"""

from __future__ import annotations

import sys
from typing import Any

_pending: BaseException | None = None
_previous_hook = sys.unraisablehook


def _hook(unraisable: Any) -> None:
    global _pending
    exc = unraisable.exc_value
    if isinstance(exc, KeyboardInterrupt):
        if _pending is None:
            _pending = exc
        return
    _previous_hook(unraisable)


def install() -> None:
    """Keep swallowed interrupts for :func:`check` (idempotent)."""
    global _previous_hook
    if sys.unraisablehook is not _hook:
        _previous_hook = sys.unraisablehook
        sys.unraisablehook = _hook


def check() -> None:
    """Raise the interrupt Python swallowed since the last call, if any."""
    global _pending
    exc, _pending = _pending, None
    if exc is not None:
        raise exc.with_traceback(None)
