"""Whole-string rules for the names the lab checks: hosts, interfaces, users, memory sizes, ids.

Python's ``$`` also matches just before a final newline: ``re.match(r"^[a-z]+$", "w3\\n")``
matches, and a host ``"w3\\n"`` became a namespace with a newline in its name. A rule made by
:func:`whole` is anchored at ``\\A`` and ``\\Z`` (the very start and end), so ``match``, ``search``
and ``fullmatch`` all take the whole string or nothing. ``tests/unit/test_names.py`` keeps ``$``
out of the source's regular expressions.

Pure.
"""

from __future__ import annotations

import re


def whole(regex: str) -> re.Pattern[str]:
    """``regex`` (without anchors of its own) compiled to match a whole string only."""
    if regex.startswith(("^", "\\A")) or (regex.endswith("$") and not regex.endswith("\\$")):
        raise ValueError(f"{regex!r}: give the rule without an anchor; whole() anchors it at both ends")
    return re.compile(rf"\A(?:{regex})\Z")


INTERFACE = whole(r"[A-Za-z0-9_.:@-]{1,15}")
"""A Linux interface name (IFNAMSIZ: at most 15 characters; no spaces or slashes)."""
