"""A core install (no extras) trains a sweep locally; each server feature without its extra
fails with one line naming the pip install that adds it.

The optional packages are installed in the test environment (the dev extra pulls every
extra in), so these tests hide them: a ``sitecustomize`` module on PYTHONPATH puts a finder
first on ``sys.meta_path`` that raises ModuleNotFoundError for each, in the CLI process and
in every process it starts (the local pool's workers). What the tests see is what a
``pip install dnnframe`` without extras gives.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

from dnnframe.extras import MissingExtraError, require

REPO = Path(__file__).resolve().parents[1]

# The top-level modules of every extra's packages (and what they pull in) that dnnframe imports.
OPTIONAL = (
    "celery",
    "kombu",
    "flask",
    "werkzeug",
    "gunicorn",
    "pymongo",
    "bson",
    "optuna",
    "cmaes",
    "plotly",
    "limits",
    "flower",
    "redis",
)

TINY = {
    "name": "core-tiny",
    "dataset": {"name": "iris"},
    "model": {"width": 4},
    "training": {"max_epochs": 1, "batch_size": 32},
}
TPE = {
    **TINY,
    "name": "core-tpe",
    "training": {"learning_rate": {"loguniform": [0.001, 0.1]}, "max_epochs": 1},
    "search": {"method": "tpe", "num_samples": 2},
}

SITECUSTOMIZE = f"""
import sys

BLOCKED = {OPTIONAL!r}


class BlockOptional:
    # First on sys.meta_path: an optional package is "not installed" in this process.
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: core install)",
                                      name=name)
        return None


sys.meta_path.insert(0, BlockOptional())
"""


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    """Run ``dnnframe ARGS`` as a core install would: the optional packages hidden."""
    root = tmp_path_factory.mktemp("core")
    (root / "site").mkdir()
    (root / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "site"), str(REPO)])}
        for name in ("DNNFRAME_STORE_URL", "DNNFRAME_BROKER_URL"):
            full_env.pop(name, None)
        full_env.update(env or {})
        code = "import sys; from dnnframe.cli import main; main(sys.argv[1:])"
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=root,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    run.root = root
    return run


def spec_file(root: Path, spec: dict) -> str:
    path = root / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(path)


def test_the_blocker_hides_the_optional_packages(core) -> None:
    proc = core("--version")
    assert proc.returncode == 0, proc.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import flask"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(core.root / "site")},
    )
    assert probe.returncode == 1 and "blocked: core install" in probe.stderr, probe.stderr


def test_a_core_install_trains_a_local_sweep(core) -> None:
    url = f"sqlite:///{core.root / 'local.db'}"
    proc = core("run", spec_file(core.root, TINY), "--store", url, "--workers", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    assert '"COMPLETE": 1' in proc.stdout, proc.stdout
    # reading the results needs no extra either
    status = core("status", "core-tiny", "--store", url)
    assert status.returncode == 0, status.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["serve"], "error: the dashboard needs Flask: pip install 'dnnframe[web]'"),
        (
            ["worker", "--store", "sqlite:///w.db"],
            "error: dnnframe worker needs Celery: pip install 'dnnframe[celery]'",
        ),
        (
            ["run", "{tiny}", "--store", "sqlite:///b.db", "--broker", "amqp://127.0.0.1:1//"],
            "error: dnnframe run with a broker (--broker, $DNNFRAME_BROKER_URL) needs Celery: "
            "pip install 'dnnframe[celery]'",
        ),
        (
            ["run", "{tiny}", "--store", "mongodb://127.0.0.1:1/x"],
            "error: a mongodb:// store needs PyMongo: pip install 'dnnframe[mongo]'",
        ),
        (
            ["ls", "--store", "mongodb://127.0.0.1:1/x"],
            "error: a mongodb:// store needs PyMongo: pip install 'dnnframe[mongo]'",
        ),
        (
            ["run", "{tpe}", "--store", "sqlite:///t.db"],
            "error: search.method: tpe needs Optuna: pip install 'dnnframe[search]'",
        ),
        (
            ["report", "x", "--store", "sqlite:///r.db"],
            "error: dnnframe report needs plotly: pip install 'dnnframe[web]'",
        ),
    ],
    ids=["serve", "worker", "run-broker", "run-mongodb", "ls-mongodb", "run-tpe", "report"],
)
def test_a_missing_extra_is_one_line_naming_the_install(core, args, line) -> None:
    words = [a.format(tiny=spec_file(core.root, TINY), tpe=spec_file(core.root, TPE)) for a in args]
    proc = core(*words)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.strip() == line, proc.stderr
    # the check comes before anything is stored
    assert not (core.root / "b.db").exists() and not (core.root / "t.db").exists()


def test_require_names_the_extra_and_returns_the_module() -> None:
    assert require("json", "web", "anything").dumps([1]) == "[1]"
    with pytest.raises(MissingExtraError) as caught:
        require("dnnframe_no_such_package", "search", "search.method: tpe")
    assert str(caught.value) == (
        "search.method: tpe needs dnnframe_no_such_package: pip install 'dnnframe[search]'"
    )
    assert caught.value.extra == "search"


def test_the_extras_the_messages_name_exist_and_dev_has_them_all() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for name in ("web", "celery", "mongo", "search", "redis", "all"):
        assert name in extras, name
    core = " ".join(project["dependencies"])
    for package in ("flask", "celery", "kombu", "pymongo", "optuna", "plotly", "gunicorn"):
        assert package not in core, f"{package} is a core dependency"
    assert "dnnframe[web,celery,mongo,search,redis]" in extras["all"]
    # the README's install of [dev] gives the whole test suite: every server extra
    [self_ref] = [r for r in extras["dev"] if r.startswith("dnnframe[")]
    assert {"all", "monitoring"} <= set(self_ref[len("dnnframe[") : -1].split(","))
