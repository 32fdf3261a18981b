"""The Celery app of dnnframe: ``celery -A tasks worker`` (or ``dnnframe worker``).

Workers take trial ids from RabbitMQ and call :func:`dnnframe.runner.run_trial` against the
store named by ``$DNNFRAME_STORE_URL``; see :mod:`tasks.config` for every setting and
:mod:`tasks.trial` for the task, worker state and heartbeats, :mod:`tasks.reaper` for the
requeue of trials whose worker vanished. Flower works against it: ``celery -A tasks flower``.
"""

from __future__ import annotations

from celery import Celery

from . import config


def create_app(broker_url: str | None = None) -> Celery:
    """A Celery app with dnnframe's settings (``broker_url`` default ``$DNNFRAME_BROKER_URL``).

    Submitters that need their own broker (``CeleryExecutor``) create one; workers use the
    module-level :data:`app`.
    """
    celery_app = Celery("dnnframe", set_as_current=False)
    celery_app.config_from_object(config.celery_settings(broker_url))
    return celery_app


#: The worker app (``celery -A tasks worker`` finds it by this name).
app = create_app()
app.set_default()

from . import trial  # noqa: E402,F401  (registers the task and the worker signal handlers)

__all__ = ["app", "create_app", "config"]
