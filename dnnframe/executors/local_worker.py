"""What runs inside one process of the local pool, and how its death is explained."""

from __future__ import annotations

import logging
import multiprocessing.connection
import os
import signal
import threading

from threadpoolctl import threadpool_limits

from .. import settings
from ..engine import heap
from ..owners import WorkerName, default_worker_name
from ..runner import PackTrainFn, run_pack
from ..store import ResultStore, open_store
from .base import THREAD_ENV

log = logging.getLogger(__name__)


def death_reason(exitcode: int | None, pid: int | None) -> str:
    """Why a worker process ended, for the FAILED trial it was running (names the signal)."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = {
            "SIGKILL": " (the out-of-memory killer or kill -9 does this)",
            "SIGSEGV": " (a segmentation fault in native code)",
            "SIGABRT": " (native code aborted)",
            "SIGBUS": " (a bus error in native code)",
        }.get(name, "")
        return (
            f"worker process {pid} was killed by {name} ({-exitcode}) while running this "
            f"trial{hint}"
        )
    return f"worker process {pid} exited with code {exitcode} while running this trial"


def _stop_on_sigterm_from_parent_only() -> None:
    """Ignore a SIGTERM that was not sent by the parent (while it lives).

    ``timeout`` and ``kill -- -PGID`` signal the whole process group: the parent then stops
    the run cleanly, as for Ctrl-C (running trials stop after their epoch and are recorded),
    which a worker killed half-way through a trial would spoil. The parent's own SIGTERM
    (stopping at once) still ends the worker, as does any SIGTERM once it is orphaned.
    The signal is blocked in every thread (threads started later inherit that) and taken
    by a thread of its own, which is told who sent it.
    """
    if not hasattr(signal, "sigwaitinfo"):  # macOS: no sender to tell; SIGTERM ends it
        return
    parent = os.getppid()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def watch() -> None:
        while True:
            info = signal.sigwaitinfo({signal.SIGTERM})
            if info.si_pid == parent or os.getppid() != parent:
                # die of the signal itself, so the parent sees the usual exit status
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    threading.Thread(target=watch, name="dnnframe-sigterm", daemon=True).start()


def worker_main(
    conn: multiprocessing.connection.Connection,
    store_url: str,
    train_fn: PackTrainFn | None,
    max_attempts: int | None,
) -> None:
    """Body of one long-lived worker process: receive packs, run them one at a time.

    Long-lived on purpose: the engine caches compiled PyTensor functions per process, so
    trials of the same graph shape compile once per worker, not once per trial.
    """
    _settle_process()
    opened = _open(conn, store_url, train_fn)
    if opened is None:
        return
    train_fn, store = opened
    if train_fn is None:  # the packed engine, not a test hook
        _warm_up()
    # worker memory settings (engine/heap.py): freed memory kept for reuse; what is loaded
    # now, and each compiled model later, lives as long as the worker: frozen out of the
    # collector's passes
    heap.enable()
    _PackLoop(conn, store, train_fn, max_attempts).serve()


def _settle_process() -> None:
    """Signals and threads of a worker process, before anything else runs in it."""
    # Ctrl-C reaches the whole process group; the parent coordinates a clean stop, so a
    # worker must not die half-way through writing a trial.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _stop_on_sigterm_from_parent_only()
    os.environ.update(THREAD_ENV)
    # the environment pins the BLAS libraries loaded from now on; this pins those loaded
    threadpool_limits(1)


def _open(
    conn: multiprocessing.connection.Connection, store_url: str, train_fn: PackTrainFn | None
) -> tuple[PackTrainFn | None, ResultStore] | None:
    """The training function (the configured one when none is given) and the open store,
    or None after telling the parent why the worker cannot start."""
    try:
        train_fn = train_fn or settings.resolve_train_fn()
    except settings.SettingsError as exc:
        conn.send(("fatal", str(exc)))
        return None
    try:
        store = open_store(store_url)
    except Exception as exc:
        conn.send(("fatal", f"worker cannot open the store {store_url}: {exc}"))
        return None
    return train_fn, store


def _warm_up() -> None:
    """The engine's warm-up (:func:`dnnframe.engine.warm_up`) while the parent is still
    submitting, so the first trial of each worker does not pay seconds of imports. Datasets
    come from the host's dataset cache, without scikit-learn, once any process loaded
    them."""
    try:
        from ..engine import warm_up

        warm_up()
    except Exception:
        log.warning("worker warm-up import failed; trials will report it", exc_info=True)


class _PackLoop:
    """A worker's life once it is ready: packs from the parent, run one at a time, each
    answered, with the worker list kept up to date; the store is closed at the end."""

    def __init__(
        self,
        conn: multiprocessing.connection.Connection,
        store: ResultStore,
        pack_train: PackTrainFn | None,
        max_attempts: int | None,
    ) -> None:
        self.conn, self.store = conn, store
        self.pack_train, self.max_attempts = pack_train, max_attempts
        self.worker = default_worker_name()
        self.done = 0

    def register(self, current: str | None, stopped: bool = False) -> None:
        try:  # the worker list is informative; a failed write must not stop training
            self.store.register_worker(
                self.worker,
                host=WorkerName.parse(self.worker).node,
                pid=os.getpid(),
                current_trial=current,
                trials_done=self.done,
                info={"executor": "local", "stopped": stopped},
            )
        except Exception:
            log.warning("worker %s: could not register", self.worker, exc_info=True)

    def serve(self) -> None:
        """Say ready, then run packs until the parent says stop or goes away."""
        self.register(None)
        self.conn.send(("ready", os.getpid()))
        try:
            while True:
                try:
                    msg = self.conn.recv()
                except (EOFError, OSError):
                    break  # parent went away
                if msg[0] == "stop":
                    break
                answer = self.run(msg[1])
                try:
                    self.conn.send(answer)
                except OSError:
                    # the parent was killed while this pack ran: its trials are recorded in
                    # the store, which is all a successor needs
                    break
            self.register(None, stopped=True)  # the worker list shows it gone, not idle
        finally:
            self.store.close()

    def run(self, pack: list[str]) -> tuple[str, list[str], dict[str, str | None], str | None]:
        """Run ``pack``; the answer for the parent: ``("done", pack, trial id -> state name
        or None, what failed or None)``."""
        self.register(pack[0])
        try:
            states = run_pack(
                pack,
                self.store,
                worker=self.worker,
                max_attempts=self.max_attempts,
                train_fn=self.pack_train,
            )
        except Exception as exc:  # a store failure: run_pack handles training errors
            log.exception("worker %s: pack %s could not be run", self.worker, pack)
            return ("done", pack, {}, f"{type(exc).__name__}: {exc}")
        self.done += sum(state is not None for state in states.values())
        self.register(None)
        return (
            "done",
            pack,
            {tid: state.value if state is not None else None for tid, state in states.items()},
            None,
        )
