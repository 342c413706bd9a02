"""Built and fetched artifacts shufflelab keeps between runs (jars, the CDS archive, Hadoop's jars),
and the userspace switch's binary.

* :func:`cache_root` -- where they live: ``$XDG_CACHE_HOME/shufflelab`` (``~/.cache/shufflelab``).
* :func:`publish_file` -- a finished file goes in by rename, so the cache only ever holds whole
  artifacts, even after a crash.
* :func:`maven` -- run a Maven goal offline first (the local repository), then online.
* :class:`Cached` -- an artifact in the cache that runs read on every host: what the package that
  builds it says of it, and what ``shufflelab deploy`` brings (:mod:`shufflelab.hosts.deploy`).
* :func:`switch_binary` -- where the switch (``crates/switch``, built by Cargo into the workspace's
  ``target/``, not into the cache) is found: what starts it (:mod:`shufflelab.switch.controller`)
  and what ships it to the hosts (:mod:`shufflelab.hosts.deploy`) both look here.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

SWITCH_BINARY_NAME = "shufflelab-switch"
_REPO = Path(__file__).resolve().parents[2]


def cache_root() -> Path:
    """The directory shufflelab's cached artifacts live in (it may not exist yet)."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "shufflelab"


def publish_file(built: Path, target: Path) -> None:
    """Copy ``built`` next to ``target``, then rename it into place: whole file or nothing."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.parent / f".{target.name}.tmp-{os.getpid()}"
    try:
        shutil.copyfile(built, partial)
        os.replace(partial, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()


@dataclass(frozen=True)
class Cached:
    """An artifact in the cache that runs read on every host: its ``path`` here (a file or a folder
    below :func:`cache_root`), whether it ``is_here`` (fetched or built), and ``missing``: what to say
    when it is not (what makes it)."""

    name: str
    path: Path
    is_here: bool
    missing: str


class MavenError(RuntimeError):
    """Maven failed offline and online; ``attempts`` says what each try did (Maven's last lines)."""

    def __init__(self, attempts: list[str]) -> None:
        super().__init__("\n".join(attempts))
        self.attempts = attempts


def mvn() -> str | None:
    return shutil.which("mvn")


def maven(
    args: Sequence[str],
    *,
    pom: Path,
    timeout_s: float,
    succeeded: Callable[[], bool],
    after_failure: Callable[[], None] = lambda: None,
    online_for: str = "Maven Central",
    tail_lines: int = 15,
    hopeless: str | None = None,
) -> None:
    """Run ``mvn -B -q <offline?> -f pom <args>`` in the pom's directory, offline (``-o``) first,
    then online. Returns once a run exits 0 and ``succeeded()`` holds; ``after_failure()`` cleans
    up between tries. A failed run whose output contains ``hopeless`` is not retried online
    (nothing Maven fetches fixes it). Raises MavenError naming each try, or FileNotFoundError
    when there is no ``mvn``."""
    exe = mvn()
    if exe is None:
        raise FileNotFoundError("mvn")
    errors: list[str] = []
    for mode in (["-o"], []):
        cmd = [exe, "-B", "-q", "-Dstyle.color=never", *mode, "-f", str(pom), *args]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=pom.parent)
        except subprocess.TimeoutExpired:
            errors.append(f"`{' '.join(cmd)}` timed out after {timeout_s:.0f} s")
            after_failure()
            continue
        if r.returncode == 0 and succeeded():
            return
        out = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr).strip()  # Maven colours even with -B
        tail = "\n".join(out.splitlines()[-tail_lines:])
        what = "offline (local Maven repository)" if mode else f"online ({online_for})"
        errors.append(f"{what}: `{' '.join(cmd)}` exited {r.returncode}:\n{tail}")
        after_failure()
        if hopeless is not None and hopeless in out:
            break
    raise MavenError(errors)


def switch_release_build() -> Path:
    """Where the workspace's release build of the switch is (``make setup`` builds it there)."""
    return _REPO / "target" / "release" / SWITCH_BINARY_NAME


def switch_binary() -> Path | None:
    """The switch binary: ``$SHUFFLELAB_SWITCH``, the workspace's release build, or ``PATH``."""
    env = os.environ.get("SHUFFLELAB_SWITCH")
    candidates = [Path(env)] if env else []
    candidates.append(switch_release_build())
    which = shutil.which(SWITCH_BINARY_NAME)
    if which:
        candidates.append(Path(which))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None
