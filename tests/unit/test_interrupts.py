"""A Ctrl-C that lands inside an at-fork callback is not lost (shufflelab.interrupts)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from shufflelab import interrupts


def _run(body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True, timeout=60)


def test_interrupt_raised_in_an_at_fork_callback_is_raised_again_by_check() -> None:
    # Python swallows an exception raised in an at-fork callback ("Exception ignored in"): the
    # state the CLI's signal handler can find itself in when pyroute2 forks a netns worker.
    res = _run(
        """
        import os
        from shufflelab import interrupts
        {install}
        def ctrl_c():
            raise KeyboardInterrupt
        os.register_at_fork(after_in_parent=ctrl_c)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        print("after fork")
        try:
            interrupts.check()
        except KeyboardInterrupt:
            print("raised again")
        """.replace("{install}", "interrupts.install()")
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["after", "fork", "raised", "again"]
    assert "Exception ignored" not in res.stderr


def test_without_the_hook_python_loses_it() -> None:
    # the failure the module exists for: no hook, the interrupt is gone
    res = _run(
        """
        import os
        from shufflelab import interrupts
        def ctrl_c():
            raise KeyboardInterrupt
        os.register_at_fork(after_in_parent=ctrl_c)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        interrupts.check()
        print("went on")
        """
    )
    assert res.returncode == 0 and "went on" in res.stdout
    assert "Exception ignored" in res.stderr


def test_check_raises_once_and_other_unraisables_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    monkeypatch.setattr(interrupts, "_pending", None)
    monkeypatch.setattr(interrupts, "_previous_hook", interrupts._previous_hook)
    interrupts.install()
    err = ValueError("not an interrupt")

    class _U:
        def __init__(self, exc: BaseException) -> None:
            self.exc_value = exc

    sys.unraisablehook(_U(KeyboardInterrupt("first")))  # type: ignore[arg-type]
    sys.unraisablehook(_U(KeyboardInterrupt("second")))  # type: ignore[arg-type]
    sys.unraisablehook(_U(err))  # type: ignore[arg-type]
    assert seen == [err]
    with pytest.raises(KeyboardInterrupt, match="first"):
        interrupts.check()
    interrupts.check()  # delivered once
