"""Executors: where trials run. ``LocalExecutor`` (a process pool on this machine) and
``CeleryExecutor`` (Celery workers over RabbitMQ) implement :class:`Executor`.

``CeleryExecutor`` is imported on first use, so a local run never imports Celery (the
``celery`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import settings
from ..extras import require
from ..store import default_store_url
from .base import THREAD_ENV, Executor, pinned_threads
from .local import LocalExecutor, LocalStats

if TYPE_CHECKING:
    from .celery import CeleryExecutor


def __getattr__(name: str) -> object:
    if name == "CeleryExecutor":
        return _celery_executor()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_executor(
    store_url: str | None = None,
    broker_url: str | None = None,
    workers: int | None = None,
    queue: str = "default",
) -> Executor:
    """Pick the executor: Celery (publishing to ``queue``) when a broker URL is given (or
    ``$DNNFRAME_BROKER_URL``), otherwise a :class:`LocalExecutor` with ``workers`` processes."""
    broker_url = broker_url or settings.get().broker_url
    store_url = store_url or default_store_url()
    if broker_url:
        return _celery_executor()(broker_url, store_url, queue=queue)
    return LocalExecutor(store_url, workers=workers)


def _celery_executor() -> type[CeleryExecutor]:
    require("celery", "celery", "sending trials to Celery workers (a broker URL)")
    from .celery import CeleryExecutor

    return CeleryExecutor


__all__ = [
    "CeleryExecutor",
    "Executor",
    "LocalExecutor",
    "LocalStats",
    "THREAD_ENV",
    "make_executor",
    "pinned_threads",
]
