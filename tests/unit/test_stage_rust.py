"""scripts/stage_rust.py: the Rust workspace copied to one folder per machine, so that Cargo (which
names a member's build by its path) reuses a build of the same sources from a clone at any path."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stage_rust", REPO / "scripts" / "stage_rust.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _checkout(root: Path) -> Path:
    """A git checkout with a two-crate workspace, an ignored target/ and a file outside it."""
    repo = root / "repo"
    for name, text in {
        "Cargo.toml": '[workspace]\nmembers = ["crates/a", "crates/b"]\n',
        "Cargo.lock": "# lock\n",
        "crates/a/Cargo.toml": '[package]\nname = "a"\n',
        "crates/a/src/lib.rs": "pub fn a() {}\n",
        "crates/b/Cargo.toml": '[package]\nname = "b"\n',
        "crates/b/src/lib.rs": "pub fn b() {}\n",
        "crates/a/target/debug/junk": "built\n",
        "README.md": "not Rust\n",
        ".gitignore": "target/\n",
    }.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    return repo


def _tree(folder: Path) -> dict[str, str]:
    files = [p for p in folder.rglob("*") if p.is_file() and ".git" not in p.relative_to(folder).parts]
    return {str(p.relative_to(folder)): p.read_text() for p in files}


def test_the_folder_holds_exactly_the_workspace_of_the_working_tree(tmp_path: Path) -> None:
    stage = _module().stage
    repo, folder = _checkout(tmp_path), tmp_path / "stage"
    assert stage(repo, folder) == 6
    assert _tree(folder) == {k: v for k, v in _tree(repo).items() if k.startswith(("Cargo.", "crates/")) and
                             "target" not in k}  # fmt: skip

    # a second checkout of the same sources writes nothing: each file keeps its time (Cargo sees nothing new)
    times = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    os.utime(repo / "crates/a/src/lib.rs", (1, 1))
    assert stage(repo, folder) == 0
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()} == times

    # an edit, a new untracked source and a deleted crate are the working tree's, as cargo in place sees them
    (repo / "crates/a/src/lib.rs").write_text("pub fn a() { let _ = 1; }\n")
    (repo / "crates/a/src/new.rs").write_text("pub fn n() {}\n")
    for name in ("crates/b/Cargo.toml", "crates/b/src/lib.rs"):
        (repo / name).unlink()
    assert stage(repo, folder) == 2
    assert _tree(folder) == {
        "Cargo.toml": '[workspace]\nmembers = ["crates/a", "crates/b"]\n',
        "Cargo.lock": "# lock\n",
        "crates/a/Cargo.toml": '[package]\nname = "a"\n',
        "crates/a/src/lib.rs": "pub fn a() { let _ = 1; }\n",
        "crates/a/src/new.rs": "pub fn n() {}\n",
    }
    assert not (folder / "crates/b").exists()  # its emptied folders too


def test_outside_a_git_checkout_every_file_but_target_folders_is_copied(tmp_path: Path) -> None:
    stage = _module().stage
    repo = _checkout(tmp_path)
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    stage(repo, tmp_path / "stage")
    assert sorted(_tree(tmp_path / "stage")) == [
        "Cargo.lock", "Cargo.toml", "crates/a/Cargo.toml", "crates/a/src/lib.rs", "crates/b/Cargo.toml",
        "crates/b/src/lib.rs",
    ]  # fmt: skip
