"""The Celery app of dnnframe, for ``celery -A tasks worker`` (or ``dnnframe worker``) and
``celery -A tasks flower``. A thin shim: the app, the task and the reaper live in
:mod:`dnnframe.executors`; this package only names the worker's app.
"""

from __future__ import annotations

from dnnframe.executors.celery import create_app
from dnnframe.executors.celery_worker import worker_app

from . import config
from .flower_login import require_login_for_metrics

#: The worker app (``celery -A tasks worker`` finds it by this name).
app = worker_app()
require_login_for_metrics()  # under `celery -A tasks flower`

__all__ = ["app", "config", "create_app"]
