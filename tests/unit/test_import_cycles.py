"""No import cycle between shufflelab's modules, counting imports inside functions (that is how a
cycle hides: the import runs late, so nothing fails until the order changes). Imports under
``if TYPE_CHECKING:`` are left out: they never run.

And the layering of the backends and what they run: the packages the backends drive (``ndp/``,
``switch/``, ``mapreduce/``) reach the backends (``emulate/``, ``hosts/``) only through the seams,
``shufflelab.emulate.protocols`` -- never a backend's adapter (the namespaces, the SSH session) --
and the backends reach them only through the same seams: neither imports the other past the
protocols module, and a new import fails naming it. What the backends run is handed to them by who
builds them (the CLI): the workload kinds' drivers (``shufflelab.kinds``, above both layers) to the
runner, the userspace switch (``protocols.Switches``: ``switch.Switch``) to the fabrics.
And no class is named as a seam it implements (``NamespaceFabric``, ``HostsFabric`` and the fakes'
``FakeFabric`` implement ``protocols.Fabric``): one name, one thing, whichever module a reader is in.

The same checks from a shell: ``make cycles`` (``.venv/bin/python -m pytest tests/unit/test_import_cycles.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _cycle_in(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One concrete cycle through a component's first module, for the failure message."""
    members = set(comp)
    start = comp[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(m for m in graph[path[-1]] if m in members)
        if start in nxt and len(path) > 1:
            return [*path, start]
        fresh = [m for m in nxt if m not in seen]
        if not fresh:
            return [*path, "..."]
        path.append(fresh[0])
        seen.add(fresh[0])


def import_graph() -> dict[str, set[str]]:
    g = grimp.build_graph("shufflelab", exclude_type_checking_imports=True, cache_dir=None)
    # A package's __init__ may import its submodules (that is how it re-exports); a submodule
    # importing its own package back is then a cycle like any other, and is counted.
    return {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}


def test_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the whole package was read
    comps = _strongly_connected(graph)
    detail = "\n".join(" -> ".join(_cycle_in(graph, c)) + f"   (component: {', '.join(c)})" for c in comps)
    assert not comps, f"import cycles in shufflelab:\n{detail}"


BACKENDS = ("shufflelab.emulate", "shufflelab.hosts")
DRIVEN = ("shufflelab.ndp", "shufflelab.switch", "shufflelab.mapreduce")
SEAMS = "shufflelab.emulate.protocols"


def _under(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a backend module by a driven package other than the seams, as
    ``importer -> imported``."""
    return sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        if _under(m, DRIVEN)
        for t in targets
        if _under(t, BACKENDS) and t != SEAMS
    )


def backend_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a driven package by a backend module, as ``importer -> imported`` (the seams
    module itself may import them: it is the boundary)."""
    return sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        if _under(m, BACKENDS) and m != SEAMS
        for t in targets
        if _under(t, DRIVEN)
    )


def test_driven_packages_reach_the_backends_only_through_the_seams() -> None:
    found = layering_violations(import_graph())
    assert not found, (
        "ndp/, switch/ and mapreduce/ may import from emulate/ and hosts/ only "
        f"{SEAMS} (take a CommandRunner / ProcessLauncher instead):\n" + "\n".join(found)
    )


def test_backends_reach_the_driven_packages_only_through_the_seams() -> None:
    found = backend_imports(import_graph())
    assert not found, (
        "emulate/ and hosts/ import from ndp/, switch/ and mapreduce/ past the seams "
        f"({SEAMS}; put what they need behind a protocol there, handed to them by who builds them):\n"
        + "\n".join(found)
    )


def test_the_layering_check_sees_an_import_past_the_seams() -> None:
    graph = {
        "shufflelab.ndp.hdfs": {SEAMS, "shufflelab.ndp.webhdfs"},
        "shufflelab.mapreduce.replay": {"shufflelab.emulate.netns"},
        "shufflelab.switch.controller": {SEAMS, "shufflelab.switch.config"},
        "shufflelab.emulate.fabric": {"shufflelab.switch.controller"},  # the other direction
        "shufflelab.ndp.proxy": {"shufflelab.hosts.remote"},
    }
    assert layering_violations(graph) == [
        "shufflelab.mapreduce.replay -> shufflelab.emulate.netns",
        "shufflelab.ndp.proxy -> shufflelab.hosts.remote",
    ]


def test_the_layering_check_sees_a_backend_import_past_the_seams() -> None:
    graph = {
        "shufflelab.emulate.fabric": {"shufflelab.switch.controller", "shufflelab.emulate.netns"},
        "shufflelab.hosts.fabric": {SEAMS, "shufflelab.ndp.storage"},
        SEAMS: {"shufflelab.switch.config"},  # the boundary itself
        "shufflelab.ndp.hdfs": {SEAMS},
    }
    assert backend_imports(graph) == [
        "shufflelab.emulate.fabric -> shufflelab.switch.controller",
        "shufflelab.hosts.fabric -> shufflelab.ndp.storage",
    ]


def test_the_check_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _strongly_connected(graph) == [["a", "b", "c"]]
    assert _cycle_in(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


ROOT = Path(__file__).resolve().parents[2]
# a class of that name that implements no seam: the simulator's spec table of a cluster
NOT_SEAMS = {("src/shufflelab/sim/spec.py", "Cluster")}


def seam_names() -> set[str]:
    """The protocols' names in ``shufflelab.emulate.protocols``."""
    tree = ast.parse((ROOT / "src/shufflelab/emulate/protocols.py").read_text())
    return {
        c.name for c in tree.body if isinstance(c, ast.ClassDef) and any(ast.unparse(b) == "Protocol" for b in c.bases)
    }


def misnamed(sources: dict[str, str], seams: set[str]) -> list[str]:
    """Every class of ``sources`` (path -> text) named as one of ``seams``, as ``path: name``."""
    return sorted(
        f"{path}: {node.name}"
        for path, text in sources.items()
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.ClassDef) and node.name in seams and (path, node.name) not in NOT_SEAMS
    )


def test_no_class_is_named_as_a_seam() -> None:
    seams = seam_names()
    assert {"Fabric", "Cluster", "Process", "Lease"} <= seams
    files = [
        f for f in (ROOT / "src/shufflelab").rglob("*.py") if f.name != "protocols.py" or f.parent.name != "emulate"
    ]
    sources = {str(f.relative_to(ROOT)): f.read_text() for f in [*files, ROOT / "tests/fakes.py"]}
    found = misnamed(sources, seams)
    assert not found, "named as a protocol of shufflelab.emulate.protocols (name it for what it is):\n" + "\n".join(
        found
    )


def test_the_naming_check_sees_a_class_named_as_a_seam() -> None:
    sources = {
        "src/shufflelab/emulate/fabric.py": "class NamespaceFabric:\n    pass\n",
        "tests/fakes.py": "class Process:\n    pass\n",
        "src/shufflelab/sim/spec.py": "class Cluster:\n    pass\n",
    }
    assert misnamed(sources, {"Fabric", "Process", "Cluster"}) == ["tests/fakes.py: Process"]
