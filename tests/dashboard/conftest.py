"""Fixtures for the dashboard tests: an app over a real SQLite file in a temp directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_support import RecordingExecutor, serving
from diverging_sweep import run_diverging_sweep

from dashboard import create_app


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("DNNFRAME_DATA_DIR", str(path))
    return path


@pytest.fixture
def recorder() -> RecordingExecutor:
    return RecordingExecutor()


@pytest.fixture
def make_app(tmp_path: Path, data_dir: Path, recorder: RecordingExecutor):
    apps = []

    def make(**config):
        settings = {
            "TESTING": True,
            "STORE_URL": f"sqlite:///{tmp_path / 'store.db'}",
            "EXECUTOR": recorder,
            **config,
        }
        app = create_app(settings)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["dnnframe"].shutdown()


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def store(app) -> Iterator:
    return app.extensions["dnnframe"].store


@pytest.fixture
def quiet_server(tmp_path, data_dir):
    """The app on a real server whose executor runs nothing: the test moves the trials."""

    app = create_app(
        {
            "STORE_URL": f"sqlite:///{tmp_path / 'quiet.db'}",
            "EXECUTOR": RecordingExecutor(),
            "ALLOWED_HOSTS": "127.0.0.1",
        }
    )
    try:
        with serving(app) as base:
            yield base, app.extensions["dnnframe"].store
    finally:
        app.extensions["dnnframe"].shutdown()


@pytest.fixture(scope="session")
def diverging_sweep(tmp_path_factory) -> tuple[str, str]:
    """A real sweep where the learning rate decides divergence (diverging_sweep.py), trained
    once for every test that reads it: the store's URL and the experiment's id."""
    return run_diverging_sweep(tmp_path_factory.mktemp("diverging"))
