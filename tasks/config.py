"""Names a deployment refers to (queues, task names, default time limit); they live in
:mod:`dnnframe.executors.celery`."""

from __future__ import annotations

from dnnframe.executors.celery import (
    DEFAULT_TASK_TIME_LIMIT,
    PACK_TASK,
    QUEUES,
    celery_settings,
)

__all__ = ["DEFAULT_TASK_TIME_LIMIT", "PACK_TASK", "QUEUES", "celery_settings"]
