"""Copy the Rust workspace of this checkout to one folder per machine and print that folder.

Cargo names a workspace member's build by the member's path, so the shared target folder
(``~/.cache/shufflelab/cargo-target``) did not spare a clone at a new path anything: the crates were
compiled again for clippy, the tests and the switch, about 90 CPU-s. Built from one folder instead,
a clone at any path reuses what an earlier build of the same sources left.

What is copied: Cargo.toml, Cargo.lock and the files under crates/ that git tracks or would track
(new files included, ignored ones such as a crate's own target/ not), as they are in the working
tree. A file whose bytes are already in the folder is left alone (its time too, so Cargo's change
detection sees nothing new); a file the checkout no longer has is removed. Callers hold
``<folder>.lock`` (flock) while they copy and build, so two checkouts never mix their sources.

Usage: python3 scripts/stage_rust.py FOLDER
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("Cargo.toml", "Cargo.lock", "crates")


def workspace_files(repo: Path) -> set[str]:
    """The workspace's files, relative to ``repo``: git's view where it is a checkout, else a walk
    that leaves out every target/ folder."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *ROOTS],
            cwd=repo, capture_output=True, check=True,
        ).stdout  # fmt: skip
        names = {n for n in out.decode().split("\0") if n}
    except (OSError, subprocess.CalledProcessError):
        names = {str(p.relative_to(repo)) for root in ROOTS for p in [repo / root, *(repo / root).rglob("*")]}
        names = {n for n in names if "target" not in Path(n).parts}
    return {n for n in names if (repo / n).is_file()}  # a file deleted in the working tree is gone


def stage(repo: Path, folder: Path) -> int:
    """Make ``folder`` hold exactly the workspace's files of ``repo``; returns how many were written."""
    wanted = workspace_files(repo)
    written = 0
    for name in sorted(wanted):
        src, dst = repo / name, folder / name
        data = src.read_bytes()
        if dst.is_file() and dst.read_bytes() == data:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        partial = dst.with_name(f".{dst.name}.partial")
        partial.write_bytes(data)
        shutil.copymode(src, partial)
        os.replace(partial, dst)
        written += 1
    for root in ROOTS:
        top = folder / root
        found = [top] if top.is_file() else sorted(top.rglob("*"), reverse=True) if top.is_dir() else []
        for p in found:
            if p.is_dir():
                if not any(p.iterdir()):
                    p.rmdir()
            elif str(p.relative_to(folder)) not in wanted:
                p.unlink()
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    folder = Path(argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    stage(REPO, folder)
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
