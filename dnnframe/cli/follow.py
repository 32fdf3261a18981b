"""Following a submitted run until its trials have ended: the progress ``dnnframe run``
shows (counts, the best so far, graphs built), read from the store's counts and the trials
that changed, never whole rows; Ctrl-C while following stops the run cleanly."""

from __future__ import annotations

import time

from ..executors.base import Executor
from ..states import TrialState, count_active

# While following a run, the best result so far is looked up at most this often: it is a
# sort of every finished trial's result inside the store (a tenth of a second at 10,000).
BEST_INTERVAL_S = 5.0
# While nothing ends, the counts (trials started, packs running) are read this often.
FOLLOW_INTERVAL_S = 2.0
# the store's counts are read at most this often while following
POLL_INTERVAL_S = 0.5


class GraphsBuilt:
    """Which of a run's graphs are built: a graph is once a trial of it has trained an epoch
    or ended. Read from the trials that changed since the last look (the store's cursor)."""

    def __init__(self, compile_key_of: dict[str, str], since: int) -> None:
        self._compile_key_of = compile_key_of
        self._since = since
        self.total = len(set(compile_key_of.values()))
        self.ready: set[str] = set()

    def update(self, store, experiment_id: str) -> tuple[int, int]:  # noqa: ANN001
        """Look at the trials changed since the last call; returns (ready, total)."""
        if len(self.ready) < self.total:
            for t in store.list_trials(experiment_id, since=self._since, fields=("metrics",)):
                self._since = max(self._since, t.seq)
                if (t.metrics or t.state.is_finished) and t.id in self._compile_key_of:
                    self.ready.add(self._compile_key_of[t.id])
        return len(self.ready), self.total


def follow(
    console,
    store,
    executor: Executor,
    exp,
    quiet: bool,  # noqa: ANN001
    graphs: GraphsBuilt,
) -> bool:
    """Show progress until the experiment's trials are finished. Returns True if interrupted."""
    from .progress import RunProgress, describe_best, trials_finished

    metric, mode = exp.objective
    first = store.counts_by_state(exp.id)
    total = exp.n_trials or sum(first.values())
    first_finished = last_finished = trials_finished(first)
    best_text = ""
    best_at = -float("inf")
    last_counts: dict[str, int] = {}
    packs: int | None = None

    def poll() -> bool:
        """Show the current counts; True once no trial is queued or running."""
        nonlocal last_finished, best_text, last_counts, packs
        nonlocal best_at
        counts = store.counts_by_state(exp.id)
        finished = trials_finished(counts)
        settled = count_active(counts) == 0
        if not progress.enabled:
            return settled  # --quiet: nothing is shown, so nothing more is read
        # the best trial is a sort of every finished result inside the store: looked up
        # when trials finished, at most every BEST_INTERVAL_S (and once more at the end)
        if (finished != last_finished or not best_text) and (
            settled or time.monotonic() - best_at >= BEST_INTERVAL_S
        ):
            best = store.best_trial(exp.id, metric, mode)
            best_text = describe_best(metric, best.value(metric) if best else None)
            last_finished, best_at = finished, time.monotonic()
        if counts != last_counts:
            # a pack's members are claimed together by one worker process: one pack each
            # (a local pool knows its packs; else the RUNNING trials' owners are counted)
            packs = executor.running_packs()
            if packs is None:
                running = (
                    store.list_trials(exp.id, state=TrialState.RUNNING, fields=())
                    if counts.get(TrialState.RUNNING.value)
                    else []
                )
                packs = len({t.worker for t in running})
            last_counts = counts
        # until a first trial ends nothing else moves: say how far the graphs got (a first
        # run on a host compiles them, for tens of seconds)
        building = graphs.update(store, exp.id) if finished == first_finished else None
        progress.update(counts, best_text, running_packs=packs, graphs=building)
        return settled

    with RunProgress(console, exp.name, total, first, enabled=not quiet) as progress:
        try:
            ended, polled_at = 0, -float("inf")
            while True:
                if executor.wait(timeout=0):
                    poll()
                    return False
                # woken as trials end (a local pool counts each pack as its worker reports
                # it), else once a FOLLOW_INTERVAL_S: the store is read only then
                ended = executor.wait_any(ended, FOLLOW_INTERVAL_S)
                # --quiet shows nothing until the end; else at most every POLL_INTERVAL_S
                # (packs of a big sweep end many times a second, each read counts them all)
                if progress.enabled and time.monotonic() - polled_at >= POLL_INTERVAL_S:
                    polled_at = time.monotonic()
                    poll()
                if console.file.reader_gone:
                    break  # the output went away (``| head``): stop as for Ctrl-C
        except KeyboardInterrupt:
            pass
        progress.mark_interrupted()
        try:
            executor.cancel(exp.id)
            console.print(
                "[yellow]interrupted:[/] no new trials start; running trials stop after "
                "their current epoch (Ctrl-C again to stop at once)"
            )
            while True:
                finished = executor.wait(timeout=0.5)
                settled = poll()
                if finished or settled:
                    break
        except KeyboardInterrupt:
            console.print("[yellow]stopping now:[/] running trials are recorded CANCELLED")
        return True
