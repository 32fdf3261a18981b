"""How the members of a pack end when the local pool process training it dies."""

from __future__ import annotations

import logging

from ..owners import worker_name
from ..store import TrialState, open_store
from ..store.base import ResultStore
from .local_worker import death_reason

log = logging.getLogger(__name__)

# A member's outcome: (the state to count, whether this crash failed it), or None when it
# must run again.
Outcome = tuple[TrialState, bool] | None


class CrashRecorder:
    """Records the packs of dead worker processes in the store (opened on first use), and
    remembers which trials were already given a second run.

    Used by the executor's dispatcher thread only, outside the executor's lock.
    """

    def __init__(self, store_url: str) -> None:
        self.store_url = store_url
        self._store: ResultStore | None = None
        self._requeued: set[str] = set()  # trials requeued after a pre-claim crash

    def settle(
        self, trial_ids: list[str], pid: int | None, exitcode: int | None, killing: bool
    ) -> list[tuple[str, Outcome]]:
        """Record how the members of a dead worker's pack ended. Returns each member with
        (the state to count, whether this crash failed it), or None when it must run again.

        A member that finished before the crash keeps its state; one never claimed runs
        again. When one member was running it caused the death and is FAILED (CANCELLED if
        we were stopping the worker). When several were training together, which one killed
        the process is unknown: they are released to run again each in a pack of its own,
        so a poison trial fails alone and its packmates complete.
        """
        reason = (
            f"interrupted: worker process {pid} was stopped"
            if killing
            else death_reason(exitcode, pid)
        )
        owner = worker_name(pid=pid)
        outcomes: list[tuple[str, Outcome]] = []
        try:
            if self._store is None:
                self._store = open_store(self.store_url)
            store = self._store
            trials = {t.id: t for t in store.get_trials(list(trial_ids), fields=())}
            running = [
                tid
                for tid, t in trials.items()
                if t.state is TrialState.RUNNING and t.worker == owner
            ]
            for tid, t in trials.items():
                if t.state.is_finished:
                    outcomes.append((tid, (t.state, False)))
                elif tid not in running:
                    again = not killing and tid not in self._requeued
                    self._requeued.add(tid)
                    if again:
                        outcomes.append((tid, None))
                    else:
                        outcomes.append(
                            (
                                tid,
                                (TrialState.CANCELLED, False)
                                if killing
                                else (TrialState.FAILED, True),
                            )
                        )
            if killing:
                store.finish_trials(
                    [(tid, TrialState.CANCELLED, None, reason) for tid in running], worker=owner
                )
                outcomes += [(tid, (TrialState.CANCELLED, False)) for tid in running]
            elif len(running) == 1:
                store.finish_trials([(running[0], TrialState.FAILED, None, reason)], worker=owner)
                log.warning("trial %s: %s", running[0], reason)
                outcomes.append((running[0], (TrialState.FAILED, True)))
            else:
                for tid in running:
                    store.release_trial(tid, owner)
                    outcomes.append((tid, None))
                if running:
                    log.warning(
                        "trials %s: %s; each runs again alone to find the cause",
                        ", ".join(running),
                        reason.replace("this trial", "their pack"),
                    )
        except Exception:
            log.exception("could not record the crash of pack %s", trial_ids)
            done = {tid for tid, _ in outcomes}
            outcomes += [(tid, (TrialState.FAILED, True)) for tid in trial_ids if tid not in done]
        return outcomes

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
