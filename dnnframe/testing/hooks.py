"""Train functions for tests and benchmarks, selected with
``DNNFRAME_TRAIN_FN=dnnframe.testing.hooks:NAME`` (Celery workers and ``dnnframe run``
alike).

Each is a pack train function (``train(configs, on_epoch) -> results``, the only contract
the runner knows) written per trial and adapted with :class:`.packs.one_by_one`: members of
a pack train one after another, each reporting its own epochs (``on_epoch`` returning True
asks to stop). Most build no network (``gate_then_train`` and ``meet_then_train`` end in the
real engine), so the machinery around a trial (broker, claim, heartbeats, reaper, delivery
cap) can be exercised and timed on its own. Never set ``DNNFRAME_TRAIN_FN`` on a production
worker (the setting refuses any function outside ``dnnframe.testing``).

Environment knobs (read per call): ``DNNFRAME_HOOK_EPOCHS`` (default 3),
``DNNFRAME_HOOK_EPOCH_SECONDS`` (default 0.5), ``DNNFRAME_HOOK_POISON_SEED`` (see
``kill_worker_train``), ``DNNFRAME_HOOK_FREE_SEEDS`` (see ``gated_train``) and
``DNNFRAME_HOOK_GATE`` (see ``gate_then_train`` and ``held_train``),
``DNNFRAME_HOOK_MEET_DIR`` and ``DNNFRAME_HOOK_MEET`` (see ``meet_then_train``) and
``DNNFRAME_HOOK_LOG``: a file to which ``sleepy_train`` appends ``{"seed", "pid"}`` each
time it *completes* a training run (tests count duplicated work with it).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from dnnframe.engine.result import TrialResult
from dnnframe.spec import TrialConfig
from dnnframe.states import TrialState

from .packs import one_by_one

OnEpoch = Callable[[int, dict], bool | None]


def _result(status: str, history: list[dict[str, Any]], seconds: float) -> TrialResult:
    last = history[-1] if history else {}
    return TrialResult(
        status=status,
        metrics={
            "train_loss": last.get("train_loss"),
            "val_loss": last.get("val_loss"),
            "test_loss": last.get("val_loss"),
            "train_accuracy": last.get("train_accuracy"),
            "val_accuracy": last.get("val_accuracy"),
            "test_accuracy": last.get("val_accuracy"),
        },
        history=history,
        timings={"data": 0.0, "compile": 0.0, "train": seconds, "total": seconds},
        n_params=0,
        environment={"train_fn": "dnnframe.testing.hooks", "pid": os.getpid()},
        epochs_run=len(history),
    )


@one_by_one
def noop_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """Return a COMPLETE result at once (dispatch-overhead benchmarks)."""
    return _result(TrialState.COMPLETE.value, [], 0.0)


def _sleepy_epochs(
    on_epoch: OnEpoch | None, curve: Callable[[int], tuple[float, float]]
) -> tuple[list[dict[str, Any]], bool, float]:
    """Sleep ``DNNFRAME_HOOK_EPOCH_SECONDS`` per epoch for ``DNNFRAME_HOOK_EPOCHS`` epochs,
    reporting each epoch (loss and accuracy from ``curve(epoch)``) and honouring
    cancellation like the engine does; returns the history, whether it was cancelled, and
    the seconds it took."""
    return _epochs(
        on_epoch,
        int(os.environ.get("DNNFRAME_HOOK_EPOCHS", "3")),
        float(os.environ.get("DNNFRAME_HOOK_EPOCH_SECONDS", "0.5")),
        curve,
    )


def _epochs(
    on_epoch: OnEpoch | None,
    epochs: int,
    per_epoch: float,
    curve: Callable[[int], tuple[float, float]],
) -> tuple[list[dict[str, Any]], bool, float]:
    started = time.perf_counter()
    history: list[dict[str, Any]] = []
    for epoch in range(1, epochs + 1):
        if per_epoch:
            time.sleep(per_epoch)
        loss, accuracy = curve(epoch)
        metrics = {
            "epoch": epoch,
            "train_loss": loss,
            "train_accuracy": accuracy,
            "val_loss": loss,
            "val_accuracy": accuracy,
            "seconds": per_epoch,
        }
        history.append(metrics)
        if on_epoch is not None and on_epoch(epoch, dict(metrics)):
            return history, True, time.perf_counter() - started
    return history, False, time.perf_counter() - started


@one_by_one
def sleepy_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """Sleep ``DNNFRAME_HOOK_EPOCH_SECONDS`` per epoch for ``DNNFRAME_HOOK_EPOCHS`` epochs,
    reporting each epoch and honouring cancellation like the engine does."""
    return _sleepy(config, on_epoch)


def _sleepy(config: TrialConfig, on_epoch: OnEpoch | None) -> TrialResult:
    history, cancelled, seconds = _sleepy_epochs(on_epoch, lambda e: (1 / e, 1 - 1 / e / 2))
    if cancelled:
        return _result(TrialState.CANCELLED.value, history, seconds)
    log_path = os.environ.get("DNNFRAME_HOOK_LOG")
    if log_path:
        with open(log_path, "a") as fh:  # one short append per line: atomic with O_APPEND
            fh.write(json.dumps({"seed": config.seed, "pid": os.getpid()}) + "\n")
    return _result(TrialState.COMPLETE.value, history, seconds)


@one_by_one
def rate_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """Like :func:`sleepy_train`, but a trial's accuracy is ten times its learning rate
    (plus a thousandth per epoch): pruning tests know which trial is better than which."""
    rate = config.training.learning_rate * 10

    def curve(epoch: int) -> tuple[float, float]:
        accuracy = rate + epoch / 1000
        return 1 - accuracy, accuracy

    history, cancelled, seconds = _sleepy_epochs(on_epoch, curve)
    ended = TrialState.CANCELLED if cancelled else TrialState.COMPLETE
    return _result(ended.value, history, seconds)


@one_by_one
def gated_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """Trials whose seed is below ``DNNFRAME_HOOK_FREE_SEEDS`` (default 0) run
    :func:`sleepy_train`; the others train epoch after epoch until asked to stop
    (cancellation), so a test decides when they end instead of a clock."""
    if config.seed < int(os.environ.get("DNNFRAME_HOOK_FREE_SEEDS", "0")):
        return _sleepy(config, on_epoch)
    per_epoch = float(os.environ.get("DNNFRAME_HOOK_EPOCH_SECONDS", "0.5"))
    started = time.perf_counter()
    history: list[dict[str, Any]] = []
    while True:
        time.sleep(per_epoch)
        metrics = {
            "epoch": len(history) + 1,
            "train_loss": 1.0,
            "train_accuracy": 0.5,
            "val_loss": 1.0,
            "val_accuracy": 0.5,
            "seconds": per_epoch,
        }
        history.append(metrics)
        if on_epoch is not None and on_epoch(len(history), dict(metrics)):
            return _result(TrialState.CANCELLED.value, history, time.perf_counter() - started)


@one_by_one
def gate_then_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """Wait until the file ``DNNFRAME_HOOK_GATE`` exists, then train with the real engine:
    a test sees its trials unfinished for as long as it needs, then lets them run."""
    from dnnframe.engine import train

    if not _gate_opened(600):
        raise TimeoutError(f"the test never opened the gate {os.environ['DNNFRAME_HOOK_GATE']}")
    return train(config, on_epoch=on_epoch)


def _gate_opened(seconds: float) -> bool:
    """Wait until the file ``DNNFRAME_HOOK_GATE`` exists (True) or ``seconds`` pass."""
    gate = os.environ["DNNFRAME_HOOK_GATE"]
    deadline = time.monotonic() + seconds
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@one_by_one
def meet_then_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """Mark this process in the directory ``DNNFRAME_HOOK_MEET_DIR``, wait until
    ``DNNFRAME_HOOK_MEET`` processes (default 2) have marked it, then train with the real
    engine: every worker of a sweep trains some of it, however late one of them starts.
    After a minute without them it trains anyway (the test then sees fewer workers)."""
    from dnnframe.engine import train

    meet = os.environ["DNNFRAME_HOOK_MEET_DIR"]
    open(os.path.join(meet, str(os.getpid())), "a").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(meet)) < int(os.environ.get("DNNFRAME_HOOK_MEET", "2")):
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return train(config, on_epoch=on_epoch)


@one_by_one
def kill_worker_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """SIGKILL the process that trains (a poison trial: segfault/OOM-kill stand-in).

    With ``DNNFRAME_HOOK_POISON_SEED`` set, only the trial with that seed is poison; the
    others run :func:`sleepy_train`.
    """
    poison = os.environ.get("DNNFRAME_HOOK_POISON_SEED", "").strip()
    if poison and str(config.seed) != poison:
        return _sleepy(config, on_epoch)
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")  # pragma: no cover


@one_by_one
def one_epoch_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """Report one epoch, without numerics, and end (COMPLETE, or CANCELLED when asked to
    stop): the platform's own cost per trial (throughput benchmarks)."""
    history, cancelled, seconds = _epochs(on_epoch, 1, 0.0, lambda e: (1.0, 0.5))
    ended = TrialState.CANCELLED if cancelled else TrialState.COMPLETE
    return _result(ended.value, history, seconds)


@one_by_one
def fail_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """Fail every trial with an error whose text holds markup-like brackets (the command
    line must print it intact)."""
    raise RuntimeError("device=cuda but no GPU here (pip install 'dnnframe[gpu]')")


@one_by_one
def held_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """Stand in for a graph that takes long to build: nothing happens until the file
    ``DNNFRAME_HOOK_GATE`` exists (a minute at most), then a no-op COMPLETE result."""
    _gate_opened(60)
    return _result(TrialState.COMPLETE.value, [], 0.0)


@one_by_one
def cuda_train(config: TrialConfig, on_epoch: OnEpoch | None = None) -> TrialResult:
    """A no-op COMPLETE result that says it trained on ``cuda:0``."""
    result = _result(TrialState.COMPLETE.value, [], 0.0)
    result.environment["device"] = "cuda:0"
    return result
