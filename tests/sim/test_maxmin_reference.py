"""The fabric's max-min solver (Rust, incremental-capable, radix heap) against an independent
Python one written from the definition, on random networks (Hypothesis): rates equal within
1e-9, no link over capacity, every flow at its cap or bottlenecked at a saturated link where no
flow is faster."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("hypothesis", reason="hypothesis is a dev dependency: pip install -e .[dev]")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@pytest.fixture(scope="module")
def solver() -> Any:
    mod = pytest.importorskip("shufflelab_simcore", reason="simulator core not built: run scripts/setup.sh")
    if not hasattr(mod, "max_min_rates"):
        pytest.skip("the installed simulator core predates max_min_rates: rebuild it (scripts/setup.sh)")
    from shufflelab.sim.core import rust_max_min_rates

    return rust_max_min_rates


def python_max_min(capacities: list[float], paths: list[list[int]], caps: list[float | None]) -> list[float]:
    """Progressive filling by levels: raise every unfrozen flow together; at each level freeze
    the flows crossing a link that is full, or that reached their cap."""
    rate = [0.0] * len(paths)
    frozen = [False] * len(paths)
    while not all(frozen):
        used = [0.0] * len(capacities)
        count = [0] * len(capacities)
        for i, p in enumerate(paths):
            for link in p:
                used[link] += rate[i]
                count[link] += 0 if frozen[i] else 1
        # how far the water can still rise before a link fills or a flow meets its cap
        step = min(
            [(capacities[link] - used[link]) / count[link] for link in range(len(capacities)) if count[link]]
            + [c - rate[i] for i, c in enumerate(caps) if c is not None and not frozen[i]]
        )
        step = max(step, 0.0)
        for i in range(len(paths)):
            if not frozen[i]:
                rate[i] += step
        for i, p in enumerate(paths):
            if frozen[i]:
                continue
            full = any(
                sum(rate[j] for j, q in enumerate(paths) if link in q)
                >= capacities[link] - 1e-12 * max(1, capacities[link])
                for link in p
            )
            capped = caps[i] is not None and rate[i] >= caps[i] - 1e-12 * max(1.0, caps[i])  # type: ignore[operator]
            if full or capped:
                frozen[i] = True
    return rate


@st.composite
def networks(draw: st.DrawFn) -> tuple[list[float], list[list[int]], list[float | None]]:
    n_links = draw(st.integers(1, 8))
    capacities = draw(st.lists(st.floats(0.5, 100), min_size=n_links, max_size=n_links))
    paths = draw(
        st.lists(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=4, unique=True), min_size=1, max_size=12)
    )
    caps = draw(st.lists(st.one_of(st.none(), st.floats(0.1, 60)), min_size=len(paths), max_size=len(paths)))
    return capacities, paths, caps


@settings(max_examples=300, deadline=None)
@given(networks())
def test_rust_rates_equal_an_independent_python_solver(solver: Any, net: Any) -> None:
    capacities, paths, caps = net
    got = solver(capacities, paths, caps)
    want = python_max_min(capacities, paths, caps)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
    for link, c in enumerate(capacities):
        assert sum(r for r, p in zip(got, paths, strict=True) if link in p) <= c * (1 + 1e-9)
    for i, p in enumerate(paths):
        capped = caps[i] is not None and got[i] >= caps[i] * (1 - 1e-9)
        bottleneck = any(
            sum(got[j] for j, q in enumerate(paths) if link in q) >= capacities[link] * (1 - 1e-9)
            and got[i] >= max(got[j] for j, q in enumerate(paths) if link in q) * (1 - 1e-9)
            for link in p
        )
        assert capped or bottleneck, f"flow {i} at {got[i]} has no bottleneck"


def test_bad_input_is_refused(solver: Any) -> None:
    with pytest.raises(ValueError, match=r"paths\[0\]"):
        solver([1.0], [[0, 3]], None)
