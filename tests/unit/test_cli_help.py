"""Every command's ``--help`` shows the TOML tables its text names: Typer renders help as Rich
markup, where ``[topology]`` or ``[[app]]`` is a style tag and vanishes unless escaped (``\\[``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from shufflelab.cli import app

# a bracketed name as a TOML table is written: [spark], [hosts.NAME], [[app]] (not typer's [default: x])
TABLE = re.compile(r"\[\[?[A-Za-z_][A-Za-z0-9_.<>-]*\]\]?")


def _commands(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, cmd
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield from _commands(sub, [*path, name])


COMMANDS = list(_commands(typer.main.get_command(app), []))


def _tables(cmd: Any) -> list[str]:
    """The TOML table names the command's help text and its parameters' help name, unescaped."""
    texts = [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
    return sorted({m for t in texts for m in TABLE.findall(t.replace("\\[", "["))})


def test_the_walk_finds_the_commands_that_name_tables() -> None:
    named = {" ".join(path): _tables(cmd) for path, cmd in COMMANDS}
    assert named["sim run"] == ["[[app]]", "[topology]"]
    assert named["tune"] == ["[tune]"]
    assert {"", "run", "doctor", "sim", "sim run", "sim report"} <= set(named)  # sub-apps are walked too


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) or "shufflelab" for p, _ in COMMANDS])
def test_help_keeps_square_bracketed_table_names(path: list[str], cmd: Any) -> None:
    r = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    for table in _tables(cmd):
        assert table in r.output, f"`shufflelab {' '.join(path)} --help` lost {table}:\n{r.output}"
