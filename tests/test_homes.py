"""Concepts with one home stay there: trial states and their groups in dnnframe/states.py,
metrics, their direction, the default objective and "is a finite number" in
dnnframe/metrics.py, a submission's pack size in dnnframe/executors/packing.py, putting back
trials whose worker stopped in dnnframe/recovery.py (and Celery's reaper), never in the web
tier or a submission, PyTensor's internals and the variables that steer PyTensor and JAX in
dnnframe/engine/pytensor_wall/, loading, splitting and parsing datasets in dnnframe/datasets/,
the graph's segments (a dense layer, a scanned stack) and the split of hidden widths into
them in dnnframe/engine/segments.py, single-trial train functions (and their adapter to
the pack contract) in dnnframe/testing/ only.

The scans read the sources (Python through its syntax tree, so a state name inside a longer
text such as an SQL query or a docstring is not a literal of its own; page scripts and
templates as text) and fail when a state name or the default objective is written out
anywhere else, so a second list of states cannot grow back unnoticed.
"""

from __future__ import annotations

import ast
import math
import re
from functools import cache
from pathlib import Path

import pytest

from dnnframe import metrics, states
from dnnframe.cli.progress import trials_finished
from dnnframe.metrics import best_first, direction, improves, rank
from dnnframe.states import TrialState, count_done

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dnnframe", "dashboard", "tasks")
STATE_NAMES = frozenset({s.value for s in TrialState} | set(states.EXPERIMENT_STATUSES))
OBJECTIVE = metrics.DEFAULT_OBJECTIVE_METRIC

STATES_HOME = "dnnframe/states.py"
METRICS_HOME = "dnnframe/metrics.py"
# Places that name test_accuracy as a metric of their own, not as the default objective.
OBJECTIVE_ALLOWED = {
    "dnnframe/testing/hooks.py": "a fake engine result fills in every final metric",
    "dnnframe/analysis/paper/depth.py": "the paper's depth table is about test accuracy itself",
}


def literals(source: str, names: frozenset[str] | set[str]) -> list[tuple[int, str]]:
    """``(line, text)`` of each string constant in Python ``source`` that is one of ``names``."""
    return [
        (n.lineno, n.value)
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names
    ]


def page_literals(text: str, names: frozenset[str] | set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of each quoted ``names`` entry in a page script or template."""
    alternatives = "|".join(sorted(map(re.escape, names)))
    pattern = re.compile(rf"""["']({alternatives})["']""")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in pattern.finditer(text)]


@cache  # read once for every scan (the dict is not changed)
def python_sources() -> dict[str, str]:
    return {
        p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
        for pkg in PACKAGES
        for p in sorted((ROOT / pkg).rglob("*.py"))
    }


def page_sources() -> dict[str, str]:
    pages = [
        *(ROOT / "dashboard" / "static").glob("*.js"),
        *(ROOT / "dashboard" / "templates").glob("*.html"),
    ]
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in sorted(pages)}


def test_state_names_are_written_only_in_their_home() -> None:
    found = [
        f"{path}:{line}: {text!r}"
        for path, source in python_sources().items()
        if path != STATES_HOME
        for line, text in literals(source, STATE_NAMES)
    ]
    found += [
        f"{path}:{line}: {text!r}"
        for path, text_ in page_sources().items()
        for line, text in page_literals(text_, STATE_NAMES)
    ]
    assert not found, (
        "state names belong in dnnframe/states.py (pages read them from the "
        "served vocabulary):\n" + "\n".join(found)
    )


def test_the_default_objective_is_written_only_in_its_home() -> None:
    found = [
        f"{path}:{line}"
        for path, source in python_sources().items()
        if path != METRICS_HOME and path not in OBJECTIVE_ALLOWED
        for line, _ in literals(source, {OBJECTIVE})
    ]
    found += [
        f"{path}:{line}"
        for path, text in page_sources().items()
        for line, _ in page_literals(text, {OBJECTIVE})
    ]
    assert not found, "use dnnframe.metrics.DEFAULT_OBJECTIVE_METRIC:\n" + "\n".join(found)


def test_allowed_places_still_name_the_metric() -> None:
    sources = python_sources()
    stale = [p for p in OBJECTIVE_ALLOWED if not literals(sources.get(p, ""), {OBJECTIVE})]
    assert not stale, f"remove these from OBJECTIVE_ALLOWED, they no longer name it: {stale}"


def test_the_scans_find_what_they_look_for() -> None:
    source = 'x = 1\nif t.state == "CANCELLED":\n    sql = "WHERE state = \'QUEUED\'"\n'
    assert literals(source, STATE_NAMES) == [(2, "CANCELLED")]  # the SQL text is not one
    assert page_literals('a;\nconst S = ["COMPLETE", "RUNNING"];', STATE_NAMES) == [
        (2, "COMPLETE"),
        (2, "RUNNING"),
    ]
    assert literals('best = "test_accuracy"', {OBJECTIVE}) == [(1, "test_accuracy")]


# --------------------------------------------------------------------- the rules themselves
def test_the_state_groups() -> None:
    assert [s.value for s in states.ACTIVE_STATES] == ["QUEUED", "RUNNING"]
    assert {s.value for s in states.DONE_STATES} == {"COMPLETE", "FAILED", "DIVERGED", "PRUNED"}
    assert set(states.FINISHED_STATES) == set(states.DONE_STATES) | {TrialState.CANCELLED}
    assert states.TOLD_STATES == states.DONE_STATES


def test_the_cli_and_the_dashboard_count_done_trials_alike() -> None:
    from dashboard.service import experiment_json
    from dnnframe.store.records import ExperimentRecord

    counts = {"COMPLETE": 2, "FAILED": 1, "PRUNED": 1, "CANCELLED": 3, "QUEUED": 2}
    exp = ExperimentRecord("exp-1", "e", {}, n_trials=9, created_at=0.0, counts=counts)
    assert trials_finished(counts) == count_done(counts) == 4
    body = experiment_json(exp)
    assert body["finished"] == 4 and body["progress"] == pytest.approx(4 / 9)


def test_directions_come_from_the_registry() -> None:
    assert [direction(m) for m in ("test_accuracy", "val_loss", "train_seconds")] == [
        "max",
        "min",
        "min",
    ]
    assert improves("val_loss", 0.5, 0.6) and not improves("val_loss", 0.6, 0.5)
    assert improves("train_accuracy", 0.91, 0.9, min_delta=0.005)
    assert not improves("train_accuracy", 0.904, 0.9, min_delta=0.005)
    with pytest.raises(ValueError, match="unknown metric 'accuracy': known metrics are test_acc"):
        direction("accuracy")


@pytest.mark.parametrize(
    "mode, expected", [("max", [3, 0, 4, 1, 2, 5]), ("min", [0, 4, 3, 1, 2, 5])]
)
def test_best_first_puts_missing_values_last_and_keeps_ties_in_order(mode, expected) -> None:
    values = [0.5, None, math.nan, 0.9, 0.5, "n/a"]
    assert best_first(values, mode) == expected


def test_rank_leaves_unscored_out_on_request_and_refuses_a_bad_mode() -> None:
    rows = [{"id": "a", "v": None}, {"id": "b", "v": 2.0}, {"id": "c", "v": 1.0}]
    assert [r["id"] for r in rank(rows, lambda r: r["v"], "min", scored_only=True)] == ["c", "b"]
    with pytest.raises(ValueError, match="mode must be 'max' or 'min', got 'up'"):
        rank(rows, lambda r: r["v"], "up")


# ------------------------------------------------------- "is a finite number": metrics.is_number
IS_NUMBER_HOME = "dnnframe/metrics.py"
# Copies allowed elsewhere (none is left). An entry that no longer holds a copy fails the test.
IS_NUMBER_COPIES_LEFT: dict[str, str] = {}


def _called(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return None


def finite_number_tests(source: str) -> list[int]:
    """Lines of the boolean expressions in ``source`` that test "a finite int or float" by
    hand: ``isinstance(x, (int, float))`` (or ``float``) together with ``isfinite(x)``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.BoolOp):
            continue
        calls = [n for n in ast.walk(node) if _called(n)]
        numeric = any(
            _called(c) == "isinstance"
            and len(c.args) == 2
            and {"int", "float"} & {n.id for n in ast.walk(c.args[1]) if isinstance(n, ast.Name)}
            for c in calls
        )
        if numeric and any(_called(c) == "isfinite" for c in calls):
            found.append(node.lineno)
    return sorted(set(found))


def test_a_finite_number_is_tested_only_by_metrics_is_number() -> None:
    sources = python_sources()
    found = [
        f"{path}:{line}"
        for path, source in sources.items()
        if path != IS_NUMBER_HOME and path not in IS_NUMBER_COPIES_LEFT
        for line in finite_number_tests(source)
    ]
    assert not found, "use dnnframe.metrics.is_number:\n" + "\n".join(found)
    stale = [p for p in IS_NUMBER_COPIES_LEFT if not finite_number_tests(sources.get(p, ""))]
    assert not stale, f"remove these from IS_NUMBER_COPIES_LEFT, the copy is gone: {stale}"
    assert finite_number_tests(sources[IS_NUMBER_HOME])


def test_the_finite_number_scan_finds_each_spelling() -> None:
    source = (
        "a = isinstance(v, (int, float)) and math.isfinite(v)\n"
        "b = not isinstance(v, (int, float)) or not math.isfinite(v)\n"
        "c = isinstance(v, bool) or not isinstance(v, float) or not isfinite(v)\n"
        "d = math.isfinite(v) and v > 0\n"
        "e = isinstance(v, str) and math.isfinite(len(v))\n"
    )
    assert finite_number_tests(source) == [1, 2, 3]


@pytest.mark.parametrize(
    "value, expected",
    [
        (1, True),
        (0.5, True),
        (True, False),
        (math.nan, False),
        (math.inf, False),
        (None, False),
        ("1", False),
    ],
)
def test_is_number_is_a_finite_int_or_float_not_a_bool(value, expected) -> None:
    assert metrics.is_number(value) is expected


# ------------------------------------------------------- the pack size: executors.packing
PACK_SIZE_HOME = "dnnframe/executors/packing.py"


def reads_of_the_spec_pack_size(source: str) -> list[int]:
    """Lines that read ``<spec>.search.pack_size`` (the spec's own size)."""
    return [
        n.lineno
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Attribute)
        and n.attr == "pack_size"
        and isinstance(n.value, ast.Attribute)
        and n.value.attr == "search"
    ]


def test_the_pack_size_rule_is_written_only_in_packing() -> None:
    found = [
        f"{path}:{line}"
        for path, source in python_sources().items()
        if path != PACK_SIZE_HOME
        for line in reads_of_the_spec_pack_size(source)
    ]
    assert not found, (
        "a submission's pack size is dnnframe.executors.packing."
        "resolve_pack_size:\n" + "\n".join(found)
    )
    assert reads_of_the_spec_pack_size(python_sources()[PACK_SIZE_HOME])


def test_a_handed_experiment_gets_the_pack_size_a_submission_gets(monkeypatch) -> None:
    from dnnframe.executors.handoff import _pack_size
    from dnnframe.executors.packing import resolve_pack_size
    from dnnframe.spec import parse_spec
    from dnnframe.store import open_store

    spec = {"name": "homes-pack", "dataset": {"name": "iris"}, "search": {"pack_size": 3}}
    store = open_store("memory://")
    monkeypatch.setenv("DNNFRAME_PACK_SIZE", "5")
    store.create_experiment("exp-pack", "homes-pack", spec, n_trials=1)
    assert _pack_size(store, "exp-pack") == resolve_pack_size(parse_spec(spec)) == 3
    assert _pack_size(store, "no-such-experiment") == resolve_pack_size(None) == 5


# ------------------------------------------------------- recovery: dnnframe/recovery.py
RECOVERY_HOME = "dnnframe/recovery.py"
# The store calls that put a RUNNING trial back to QUEUED, and who else may make them: each
# of these puts back only trials it can judge itself, never a whole store's on a request.
PUT_BACK = frozenset({"requeue_stale", "release_trial"})
PUT_BACK_ALSO = {
    "dnnframe/executors/reaper.py": "Celery's owner of recovery, a worker's reaper process",
    "dnnframe/executors/redelivery.py": "a redelivered message's own members",
    "dnnframe/executors/local_crashes.py": "the pack of a local pool process that died",
}
# Who runs recovery (dnnframe.recovery's functions): the local pool's service and `dnnframe run`.
RECOVERY_CALLERS = {
    "dnnframe/executors/pool_service.py": "the local pool's service of a server without a broker",
    "dnnframe/cli/run.py": "a rerun, for its own spec's trials, before it submits",
}
RECOVERY_NAMES = frozenset({"recover_abandoned_trials", "recover_for_run", "StoreRecovery"})


def calls_of(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of each call in ``source`` of a function or method in ``names``, and
    each import of one."""
    found = [(n.lineno, name) for n in ast.walk(ast.parse(source)) if (name := _called(n)) in names]
    found += [
        (n.lineno, a.name)
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.ImportFrom)
        for a in n.names
        if a.name in names
    ]
    return sorted(found)


def test_trials_are_put_back_only_by_recoverys_owners() -> None:
    sources = python_sources()
    found = [
        f"{path}:{line}: {name}"
        for path, source in sources.items()
        if path != RECOVERY_HOME
        and path not in PUT_BACK_ALSO
        and not path.startswith("dnnframe/store/")
        for line, name in calls_of(source, PUT_BACK)
    ]
    assert not found, (
        "trials whose worker stopped are put back by dnnframe/recovery.py "
        "(or Celery's reaper):\n" + "\n".join(found)
    )
    stale = [p for p in PUT_BACK_ALSO if not calls_of(sources.get(p, ""), PUT_BACK)]
    assert not stale, f"remove these from PUT_BACK_ALSO, they put nothing back: {stale}"
    assert calls_of(sources[RECOVERY_HOME], PUT_BACK)


def test_recovery_runs_in_the_pool_service_and_a_rerun_never_in_a_request() -> None:
    sources = python_sources()
    callers = {
        path
        for path, source in sources.items()
        if path != RECOVERY_HOME and calls_of(source, RECOVERY_NAMES)
    }
    assert callers == set(RECOVERY_CALLERS), (
        "recovery (dnnframe/recovery.py) is run by its owners only, never by a submission "
        f"or the web tier: called from {sorted(callers)}"
    )


def test_the_recovery_scan_finds_each_spelling() -> None:
    source = (
        "from dnnframe.recovery import recover_for_run\n"
        "store.release_trial(t, w)\n"
        "requeue_stale(5)\n"
        "x = store.requeue_stale\n"
    )
    assert calls_of(source, PUT_BACK) == [(2, "release_trial"), (3, "requeue_stale")]
    assert calls_of(source, RECOVERY_NAMES) == [(1, "recover_for_run")]


# PyTensor's internals and the environment that steers PyTensor and JAX have one home,
# behind which a PyTensor upgrade is checked (dnnframe/engine/pytensor_wall/).
PYTENSOR_WALL = "dnnframe/engine/pytensor_wall/"
PYTENSOR_PRIVATE = frozenset(
    {
        "_c_all",
        "march_flags",
        "_force_init_beta",
        "_get_ext_suffix",
        "_config_var_dict",
        "fake_node",
        "cmodule",
        "optdb",
    }
)
STEERING_VARIABLES = frozenset({"PYTENSOR_FLAGS", "JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE"})
_WRITES = ("setdefault", "update", "putenv", "setenv", "__setitem__")


def _is_steering(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in STEERING_VARIABLES


def _mode_receiver(node: ast.AST) -> bool:
    # get_mode(...).register(...), mode.excluding(...).register(...), a_mode.register(...)
    names = {getattr(n, "id", None) or getattr(n, "attr", None) for n in ast.walk(node)}
    return bool(names & {"get_mode", "excluding", "including", "Mode"}) or any(
        "mode" in (n or "").lower() for n in names
    )


def pytensor_reaches(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of each reach past PyTensor's public API in Python ``source`` (a
    private name read, set, overridden or imported; a rewrite registered by position; a
    ``register_*`` imported from PyTensor) and each write of a variable that steers
    PyTensor or JAX (:data:`STEERING_VARIABLES`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = node.name
        if name in PYTENSOR_PRIVATE:
            found.append((node.lineno, name))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytensor"):
            parts = set((node.module or "").split("."))
            for alias in node.names:
                if (
                    alias.name in PYTENSOR_PRIVATE
                    or alias.name.startswith("register_")
                    or parts & PYTENSOR_PRIVATE
                ):
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if func.attr == "register" and _mode_receiver(func.value):
                found.append((node.lineno, "register"))
            if func.attr in _WRITES and (
                any(_is_steering(a) for a in node.args[:1])
                or any(k.arg in STEERING_VARIABLES for k in node.keywords)
            ):
                found.append((node.lineno, f"{func.attr} {STEERING_VARIABLES}"))
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in getattr(node, "targets", None) or [node.target]:
                if isinstance(target, ast.Subscript) and _is_steering(target.slice):
                    found.append((node.lineno, f"[{target.slice.value}] ="))
    return sorted(set(found))


def test_only_the_wall_reaches_into_pytensor_or_writes_its_environment() -> None:
    sources = python_sources()
    found = [
        f"{path}:{line}: {what}"
        for path, source in sources.items()
        if not path.startswith(PYTENSOR_WALL)
        for line, what in pytensor_reaches(source)
    ]
    assert not found, (
        "PyTensor's internals and PYTENSOR_FLAGS/JAX_PLATFORMS belong in "
        f"{PYTENSOR_WALL}:\n" + "\n".join(found)
    )
    inside = [
        what
        for path, source in sources.items()
        if path.startswith(PYTENSOR_WALL)
        for _, what in pytensor_reaches(source)
    ]
    assert {"_c_all", "march_flags", "_force_init_beta", "_get_ext_suffix", "register"} <= set(
        inside
    )


def test_the_wall_scan_finds_each_spelling() -> None:
    source = (
        "class E(Elemwise):\n"
        "    def _c_all(self): ...\n"
        "GCC_compiler.march_flags = []\n"
        "check._force_init_beta = True\n"
        "from pytensor.link.c import cmodule\n"
        "from pytensor.tensor.rewriting.basic import register_specialize\n"
        "get_mode('CVM').excluding('x').register((r, 1.5))\n"
        "os.environ['PYTENSOR_FLAGS'] = 'a=1'\n"
        "os.environ.setdefault('JAX_PLATFORMS', 'cpu')\n"
        "env.update(XLA_PYTHON_CLIENT_PREALLOCATE='false')\n"
        "os.environ.get('PYTENSOR_FLAGS')\n"
        "atexit.register(f)\n"
        "store.register_worker(w)\n"
    )
    assert [line for line, _ in pytensor_reaches(source)] == [2, 3, 4, 5, 6, 7, 8, 9, 10]


# ------------------------------------------------------- loading datasets: dnnframe/datasets/
DATASETS_HOME = "dnnframe/datasets/"
# The libraries that produce or split raw data, and the parser of CSV text.
DATA_SOURCES = ("sklearn.datasets", "sklearn.model_selection", "mnist1d")


def data_loading(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of each import of a data source (:data:`DATA_SOURCES`) and each
    ``csv.reader``/``csv.DictReader`` in Python ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
        found += [
            (node.lineno, n)
            for n in names
            if any(n == s or n.startswith(s + ".") for s in DATA_SOURCES)
        ]
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("reader", "DictReader")
            and isinstance(node.value, ast.Name)
            and node.value.id == "csv"
        ):
            found.append((node.lineno, f"csv.{node.attr}"))
    return sorted(set(found))


def test_datasets_are_loaded_only_in_their_home() -> None:
    sources = python_sources()
    found = [
        f"{path}:{line}: {what}"
        for path, source in sources.items()
        if not path.startswith(DATASETS_HOME)
        for line, what in data_loading(source)
    ]
    assert not found, (
        "loading, splitting and parsing datasets belong in "
        f"{DATASETS_HOME} (use dnnframe.datasets):\n" + "\n".join(found)
    )
    inside = {
        what
        for path, source in sources.items()
        if path.startswith(DATASETS_HOME)
        for _, what in data_loading(source)
    }
    assert {"sklearn.datasets", "sklearn.model_selection", "mnist1d.data", "csv.reader"} <= inside


def test_the_data_loading_scan_finds_each_spelling() -> None:
    source = (
        "import sklearn.datasets as skd\n"
        "from sklearn.model_selection import train_test_split\n"
        "from sklearn import datasets\n"
        "from mnist1d.data import make_dataset\n"
        "rows = csv.reader(io.StringIO(text))\n"
        "import csv\n"
        "w = csv.writer(f)\n"
        "from sklearn.neural_network import MLPClassifier\n"
    )
    assert sorted({line for line, _ in data_loading(source)}) == [1, 2, 3, 4, 5]


# ------------------------------------------------------- the graph's segments: engine/segments.py
SEGMENTS_HOME = "dnnframe/engine/segments.py"
SEGMENT_KINDS = frozenset({"dense", "stack"})


def segment_kinds(source: str) -> list[tuple[int, str]]:
    """``(line, kind)`` of each string constant in Python ``source`` that is a segment's kind
    (:data:`SEGMENT_KINDS`), except as the text of an f-string (a layer's name)."""
    tree = ast.parse(source)
    in_fstrings = {
        id(part) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for part in n.values
    }
    return sorted(
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and n.value in SEGMENT_KINDS
        and id(n) not in in_fstrings
    )


def test_segments_are_made_and_read_only_through_their_home() -> None:
    """A segment is a :class:`~dnnframe.engine.segments.Segment`, and hidden widths split into
    them by :func:`~dnnframe.engine.segments.split_widths` alone (the graph and the compile
    key both): a second spelling of a kind, a tuple read by index, grows back here."""
    sources = python_sources()
    found = [
        f"{path}:{line}: {kind!r}"
        for path, source in sources.items()
        if path != SEGMENTS_HOME
        for line, kind in segment_kinds(source)
    ]
    assert not found, (
        "a graph segment is a dnnframe.engine.segments.Segment (seg.is_stack, "
        "Segment.dense(...)):\n" + "\n".join(found)
    )
    assert {kind for _, kind in segment_kinds(sources[SEGMENTS_HOME])} == SEGMENT_KINDS


def test_the_segment_scan_finds_each_spelling() -> None:
    source = (
        'seg = ("dense", 4, 8)\n'
        'if seg[0] == "stack":\n'
        '    name = f"stack{k}"\n'
        'doc = "a stack of layers"\n'
    )
    assert segment_kinds(source) == [(1, "dense"), (2, "stack")]


# ------------------------------------------------------- dotted paths: jsonsafe.dotted_items
def test_nested_documents_are_flattened_only_by_dotted_items() -> None:
    """One flattener (dnnframe/jsonsafe.py): a function that calls itself with
    ``f"{prefix}.{key}"`` elsewhere is a copy, which may write lists differently."""
    pattern = re.compile(r'f"\{prefix\}\.\{(?:key|k)\}"')
    found = [
        path
        for path, source in python_sources().items()
        if path != "dnnframe/jsonsafe.py" and pattern.search(source)
    ]
    assert not found, "flatten nested dicts with dnnframe.jsonsafe.dotted_items: " + ", ".join(
        found
    )


# ----------------------------------------- single-trial train functions: dnnframe/testing/
TESTING_HOME = "dnnframe/testing/"
# What trains one trial at a time, and the adapter that makes a pack of it: tests' stand-ins.
PER_TRIAL_NAMES = frozenset({"one_by_one", "run_one", "run_trial", "TrainFn", "TrialTrainFn"})


def per_trial_training(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of each per-trial training name used, defined or imported in Python
    ``source`` (:data:`PER_TRIAL_NAMES`), and each ``train_fn`` parameter not annotated as
    a pack train function (``PackTrainFn``)."""
    found = []
    for n in ast.walk(ast.parse(source)):
        name = (
            getattr(n, "id", None)
            if isinstance(n, ast.Name)
            else n.attr
            if isinstance(n, ast.Attribute)
            else n.name
            if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.alias))
            else None
        )
        if name in PER_TRIAL_NAMES:
            found.append((getattr(n, "lineno", 0), name))
        if (
            isinstance(n, ast.arg)
            and n.arg == "train_fn"
            and (n.annotation is None or "PackTrainFn" not in ast.unparse(n.annotation))
        ):
            found.append((n.lineno, "train_fn: not a PackTrainFn"))
    return sorted(found)


def test_production_trains_packs_only() -> None:
    """The runner and the executors know one training contract, ``PackTrainFn``: a
    single-trial function, and its adapter, live with the tests' hooks in dnnframe.testing."""
    sources = python_sources()
    found = [
        f"{path}:{line}: {what}"
        for path, source in sources.items()
        if not path.startswith(TESTING_HOME)
        for line, what in per_trial_training(source)
    ]
    assert not found, (
        "production trains packs (PackTrainFn); per-trial train functions and "
        "one_by_one live in dnnframe/testing/:\n" + "\n".join(found)
    )
    assert per_trial_training(sources[TESTING_HOME + "packs.py"])


def test_the_per_trial_scan_finds_each_spelling() -> None:
    source = (
        "from dnnframe.testing.packs import one_by_one\n"
        "train = packs.run_trial\n"
        "def run(train_fn: TrainFn | None, other: PackTrainFn | None) -> None: ...\n"
        "def pool(train_fn=None): ...\n"
        "def fine(train_fn: PackTrainFn | None = None): ...\n"
    )
    assert per_trial_training(source) == [
        (1, "one_by_one"),
        (2, "run_trial"),
        (3, "TrainFn"),
        (3, "train_fn: not a PackTrainFn"),
        (4, "train_fn: not a PackTrainFn"),
    ]
