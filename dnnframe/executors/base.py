"""The executor interface: where packs of trials run.

An executor only moves trial ids. Each worker opens the store itself and calls
:func:`dnnframe.runner.run_pack`, so a trial behaves the same on every executor.
"""

from __future__ import annotations

import abc
import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence

# A worker process trains on one core: pin every math library to one thread so N workers
# use N cores instead of N x cores threads fighting over them. Libraries read these when
# they load, so they must be in a worker's environment from its first line.
THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}
_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def pinned_threads() -> Iterator[None]:
    """Within the block this process's environment has :data:`THREAD_ENV`, so processes
    started in it pin their math libraries to one thread from their first line; the
    previous values come back after. Serialised: the environment is process-wide."""
    with _ENV_LOCK:
        saved = {k: os.environ.get(k) for k in THREAD_ENV}
        os.environ.update(THREAD_ENV)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class Executor(abc.ABC):
    """Runs packs of stored trials. Implementations: ``LocalExecutor``, ``CeleryExecutor``.

    A pack is a list of trial ids that share one compiled graph (see
    :func:`dnnframe.executors.packing.make_packs`); a pack of one is a plain trial.
    ``submit`` returns at once; results arrive in the store. Executors are context
    managers (``shutdown(wait=True)`` on a clean exit, ``wait=False`` on an exception).
    """

    @property
    def parallelism(self) -> int:
        """How many packs this executor can train at once; ``submit_experiment`` makes at
        least this many packs when there are enough trials."""
        return 1

    @abc.abstractmethod
    def submit(self, packs: Sequence[list[str]], compile_keys: Sequence[str] | None = None) -> None:
        """Queue packs of trials (already stored QUEUED); returns without waiting.

        ``compile_keys[i]`` is the compile key of ``packs[i]``
        (:func:`~dnnframe.engine.compile_key`): an executor that keeps worker processes may
        use it to send a pack to a worker that already compiled its graph.
        """

    @abc.abstractmethod
    def cancel(self, experiment_id: str) -> int:
        """Cancel an experiment: queued trials never start, running ones stop after their
        current epoch. Returns how many queued trials were cancelled."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> bool:
        """Block until every submitted trial has finished; False if ``timeout`` ran out."""

    def wait_any(self, ended: int, timeout: float) -> int:
        """Block until more than ``ended`` of the trials submitted here have ended, or for
        ``timeout`` seconds; returns how many have ended so far (pass it back next time;
        start from 0). A trial counted here is already finished in the store.

        Callers that hand out work as trials end (a search driver) use it to wake when a
        worker frees rather than on a clock. This default knows of no ends: it sleeps the
        timeout out, and the caller looks at the store.
        """
        time.sleep(timeout)
        return ended

    def running_packs(self) -> int | None:
        """How many packs are on workers now, where the executor knows it without asking
        the store (a local pool does); None here: a caller counts the RUNNING trials'
        owners in the store instead."""
        return None

    @abc.abstractmethod
    def shutdown(self, wait: bool = True) -> None:
        """Release the executor; with ``wait`` first let submitted trials finish."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=exc[0] is None)
