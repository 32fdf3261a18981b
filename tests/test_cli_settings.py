"""Commands that start servers pass their settings on explicitly and never write their own
process's environment: ``dnnframe serve`` to the app (or gunicorn's environment),
``dnnframe worker`` to the Celery worker's environment. Run in-process (click's CliRunner)
with the server start replaced, so the environment can be compared before and after."""

from __future__ import annotations

import os
from typing import Any

import pytest
from click.testing import CliRunner
from flask import Flask

from dashboard import create_app
from dnnframe import settings
from dnnframe.cli import cli
from dnnframe.cli import services as cli_services
from dnnframe.executors import THREAD_ENV


class Started(Exception):
    """Stands for a server start (``os.execve`` never returns; ``app.run`` blocks)."""


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        seen.update(path=path, argv=argv, env=env)
        raise Started

    def run(app: Flask, **kwargs: Any) -> None:
        seen.update(config=dict(app.config), run=kwargs)
        raise Started

    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setattr(Flask, "run", run)

    class DriverChild:  # the driver service's supervisor: a real one would start a process
        def __init__(self, store_url: str | None = None):
            seen.update(driver_store_url=store_url)

        def start(self) -> DriverChild:
            seen.update(driver_started=True)
            return self

        def stop(self) -> None:
            seen.update(driver_stopped=True)

    monkeypatch.setattr(cli_services, "DriverChild", DriverChild)
    for name in (
        "DNNFRAME_STORE_URL",
        "DNNFRAME_BROKER_URL",
        "DNNFRAME_BIND_HOST",
        "THEANO_FLAGS",
        *THREAD_ENV,
    ):
        monkeypatch.delenv(name, raising=False)
    return seen


def _invoke(args: list[str]) -> None:
    before = dict(os.environ)
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, Started), result.output
    assert dict(os.environ) == before, "the command changed its own environment"


def test_serve_gives_the_app_its_settings(started, tmp_path):
    url = f"sqlite:///{tmp_path / 'serve.db'}"
    _invoke(["serve", "--store", url, "--host", "127.0.0.2", "--port", "5999"])
    assert started["config"]["STORE_URL"] == url
    assert started["config"]["BIND_HOST"] == "127.0.0.2"
    assert "127.0.0.2" in started["config"]["ALLOWED_HOSTS"]
    assert started["run"]["port"] == 5999
    # the search drivers' service is told the store explicitly, not through the environment
    assert started["driver_started"] and started["driver_store_url"] == url
    assert started["driver_stopped"]


def test_serve_keeps_a_bind_host_the_environment_sets(started, tmp_path, monkeypatch):
    monkeypatch.setenv("DNNFRAME_BIND_HOST", "dash.example.org")
    _invoke(["serve", "--store", f"sqlite:///{tmp_path / 's.db'}"])
    assert started["config"]["BIND_HOST"] == "dash.example.org"


def test_serve_production_gives_gunicorn_an_environment_of_its_own(started, tmp_path):
    url = f"sqlite:///{tmp_path / 'prod.db'}"
    _invoke(["serve", "--production", "--store", url, "--host", "::1", "--web-workers", "3"])
    assert started["argv"][1:4] == ["-m", "gunicorn", "--config"]
    assert started["argv"][-4:] == ["[::1]:5000", "--workers", "3", "dashboard.wsgi:app"]
    env = started["env"]
    assert env["DNNFRAME_STORE_URL"] == url and env["DNNFRAME_BIND_HOST"] == "::1"
    assert env["PATH"] == os.environ["PATH"]


def test_worker_gives_celery_an_environment_of_its_own(started, tmp_path, monkeypatch):
    checked: list[dict[str, str]] = []
    monkeypatch.setattr(
        cli_services, "refuse_unusable_device", lambda doing, env=None: checked.append(env)
    )
    url = f"sqlite:///{tmp_path / 'w.db'}"
    _invoke(
        [
            "worker",
            "--store",
            url,
            "--broker",
            "amqp://u:p@broker:5672//",
            "-Q",
            "gpu",
            "-c",
            "2",
            "--",
            "--without-mingle",
        ]
    )
    env = started["env"]
    assert env["DNNFRAME_STORE_URL"] == url
    assert env["DNNFRAME_BROKER_URL"] == "amqp://u:p@broker:5672//"
    assert env["THEANO_FLAGS"] == "device=cuda,floatX=float32"
    assert {k: env[k] for k in THREAD_ENV} == THREAD_ENV
    assert checked == [env]  # the device is checked with the flags the worker will get
    assert started["argv"][1:6] == ["-m", "celery", "-A", "tasks", "worker"]
    assert "--queues=gpu" in started["argv"] and "--concurrency=2" in started["argv"]
    assert started["argv"][-1] == "--without-mingle"


def test_worker_keeps_the_flags_the_environment_sets(started, tmp_path, monkeypatch):
    monkeypatch.setenv("THEANO_FLAGS", "device=cpu,floatX=float64")
    monkeypatch.setattr(cli_services, "refuse_unusable_device", lambda doing, env=None: None)
    _invoke(["worker", "--store", f"sqlite:///{tmp_path / 'w.db'}", "-Q", "gpu,default"])
    assert started["env"]["THEANO_FLAGS"] == "device=cpu,floatX=float64"
    assert "DNNFRAME_BROKER_URL" not in started["env"]


# ------------------------------------------------------------------ the dashboard's settings
def test_create_app_takes_explicit_settings_over_the_environment(monkeypatch):
    monkeypatch.setenv("DNNFRAME_STORE_URL", "sqlite:///from-env.db")
    monkeypatch.setenv("DNNFRAME_MAX_TRIALS", "7")
    given = settings.get().replace(store_url="sqlite:///given.db")
    app = create_app(settings=given)
    assert app.config["STORE_URL"] == "sqlite:///given.db"
    assert app.config["MAX_TRIALS"] == 7  # typed: an int, as the environment said
    assert create_app().config["STORE_URL"] == "sqlite:///from-env.db"
    # a test's own config wins over both
    assert create_app({"MAX_TRIALS": 3}, settings=given).config["MAX_TRIALS"] == 3


def test_an_unset_dashboard_setting_takes_the_settings_default(monkeypatch):
    """Every setting the dashboard takes reaches its config, its default from Settings (the
    one home of the dashboard's limits); the environment and then test_config override it."""
    given = settings.Settings.model_fields
    for name in (
        "DNNFRAME_MAX_TRIALS",
        "DNNFRAME_EVENT_STREAMS",
        "DNNFRAME_MAX_CONTENT_LENGTH",
        "DNNFRAME_CELERY_INSPECT_TIMEOUT",
        "DNNFRAME_TOKEN_GUESS_LIMIT",
        "DNNFRAME_MAX_UPLOAD_BYTES",
    ):
        monkeypatch.delenv(name, raising=False)
    config = create_app().config
    for key in (
        "MAX_TRIALS",
        "MAX_DATASET_CELLS",
        "EVENT_STREAMS",
        "MAX_CONTENT_LENGTH",
        "CELERY_INSPECT_TIMEOUT",
        "TOKEN_GUESS_LIMIT",
        "TOKEN_GUESS_STORAGE",
        "TRUSTED_PROXIES",
    ):
        assert given[key.lower()].default is not None, key
        assert config[key] == given[key.lower()].default, key
    assert set(settings.get().dashboard_config()) <= set(config)
    assert config["MAX_UPLOAD_BYTES"] is None  # unset: the uploads take MAX_CONTENT_LENGTH
    monkeypatch.setenv("DNNFRAME_EVENT_STREAMS", "0")
    monkeypatch.setenv("DNNFRAME_CELERY_INSPECT_TIMEOUT", "2.5")
    config = create_app({"TOKEN_GUESS_LIMIT": "1 per hour"}).config
    assert (config["EVENT_STREAMS"], config["CELERY_INSPECT_TIMEOUT"]) == (0, 2.5)
    assert config["TOKEN_GUESS_LIMIT"] == "1 per hour"
    assert create_app({"EVENT_STREAMS": 3}).config["EVENT_STREAMS"] == 3


def test_gunicorn_gives_each_worker_a_thread_per_event_stream(monkeypatch):
    """gunicorn's threads are the request threads plus DNNFRAME_EVENT_STREAMS, its default
    from Settings; 0 streams (every page polls) adds none."""
    import importlib

    monkeypatch.setenv("DNNFRAME_SECRET_KEY", "test-key")  # so the import writes no key
    monkeypatch.setenv("DNNFRAME_WEB_THREADS", "3")
    monkeypatch.delenv("DNNFRAME_EVENT_STREAMS", raising=False)
    config = importlib.reload(importlib.import_module("dashboard.gunicorn_config"))
    assert config.threads == 3 + settings.Settings.model_fields["event_streams"].default
    monkeypatch.setenv("DNNFRAME_EVENT_STREAMS", "0")
    assert importlib.reload(config).threads == 3


def test_no_dashboard_default_is_a_setting():
    """A setting's default lives in Settings alone: dashboard.DEFAULTS keeps only the app's
    own keys, so the two cannot disagree again."""
    from dashboard import DEFAULTS

    both = sorted(k for k in DEFAULTS if k.lower() in settings.Settings.model_fields)
    assert not both, f"settings with a second default in dashboard.DEFAULTS: {both}"


def test_the_dashboards_setting_defaults_are_not_written_in_the_dashboard():
    """The text defaults of the settings the dashboard takes appear nowhere in dashboard/ as
    a literal of their own (a fallback such as ``or "memory://"`` would be a second home)."""
    import ast
    from pathlib import Path

    fields = settings.Settings.model_fields
    texts = {
        fields[k.lower()].default
        for k in settings.get().dashboard_config()
        if isinstance(fields[k.lower()].default, str)
    }
    assert {"memory://", "10 per minute"} <= texts
    root = Path(__file__).resolve().parents[1]
    found = [
        f"{path.relative_to(root)}:{node.lineno}: {node.value!r}"
        for path in sorted((root / "dashboard").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in texts
    ]
    assert not found, "read these from the app's config (Settings):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "name, value, message",
    [
        (
            "DNNFRAME_MAX_TRIALS",
            "many",
            "DNNFRAME_MAX_TRIALS must be a positive integer, but got 'many'",
        ),
        (
            "DNNFRAME_MAX_CONTENT_LENGTH",
            "0",
            "DNNFRAME_MAX_CONTENT_LENGTH must be a positive integer",
        ),
        ("DNNFRAME_CELERY_INSPECT_TIMEOUT", "-1", "DNNFRAME_CELERY_INSPECT_TIMEOUT must be > 0"),
        ("DNNFRAME_EVENT_STREAMS", "-1", "DNNFRAME_EVENT_STREAMS: .*greater than or equal to 0"),
    ],
)
def test_a_bad_dashboard_setting_is_named(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(settings.SettingsError, match=message):
        create_app()


def test_child_environ_adds_settings_and_refuses_unknown_names():
    env = settings.child_environ(
        {"THEANO_FLAGS": "device=cpu", "GONE": None},
        base={"PATH": "/bin"},
        store_url="sqlite:///x.db",
        broker_url=None,
    )
    assert env == {
        "PATH": "/bin",
        "DNNFRAME_STORE_URL": "sqlite:///x.db",
        "THEANO_FLAGS": "device=cpu",
    }
    with pytest.raises(settings.SettingsError, match="no such setting: store"):
        settings.child_environ(store="x")
    with pytest.raises(settings.SettingsError, match="no such setting: nope"):
        settings.get().replace(nope=1)


def test_every_setting_says_what_it_means():
    """The settings reference prints each field's description as the variable's meaning
    (docs/hooks/settings_reference.py); no other page writes it."""
    vague = [
        name
        for name, info in settings.Settings.model_fields.items()
        if len((info.description or "").split()) < 4
    ]
    assert not vague, f"settings without a meaning: {vague}"
