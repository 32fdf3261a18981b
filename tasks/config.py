"""Names a deployment refers to (queues, task name, default time limit); they live in
:mod:`dnnframe.executors.celery`."""

from __future__ import annotations

from dnnframe.executors.celery import (
    DEFAULT_TASK_TIME_LIMIT,
    QUEUES,
    TRAIN_TASK,
    celery_settings,
)

__all__ = ["DEFAULT_TASK_TIME_LIMIT", "QUEUES", "TRAIN_TASK", "celery_settings"]
