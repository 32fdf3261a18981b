"""The module graph of dnnframe/, tasks/ and dashboard/ has no import cycle, and its layers
depend on each other only downwards.

Every import statement counts, wherever it is written: an import inside a function still
makes its module depend on the imported one, and hiding a cycle there is what this test
exists to catch. Only imports under ``if TYPE_CHECKING:`` are left out, since they never
run. ``from package import name`` is an edge to ``package.name`` when that is a module,
else to ``package``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
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


# A layer rule: modules under ``importer`` never depend on modules under ``forbidden``, not
# even through other modules (importing a module also runs its packages' __init__). Each
# with why the lower layer must not know the upper one.
LAYER_RULES: list[tuple[str, tuple[str, ...], str]] = [
    (
        "dnnframe.engine",
        ("dnnframe.store",),
        "the engine trains configurations and returns results; the runner records them",
    ),
    (
        "dnnframe.store",
        ("dnnframe.executors",),
        "a store records trials whoever runs them; the executors use it, not the reverse",
    ),
    (
        "dnnframe.runner",
        ("dnnframe.search", "dnnframe.submit", "dnnframe.executors"),
        "the runner trains what it is given: drivers and executors hand it trials, and it "
        "knows pruning through dnnframe.pruning's protocol only",
    ),
    (
        "dnnframe",
        ("tasks", "dashboard"),
        "dnnframe is the library; the Celery shim and the web app sit on top of it",
    ),
    (
        "",
        ("dnnframe.testing",),
        "test hooks are loaded by name (DNNFRAME_TRAIN_FN) in tests, never imported by the "
        "code that runs in production",
    ),
    (
        "dnnframe.datasets",
        (
            "dnnframe.spec",
            "dnnframe.engine",
            "dnnframe.store",
            "dnnframe.runner",
            "dnnframe.executors",
            "dnnframe.search",
            "dnnframe.submit",
            "dnnframe.pruning",
            "dnnframe.cli",
            "dnnframe.analysis",
        ),
        "a dataset knows nothing of the specs, engine and runs that train on it; they load it "
        "through dnnframe.datasets",
    ),
]

# Packages from the bottom up, each a layer of its own: a package never depends on one
# after it. Pruning is asked by the runner after each epoch; the executors run packs with
# the runner; the search drivers hand trials to the executors (and to dnnframe.submit,
# which sits between them).
PACKAGE_ORDER = (
    "dnnframe.pruning",
    "dnnframe.runner",
    "dnnframe.executors",
    "dnnframe.submit",
    "dnnframe.search",
)
LAYER_RULES += [
    (
        lower,
        PACKAGE_ORDER[i + 1 :],
        f"{lower} sits below {', '.join(PACKAGE_ORDER[i + 1 :])} (PACKAGE_ORDER)",
    )
    for i, lower in enumerate(PACKAGE_ORDER[:-1])
]

# Imports that cross a layer rule, each with why it exists. An entry that no longer matches
# an import, or no longer crosses a rule, fails the test, so the list only shrinks.
ALLOWED_LAYER_EDGES: dict[tuple[str, str], str] = {
    (
        "dnnframe.cli.services",
        "dashboard",
    ): "`dnnframe serve` starts the dashboard in its own process; the command line is the "
    "one application inside the library, and nothing else in the library imports it",
}

# The modules of dnnframe.pruning the runner may name itself: the protocol and the factory
# that picks the implementation (never a concrete pruner).
RUNNER_PRUNING_IMPORTS = {"dnnframe.pruning.pruner", "dnnframe.pruning.factory"}


def within(module: str, prefix: str) -> bool:
    """True when ``module`` is ``prefix`` or below it (any module for an empty prefix)."""
    return not prefix or module == prefix or module.startswith(prefix + ".")


def with_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` plus the edges Python adds: importing ``a.b.c`` runs ``a/__init__`` and
    ``a/b/__init__`` first."""
    out = {name: set(targets) for name, targets in graph.items()}
    for name, targets in graph.items():
        for target in targets:
            parts = target.split(".")
            out[name].update(
                p
                for p in (".".join(parts[:i]) for i in range(1, len(parts)))
                if p in graph and p != name
            )
    return out


def path_to(graph: dict[str, set[str]], start: str, targets: tuple[str, ...]) -> list[str] | None:
    """The shortest import chain from ``start`` to a module under one of ``targets``."""
    previous: dict[str, str | None] = {start: None}
    queue = [start]
    for node in queue:
        for child in sorted(graph.get(node, ())):
            if child in previous:
                continue
            previous[child] = node
            if any(within(child, t) for t in targets):
                chain = [child]
                while previous[chain[-1]] is not None:
                    chain.append(previous[chain[-1]])  # type: ignore[arg-type]
                return chain[::-1]
            queue.append(child)
    return None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """One line per module that reaches a module a rule forbids it, with the chain."""
    graph = with_packages(graph)
    found = []
    for importer, forbidden, why in LAYER_RULES:
        for name in sorted(graph):
            if not within(name, importer) or any(within(name, f) for f in forbidden):
                continue
            chain = path_to(graph, name, forbidden)
            if chain:
                found.append(f"{' -> '.join(chain)} ({why})")
    return found


def test_layers_depend_only_downwards() -> None:
    graph = import_graph()
    for importer, imported in ALLOWED_LAYER_EDGES:
        graph[importer].discard(imported)
    violations = layer_violations(graph)
    assert not violations, "\n".join(violations)


def test_allowed_layer_edges_still_exist_and_cross_a_rule() -> None:
    graph = import_graph()
    stale = [edge for edge in ALLOWED_LAYER_EDGES if edge[1] not in graph.get(edge[0], set())]
    assert not stale, f"remove these from ALLOWED_LAYER_EDGES, the imports are gone: {stale}"
    needless = [
        (a, b)
        for a, b in ALLOWED_LAYER_EDGES
        if not any(
            within(a, importer) and any(within(b, f) for f in forbidden)
            for importer, forbidden, _ in LAYER_RULES
        )
    ]
    assert not needless, f"remove these from ALLOWED_LAYER_EDGES, no rule forbids them: {needless}"


def test_the_runner_knows_pruning_only_through_the_protocol() -> None:
    graph = import_graph()
    named = {
        m
        for name, targets in graph.items()
        if within(name, "dnnframe.runner")
        for m in targets
        if within(m, "dnnframe.pruning")
    }
    assert named <= RUNNER_PRUNING_IMPORTS, f"the runner imports {sorted(named)}"


def test_a_layer_rule_sees_through_other_modules_and_package_inits() -> None:
    graph = {
        "dnnframe": set(),
        "dnnframe.engine": set(),
        "dnnframe.engine.a": {"dnnframe.util"},
        "dnnframe.util": {"dnnframe.search.x"},
        "dnnframe.search": {"dnnframe.store.base"},
        "dnnframe.search.x": set(),
        "dnnframe.store": set(),
        "dnnframe.store.base": set(),
    }
    # importing dnnframe.search.x runs dnnframe/search/__init__, which imports the store
    assert layer_violations(graph) == [
        "dnnframe.engine.a -> dnnframe.util -> dnnframe.search -> dnnframe.store (the engine "
        "trains configurations and returns results; the runner records them)"
    ]
    graph["dnnframe.search"] = set()
    assert layer_violations(graph) == []


def test_the_entry_points_load_no_test_hook_unless_asked() -> None:
    """The test hooks are imported by name (``importlib``), which the graph above cannot
    see: start what a worker, the web app and the command line import, in a fresh
    interpreter, and look."""
    probe = (
        "import sys, dashboard, tasks, dnnframe.cli, dnnframe.executors.local_worker\n"
        "from dnnframe.settings import resolve_train_fn\n"
        "assert resolve_train_fn() is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('dnnframe.testing')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DNNFRAME_TRAIN_FN"}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
    asked = {**env, "DNNFRAME_TRAIN_FN": "dnnframe.testing.hooks:noop_train"}
    out = subprocess.run(
        [sys.executable, "-c", probe.replace(" is None", " is not None")],
        cwd=ROOT,
        env=asked,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == (
        "['dnnframe.testing', 'dnnframe.testing.hooks', 'dnnframe.testing.packs']"
    )


def test_the_package_order_names_packages_that_exist() -> None:
    graph = import_graph()
    missing = [p for p in PACKAGE_ORDER if p not in graph]
    assert not missing, f"PACKAGE_ORDER names modules that do not exist: {missing}"
    # pruning knows the store it reads rungs from, and nothing that runs or proposes trials
    pruning = {
        m
        for name, targets in with_packages(graph).items()
        if within(name, "dnnframe.pruning")
        for m in targets
    }
    assert "dnnframe.store.base" in pruning
    assert not [m for m in pruning if any(within(m, p) for p in PACKAGE_ORDER[1:])]


# Top-level modules of dnnframe/ that one package alone imports, each with why it is not
# beside that caller. An entry that gains a second importing package fails the test.
SINGLE_CALLER_TOP_LEVEL: dict[str, str] = {
    "dnnframe.spawned": "a spawned local worker's first import, kept outside "
    "dnnframe.executors, whose __init__ takes a third of a second to import",
}


def home_package(module: str) -> str:
    """The package a module belongs to for the rule below: ``dnnframe.<x>`` for anything in
    dnnframe/ (a top-level module is its own), the top package elsewhere."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "dnnframe" else parts[0]


def single_caller_top_level(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Top-level modules of dnnframe/ (not packages) and the packages that import them, for
    each that fewer than two packages import."""
    out = {}
    for path in sorted((ROOT / "dnnframe").glob("*.py")):
        if path.name == "__init__.py":
            continue
        name = module_name(path)
        users = {home_package(m) for m, targets in graph.items() if name in targets} - {name}
        if len(users) < 2:
            out[name] = users
    return out


def test_a_top_level_module_serves_several_packages() -> None:
    """A module of dnnframe/ that one package alone uses lives in that package."""
    found = single_caller_top_level(import_graph())
    misplaced = {m: sorted(users) for m, users in found.items() if m not in SINGLE_CALLER_TOP_LEVEL}
    assert not misplaced, f"move these beside their one importing package: {misplaced}"
    stale = [m for m in SINGLE_CALLER_TOP_LEVEL if m not in found]
    assert not stale, f"remove these from SINGLE_CALLER_TOP_LEVEL: {stale}"


def test_the_datasets_package_is_imported_whole() -> None:
    """Outside dnnframe/datasets/ its modules are reached through the package's API only, so
    they can be rearranged without touching a caller."""
    found = sorted(
        f"{name} -> {target}"
        for name, targets in import_graph().items()
        if not within(name, "dnnframe.datasets")
        for target in targets
        if target.startswith("dnnframe.datasets.")
    )
    assert not found, "import these from dnnframe.datasets:\n" + "\n".join(found)
