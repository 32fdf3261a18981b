"""The executor ``dnnframe run`` trains with, made only once there is something to train:
a run with nothing left starts no worker process and opens no broker connection."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .. import settings
from ..executors.base import Executor
from .common import _shown_url


def run_executor(
    store,
    store_url: str,
    broker_url: str | None,  # noqa: ANN001
    workers: int | None,
    queue: str,
) -> StartOnSubmit:
    """The executor of ``dnnframe run``: Celery over ``broker_url``, else a local pool; made
    only when there is something to train."""
    from ..executors import LocalExecutor, make_executor

    if broker_url:
        return StartOnSubmit(
            store,
            lambda _: make_executor(store_url, broker_url=broker_url, queue=queue),
            settings.get().worker_count,
            _shown_url(broker_url),
            remote=True,
        )
    n = workers if workers is not None else settings.get().worker_count
    return StartOnSubmit(
        store, lambda k: LocalExecutor(store_url, workers=k), n, _local_workers(n), remote=False
    )


def _local_workers(n: int) -> str:
    return f"{n} local worker{'' if n == 1 else 's'}"


class StartOnSubmit(Executor):
    """An executor made on the first ``submit``: a run with nothing left to train starts
    no worker process and opens no broker connection."""

    def __init__(
        self,
        store,
        factory: Callable[[int], Executor],  # the parallelism to start with
        parallelism: int,  # noqa: ANN001
        where: str,
        remote: bool,
    ) -> None:
        self._store = store
        self._factory = factory
        self._parallelism = parallelism
        self.where = where  # "4 local workers" or the broker URL, for messages
        self.remote = remote  # trials run on workers elsewhere (Celery)
        self.compile_key_of: dict[str, str] = {}  # trial id → its pack's compile key
        self.first_seq = 0  # the store's change cursor before the first pack was handed on
        self.started: Executor | None = None

    @property
    def parallelism(self) -> int:
        """The parallelism the executor will have, known before it exists."""
        return self._parallelism

    def start(self, trials: int | None = None) -> Executor:
        """Make the executor now (once): a local pool's processes then start (imports,
        opening the store) while this process expands and stores the sweep. Told the
        sweep's size, ``trials``, a local pool starts no more processes than it has trials
        (each costs a second or more of CPU to import and warm up, for nothing)."""
        if self.started is None:
            if trials is not None and not self.remote and 0 < trials < self._parallelism:
                self._parallelism = trials
                self.where = _local_workers(trials)
            self.first_seq = self._store.latest_seq()
            self.started = self._factory(self._parallelism)
        return self.started

    def submit(self, packs: Sequence[list[str]], compile_keys: Sequence[str] | None = None) -> None:
        """Make the executor (once) and hand it the packs."""
        executor = self.start()
        for pack, key in zip(packs, compile_keys or ()):
            self.compile_key_of.update(dict.fromkeys(pack, key))
        executor.submit(packs, compile_keys)

    def cancel(self, experiment_id: str) -> int:
        """Cancel in the store (and in the executor, once there is one)."""
        if self.started is None:
            return self._store.cancel_experiment(experiment_id)
        return self.started.cancel(experiment_id)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the executor; nothing to wait for before it exists."""
        return True if self.started is None else self.started.wait(timeout)

    def wait_any(self, ended: int, timeout: float) -> int:
        """Wait for trials to end on the executor; before it exists, none can."""
        if self.started is None:
            return super().wait_any(ended, timeout)
        return self.started.wait_any(ended, timeout)

    def running_packs(self) -> int | None:
        """The executor's own count once it exists (0 before)."""
        return 0 if self.started is None else self.started.running_packs()

    def shutdown(self, wait: bool = True) -> None:
        """Shut the executor down if it was made."""
        if self.started is not None:
            self.started.shutdown(wait)
