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


# The equivalence tests that train graphs in this process, run without coverage's tracer:
# on Python 3.11 tracing makes all Python slower, PyTensor's own included, and it cost these
# 1.5 to 1.7 times their CPU (tests/engine/test_widths.py with test_blocks.py: 51-58 s
# untraced, 80-97 s traced), a tenth of the full run's. They reach no line of dnnframe/
# that the other engine tests do not (measured with coverage's per-test contexts), so the
# figure CI prints is the same without them.
UNTRACED = {
    "test_widths.py",
    "test_unrolled.py",
    "test_blocks.py",
    "test_blas.py",
    "test_float32.py",
    "test_rewrites.py",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in UNTRACED and item.path.parent.name == "engine":
            item.add_marker(pytest.mark.no_cover)
