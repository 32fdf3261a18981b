"""Submit a sweep: store the experiment and its trials, hand unfinished trials to an executor.

Submitting is idempotent. The experiment id and every trial id are hashes of what
determines them, so submitting the same spec again reuses the same rows: COMPLETE (and
other finished) trials are not trained again, trials a previous run left CANCELLED (an
interrupted ``dnnframe run``) are queued again, and only QUEUED trials go to the executor.

A submission puts back no trial whose worker stopped: that is :mod:`dnnframe.recovery`'s
work, done by a long-running owner (a driver service, a Celery worker's reaper) and by
``dnnframe run`` before it submits, never inside a web request.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .exceptions import NotFoundError
from .executors.base import Executor
from .executors.packing import compile_key, make_packs, resolve_pack_size
from .spec import ExperimentSpec, count_trials, expand_documents
from .store.base import ExperimentRecord, ResultStore, TrialState


@dataclass
class SubmitResult:
    """What a submission did: the experiment, all its trial ids (in expansion order), the ids
    that were new to the store, the ids re-queued from an earlier interrupted run, the ids
    handed to the executor, the packs the executor received, and whether the experiment was
    new to the store."""

    experiment: ExperimentRecord
    trial_ids: list[str]
    new_trial_ids: list[str]
    requeued_trial_ids: list[str] = field(default_factory=list)
    submitted_trial_ids: list[str] = field(default_factory=list)
    packs: list[list[str]] = field(default_factory=list)
    created: bool = False


def submit_experiment(
    spec: ExperimentSpec,
    store: ResultStore,
    executor: Executor | None = None,
    retry_failed: bool = False,
    pack_size: int | None = None,
) -> SubmitResult:
    """Store ``spec``'s experiment and trials (idempotently) and run the unfinished ones.

    The trials still QUEUED go to the executor in packs of trials that share a compiled
    graph (:func:`make_packs`). Trials left RUNNING by a worker that stopped are not
    touched here (see :mod:`dnnframe.recovery`).

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
    pairs = list(expand_documents(spec))
    trial_ids = list(dict.fromkeys(tid for tid, _ in pairs))  # a duplicated config is one trial
    experiment_id = spec.experiment_id
    new_experiment = not experiment_exists(store, experiment_id)
    existing = (
        set() if new_experiment else {t.id for t in store.list_trials(experiment_id, fields=())}
    )
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
        queued = {
            t.id for t in store.list_trials(experiment_id, state=TrialState.QUEUED, fields=())
        }
        to_run = [tid for tid in trial_ids if tid in queued]
    packs: list[list[str]] = []
    if executor is not None and to_run:
        configs = dict(pairs)
        size = resolve_pack_size(spec, pack_size)
        packs = make_packs(to_run, configs, size, executor.parallelism)
        executor.submit(
            packs, compile_keys=[compile_key(configs[pack[0]], len(pack)) for pack in packs]
        )
    return SubmitResult(
        store.get_experiment(experiment_id),
        trial_ids,
        new_ids,
        list(requeued),
        to_run,
        packs,
        new_experiment,
    )


def experiment_exists(store: ResultStore, experiment_id: str) -> bool:
    """Whether the store holds experiment ``experiment_id`` (one read)."""
    try:
        store.get_experiment(experiment_id)
    except NotFoundError:
        return False
    return True
