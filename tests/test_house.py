"""The package's layout (issue 44): no import cycle among dprl's modules, the run engine
(``dprl.engine``) imports no experiment (``dprl.experiments``), and no module is longer than
450 lines unless its docstring says why.

The import graph is read from the sources (every ``import`` and ``from ... import`` anywhere
in a module, lazy ones inside functions included), not from what a run happens to import."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dprl"
MAX_LINES = 450
#: What the docstring of a longer module must say, followed by the reason
LONG_MODULE_NOTE = "longer than 450 lines because"


@functools.cache
def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (a package by its ``__init__``'s)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _target(name: str, known: dict[str, Path]) -> str | None:
    """The module of ``known`` that importing ``name`` (a module, or a name in one) runs."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(source: str, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``source`` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(target for name in names if (target := _target(name, known)))
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (itself left out)."""
    known = modules(package)
    return {name: imports(path.read_text(), known) - {name} for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted: every import cycle lies in one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def test_the_cycle_finder_finds_cycles_and_nothing_else():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_imports_are_read_wherever_they_are():
    known = {name: Path() for name in ("dprl", "dprl.x", "dprl.x.y", "dprl.z")}
    source = ("import dprl.x.y\nfrom dprl.x import helper\n"
              "def f():\n    from dprl import z\n    import numpy\n")
    assert imports(source, known) == {"dprl.x.y", "dprl.x", "dprl.z"}


def test_no_import_cycle_among_dprl_modules():
    found = cycles(import_graph())
    assert not found, "import cycles among dprl's modules:\n" + "\n".join(
        " <-> ".join(component) for component in found)


def test_the_engine_imports_no_experiment():
    graph = import_graph()
    assert any(name.startswith("dprl.engine.") for name in graph)
    wrong = {name: sorted(target for target in targets
                          if target == "dprl.experiments" or target.startswith("dprl.experiments."))
             for name, targets in graph.items()
             if name == "dprl.engine" or name.startswith("dprl.engine.")}
    assert not any(wrong.values()), f"the engine imports experiments: {wrong}"


@pytest.mark.parametrize("name", sorted(modules()))
def test_modules_are_short_or_say_why(name):
    path = modules()[name]
    source = path.read_text()
    lines = len(source.splitlines())
    if lines > MAX_LINES:
        docstring = ast.get_docstring(ast.parse(source)) or ""
        assert LONG_MODULE_NOTE in " ".join(docstring.split()), (
            f"{path.relative_to(PACKAGE.parent)} has {lines} lines (> {MAX_LINES}) and its "
            f"docstring does not say why ('{LONG_MODULE_NOTE} ...')")


def test_the_engine_finds_the_book_s_experiments_through_the_entry_point():
    import importlib.metadata

    from dprl.engine.registry import CATALOGUE_GROUP
    from dprl.experiments import catalogue

    (entry,) = importlib.metadata.entry_points(group=CATALOGUE_GROUP)
    assert entry.value == catalogue.__name__
    listed = {node.names[0].name for node in ast.parse(Path(catalogue.__file__).read_text()).body
              if isinstance(node, ast.Import)}
    sources = {name: path.read_text() for name, path in modules().items()
               if name.startswith("dprl.experiments.")}
    registering = {name for name, source in sources.items()
                   if "register(Experiment(" in source or "register_audit(\n" in source}
    assert registering <= listed, f"not in the catalogue: {sorted(registering - listed)}"
