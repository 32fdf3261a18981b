"""The local process pool: trains packs of trials on long-lived worker processes on this
machine (the embedded default of ``dnnframe run``)."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import settings, spawned
from ..exceptions import DnnframeError
from ..runner import PackTrainFn
from ..store import default_store_url, open_store
from .base import Executor, pinned_threads
from .local_crashes import CrashRecorder
from .local_queue import PackQueue, QueuedPack

log = logging.getLogger(__name__)


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    ready: bool = False
    pack: QueuedPack | None = None  # the pack this process is running
    stopping: bool = False
    dead: bool = False
    compiled: set[str] = field(default_factory=set)  # compile keys of the graphs it built


@dataclass
class LocalStats:
    """Counters of a :class:`LocalExecutor` (snapshot)."""

    submitted: int = 0
    finished: int = 0
    crashed: int = 0
    running: list[str] = field(default_factory=list)
    pending: int = 0
    states: dict[str, int] = field(default_factory=dict)
    worker_restarts: int = 0


class LocalExecutor(Executor):
    """Train trials on ``workers`` processes on this machine (one per core by default).

    Workers are spawned once and kept: each runs one pack at a time and keeps the engine's
    compile cache warm. Their math libraries are pinned to one thread. A trial that kills
    its process (segfault, out-of-memory kill) is recorded FAILED with the exit signal, the
    worker is replaced and the sweep goes on.

    Args:
        store_url: the store URL every worker opens (default ``$DNNFRAME_STORE_URL`` or
            ``sqlite:///dnnframe.db``); must name a store other processes can open.
        workers: number of processes (default ``$DNNFRAME_WORKERS``, else one per core).
        train_fn: the pack train function passed to ``run_pack``; must be picklable (a
            module-level function). Default: the ``$DNNFRAME_TRAIN_FN`` test hook if set,
            else the engine.
        max_attempts: passed to ``run_pack``.
        start_method: multiprocessing start method; ``spawn`` so no parent threads or open
            database handles are inherited.
    """

    def __init__(
        self,
        store_url: str | None = None,
        workers: int | None = None,
        *,
        train_fn: PackTrainFn | None = None,
        max_attempts: int | None = None,
        start_method: str = "spawn",
    ) -> None:
        self.store_url = store_url or default_store_url()
        self.workers = int(workers) if workers is not None else settings.get().worker_count
        if self.workers < 1:
            raise DnnframeError(f"workers must be >= 1, but got {self.workers}")
        self._train_fn = train_fn
        self._max_attempts = max_attempts
        self._ctx = multiprocessing.get_context(start_method)
        self._lock = threading.Condition()
        self._pending = PackQueue()
        self._pool: list[_Worker] = []
        self._stats = LocalStats()
        self._closing = False
        self._killing = False
        self._error: BaseException | None = None
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._crashes = CrashRecorder(self.store_url)  # used by the dispatcher thread only
        self._recording = 0  # crashes taken from the pool, not yet settled
        with self._lock:
            for _ in range(self.workers):
                self._pool.append(self._start_worker())
        self._thread = threading.Thread(
            target=self._dispatch_loop, name="dnnframe-local-executor", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ public API
    @property
    def parallelism(self) -> int:
        """The number of worker processes."""
        return self.workers

    def submit(self, packs: Sequence[list[str]], compile_keys: Sequence[str] | None = None) -> None:
        """Queue packs (in order) for the worker processes.

        ``compile_keys`` (one per pack) lets a worker keep taking packs whose graph it has
        already compiled, and different workers start on different graphs, instead of every
        worker compiling every graph.
        """
        keys = list(compile_keys) if compile_keys is not None else [None] * len(packs)
        if len(keys) != len(packs):
            raise ValueError(
                f"compile_keys must have one key per pack ({len(packs)}), but got {len(keys)}"
            )
        with self._lock:
            if self._closing:
                raise DnnframeError("this executor has been shut down")
            for pack, key in zip(packs, keys):
                if pack:
                    self._pending.append(QueuedPack(list(pack), key))
                    self._stats.submitted += len(pack)
        self._wake()

    def cancel(self, experiment_id: str) -> int:
        """Cancel ``experiment_id`` in the store; drop its not-yet-started trials here."""
        store = open_store(self.store_url)
        try:
            n = store.cancel_experiment(experiment_id)
            ids = {t.id for t in store.list_trials(experiment_id)}
        finally:
            store.close()
        with self._lock:
            self._stats.submitted -= self._pending.drop(ids)
            self._lock.notify_all()
        self._wake()
        return n

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every submitted trial has finished; False if ``timeout`` ran out.

        Raises:
            DnnframeError: when the worker pool broke (e.g. workers cannot open the store).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                if self._error is not None:
                    raise self._error
                if (
                    not self._pending
                    and not self._recording
                    and not any(w.pack for w in self._pool)
                ):
                    return True
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._lock.wait(remaining if remaining is not None else 1.0)

    def wait_any(self, ended: int, timeout: float) -> int:
        """Block until more than ``ended`` trials have ended here (the pool counts each
        trial of a pack as its worker reports it, after the store has it), or ``timeout``
        passes; returns the count.

        Raises:
            DnnframeError: when the worker pool broke.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._stats.finished <= ended:
                if self._error is not None:
                    raise self._error
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._lock.wait(remaining)
            return self._stats.finished

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until every worker process has started (opened the store, imported the
        engine); False if ``timeout`` ran out. Benchmarks use it to time the pool start."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while not all(w.ready for w in self._pool):
                if self._error is not None:
                    raise self._error
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._lock.wait(remaining if remaining is not None else 1.0)
            return True

    @property
    def stats(self) -> LocalStats:
        """A snapshot of the counters: submitted, finished, crashed, running trial ids, ..."""
        with self._lock:
            s = self._stats
            return LocalStats(
                s.submitted,
                s.finished,
                s.crashed,
                [t for w in self._pool if w.pack for t in w.pack.trial_ids],
                self._pending.trial_count(),
                dict(s.states),
                s.worker_restarts,
            )

    def running_packs(self) -> int:
        """Packs handed to worker processes and not yet reported back."""
        with self._lock:
            return sum(1 for w in self._pool if w.pack)

    def shutdown(self, wait: bool = True) -> None:
        """Stop the pool. ``wait=True`` lets queued and running trials finish first;
        ``wait=False`` drops queued trials and terminates the workers at once — their running
        trials are recorded CANCELLED (interrupted)."""
        if wait:
            try:
                self.wait()
            except DnnframeError:
                pass
        with self._lock:
            self._closing = True
            if not wait:
                self._killing = True
                self._stats.submitted -= self._pending.clear()
        self._wake()
        if not wait:
            with self._lock:
                for w in self._pool:
                    if w.process.is_alive():
                        w.process.terminate()
        self._thread.join(timeout=60)
        for w in self._pool:
            w.process.join(timeout=5)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(timeout=5)

    # ------------------------------------------------------------------ internals
    def _wake(self) -> None:
        try:
            self._wake_w.send_bytes(b"x")
        except OSError:
            pass

    def _start_worker(self) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        # typeshed types get_context(str) as BaseContext, which lacks the Process that
        # every context it returns has
        proc = self._ctx.Process(  # type: ignore[attr-defined]
            target=spawned.local_worker,
            name="dnnframe-worker",
            args=(child, self.store_url, self._train_fn, self._max_attempts),
            daemon=True,
        )
        # Spawned children copy os.environ when they start: pin their math libraries from
        # the first instruction (the parent's own environment is restored right after).
        with pinned_threads():
            proc.start()
        child.close()
        return _Worker(proc, parent)

    def _settle_crashes(self, crashes: list[tuple[QueuedPack, int | None, int | None]]) -> None:
        """Record the dead workers' packs (outside the lock), then queue again, each in a
        pack of its own, the members that must run again, and count the others (inside)."""
        killing = self._killing
        settled = [
            (pack, self._crashes.settle(pack.trial_ids, pid, code, killing))
            for pack, pid, code in crashes
        ]
        with self._lock:
            for pack, outcomes in settled:
                self._recording -= 1
                for tid, outcome in reversed(outcomes):
                    if outcome is None:
                        self._pending.put_first(QueuedPack([tid], pack.compile_key))
                for _tid, outcome in outcomes:
                    if outcome is not None:
                        state, crashed = outcome
                        self._stats.crashed += crashed
                        self._count(state.value)
            self._lock.notify_all()
        self._wake()

    def _count(self, state: str) -> None:
        self._stats.finished += 1
        self._stats.states[state] = self._stats.states.get(state, 0) + 1

    def _dispatch_loop(self) -> None:
        try:
            self._dispatch()
        except BaseException as exc:  # surface in wait() instead of hanging it
            log.exception("local executor dispatcher failed")
            with self._lock:
                self._error = (
                    exc
                    if isinstance(exc, DnnframeError)
                    else DnnframeError(f"local executor failed: {type(exc).__name__}: {exc}")
                )
                self._lock.notify_all()
        finally:
            self._crashes.close()

    def _dispatch(self) -> None:
        startup_failures = 0
        while True:
            crashes: list[tuple[QueuedPack, int | None, int | None]] = []
            with self._lock:
                # hand queued packs to idle workers
                for w in self._pool:
                    if w.ready and w.pack is None and not w.stopping and self._pending:
                        w.pack = self._take_for(w)
                        try:
                            w.conn.send(("run", w.pack.trial_ids))
                        except OSError:
                            pass  # the death is handled below via its sentinel
                if self._closing and not self._pending and not any(w.pack for w in self._pool):
                    for w in self._pool:
                        if not w.stopping:
                            w.stopping = True
                            try:
                                w.conn.send(("stop",))
                            except OSError:
                                pass
                    if all(w.dead for w in self._pool):
                        self._lock.notify_all()
                        return
                waitables: list[multiprocessing.connection.Connection | int] = [self._wake_r]
                for w in self._pool:
                    if not w.dead:
                        waitables += [w.conn, w.process.sentinel]
            ready = multiprocessing.connection.wait(waitables, timeout=0.5)
            with self._lock:
                if self._wake_r in ready:
                    while self._wake_r.poll():
                        self._wake_r.recv_bytes()
                for i, w in enumerate(list(self._pool)):
                    if w.dead:
                        continue
                    if w.conn in ready:
                        try:
                            while w.conn.poll():
                                msg = w.conn.recv()
                                self._on_message(w, msg)
                        except (EOFError, OSError):
                            pass
                    if w.process.sentinel in ready or not w.process.is_alive():
                        w.process.join(timeout=1)
                        if w.process.exitcode is None:
                            continue
                        if w.pack is not None:
                            crashes.append((w.pack, w.process.pid, w.process.exitcode))
                            self._recording += 1
                            w.pack = None
                        elif not w.ready and not w.stopping:
                            startup_failures += 1
                        w.conn.close()
                        w.dead = True
                        if (self._closing and w.stopping) or self._killing:
                            w.stopping = True  # stays dead; the loop ends when all are dead
                            continue
                        if startup_failures >= 3 * self.workers:
                            raise DnnframeError(
                                "worker processes keep dying before they start; see the log above"
                            )
                        self._stats.worker_restarts += 1
                        self._pool[i] = self._start_worker()
                self._lock.notify_all()
            if crashes:
                self._settle_crashes(crashes)

    def _take_for(self, w: _Worker) -> QueuedPack:
        """Next pack for worker ``w``, preferring graphs it has compiled (see
        :meth:`PackQueue.take`)."""
        elsewhere = set().union(*(o.compiled for o in self._pool if o is not w and not o.dead))
        pack = self._pending.take(w.compiled, elsewhere)
        if pack.compile_key is not None:
            w.compiled.add(pack.compile_key)
        return pack

    def _on_message(self, w: _Worker, msg: tuple) -> None:
        kind = msg[0]
        if kind == "ready":
            w.ready = True
        elif kind == "fatal":
            raise DnnframeError(msg[1])
        elif kind == "done":
            _, pack, states, error = msg
            if error:
                log.error("pack %s could not be run: %s", pack, error)
            w.pack = None
            for tid in pack:
                state = states.get(tid)
                self._count(state or ("ERROR" if error else "SKIPPED"))
