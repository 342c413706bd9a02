"""Reading spec files, shared by the lab's and the simulator's specs: TOML read with errors that name
the file and the line, nesting bounded, field paths written as in TOML."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from shufflelab.names import whole


class SpecError(ValueError):
    """A spec that cannot be used; the message names the file, the field and why."""


_BARE_KEY = whole(r"[A-Za-z0-9_-]+")


def field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    """A field's location as written in TOML: ``spark.conf."spark.eventLog.enabled"``, ``faults[0].host``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":  # pydantic's marker for an error in a dict key: the key is the field
            continue
        else:
            text = str(part) if _BARE_KEY.match(str(part)) else json.dumps(str(part), ensure_ascii=False)
            out += f".{text}" if out else text
    return out


MAX_NESTING = 32
"""How deeply tables and arrays may nest in a spec (a real one nests about 6 levels deep)."""


def check_nesting(data: Any, where: str, error: type[SpecError] | None = None) -> None:
    """Refuse data nested more than :data:`MAX_NESTING` levels deep, naming where (iteratively:
    validating, copying or hashing such data would exhaust Python's stack)."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        node, loc = stack.pop()
        if len(loc) > MAX_NESTING:
            raise (error or SpecError)(
                f"{where}: {field_path(loc[:MAX_NESTING])}...: nested more than {MAX_NESTING} levels deep"
            )
        if isinstance(node, dict):
            stack.extend((v, (*loc, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*loc, i)) for i, v in enumerate(node))


def _toml_statement(exc: BaseException) -> str:
    """Where tomllib was when it ran out of stack: ``line N, key.path: `` of the top-level statement
    (read from its parser's frames; empty if they cannot be found)."""
    src = pos = None
    header: Any = ()
    key: Any = None
    tb = exc.__traceback__
    while tb is not None:
        code, local = tb.tb_frame.f_code, tb.tb_frame.f_locals
        if code.co_filename.endswith(os.path.join("tomllib", "_parser.py")):
            if code.co_name == "loads":
                src, pos, header = local.get("src"), local.get("pos"), local.get("header", ())
            elif code.co_name == "parse_key_value_pair" and key is None:
                key = local.get("key")
        tb = tb.tb_next
    if not isinstance(src, str) or not isinstance(pos, int):
        return ""
    line = src.count("\n", 0, pos) + 1
    out = f"line {line}"
    if isinstance(header, tuple) and isinstance(key, tuple):
        out += f", {field_path((*header, *key))}"
    return out + ": "


def read_toml(path: str | Path, error: type[SpecError] | None = None) -> dict[str, Any]:
    """Read a TOML file; every problem raises ``error`` (:class:`SpecError`) naming the file and
    where in it: unreadable, not UTF-8, not TOML, nested too deeply."""
    error = error or SpecError
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise error(f"{p}: cannot read: {(exc.strerror or str(exc)).lower()}") from None
    try:
        text = raw.decode("utf-8")  # TOML is UTF-8, whatever the locale says
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise error(
            f"{p}: line {line}, column {column}: byte 0x{raw[exc.start]:02x} is not UTF-8 (a TOML file is UTF-8 text)"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{p}: not valid TOML: {exc}") from None
    except RecursionError as exc:
        raise error(
            f"{p}: {_toml_statement(exc)}arrays or inline tables nested too deeply to read "
            f"(a spec may nest {MAX_NESTING} levels)"
        ) from None
    check_nesting(data, str(p), error)
    return data


def describe_error(err: Any) -> str:
    loc = field_path(err.get("loc", ()))
    msg = str(err.get("msg", "invalid"))
    return f"{loc}: {msg}" if loc else msg
