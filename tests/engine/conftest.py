"""Fixtures of the engine tests."""

from __future__ import annotations

import pytest

from dnnframe.engine import packed


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty in-process and disk cache of compiled models."""
    monkeypatch.setenv("DNNFRAME_CACHE_DIR", str(tmp_path))
    packed.clear_cache()
    yield
    packed.clear_cache()
