"""What a Celery worker runs: the task, per-process worker state and heartbeats, and the
worker signals that start the reaper. :func:`install` puts it all on an app (``tasks``
does, for ``celery -A tasks worker``).

The task is thin: it takes a pack of trial ids and :mod:`dnnframe.runner` does the rest (claim,
train, record). What this module adds is what only a Celery worker needs: a heartbeat
thread per process (independent of how long an epoch or a compile takes, so only a trial
whose process really vanished goes stale), worker state in the store (host, pid,
current trial, trials done, and the queue its message came from, so the reaper can send a
requeued trial back to it), and what monitors see of the task (its result, failure and
progress: :mod:`dnnframe.executors.celery_monitoring`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import warnings
from typing import TypedDict

from celery import Celery, Task, signals
from celery.exceptions import CPendingDeprecationWarning, Reject
from celery.worker.control import inspect_command

from .. import settings
from ..engine import heap
from ..exceptions import DnnframeError, NotFoundError, StoreError
from ..owners import celery_node, worker_name
from ..runner import PackTrainFn, run_pack
from ..store import default_store_url, open_store
from ..store.base import ResultStore, TrialState
from . import liveness, reaper, redelivery
from .base import THREAD_ENV
from .celery import PACK_TASK, create_app
from .celery_monitoring import RESULT_REPR_MAX, PackFailed, PackReport, ProgressSender
from .dispatch import RETRY_SUFFIX, STORE_HEADER, with_retry_queues

log = logging.getLogger(__name__)

# Store outages while claiming: retry with backoff (capped at a minute) for about 15 minutes
# rather than acknowledging the message and leaving the trial QUEUED with nothing to run it.
STORE_RETRIES = 20
# Worker state (current trial, trials done) reaches the store at most this often.
STATE_WRITE_S = 0.1


class _WorkerState(TypedDict):
    """The arguments of ``register_worker`` for this process."""

    name: str
    host: str
    pid: int
    current_trial: str | None
    trials_done: int
    info: dict[str, str | None]


class _ProcessState:
    """What one worker process knows: its store, its trial, its heartbeat thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.store: ResultStore | None = None
        self.trials_done = 0
        self.current: tuple[tuple[str, ...], str] | None = None  # (pack, worker name)
        self.state: _WorkerState | None = None  # still to write
        self.dirty = False
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.train_fn: PackTrainFn | None = None
        self.train_fn_loaded = False
        self.progress: ProgressSender | None = None

    def progress_sender(self, app: Celery) -> ProgressSender | None:
        """This process's progress sender; None when the app sends no task events."""
        if not app.conf.worker_send_task_events:
            return None
        if self.progress is None:
            self.progress = ProgressSender(app)
        return self.progress

    def open_store(self) -> ResultStore:
        if self.store is None:
            self.store = open_store(default_store_url())
        return self.store

    def get_train_fn(self) -> PackTrainFn | None:
        if not self.train_fn_loaded:
            self.train_fn = settings.resolve_train_fn()
            self.train_fn_loaded = True
        return self.train_fn

    def start_state_writer(self) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(
                target=self._beat, name="dnnframe-worker-state", daemon=True
            )
            self.thread.start()

    def _beat(self) -> None:
        # Writes this process's worker state when it changed, at most every STATE_WRITE_S,
        # so a burst of short packs costs a few writes a second. Trial heartbeats come from
        # the runner's own heartbeat thread (dnnframe.runner.heartbeat), batched per pack.
        last_state = 0.0
        while True:
            self.wake.wait(
                max(0.0, last_state + STATE_WRITE_S - time.monotonic()) if self.dirty else None
            )
            self.wake.clear()
            now = time.monotonic()
            with self.lock:
                state = self.state if self.dirty and now >= last_state + STATE_WRITE_S else None
                if state is not None:
                    self.dirty = False
            if state is None:
                continue
            last_state = now
            try:
                self.open_store().register_worker(**state)
            except Exception:  # a store hiccup must not kill the thread; the next change retries
                log.warning("worker state write failed", exc_info=True)

    def set_state(
        self, node: str, queue: str | None, current: tuple[tuple[str, ...], str] | None
    ) -> None:
        """Record the running pack (for heartbeats) and queue a worker-state write."""
        with self.lock:
            self.current = current
            self.state = {
                "name": worker_name(node),
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "current_trial": current[0][0] if current else None,
                "trials_done": self.trials_done,
                "info": {"node": node, "queue": queue, "role": "process"},
            }
            self.dirty = True
        self.wake.set()


_proc = _ProcessState()


def train_pack(self: Task, trial_ids: list[str]) -> dict[str, object]:
    """Run a pack of stored trials by id (claim → train → record each member).

    Returns what this delivery did, member by member (see
    :mod:`dnnframe.executors.celery_monitoring`): ``{"summary": ..., "redelivered": bool,
    "trials": {trial_id: {"state", "delivery", "attempt", "objective", ...}}}``.

    Raises:
        PackFailed: after every member was recorded, when this delivery left one FAILED.

    A redelivered pack runs again here the members an earlier delivery lost, as a pack (see
    :mod:`dnnframe.executors.redelivery`).
    """
    if (
        not isinstance(trial_ids, list)
        or not trial_ids
        or not all(isinstance(t, str) and t for t in trial_ids)
    ):
        raise DnnframeError(
            f"{PACK_TASK} needs a non-empty list of trial id strings, but got {trial_ids!r}"
        )
    return _run_pack(self, trial_ids)


def _run_pack(task: Task, trial_ids: list[str]) -> dict[str, object]:
    node = celery_node(task.request.hostname)
    worker = worker_name(node)
    queue = (task.request.delivery_info or {}).get("routing_key")
    proc = _proc
    try:
        store = proc.open_store()
    except StoreError as exc:
        raise task.retry(
            exc=exc, countdown=min(60, 2**task.request.retries), max_retries=STORE_RETRIES
        ) from exc
    pack_train = proc.get_train_fn()  # None: the packed engine
    max_attempts = settings.get().max_attempts
    proc.start_state_writer()
    proc.set_state(node, queue, (tuple(trial_ids), worker))
    report = PackReport(store, task.request.id, node, proc.progress_sender(task.app))
    states: dict[str, TrialState | None] = dict.fromkeys(trial_ids)
    delivery = task.request.delivery_info or {}
    try:
        to_run = redelivery.take_back(
            store, task.app, trial_ids, node, queue, bool(delivery.get("redelivered"))
        )
        if to_run:
            # Beats well within the node timeout, so a live trial is never judged dead.
            states.update(
                run_pack(
                    to_run,
                    store,
                    worker=worker,
                    max_attempts=max_attempts,
                    train_fn=pack_train,
                    observer=report,
                    heartbeat_interval_s=liveness.trial_beat_interval(),
                )
            )
    except NotFoundError as exc:
        theirs, mine = task.request.get(STORE_HEADER), liveness.store_label()
        if theirs and theirs != mine:
            _refuse_queue(task, node, queue, theirs, mine)
            raise Reject(
                f"pack {trial_ids} is for the store {theirs}, not this worker's {mine}",
                requeue=True,
            ) from None  # the reason is logged above
        raise DnnframeError(
            f"a trial of pack {trial_ids} is not in this worker's store "
            f"{default_store_url()!r}: the submitter and the workers must use the same "
            "DNNFRAME_STORE_URL"
        ) from exc
    except StoreError as exc:
        # Claim or final write failed: try again later. Members already finished are
        # no-ops then; one that was claimed stays RUNNING without heartbeats and is
        # requeued by the reaper, so nothing is lost.
        log.warning("pack %s: store unavailable (%s); retrying", trial_ids, exc)
        raise task.retry(
            exc=exc, countdown=min(60, 2**task.request.retries), max_retries=STORE_RETRIES
        ) from exc
    finally:
        report.close()
        proc.trials_done += sum(state is not None for state in states.values())
        proc.set_state(node, queue, None)
    result = report.result(trial_ids, bool(delivery.get("redelivered")))
    report.raise_if_failed(result)
    return result


def _refuse_queue(task: Task, node: str, queue: str | None, theirs: str, mine: str) -> None:
    """This worker is on another store than the queue's submitter: stop consuming the queue
    (and its retry queue), so its messages stay for the workers that can serve them."""
    base = (queue or "default").removesuffix(RETRY_SUFFIX)
    log.error(
        "this worker is on the wrong store: messages on queue %r are for the store %s, but it "
        "(%s) uses %s; it stops consuming %r and leaves the messages on the queue. "
        "Give it the submitter's DNNFRAME_STORE_URL and restart it.",
        base,
        theirs,
        node,
        mine,
        base,
    )
    for name in with_retry_queues([base]):
        task.app.control.cancel_consumer(name, destination=[node])


@inspect_command()
def dnnframe_store(state: object) -> dict[str, object]:
    """``celery inspect dnnframe_store``: the store this worker serves (password masked),
    so a monitor can tell a worker on another store (the dashboard's worker list does)."""
    return {"store": liveness.store_label()}


def _reset_process_state(**_: object) -> None:
    # A fresh pool process must not reuse the parent's store connection or threads.
    global _proc
    _proc = _ProcessState()
    # worker memory settings (engine/heap.py): freed memory kept for reuse, long-lived
    # objects frozen out of the collector's passes; per pool process, not in the parent
    heap.enable()


def _on_worker_init(**_: object) -> None:
    for key, value in THREAD_ENV.items():
        os.environ.setdefault(key, value)
    # Fail at start-up, not on the first trial, when the configuration is unusable.
    settings.get()
    if settings.resolve_train_fn() is None:
        _warm_up_before_fork()


def _warm_up_before_fork() -> None:
    """Load the engine here, in the worker's main process before it forks its pool: every
    pool process then starts with PyTensor loaded, instead of each paying about a second
    of CPU on its first pack, inside the sweep (and again after each restart). Not under
    the JAX backend: a process must not fork once JAX has started its threads. A failure
    is left to the trials to report, as they would without this."""
    from ..engine import warm_up
    from ..engine.flags import translate

    try:
        flags = translate(
            os.environ.get("THEANO_FLAGS", ""),
            os.environ.get("PYTENSOR_FLAGS", ""),
            warn=False,
            blas=False,
        )
        if flags.backend == "c":
            warm_up()
    except Exception:
        log.warning("worker warm-up failed; trials will report it", exc_info=True)


def _say_which_store() -> None:
    if settings.get().store_url is None:
        log.warning(
            "DNNFRAME_STORE_URL is not set: this worker uses its own %s in %s, which "
            "no submitter on another host shares; packs for another store are left "
            "on the queue and this worker stops consuming it",
            liveness.store_label(),
            os.getcwd(),
        )
    else:
        log.info("dnnframe worker: store %s", liveness.store_label())


def _on_worker_ready(sender: object = None, **_: object) -> None:
    # sender: the worker's consumer; its controller knows the pool size (-c)
    hostname = celery_node(getattr(sender, "hostname", None))
    concurrency = getattr(getattr(sender, "controller", None), "concurrency", None)
    _say_which_store()
    _ignore_connection_loss_warning()
    if _app is not None:
        reaper.start_reaper(_app, hostname, concurrency if isinstance(concurrency, int) else None)


def _on_worker_shutdown(**_: object) -> None:
    reaper.stop_reaper()


class _LostAckFilter(logging.Filter):
    """Celery logs a failed acknowledgement (the broker connection dropped while a pack
    trained) as CRITICAL with a traceback, after every broker restart. It is expected and
    harmless here: the broker redelivers the message and the store's claim makes that a
    no-op. Say so in one WARNING line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Couldn't ack"):
            args = record.args if isinstance(record.args, tuple) else ()
            tag, reason = (*args, None, None)[:2]
            record.msg = (
                "could not acknowledge message %s (%s): the broker connection "
                "dropped; it will be redelivered, and its finished trials are "
                "no-ops then"
            )
            record.args = (tag, " ".join(str(reason).split()))
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


def _quiet_expected_noise() -> None:
    """Keep the worker log to what an operator must read (see :class:`_LostAckFilter`).
    Called on import, before Celery forks its pool processes, which inherit it."""
    logging.getLogger("celery.worker.request").addFilter(_LostAckFilter())
    # PyTensor logs every compile of an op without a C cache version at INFO, one line per
    # node; a worker's INFO log is for its tasks.
    logging.getLogger("pytensor.link.c.basic").setLevel(logging.WARNING)


def _ignore_connection_loss_warning() -> None:
    # Celery warns on each connection loss, in several lines, that 6.0 will cancel running
    # late-ack tasks; dnnframe keeps them running on purpose
    # (worker_cancel_long_running_tasks_on_connection_loss=False). Installed once Celery's
    # logging setup has put its own "always" filter for these warnings in front.
    warnings.filterwarnings(
        "ignore",
        message=r"\s*In Celery 5\.1 we introduced an optional "
        "breaking change",
        category=CPendingDeprecationWarning,
    )


_app: Celery | None = None


def install(celery_app: Celery) -> None:
    """Register the task and the worker signal handlers on ``celery_app`` (the worker's)."""
    global _app
    _app = celery_app
    _quiet_expected_noise()
    # throws: a FAILED trial is an expected outcome, logged in one line (its traceback is
    # in the store); resultrepr_maxsize: task-succeeded events carry whole packs.
    celery_app.task(
        name=PACK_TASK,
        bind=True,
        acks_late=True,
        reject_on_worker_lost=True,
        ignore_result=True,
        throws=(PackFailed,),
        resultrepr_maxsize=RESULT_REPR_MAX,
    )(train_pack)
    signals.worker_process_init.connect(_reset_process_state, dispatch_uid="dnnframe-proc")
    signals.worker_init.connect(_on_worker_init, dispatch_uid="dnnframe-init")
    signals.worker_ready.connect(_on_worker_ready, dispatch_uid="dnnframe-ready")
    signals.celeryd_after_setup.connect(
        reaper.consume_retry_queues, dispatch_uid="dnnframe-retry-queues"
    )
    signals.worker_shutdown.connect(_on_worker_shutdown, dispatch_uid="dnnframe-shutdown")


def worker_app(broker_url: str | None = None) -> Celery:
    """A Celery app for a worker: dnnframe's settings, the task and the signal handlers."""
    celery_app = create_app(broker_url)
    celery_app.set_default()
    install(celery_app)
    return celery_app
