"""Submit a sweep: store the experiment and its trials, hand unfinished trials to an executor.

Submitting is idempotent. The experiment id and every trial id are hashes of what
determines them, so submitting the same spec again reuses the same rows: COMPLETE (and
other finished) trials are not trained again, trials a previous run left CANCELLED (an
interrupted ``dnnframe run``) are queued again, and only QUEUED trials go to the executor.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from . import settings
from .exceptions import NotFoundError
from .executors.base import Executor
from .executors.packing import compile_key, make_packs, resolve_pack_size
from .owners import release_if_owner_died
from .spec import ExperimentSpec, count_trials, expand_documents
from .store.base import ExperimentRecord, ResultStore, TrialState


@dataclass
class SubmitResult:
    """What a submission did: the experiment, all its trial ids (in expansion order), the ids
    that were new to the store, the ids re-queued from an earlier interrupted run, the ids
    handed to the executor, the trials of any experiment whose worker had stopped
    (see :func:`recover_abandoned_trials`), and the packs the executor received."""

    experiment: ExperimentRecord
    trial_ids: list[str]
    new_trial_ids: list[str]
    requeued_trial_ids: list[str] = field(default_factory=list)
    submitted_trial_ids: list[str] = field(default_factory=list)
    recovered_trial_ids: list[str] = field(default_factory=list)
    packs: list[list[str]] = field(default_factory=list)


def recover_abandoned_trials(store: ResultStore) -> list[str]:
    """Put trials whose worker stopped back to QUEUED; returns their ids.

    Two kinds: RUNNING trials whose heartbeat is older than ``$DNNFRAME_HEARTBEAT_TIMEOUT``
    (a run killed outright, a lost machine), and RUNNING trials whose owner was a process of
    this host that no longer exists (a killed ``dnnframe run``), which need not wait for the
    timeout. Both keep their ``attempts``, so the delivery cap still holds.
    """
    recovered = store.requeue_stale(settings.get().heartbeat_timeout)
    host = socket.gethostname()
    recovered += [t.id for t in store.running_owners()
                  if release_if_owner_died(store, t.id, host)]
    return recovered


def submit_experiment(spec: ExperimentSpec, store: ResultStore, executor: Executor | None = None,
                      retry_failed: bool = False, pack_size: int | None = None) -> SubmitResult:
    """Store ``spec``'s experiment and trials (idempotently) and run the unfinished ones.

    First recovers trials whose worker stopped (:func:`recover_abandoned_trials`), so every
    entry point (CLI, dashboard) resumes the same way. The trials still QUEUED go to the
    executor in packs of trials that share a compiled graph (:func:`make_packs`).

    Args:
        spec: a validated spec (:func:`dnnframe.spec.parse_spec` / ``load_spec``).
        store: where the experiment and its trials live.
        executor: receives the packs of the trials still QUEUED; None only stores them.
        retry_failed: also re-queue trials a previous run left FAILED.
        pack_size: most trials per pack (``dnnframe run --pack-size``); None takes the
            spec's ``search.pack_size``, else ``$DNNFRAME_PACK_SIZE``, else an automatic
            size (see :func:`dnnframe.executors.packing.auto_pack_size`).

    Returns:
        A :class:`SubmitResult`.
    """
    recovered = recover_abandoned_trials(store)
    pairs = list(expand_documents(spec))
    trial_ids = list(dict.fromkeys(tid for tid, _ in pairs))  # a duplicated config is one trial
    experiment_id = spec.experiment_id
    existing = ({t.id for t in store.list_trials(experiment_id, fields=())}
                if _experiment_exists(store, experiment_id) else set())
    store.create_experiment(experiment_id, spec.name, spec.to_dict(), count_trials(spec))
    created = store.create_trials(experiment_id, pairs)
    new_ids = [tid for tid in trial_ids if tid not in existing]

    # A resubmission resumes: lift the cancel flag of an interrupted run and queue its
    # CANCELLED (and on request FAILED) trials again. COMPLETE trials stay as they are.
    states = [TrialState.CANCELLED] + ([TrialState.FAILED] if retry_failed else [])
    requeued = store.requeue_trials(experiment_id, states)

    if created == len(trial_ids):
        to_run = trial_ids  # all created QUEUED just now: no need to read them back
    else:
        queued = {t.id for t in store.list_trials(experiment_id, state=TrialState.QUEUED,
                                                  fields=())}
        to_run = [tid for tid in trial_ids if tid in queued]
    if executor is not None:  # recovered trials of other experiments are not in to_run
        ours = set(trial_ids)
        executor.recovered_elsewhere([tid for tid in recovered if tid not in ours])
    packs: list[list[str]] = []
    if executor is not None and to_run:
        configs = dict(pairs)
        size = resolve_pack_size(spec, pack_size)
        packs = make_packs(to_run, configs, size, executor.parallelism)
        executor.submit(packs, compile_keys=[compile_key(configs[pack[0]], len(pack)) for pack in packs])
    return SubmitResult(store.get_experiment(experiment_id), trial_ids, new_ids, list(requeued),
                        to_run, recovered, packs)


def _experiment_exists(store: ResultStore, experiment_id: str) -> bool:
    try:
        store.get_experiment(experiment_id)
    except NotFoundError:
        return False
    return True
