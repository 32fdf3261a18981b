"""The module graph of dnnframe/, tasks/ and dashboard/ has no import cycle.

Every import statement counts, wherever it is written: an import inside a function still
makes its module depend on the imported one, and hiding a cycle there is what this test
exists to catch. Only imports under ``if TYPE_CHECKING:`` are left out, since they never
run. ``from package import name`` is an edge to ``package.name`` when that is a module,
else to ``package``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dnnframe", "tasks", "dashboard")

# Edges that close a cycle, each with why it exists. An entry that no longer matches an
# import fails the test, so the list only shrinks. Empty: keep it so.
ALLOWED_EDGES: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of import nodes inside ``if TYPE_CHECKING:`` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skipped


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The project modules that module ``name`` (its source at ``path``) imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skipped = _type_checking_only(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def longest_known(dotted: str) -> str | None:
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in modules:
                return candidate
        return None

    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = longest_known(alias.name)
                if target:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                target = longest_known(f"{source}.{alias.name}") or longest_known(source)
                if target:
                    found.add(target)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
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


def describe(component: list[str], graph: dict[str, set[str]]) -> str:
    members = set(component)
    edges = [f"  {a} -> {b}" for a in component for b in sorted(graph[a]) if b in members]
    return "cycle among " + ", ".join(component) + ":\n" + "\n".join(edges)


def test_no_import_cycles() -> None:
    graph = import_graph()
    for importer, imported in ALLOWED_EDGES:
        graph[importer].discard(imported)
    cycles = find_cycles(graph)
    assert not cycles, "\n".join(describe(c, graph) for c in cycles)


def test_allowed_edges_still_exist() -> None:
    graph = import_graph()
    stale = [edge for edge in ALLOWED_EDGES if edge[1] not in graph.get(edge[0], set())]
    assert not stale, f"remove these from ALLOWED_EDGES, the imports are gone: {stale}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import dnnframe.spec.models\n", {"dnnframe.spec.models"}),
        ("from dnnframe.spec import parse_spec\n", {"dnnframe.spec"}),
        ("from . import models\n", {"dnnframe.spec.models"}),
        ("from ..datasets import DatasetConfig\n", {"dnnframe.datasets"}),
        ("def f():\n    from ..engine import constants\n", {"dnnframe.engine.constants"}),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..runner import x\n",
            set(),
        ),
        ("import json\nfrom pydantic import BaseModel\n", set()),
    ],
)
def test_imports_are_resolved_like_python_does(
    tmp_path: Path, source: str, expected: set[str]
) -> None:
    module = tmp_path / "probe.py"
    module.write_text(source)
    known = {
        "dnnframe.spec",
        "dnnframe.spec.models",
        "dnnframe.datasets",
        "dnnframe.engine",
        "dnnframe.engine.constants",
        "dnnframe.runner",
    }
    assert imports_of("dnnframe.spec.probe", module, known) == expected


def test_a_cycle_through_a_function_level_import_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_the_library_never_imports_the_applications() -> None:
    """``dnnframe`` is the library: ``tasks`` (the Celery shim) and ``dashboard`` (the web
    app) sit on top of it. Only the command line starts the dashboard."""
    graph = import_graph()
    upward = sorted(
        (importer, imported)
        for importer, targets in graph.items()
        if importer.startswith("dnnframe") and not importer.startswith("dnnframe.cli")
        for imported in targets
        if imported.split(".")[0] in ("tasks", "dashboard")
    )
    assert not upward
