"""Model-based search (``search.method: tpe | cmaes``): ask Optuna's sampler for
configurations as results arrive, store each as an ordinary trial, tell it the objective.

The study lives in memory only: the store is the record. A driver that starts (or restarts
after a crash) rebuilds the study from the experiment's stored trials, so the sampler sees
every result so far. Each configuration asked for trial number ``n`` comes from a sampler
seeded with ``(search.random_seed, n)``: with one worker (asked, trained, told in turn), a
run gives the same trials whether or not it was restarted on the way.

With ``search.pruner: asha`` the runner prunes trials at rungs exactly as for
``method: asha`` (a store query, no coordinator); a PRUNED trial is told to Optuna as
``TrialState.PRUNED`` with its per-epoch values as intermediate values.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import optuna
from optuna.samplers import BaseSampler, CmaEsSampler, TPESampler
from optuna.trial import FrozenTrial, create_trial
from optuna.trial import TrialState as OptunaState

from ..datasets import dataset_fingerprint
from ..exceptions import SpecError
from ..executors.base import Executor
from ..executors.packing import compile_key, make_packs, resolve_pack_size
from ..extras import require
from ..metrics import is_number
from ..spec import ExperimentSpec, count_trials, trial_id
from ..spec.expand import resolve, spec_spaces
from ..spec.models import MODEL_BASED_METHODS, canonical_json, is_driven
from ..states import TOLD_STATES, TrialState
from ..store.base import ResultStore, TrialRecord
from .space import SpaceMap

log = logging.getLogger(__name__)

# What the study hears of each state a sampler is told about; the others told are failures.
_AS_OPTUNA = {TrialState.COMPLETE: OptunaState.COMPLETE, TrialState.PRUNED: OptunaState.PRUNED}
_TOLD = {s: _AS_OPTUNA.get(s, OptunaState.FAIL) for s in TOLD_STATES}


def make_sampler(method: str, seed: int) -> BaseSampler:
    """Optuna's sampler for ``method`` (``tpe`` or ``cmaes``), seeded."""
    if method == "tpe":
        return TPESampler(seed=seed)
    if method == "cmaes":
        require("cmaes", "search", "search.method: cmaes")  # Optuna imports it only when sampling
        return CmaEsSampler(seed=seed, warn_independent_sampling=False)
    raise ValueError(f"method must be one of {MODEL_BASED_METHODS}, got {method!r}")


@dataclass
class DriverResult:
    """What a driver run did: the experiment, the trials it asked for (in order; a repeat
    of a configuration appears again), how many stored finished trials it rebuilt the study
    from, whether all ``num_samples`` are done, whether the experiment was cancelled, and
    whether the driver stopped early because ``keep_going`` said so (its lease was lost)."""

    experiment_id: str
    asked: list[str] = field(default_factory=list)
    rebuilt: int = 0
    finished: bool = False
    cancelled: bool = False
    stopped: bool = False


class SearchDriver:
    """Asks a sampler for new trials as results arrive, keeping an executor busy.

    Args:
        spec: a validated spec with ``search.method`` tpe or cmaes.
        store: where the experiment and its trials live.
        executor: trains the trials (local pool or Celery), one pack per free slot.
        pack_size: as for :func:`dnnframe.submit.submit_experiment`.
        poll_s: the longest wait between looks at the store. The executor wakes the driver
            when one of its trials ends; the store is read at least this often for trials
            that end elsewhere (another process, a cancellation).
        keep_going: asked before every ask; once it answers False the driver asks nothing
            more and returns (``stopped``). A driver holding a lease passes
            ``LeaseKeeper.held``, so a driver that lost its lease never asks again.
    """

    def __init__(
        self,
        spec: ExperimentSpec,
        store: ResultStore,
        executor: Executor,
        pack_size: int | None = None,
        poll_s: float = 0.2,
        keep_going: Callable[[], bool] | None = None,
    ):
        if not is_driven(spec):
            raise ValueError(
                f"a driver needs search.method tpe or cmaes, got {spec.search.method!r}"
            )
        self.spec, self.store, self.executor, self.poll_s = spec, store, executor, poll_s
        self.keep_going = keep_going or (lambda: True)
        self.pack_size = resolve_pack_size(spec, pack_size)
        self.search = spec.search
        self.space = SpaceMap(spec_spaces(spec))
        self.metric = self.search.objective.metric
        direction: Literal["maximize", "minimize"] = (
            "maximize" if self.search.objective.mode == "max" else "minimize"
        )
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(
            direction=direction, sampler=make_sampler(self.search.method, 0)
        )
        self.seed = self.search.seed_list[0]
        self.waiting: dict[str, list[optuna.trial.Trial | None]] = {}  # id -> asks to tell
        self.fingerprints: dict[str, str] = {}

    @property
    def experiment_id(self) -> str:
        """The experiment this driver fills."""
        return self.spec.experiment_id

    def run(self, limit: int | None = None) -> DriverResult:
        """Ask, store, train and tell until ``search.num_samples`` trials are done.

        ``limit`` caps how many new configurations this call asks for (it then returns once
        those are done); the next call, or a new driver, goes on from the store.
        Trials a previous run left CANCELLED are queued again and resumed; trials left
        RUNNING by a worker that stopped are put back by whoever owns recovery
        (:mod:`dnnframe.recovery`), and told when they end.
        """
        out = DriverResult(self.experiment_id)
        self.store.create_experiment(
            self.experiment_id, self.spec.name, self.spec.to_dict(), count_trials(self.spec)
        )
        self.store.requeue_trials(self.experiment_id, [TrialState.CANCELLED])
        cursor = self.store.latest_seq()
        stored = self.store.list_trials(self.experiment_id)
        out.rebuilt = self._rebuild(stored)
        self._submit([t.id for t in stored if t.state is TrialState.QUEUED])
        budget = self.search.num_samples - len(stored)
        seen = 0  # trials the executor has seen end (wait_any's count)
        while True:
            if not self.keep_going():
                out.stopped = True
                return out
            slots = max(1, self.executor.parallelism) - len(self.waiting)
            n_new = min(slots, budget, limit - len(out.asked) if limit is not None else slots)
            if n_new > 0:
                # Another driver of this experiment (another dashboard process) may have
                # stored trials too: the store's count bounds the budget of both.
                room = self.search.num_samples - self._n_stored()
                if room <= 0 and not self.waiting:
                    budget = 0  # the others' trials filled it
                n_new = min(n_new, room)
            if n_new > 0:
                new = self._ask(n_new, out)
                budget -= n_new
                self._submit(new)
            if not self.waiting:
                out.finished = budget <= 0 and not out.cancelled
                return out
            # Woken as soon as a trial ends here, so a freed worker gets its next trial at
            # once; the timeout still reads the store for ends the executor cannot see.
            seen = self.executor.wait_any(seen, timeout=self.poll_s)
            changed = self.store.list_trials(self.experiment_id, since=cursor)
            if changed:
                cursor = max(t.seq for t in changed)
            ended = [t for t in changed if t.id in self.waiting and t.state.is_finished]
            for t in ended:
                if t.state is TrialState.CANCELLED:  # the experiment is being cancelled
                    out.cancelled, budget = True, 0
                    for trial in self.waiting.pop(t.id):
                        if trial is not None:
                            self.study.tell(trial, state=OptunaState.FAIL)
                else:
                    self._tell(t)

    def _n_stored(self) -> int:
        return sum(self.store.counts_by_state(self.experiment_id).values())

    # ---------------------------------------------------------------- the study
    def _rebuild(self, stored: list[TrialRecord]) -> int:
        """Give the study every stored finished trial; track the unfinished ones."""
        n = 0
        for t in stored:
            if t.state in _TOLD:
                params = self.space.params(t.config)
                if params is None:
                    continue  # not a point of this spec's spaces (shared with another)
                self.study.add_trial(self._frozen(t, params))
                n += 1
            else:
                self.waiting.setdefault(t.id, []).append(None)
        return n

    def _frozen(self, t: TrialRecord, params: dict[str, Any]) -> FrozenTrial:
        state = _TOLD[t.state]
        value = self._value(t) if state is OptunaState.COMPLETE else None
        if state is OptunaState.COMPLETE and value is None:
            state = OptunaState.FAIL
        return create_trial(
            state=state,
            value=value,
            params=params,
            distributions=self.space.distributions,
            intermediate_values=self._curve(t),
        )

    def _value(self, t: TrialRecord) -> float | None:
        v = t.value(self.metric)
        return float(v) if is_number(v) else None

    def _curve(self, t: TrialRecord) -> dict[int, float]:
        metric = self.search.rung_metric
        return {
            int(m["epoch"]): float(m[metric])
            for m in t.metrics
            if isinstance(m.get("epoch"), int) and is_number(m.get(metric))
        }

    def _ask(self, n: int, out: DriverResult) -> list[str]:
        """Ask for ``n`` configurations and store each; returns the ids to train."""
        new: list[str] = []
        for _ in range(n):
            if not self.keep_going():
                out.stopped = True
                break
            # the asks so far, an earlier driver's unfinished ones included: a successor
            # seeds its asks where the earlier driver left off, not again from the seed
            # one of its trials still in flight had
            number = len(self.study.get_trials(deepcopy=False)) + self._earlier_in_flight()
            self.study.sampler = make_sampler(
                self.search.method, _seed(self.search.random_seed, number)
            )
            trial = self.study.ask(self.space.distributions)
            try:
                config = resolve(self.spec, self.space.assignment(trial.params), self.seed)
            except SpecError as exc:
                log.warning("proposal %s breaks a rule; told as failed: %s", trial.params, exc)
                self.study.tell(trial, state=OptunaState.FAIL)
                continue
            tid = trial_id(config, self._fingerprint(config))
            out.asked.append(tid)
            known = tid in self.waiting
            self.waiting.setdefault(tid, []).append(trial)
            if known:
                log.info(
                    "experiment %s: asked trial %s (number %d), in flight already",
                    self.experiment_id,
                    tid,
                    number,
                )
                continue  # the same configuration is in flight already: told when it ends
            self.store.create_trials(self.experiment_id, [(tid, config.model_dump(mode="json"))])
            # logged once stored: a driver killed before the write asked nothing that lasts,
            # and its successor asks that number again
            log.info("experiment %s: asked trial %s (number %d)", self.experiment_id, tid, number)
            record = self.store.get_trial(tid)
            if record.state in TOLD_STATES:
                self._tell(record)  # trained before (by another experiment): reuse it
            elif record.state is TrialState.QUEUED:
                new.append(tid)
        return new

    def _earlier_in_flight(self) -> int:
        """Trials an earlier driver asked that have not ended (not in this study yet)."""
        return sum(trial is None for asks in self.waiting.values() for trial in asks)

    def _tell(self, t: TrialRecord) -> None:
        state = _TOLD.get(t.state, OptunaState.FAIL)
        for trial in self.waiting.pop(t.id, []):
            if trial is None:  # asked by an earlier driver: added as it ended
                params = self.space.params(t.config)
                if params is not None:
                    self.study.add_trial(self._frozen(t, params))
                continue
            value = self._value(t)
            if state is OptunaState.PRUNED:
                for step, v in sorted(self._curve(t).items()):
                    trial.report(v, step)
                self.study.tell(trial, state=OptunaState.PRUNED)
            elif state is OptunaState.COMPLETE and value is not None:
                self.study.tell(trial, value)
            else:
                self.study.tell(trial, state=OptunaState.FAIL)

    def _fingerprint(self, config: Any) -> str:
        key = canonical_json(config.dataset.model_dump(mode="json"))
        if key not in self.fingerprints:
            self.fingerprints[key] = dataset_fingerprint(config.dataset)
        return self.fingerprints[key]

    def _submit(self, ids: list[str]) -> None:
        if not ids:
            return
        configs = {t.id: t.config for t in self.store.get_trials(ids, fields=["config"])}
        packs = make_packs(ids, configs, self.pack_size, self.executor.parallelism)
        self.executor.submit(
            packs, compile_keys=[compile_key(configs[p[0]], len(p)) for p in packs]
        )


def _seed(random_seed: int, number: int) -> int:
    """The sampler seed of trial ``number``: independent of how many asks came before in
    this process, so a restarted driver proposes what an uninterrupted one would."""
    return (random_seed * 1_000_003 + number) % (2**32)
