"""The Celery executor and the Celery app it talks to.

Workers (``celery -A tasks worker`` or ``dnnframe worker``) use the same app: see
:mod:`dnnframe.executors.celery_worker` for the task and what a worker process adds.

Why the hard time limit defaults to 28 minutes: workers acknowledge a message only when
its trials have finished (``acks_late``), and RabbitMQ closes the channel of a consumer
that holds an unacknowledged message longer than its ``consumer_timeout`` (30 minutes by
default): the message would be redelivered and run again forever. So the hard limit must
stay below the broker's consumer_timeout. ``deploy/rabbitmq/rabbitmq.conf`` raises
consumer_timeout to 24 hours and docker-compose.yml sets ``DNNFRAME_TASK_TIME_LIMIT=21600``
(6 hours); on a broker you run yourself, raise both together. The soft limit fires a
minute earlier (10 % earlier for short limits) inside the trial, which then ends FAILED
with the reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from celery import Celery
from kombu import Connection, Exchange, Producer, Queue
from kombu.exceptions import ChannelError

from .. import settings
from ..exceptions import BrokerUnavailableError, DnnframeError, StoreError
from ..retrying import BROKER_PUBLISH
from ..store import default_store_url, open_store
from ..store.base import ResultStore
from . import liveness
from .base import Executor
from .dispatch import PACK_TASK, STORE_HEADER, send_held

log = logging.getLogger(__name__)

DEFAULT_BROKER_URL = "amqp://guest:guest@127.0.0.1:5672//"
DEFAULT_TASK_TIME_LIMIT = settings.Settings.model_fields["task_time_limit"].default
#: Queues every deployment has: CPU workers consume ``default``, workers started with
#: ``THEANO_FLAGS=device=cuda`` consume ``gpu``. Any other name is created on first use.
QUEUES = ("default", "gpu")
# Messages are published in AMQP transactions of this many.
_PUBLISH_BATCH = 500
# A submit gives up on an unreachable broker after about this long (a caller, say the
# dashboard answering a POST, is waiting); its trials are held and sent later.
_CONNECT_TIMEOUT_S = 2.0


def celery_settings(broker: str | None = None) -> dict[str, object]:
    """The Celery configuration of dnnframe (see the module docstring for the time limit);
    ``broker`` defaults to ``$DNNFRAME_BROKER_URL``, else the local RabbitMQ."""
    current = settings.get()
    soft, hard = current.task_time_limits
    exchange = Exchange("dnnframe", type="direct", durable=True)
    return {
        "broker_url": broker or current.broker_url or DEFAULT_BROKER_URL,
        # Messages carry trial ids and nothing else; JSON only, so no pickle ever runs.
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "event_serializer": "json",
        # Results live in the store, not in a Celery result backend.
        "task_ignore_result": True,
        "result_backend": None,
        # Monitors (Flower) see tasks, their results and progress through events only
        # (the worker's -E, on from the start rather than when Flower first asks).
        "worker_send_task_events": True,
        # A killed worker loses nothing: the message is acknowledged only after its trials
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


def create_app(broker_url: str | None = None) -> Celery:
    """A Celery app with dnnframe's settings (``broker_url`` default ``$DNNFRAME_BROKER_URL``).

    Submitters create their own; workers use the one ``tasks`` makes (with the task
    registered on it).
    """
    celery_app = Celery("dnnframe", set_as_current=False)
    celery_app.config_from_object(celery_settings(broker_url))
    return celery_app


class _TxChannel(Protocol):
    """The channel a batch is published on: py-amqp's, whose transactions kombu's own
    channel type (StdChannel) does not declare."""

    def tx_select(self) -> object: ...

    def tx_commit(self) -> object: ...


class CeleryExecutor(Executor):
    """Send packs over a broker (RabbitMQ) to Celery workers (``dnnframe worker``).

    Only trial ids travel (JSON, one message per pack); each worker opens the store named
    by *its own* ``$DNNFRAME_STORE_URL`` (which must be the same store as ``store_url``
    here) and calls :func:`dnnframe.runner.run_pack`. Messages are persistent and committed
    to the broker, so a pack accepted by ``submit`` survives a broker restart. Results
    arrive in the store; :meth:`wait` watches it.

    Args:
        broker_url: e.g. ``amqp://user:pass@host:5672//`` (default ``$DNNFRAME_BROKER_URL``).
        store_url: the shared store (default ``$DNNFRAME_STORE_URL`` / ``sqlite:///dnnframe.db``).
        queue: the queue trials are routed to: ``default`` (CPU workers), ``gpu`` (workers
            started with ``THEANO_FLAGS=device=cuda``) or any name workers consume.
    """

    def __init__(
        self, broker_url: str | None = None, store_url: str | None = None, queue: str = "default"
    ) -> None:
        if not isinstance(queue, str) or not queue.strip():
            raise DnnframeError(f"queue must be a non-empty queue name, but got {queue!r}")
        self.broker_url = broker_url or settings.get().broker_url
        self.store_url = store_url or default_store_url()
        self.queue = queue
        self._store_label = liveness.store_label(self.store_url)
        self.app = create_app(self.broker_url)
        # Publisher confirms and transactions exclude each other on a channel; submit uses
        # transactions (see submit), so this app's channels must not be in confirm mode.
        self.app.conf.broker_transport_options = {}
        self.app.conf.broker_connection_timeout = _CONNECT_TIMEOUT_S
        self._submitted: list[str] = []
        # what wait() still waits for, and the store's change cursor it reads from
        self._unchecked: list[str] = []
        self._remaining: set[str] = set()
        self._ended = 0  # submitted trials seen finished (wait_any's count)
        self._cursor: int | None = None
        self._store: ResultStore | None = None
        self._lock = threading.RLock()
        self._conn: Connection | None = None
        self._channel: _TxChannel | None = None

    def _close_connection(self) -> None:
        with self._lock:
            conn, self._conn, self._channel = self._conn, None, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already broken; nothing more to release
                pass

    def _open_store(self) -> ResultStore:
        if self._store is None:
            self._store = open_store(self.store_url)
        return self._store

    @property
    def parallelism(self) -> int:
        """The worker processes consuming :attr:`queue` now (packs are sized so each gets
        work): the nodes the broker counts as the queue's consumers, each with the pool size
        it registered in the store (:func:`.liveness.worker_processes`). When neither knows
        of a worker (none started yet), ``$DNNFRAME_WORKERS``, else this machine's cores."""
        consumers = self._consumer_count()
        try:
            known = liveness.worker_processes(self._open_store(), self.queue, consumers)
        except StoreError as exc:
            log.warning(
                "cannot read the workers from the store (%s); sizing packs for "
                "%d broker consumer(s)",
                exc,
                consumers or 0,
            )
            known = consumers or None
        return known or settings.get().worker_count

    def _consumer_count(self) -> int | None:
        """Consumers of :attr:`queue` on the broker (0 if it has no such queue yet); None
        when the broker cannot be asked."""
        try:
            with self.app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, interval_start=0.1, interval_step=0.1)
                channel = conn.channel()
                try:
                    return channel.queue_declare(self.queue, passive=True).consumer_count
                except ChannelError:  # no such queue: nobody consumes it
                    return 0
        except Exception as exc:  # noqa: BLE001 - the submit that follows reports the broker
            log.debug("cannot count the consumers of %r: %s", self.queue, exc)
            return None

    def submit(self, packs: Sequence[list[str]], compile_keys: Sequence[str] | None = None) -> None:
        """Publish one ``tasks.train_pack`` message per pack to :attr:`queue`.

        Messages are persistent and published in AMQP transactions of up to 500: when the
        commit returns, the broker has taken them all (one round trip per batch instead of
        one publisher confirm per message). A batch that fails is published again whole;
        a duplicate message is harmless (the store claim runs a trial once). Workers take
        packs in any order, so ``compile_keys`` is not used. Trials held by an earlier
        outage are sent first.

        Raises:
            BrokerUnavailableError: the broker cannot be reached within a few seconds; the
                message names the broker without its password. The trials not sent are
                held in the store and sent once a broker answers (see
                :mod:`dnnframe.executors.dispatch`).
        """
        packs = [list(p) for p in packs if p]
        store = self._open_store()
        with self._lock:
            if self._cursor is None:  # wait() reads only what changed after this
                self._cursor = store.latest_seq()
        for start in range(0, len(packs), _PUBLISH_BATCH):
            try:
                self._publish_batch(packs[start : start + _PUBLISH_BATCH])
            except BrokerUnavailableError:
                store.hold_dispatch([(t, self.queue) for p in packs[start:] for t in p])
                raise
        with self._lock:
            self._submitted.extend(t for p in packs for t in p)
            self._unchecked.extend(t for p in packs for t in p)
        try:
            send_held(store, self.app)
        except Exception as exc:  # noqa: BLE001 - they stay held for the next try
            log.warning("trials held during a broker outage could not be sent yet: %s", exc)

    def _publish_batch(self, packs: list[list[str]]) -> None:
        try:
            BROKER_PUBLISH.call(
                self._publish_once, packs, what=f"publishing {len(packs)} packs to {self.queue!r}"
            )
        except Exception as exc:  # still refused/dropped: the caller holds the trials
            safe = self.app.connection_for_write().as_uri()  # password masked
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise BrokerUnavailableError(
                f"the broker {safe} is unavailable ({reason}); the trials are stored and will "
                "be sent when it is back"
            ) from exc

    def _publish_once(self, packs: list[list[str]]) -> None:
        """One attempt of :meth:`_publish_batch`: the whole batch in one AMQP transaction;
        a failure closes the connection, so the next attempt redoes the batch afresh."""
        try:
            with self._lock:
                if self._channel is None:  # one connection, kept open between submits
                    self._conn = self.app.connection_for_write()
                    self._conn.ensure_connection(
                        max_retries=1, interval_start=0.1, interval_step=0.1
                    )
                    self._channel = self._conn.channel()
                    self._channel.tx_select()
                producer = Producer(self._channel)
                for pack in packs:
                    # retry=False: kombu's own retry would reconnect onto a fresh
                    # channel that is not transactional, so the message went out at
                    # once and again when BROKER_PUBLISH redid the batch (after a broker
                    # restart, every pack twice). A failure here redoes the batch.
                    self.app.send_task(
                        PACK_TASK,
                        args=[pack],
                        queue=self.queue,
                        producer=producer,
                        retry=False,
                        headers={STORE_HEADER: self._store_label},
                    )
                self._channel.tx_commit()
        except Exception:  # connection refused/dropped: redo the whole batch
            self._close_connection()
            raise

    def cancel(self, experiment_id: str) -> int:
        """Cancel in the store: queued trials are refused at claim (their messages become
        no-ops), running ones stop after their current epoch. Returns queued trials cancelled."""
        return self._open_store().cancel_experiment(experiment_id)

    def wait(self, timeout: float | None = None, poll_s: float = 0.2) -> bool:
        """Block until every submitted trial is finished in the store; False on ``timeout``.

        Each trial is looked up once; after that a poll reads only the trials that changed
        since the last one (the store's ``since`` cursor), so a caller that waits in short
        slices (the CLI's progress loop) pays per change, not per submitted trial.
        """
        return self._poll(lambda: not self._remaining, timeout, poll_s)

    def wait_any(self, ended: int, timeout: float) -> int:
        """Block until more than ``ended`` submitted trials are finished in the store, or
        ``timeout`` passes; returns the count. Workers are elsewhere, so this reads the
        store's changes as :meth:`wait` does."""
        self._poll(lambda: self._ended > ended, timeout, 0.2)
        return self._ended

    def _poll(self, done: Callable[[], bool], timeout: float | None, poll_s: float) -> bool:
        """Read the store's changes every ``poll_s`` until ``done()``; False on ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        store = self._open_store()
        with self._lock:
            unchecked, self._unchecked = self._unchecked, []
            cursor = self._cursor if self._cursor is not None else store.latest_seq()
        # Trials finished before the cursor was taken are seen here, the rest by the cursor.
        fresh = list(dict.fromkeys(t for t in unchecked if t not in self._remaining))
        running = {
            t.id
            for t in (store.get_trials(fresh, fields=()) if fresh else [])
            if not t.state.is_finished
        }
        self._ended += len(fresh) - len(running)
        self._remaining |= running
        while True:
            changed = store.changed_states(cursor)
            if changed:
                cursor = max(cursor, changed[-1][2])
                ended = self._remaining & {tid for tid, state, _ in changed if state.is_finished}
                self._remaining -= ended
                self._ended += len(ended)
            with self._lock:
                self._cursor = cursor
            if done():
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(
                poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic()))
            )

    def shutdown(self, wait: bool = True) -> None:
        """With ``wait``, block until submitted trials finish; then close connections.
        Trials already sent stay queued for the workers either way."""
        try:
            if wait:
                self.wait()
        finally:
            self._close_connection()
            self.app.close()
            if self._store is not None:
                self._store.close()
                self._store = None
