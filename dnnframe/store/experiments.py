"""Experiments of the ResultStore contract (``ResultStore`` inherits
:class:`ExperimentMethods`): recording an experiment and its trials, cancelling, resuming
and deleting it, reading it back with its trials counted by state.

An experiment links to its trials by id; a trial shared by several experiments is one row
listing them all (base.py's Vocabulary). Each public method checks its arguments once,
here, then calls the backend's ``_``-named abstract method; the backends implement those
in their main module (memory.py, sqlite.py, postgresql.py, mongodb.py).
"""

from __future__ import annotations

import abc
from typing import Any

from .checks import (
    check_experiment_args,
    check_experiment_id,
    check_experiment_ids,
    check_page,
    check_trial_items,
    requeue_state_list,
)
from .records import ExperimentRecord, TrialState, TrialTally

__all__ = ["ExperimentMethods"]


class ExperimentMethods(abc.ABC):
    """The experiments of :class:`~dnnframe.store.base.ResultStore` (see the module
    docstring)."""

    def create_experiment(
        self, experiment_id: str, name: str, spec: dict[str, Any], n_trials: int
    ) -> ExperimentRecord:
        """Record an experiment (idempotent: an existing one is returned unchanged).

        ``spec`` is the validated spec as JSON, ``n_trials`` how many trials it expands to.
        Returns the stored record (with ``counts``). Raises ValueError for an empty id or a
        negative ``n_trials``.
        """
        check_experiment_args(experiment_id, n_trials)
        return self._create_experiment(experiment_id, name, spec, n_trials)

    def create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int:
        """Create QUEUED trials and link them to the experiment, all in one transaction.

        Idempotent: a trial id that already exists (from this or another experiment) is not
        duplicated and keeps its state and results; it is only linked to ``experiment_id``.
        ``trials`` are ``(trial_id, TrialConfig.model_dump(mode="json"))`` pairs.

        Returns:
            How many trial rows were new.
        Raises:
            NotFoundError: unknown experiment.  ValueError: an empty id or non-dict config.
        """
        return self._create_trials(experiment_id, check_trial_items(trials))

    def cancel_experiment(self, experiment_id: str) -> int:
        """Request cancellation: set ``cancel_requested`` and turn its QUEUED trials CANCELLED.

        A QUEUED trial shared with another experiment that is not cancelled stays QUEUED.
        RUNNING trials are not touched here: ``cancel_requested`` tells their runner to stop
        at the next epoch, and the runner finishes them as CANCELLED.

        Returns how many QUEUED trials became CANCELLED. Raises NotFoundError if unknown.
        """
        return self._cancel_experiment(experiment_id)

    def requeue_trials(
        self,
        experiment_id: str,
        states: list[TrialState] | tuple[TrialState, ...] | TrialState = (TrialState.CANCELLED,),
    ) -> list[str]:
        """Resume an experiment: lift ``cancel_requested`` and put its trials in ``states`` back
        to QUEUED (the one sanctioned way out of a finished state).

        The trial's result, error, worker and times are cleared and ``attempts`` is reset so
        the delivery cap counts afresh. COMPLETE trials are never requeued.

        Returns:
            The requeued trial ids.
        Raises:
            NotFoundError: unknown experiment.  ValueError: a state other than CANCELLED,
            FAILED, DIVERGED or PRUNED.
        """
        return self._requeue_trials(experiment_id, requeue_state_list(states))

    def delete_experiment(self, experiment_id: str) -> int:
        """Remove an experiment that is over, with every trial that belongs to it alone.

        A trial it shares with another experiment stays, results and all, and only loses its
        link to this one (its ``seq`` moves, as its ``experiment_ids`` changed). Queued
        dispatches of the removed trials go too. Idempotent: an unknown (or already
        deleted) experiment removes nothing and returns 0, so a retry after a lost
        connection is safe.

        Returns:
            How many trials were removed.
        Raises:
            ExperimentActiveError: a trial that belongs to it alone is QUEUED or RUNNING
                (nothing is removed; cancel the experiment and let its trials stop first).
            ValueError: an empty experiment id.
        """
        check_experiment_id(experiment_id)
        return self._delete_experiment(experiment_id)

    def get_experiment(self, experiment_id: str) -> ExperimentRecord:
        """The experiment with its trial ``counts`` and ``reruns``. Raises NotFoundError if
        unknown."""
        return self._get_experiment(experiment_id)

    def list_experiments(self, limit: int = 100, offset: int = 0) -> list[ExperimentRecord]:
        """Experiments, newest first, with their ``counts`` and ``reruns`` (all counted in one
        query)."""
        check_page(limit, offset)
        return self._list_experiments(limit, offset)

    def counts_by_state(self, experiment_id: str | None = None) -> dict[str, int]:
        """Trials by state, every state present (zeros included), for one experiment or all."""
        counts = {s.value: 0 for s in TrialState}
        counts.update(self._count_states(experiment_id))
        return counts

    def counts_by_experiment(self, experiment_ids: list[str]) -> dict[str, dict[str, int]]:
        """:meth:`counts_by_state` of several experiments in one query: ``{experiment_id:
        counts}`` for each id given (an unknown one has all zeros). Raises ValueError for a
        malformed id list."""
        ids = check_experiment_ids(experiment_ids)
        found = self._tally_many(ids) if ids else {}
        return {
            eid: {**{s.value: 0 for s in TrialState}, **found.get(eid, TrialTally()).counts}
            for eid in ids
        }

    # ---------------------------------------------------------------- what a backend implements
    @abc.abstractmethod
    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        """Trials by state (only states present), for one experiment or the whole store."""

    @abc.abstractmethod
    def _tally_many(self, experiment_ids: list[str]) -> dict[str, TrialTally]:
        """The trials of each experiment that has any, counted by state and re-runs, in one
        query (what its record's ``counts`` and ``reruns`` hold)."""

    @abc.abstractmethod
    def _create_experiment(
        self, experiment_id: str, name: str, spec: dict[str, Any], n_trials: int
    ) -> ExperimentRecord:
        """:meth:`create_experiment`, its arguments checked."""

    @abc.abstractmethod
    def _create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int:
        """:meth:`create_trials`, its arguments checked."""

    @abc.abstractmethod
    def _cancel_experiment(self, experiment_id: str) -> int:
        """:meth:`cancel_experiment`, its arguments checked."""

    @abc.abstractmethod
    def _requeue_trials(self, experiment_id: str, states: list[str]) -> list[str]:
        """:meth:`requeue_trials`, its arguments checked."""

    @abc.abstractmethod
    def _delete_experiment(self, experiment_id: str) -> int:
        """:meth:`delete_experiment`, its arguments checked."""

    @abc.abstractmethod
    def _get_experiment(self, experiment_id: str) -> ExperimentRecord:
        """:meth:`get_experiment`, its arguments checked."""

    @abc.abstractmethod
    def _list_experiments(self, limit: int | None, offset: int) -> list[ExperimentRecord]:
        """:meth:`list_experiments`, its arguments checked."""
