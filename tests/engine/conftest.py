"""Fixtures of the engine tests."""

from __future__ import annotations

import pytest

from dnnframe.engine.pytensor_wall import configure


def pytest_configure(config) -> None:  # noqa: ANN001 - pytest hook
    # this process's flags go to PyTensor before any engine test module imports it
    configure()


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty in-process and disk cache of compiled models."""
    from dnnframe.engine import packed

    monkeypatch.setenv("DNNFRAME_CACHE_DIR", str(tmp_path))
    packed.clear_cache()
    yield
    packed.clear_cache()
