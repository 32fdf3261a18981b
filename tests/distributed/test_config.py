"""The Celery app's settings (no broker needed): what the distributed guarantees rest on."""

from __future__ import annotations

import pytest

from dnnframe.executors import celery as config
from dnnframe.executors.celery import create_app
from dnnframe.settings import SettingsError, heartbeat_timeout, max_attempts, resolve_train_fn
from tasks import app


def test_json_only_late_acks_prefetch_one():
    conf = app.conf
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert conf.result_accept_content == ["json"]
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert conf.broker_connection_retry_on_startup
    assert {q.name for q in conf.task_queues} == {"default", "gpu"}
    assert config.TRAIN_TASK in app.tasks


def test_default_time_limit_below_rabbitmq_consumer_timeout(monkeypatch):
    monkeypatch.delenv("DNNFRAME_TASK_TIME_LIMIT", raising=False)
    soft, hard = config.task_time_limits()
    assert soft < hard < 1800  # RabbitMQ's default consumer_timeout is 30 minutes
    monkeypatch.setenv("DNNFRAME_TASK_TIME_LIMIT", "21600")
    assert create_app("amqp://x//").conf.task_time_limit == 21600


@pytest.mark.parametrize("name,value,needle", [
    ("DNNFRAME_TASK_TIME_LIMIT", "soon", "DNNFRAME_TASK_TIME_LIMIT must be a number"),
    ("DNNFRAME_HEARTBEAT_TIMEOUT", "-5", "DNNFRAME_HEARTBEAT_TIMEOUT must be > 0"),
    ("DNNFRAME_MAX_ATTEMPTS", "0", "DNNFRAME_MAX_ATTEMPTS must be a positive integer"),
])
def test_bad_settings_name_the_variable(monkeypatch, name, value, needle):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=needle):
        config.celery_settings() if name == "DNNFRAME_TASK_TIME_LIMIT" else (
            heartbeat_timeout() if "HEARTBEAT" in name else max_attempts())


def test_train_fn_hook(monkeypatch):
    monkeypatch.delenv("DNNFRAME_TRAIN_FN", raising=False)
    assert resolve_train_fn() is None
    monkeypatch.setenv("DNNFRAME_TRAIN_FN", "tasks.hooks:noop_train")
    assert resolve_train_fn().__name__ == "noop_train"
    monkeypatch.setenv("DNNFRAME_TRAIN_FN", "tasks.hooks")
    with pytest.raises(SettingsError, match="must look like 'package.module:function'"):
        resolve_train_fn()
    monkeypatch.setenv("DNNFRAME_TRAIN_FN", "tasks.hooks:nope")
    with pytest.raises(SettingsError, match="cannot be imported"):
        resolve_train_fn()
