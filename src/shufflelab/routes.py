"""Routes a link took with it: when an interface goes down the kernel removes every route through
it, and bringing it up again restores only its own subnet routes. Pure (text in, argv out); what the
local fabric and the hosts backend use to put a downed link's routes back."""

from __future__ import annotations

from collections.abc import Sequence


def routes_to_restore(before: Sequence[str], now: str) -> list[list[str]]:
    """The routes of ``before`` (lines of ``ip route show`` while the link was up) missing from
    ``now`` (its output once the link is up again), as ``ip route replace`` arguments; the kernel's
    own routes (``proto kernel``) come back by themselves and are left out."""
    have = {line.strip() for line in now.splitlines()}
    return [
        line.split()
        for line in (b.strip() for b in before)
        if line and line not in have and " proto kernel " not in f" {line} "
    ]
