"""Settings of the Celery app, read from the environment (one story for CLI, compose, tests).

=============================== ===========================================================
``DNNFRAME_BROKER_URL``         broker (default ``amqp://guest:guest@127.0.0.1:5672//``)
``DNNFRAME_STORE_URL``          the result store every worker writes to (default
                                ``sqlite:///dnnframe.db``); it is never put in a message
``DNNFRAME_TASK_TIME_LIMIT``    hard limit of one trial in seconds (default 1680 = 28 min)
``DNNFRAME_HEARTBEAT_TIMEOUT``  a RUNNING trial silent this long is requeued (default 300)
``DNNFRAME_MAX_ATTEMPTS``       delivery cap: claims of one trial before it is FAILED (3)
``DNNFRAME_TRAIN_FN``           testing/benchmark hook ``module:function`` used instead of
                                the engine's ``train`` (see ``tasks.hooks``)
=============================== ===========================================================

Why the time limit defaults to 28 minutes: workers acknowledge a trial only when it has
finished (``acks_late``), and RabbitMQ closes the channel of a consumer that holds an
unacknowledged message longer than its ``consumer_timeout`` (30 minutes by default) — the
trial would be redelivered and run again forever. So the hard limit must stay *below* the
broker's consumer_timeout. ``deploy/rabbitmq/rabbitmq.conf`` raises consumer_timeout to
24 hours and docker-compose.yml sets ``DNNFRAME_TASK_TIME_LIMIT=21600`` (6 hours); on a
broker you run yourself, raise both together. The soft limit fires a minute earlier
(10 % earlier for short limits) inside the trial, which then ends FAILED with the reason.
"""

from __future__ import annotations

import os
from typing import Any

from kombu import Exchange, Queue

from dnnframe.settings import (  # noqa: F401 - re-exported: the worker's settings in one place
    DEFAULT_HEARTBEAT_TIMEOUT,
    DEFAULT_MAX_ATTEMPTS,
    SettingsError,
    env_seconds,
    heartbeat_timeout,
    max_attempts,
)
from dnnframe.store import default_store_url

DEFAULT_BROKER_URL = "amqp://guest:guest@127.0.0.1:5672//"
DEFAULT_TASK_TIME_LIMIT = 1680.0
#: Queues every deployment has: CPU workers consume ``default``, workers started with
#: ``THEANO_FLAGS=device=cuda`` consume ``gpu``. Any other name is created on first use.
QUEUES = ("default", "gpu")
TRAIN_TASK = "tasks.train_trial"


# Settings shared with the CLI and the local executor live in dnnframe.settings.
ConfigError = SettingsError


def broker_url() -> str:
    """``$DNNFRAME_BROKER_URL`` or the local RabbitMQ."""
    return os.environ.get("DNNFRAME_BROKER_URL", "").strip() or DEFAULT_BROKER_URL


def store_url() -> str:
    """``$DNNFRAME_STORE_URL`` or the embedded default ``sqlite:///dnnframe.db``."""
    return default_store_url()


def task_time_limits() -> tuple[float, float]:
    """(soft, hard) time limit of one trial in seconds, from ``$DNNFRAME_TASK_TIME_LIMIT``."""
    hard = env_seconds("DNNFRAME_TASK_TIME_LIMIT", DEFAULT_TASK_TIME_LIMIT)
    soft = hard - min(60.0, hard * 0.1)
    return soft, hard


def celery_settings(broker: str | None = None) -> dict[str, Any]:
    """The Celery configuration of dnnframe (see the module docstring for the why)."""
    soft, hard = task_time_limits()
    exchange = Exchange("dnnframe", type="direct", durable=True)
    return {
        "broker_url": broker or broker_url(),
        # Messages carry a trial id and nothing else; JSON only, so no pickle ever runs.
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "event_serializer": "json",
        # Results live in the store, not in a Celery result backend.
        "task_ignore_result": True,
        "result_backend": None,
        # A killed worker loses nothing: the message is acknowledged only after the trial
        # finished, and given back to the queue when the worker process dies under it.
        # Redelivery is harmless because the store's claim refuses a trial that is running
        # or finished.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # Long jobs: each process reserves one message at a time, so queued trials stay
        # available to idle workers instead of waiting behind a busy one.
        "worker_prefetch_multiplier": 1,
        "task_time_limit": hard,
        "task_soft_time_limit": soft,
        # Survive a broker that is down at start or restarts later: keep retrying.
        "broker_connection_retry": True,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        # A running trial keeps going through a broker restart; its (lost) ack makes the
        # broker redeliver the message, which the store claim turns into a no-op.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        # Publishes are confirmed by the broker and messages/queues are durable, so an
        # accepted submit survives a broker restart.
        "broker_transport_options": {"confirm_publish": True},
        "task_default_delivery_mode": "persistent",
        "task_queues": [Queue(name, exchange, routing_key=name, durable=True) for name in QUEUES],
        "task_default_queue": "default",
        "task_default_exchange": "dnnframe",
        "task_default_routing_key": "default",
        "task_create_missing_queues": True,
    }
