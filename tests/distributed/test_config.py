"""The Celery app's settings (no broker needed): what the distributed guarantees rest on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dnnframe import settings
from dnnframe.executors import celery as config
from dnnframe.executors.celery import create_app
from dnnframe.settings import SettingsError, resolve_train_fn
from tasks import app


def test_json_only_late_acks_prefetch_one():
    conf = app.conf
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert conf.result_accept_content == ["json"]
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert conf.broker_connection_retry_on_startup
    assert {q.name for q in conf.task_queues} == {"default", "gpu"}
    # one task: a worker trains packs (a single trial is a pack of one)
    assert {name for name in app.tasks if name.startswith("tasks.")} == {config.PACK_TASK}


def test_default_time_limit_below_rabbitmq_consumer_timeout(monkeypatch):
    monkeypatch.delenv("DNNFRAME_TASK_TIME_LIMIT", raising=False)
    soft, hard = settings.get().task_time_limits
    assert soft < hard < 1800  # RabbitMQ's default consumer_timeout is 30 minutes
    monkeypatch.setenv("DNNFRAME_TASK_TIME_LIMIT", "21600")
    assert create_app("amqp://x//").conf.task_time_limit == 21600


@pytest.mark.parametrize(
    "name,value,needle",
    [
        ("DNNFRAME_TASK_TIME_LIMIT", "soon", "DNNFRAME_TASK_TIME_LIMIT must be a number"),
        ("DNNFRAME_HEARTBEAT_TIMEOUT", "-5", "DNNFRAME_HEARTBEAT_TIMEOUT must be > 0"),
        ("DNNFRAME_MAX_ATTEMPTS", "0", "DNNFRAME_MAX_ATTEMPTS must be a positive integer"),
    ],
)
def test_bad_settings_name_the_variable(monkeypatch, name, value, needle):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=needle):
        config.celery_settings()


def test_train_fn_hook(monkeypatch):
    monkeypatch.delenv("DNNFRAME_TRAIN_FN", raising=False)
    assert resolve_train_fn() is None
    monkeypatch.setenv("DNNFRAME_TRAIN_FN", "dnnframe.testing.hooks:noop_train")
    assert resolve_train_fn().__name__ == "noop_train"
    monkeypatch.setenv("DNNFRAME_TRAIN_FN", "dnnframe.testing.hooks")
    with pytest.raises(SettingsError, match="must look like 'package.module:function'"):
        resolve_train_fn()
    monkeypatch.setenv("DNNFRAME_TRAIN_FN", "dnnframe.testing.hooks:nope")
    with pytest.raises(SettingsError, match="cannot be imported"):
        resolve_train_fn()


def test_the_train_fn_hook_is_a_pack_function():
    """A hook trains a pack: one result per member, each member's epochs in its own slot."""
    from dnnframe.spec import TrialConfig

    train = resolve_train_fn("dnnframe.testing.hooks:one_epoch_train")
    configs = [TrialConfig(dataset={"name": "iris"}, seed=s) for s in (0, 1)]
    seen = []
    results = train(configs, lambda epoch, slots: seen.append(list(slots)) or [False, False])
    assert [r.status for r in results] == ["COMPLETE", "COMPLETE"]
    assert [[s is not None for s in slots] for slots in seen] == [[True, False], [False, True]]


def test_a_hook_reaches_a_spawned_local_worker_by_name():
    """The local pool pickles its train function to spawned processes: a decorated hook
    travels by name (the same object comes back), a call-site adapter with its function."""
    import pickle

    from dnnframe.testing import hooks
    from dnnframe.testing.packs import one_by_one

    assert pickle.loads(pickle.dumps(hooks.sleepy_train)) is hooks.sleepy_train
    wrapped = pickle.loads(pickle.dumps(one_by_one(hooks._sleepy)))
    assert isinstance(wrapped, one_by_one) and wrapped.train is hooks._sleepy


@pytest.mark.parametrize(
    "spec",
    [
        "json:dumps",  # a function of another package
        "tests.distributed.test_config:test_train_fn_hook",  # a test's own function
        "dnnframe.engine:train",  # the engine itself
        "dnnframe.testingx.hooks:noop_train",  # a package whose name only starts alike
        "dnnframe.testing.hooks:TrialResult",  # imported into the testing package from elsewhere
    ],
)
def test_the_train_fn_hook_names_only_functions_of_the_testing_package(monkeypatch, spec):
    monkeypatch.setenv("DNNFRAME_TRAIN_FN", spec)
    with pytest.raises(SettingsError) as refused:
        resolve_train_fn()
    assert str(refused.value) == (
        f"DNNFRAME_TRAIN_FN={spec!r} is refused: it is a test hook and may only name a "
        "function defined in the dnnframe.testing package; unset it to train with the engine"
    )


@pytest.mark.parametrize(
    "name,value,message",
    [
        ("DNNFRAME_WORKERS", "x", "DNNFRAME_WORKERS must be a positive integer, but got 'x'"),
        ("DNNFRAME_PACK_SIZE", "0", "DNNFRAME_PACK_SIZE must be a positive integer, but got '0'"),
        (
            "DNNFRAME_TASK_TIME_LIMIT",
            "inf",
            "DNNFRAME_TASK_TIME_LIMIT must be > 0 seconds, but got 'inf'",
        ),
    ],
)
def test_settings_errors_name_the_variable_and_value(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        settings.get()
    assert str(info.value) == message


def test_settings_are_read_afresh_and_empty_means_default(monkeypatch):
    monkeypatch.setenv("DNNFRAME_MAX_ATTEMPTS", "")
    assert settings.get().max_attempts == 3
    monkeypatch.setenv("DNNFRAME_MAX_ATTEMPTS", "7")
    monkeypatch.setenv("DNNFRAME_API_TOKEN", "123")  # looks like JSON, stays a string
    current = settings.get()
    assert current.max_attempts == 7
    assert current.dashboard_config()["API_TOKEN"] == "123"
    assert settings.get() is current  # nothing changed: the same settings, not built anew
    monkeypatch.delenv("DNNFRAME_API_TOKEN")
    assert settings.get().api_token is None and settings.get().max_attempts == 7
    monkeypatch.setenv("dnnframe_max_attempts", "9")  # read as the variable's name in any case
    monkeypatch.delenv("DNNFRAME_MAX_ATTEMPTS")
    assert settings.get().max_attempts == 9


@pytest.mark.parametrize(
    ("size", "attempts", "cap", "pieces"),
    [
        (4, 1, 3, [4]),  # first crash: the whole pack again
        (4, 2, 3, [1, 1, 1, 1]),  # one claim left: alone, so only the poison trial fails
        (8, 2, 5, [4, 4]),  # claims to spare: halves
        (8, 3, 5, [2, 2, 2, 2]),  # two claims left: pieces that can still reach one trial
        (3, 1, 2, [1, 1, 1]),  # a cap of 2 leaves no room for the whole pack again
        (1, 2, 3, [1]),
    ],
)
def test_a_crashed_pack_is_sent_whole_then_split(size, attempts, cap, pieces):
    from dnnframe.executors.dispatch import split_after_crash

    ids = [f"t{i}" for i in range(size)]
    split = split_after_crash(ids, attempts, cap)
    assert [len(p) for p in split] == pieces
    assert [t for p in split for t in p] == ids


_WORKER_INIT = (
    "import sys\n"
    "from dnnframe.executors import celery_worker\n"
    "celery_worker._on_worker_init()\n"
    "print('pytensor' in sys.modules, 'jax' in sys.modules)\n"
)


@pytest.mark.parametrize(
    ("env", "loaded"),
    [
        ({}, "True False"),  # the C backend: loaded before the pool forks
        ({"THEANO_FLAGS": "mode=JAX"}, "False False"),  # no fork once JAX may have threads
        ({"DNNFRAME_TRAIN_FN": "dnnframe.testing.hooks:sleepy_train"}, "False False"),
    ],
)
def test_a_worker_main_process_loads_the_engine_before_its_pool_forks(env, loaded):
    """Celery's ``worker_init`` runs in the worker's main process before the pool forks:
    under the C backend the engine is loaded there (each pool process inherits it), not
    under JAX nor for a test hook that does not train with it. A fresh interpreter each,
    as a worker is."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("THEANO_FLAGS", "PYTENSOR_FLAGS", "DNNFRAME_TRAIN_FN")
    }
    out = subprocess.run(
        [sys.executable, "-c", _WORKER_INIT],
        env={**clean, **env},
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == loaded, out.stdout + out.stderr
