"""In-memory backend (``memory://`` or ``memory://NAME``): the reference implementation.

Plain dicts under one lock, with the rules of lifecycle.py applied directly: read it to see
what the contract means without SQL or MongoDB in the way; the contract suite runs it like
every other backend. For tests and one-process use only: the data lives in this process
(stores opened here with the same URL share it, as a test's dashboard and runner need)
and is gone when the process exits; worker processes and other machines never see it.

Experiments, queries and the trial life cycle here; leases, the dispatch outbox, workers and
notes in lease_backends.py, outbox_backends.py, worker_backends.py and note_backends.py.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import NotFoundError, StoreError
from ..jsonsafe import json_copy
from ..metrics import is_number
from .base import ResultStore, now
from .checks import CheckedFinish, active_error, epochs_to_store
from .lease_backends import MemoryLeases
from .leases import LeaseRecord
from .lifecycle import (
    QUEUED,
    RELEASE,
    REQUEUE_RESET,
    REQUEUE_STALE,
    RUNNING,
    ClaimOutcome,
    TrialUpdate,
    all_experiments_cancelled,
    cancel_before_start,
    decide_claim,
    finish_update,
    is_stale,
    may_finish,
    owns,
    stop_requested,
)
from .note_backends import MemoryNotes
from .notes import NoteRecord
from .outbox_backends import MemoryOutbox
from .records import (
    BULKY_FIELDS,
    ExperimentRecord,
    TrialRecord,
    TrialState,
    TrialTally,
    WorkerRecord,
    tally_rows,
    value_at,
)
from .sorting import json_sort_key, resolve_sort_path
from .worker_backends import MemoryWorkers

__all__ = ["MEMORY_PREFIX", "MemoryStore"]

# In-memory stores live in one process: a URL that worker processes cannot share.
MEMORY_PREFIX = "memory://"


@dataclass
class _Data:
    """Everything one ``memory://NAME`` store holds; dicts keep creation order."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    experiments: dict[str, dict[str, Any]] = field(default_factory=dict)
    trials: dict[str, dict[str, Any]] = field(default_factory=dict)
    workers: dict[str, WorkerRecord] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)  # trial id -> queue, oldest first
    leases: dict[str, LeaseRecord] = field(default_factory=dict)
    notes: dict[tuple[str, str], NoteRecord] = field(default_factory=dict)  # by (kind, id)
    seq: int = 0
    experiment_order: int = 0


# One store per name per process, kept until the process exits (like a server's database).
_STORES: dict[str, _Data] = {}
_STORES_LOCK = threading.Lock()


class MemoryStore(MemoryLeases, MemoryNotes, MemoryOutbox, MemoryWorkers, ResultStore):
    """ResultStore in this process's memory (see the module docstring)."""

    def __init__(self, url: str = MEMORY_PREFIX, create: bool = True):
        if not url.startswith(MEMORY_PREFIX):
            raise StoreError(
                f"store URL {url!r}: an in-memory store URL looks like "
                f"{MEMORY_PREFIX} or {MEMORY_PREFIX}NAME"
            )
        self.url = url
        self._closed = False
        name = url[len(MEMORY_PREFIX) :]
        with _STORES_LOCK:
            data = _STORES.get(name)
            if data is None and not create:
                raise StoreError(
                    f"no store at {url!r} (no in-memory store of that name in "
                    "this process; nothing has been run with this store yet?)"
                )
            if data is None:
                data = _STORES[name] = _Data()
        self._data = data

    def close(self) -> None:
        self._closed = True  # the data stays, for other stores of this URL in the process

    @contextlib.contextmanager
    def _locked(self) -> Iterator[_Data]:
        if self._closed:
            raise StoreError(f"store {self.url!r} is closed")
        with self._data.lock:
            yield self._data

    # ------------------------------------------------------------ helpers (lock held)
    def _trial(self, d: _Data, trial_id: str) -> dict[str, Any]:
        doc = d.trials.get(trial_id)
        if doc is None:
            raise NotFoundError(f"trial {trial_id!r} not found in {self.url}")
        return doc

    def _require(self, d: _Data, ids: list[str]) -> None:
        missing = [tid for tid in ids if tid not in d.trials]
        if missing:
            raise NotFoundError(
                f"trial {missing[0]!r} not found in {self.url}"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            )

    def _experiment_doc(self, d: _Data, experiment_id: str) -> dict[str, Any]:
        doc = d.experiments.get(experiment_id)
        if doc is None:
            raise NotFoundError(f"experiment {experiment_id!r} not found in {self.url}")
        return doc

    @staticmethod
    def _write(d: _Data, doc: dict[str, Any], update: TrialUpdate) -> None:
        """Apply a life-cycle update (stored values are JSON copies: nothing a caller
        holds is shared) and give the trial the next seq."""
        doc.update(json_copy(dict(update.set)))
        for name, amount in update.inc.items():
            doc[name] += amount
        d.seq += 1
        doc["seq"] = d.seq

    @staticmethod
    def _cancelled(d: _Data, doc: dict[str, Any]) -> bool:
        live = [e for e in doc["experiment_ids"] if not d.experiments[e]["cancel_requested"]]
        return all_experiments_cancelled(doc["experiment_ids"], live)

    @staticmethod
    def _linked(d: _Data, experiment_id: str) -> list[dict[str, Any]]:
        return [doc for doc in d.trials.values() if experiment_id in doc["experiment_ids"]]

    @staticmethod
    def _record(
        doc: dict[str, Any], fields: frozenset[str] = frozenset(BULKY_FIELDS)
    ) -> TrialRecord:
        # the bulky fields not asked for are never copied
        values = json_copy(
            {
                k: v
                for k, v in doc.items()
                if k != "state" and (k not in BULKY_FIELDS or k in fields)
            }
        )
        values["experiment_ids"] = sorted(values["experiment_ids"])
        return TrialRecord(state=TrialState(doc["state"]), **{"config": {}, **values})

    def _experiment(
        self, d: _Data, experiment_id: str, tally: TrialTally | None = None
    ) -> ExperimentRecord:
        doc = self._experiment_doc(d, experiment_id)
        if tally is None:
            tally = self._tally_many([experiment_id]).get(experiment_id, TrialTally())
        return ExperimentRecord(
            id=experiment_id,
            name=doc["name"],
            spec=json_copy(doc["spec"]),
            n_trials=doc["n_trials"],
            created_at=doc["created_at"],
            cancel_requested=doc["cancel_requested"],
            counts=tally.counts,
            reruns=tally.reruns,
        )

    # ------------------------------------------------------------ experiments
    def _create_experiment(
        self, experiment_id: str, name: str, spec: dict[str, Any], n_trials: int
    ) -> ExperimentRecord:
        with self._locked() as d:
            if experiment_id not in d.experiments:
                d.experiment_order += 1
                d.experiments[experiment_id] = {
                    "name": name,
                    "spec": json_copy(spec),
                    "n_trials": n_trials,
                    "created_at": now(),
                    "cancel_requested": False,
                    "order": d.experiment_order,
                }
            return self._experiment(d, experiment_id)

    def _get_experiment(self, experiment_id: str) -> ExperimentRecord:
        with self._locked() as d:
            return self._experiment(d, experiment_id)

    def _list_experiments(self, limit: int | None, offset: int) -> list[ExperimentRecord]:
        with self._locked() as d:
            ids = sorted(
                d.experiments,
                key=lambda e: (d.experiments[e]["created_at"], d.experiments[e]["order"]),
                reverse=True,
            )
            page = ids[offset:] if limit is None else ids[offset : offset + limit]
            tallies = self._tally_many(page)
            return [self._experiment(d, e, tallies.get(e, TrialTally())) for e in page]

    def _count_states(self, experiment_id: str | None) -> dict[str, int]:
        with self._locked() as d:
            docs = d.trials.values() if experiment_id is None else self._linked(d, experiment_id)
            return dict(Counter(doc["state"] for doc in docs))

    def _tally_many(self, experiment_ids: list[str]) -> dict[str, TrialTally]:
        wanted = set(experiment_ids)
        with self._locked() as d:
            return tally_rows(
                (eid, doc["state"], doc["attempts"] > 1, 1)
                for doc in d.trials.values()
                for eid in wanted.intersection(doc["experiment_ids"])
            )

    def _cancel_experiment(self, experiment_id: str) -> int:
        with self._locked() as d:
            self._experiment_doc(d, experiment_id)["cancel_requested"] = True
            docs = [
                doc
                for doc in self._linked(d, experiment_id)
                if doc["state"] == QUEUED and self._cancelled(d, doc)
            ]
            t = now()
            for doc in docs:
                self._write(d, doc, cancel_before_start(t))
            return len(docs)

    def _requeue_trials(self, experiment_id: str, states: list[str]) -> list[str]:
        with self._locked() as d:
            self._experiment_doc(d, experiment_id)["cancel_requested"] = False
            docs = [doc for doc in self._linked(d, experiment_id) if doc["state"] in states]
            for doc in docs:
                self._write(d, doc, REQUEUE_RESET)
            return sorted(doc["id"] for doc in docs)

    def _delete_experiment(self, experiment_id: str) -> int:
        with self._locked() as d:
            if experiment_id not in d.experiments:
                return 0
            linked = self._linked(d, experiment_id)
            own = [doc["id"] for doc in linked if doc["experiment_ids"] == [experiment_id]]
            active = [tid for tid in own if d.trials[tid]["state"] in (QUEUED, RUNNING)]
            if active:
                raise active_error(experiment_id, active)
            for tid in own:
                del d.trials[tid]
                d.held.pop(tid, None)
            self._drop_notes(d, experiment_id, own)
            for doc in linked:
                if doc["id"] not in own:  # its experiment_ids change: it moves in change order
                    doc["experiment_ids"].remove(experiment_id)
                    self._write(d, doc, TrialUpdate({}))
            del d.experiments[experiment_id]
            return len(own)

    # ------------------------------------------------------------ trials
    def _create_trials(self, experiment_id: str, trials: list[tuple[str, dict[str, Any]]]) -> int:
        with self._locked() as d:
            self._experiment_doc(d, experiment_id)
            t, created = now(), 0
            for tid, config in trials:
                doc = d.trials.get(tid)
                if doc is None:  # the first of a repeated id counts
                    d.seq += 1
                    d.trials[tid] = {
                        "id": tid,
                        "experiment_ids": [experiment_id],
                        "state": QUEUED,
                        "config": json_copy(config),
                        "result": None,
                        "metrics": [],
                        "error": None,
                        "worker": None,
                        "attempts": 0,
                        "created_at": t,
                        "started_at": None,
                        "finished_at": None,
                        "heartbeat_at": None,
                        "seq": d.seq,
                    }
                    created += 1
                elif experiment_id not in doc["experiment_ids"]:
                    doc["experiment_ids"].append(experiment_id)
            return created

    def _claim_trials(
        self, trial_ids: list[str], worker: str, max_attempts: int | None
    ) -> list[TrialRecord]:
        with self._locked() as d:
            self._require(d, trial_ids)
            t, won = now(), []
            for tid in trial_ids:
                doc = d.trials[tid]
                outcome, update = decide_claim(
                    doc["state"], doc["attempts"], self._cancelled(d, doc), max_attempts, worker, t
                )
                if update is not None:
                    self._write(d, doc, update)
                if outcome is ClaimOutcome.WON:
                    won.append(self._record(doc))
            return won

    def _heartbeat_trials(self, trial_ids: list[str], worker: str) -> set[str]:
        with self._locked() as d:
            t, alive = now(), set()
            for tid in trial_ids:
                doc = d.trials.get(tid)
                if (
                    doc is not None
                    and worker is not None
                    and owns(doc["state"], doc["worker"], worker)
                ):
                    doc["heartbeat_at"] = t  # a heartbeat moves no seq
                    alive.add(tid)
            return alive

    def _append_metrics_many(
        self, epochs_by_id: dict[str, list[dict[str, Any]]], worker: str | None
    ) -> set[str]:
        with self._locked() as d:
            t, written = now(), set()
            for tid, epochs in epochs_by_id.items():
                doc = d.trials.get(tid)
                if doc is None or not owns(doc["state"], doc["worker"], worker):
                    continue
                _extend_curve(doc, epochs)
                doc["heartbeat_at"] = t
                self._write(d, doc, TrialUpdate({}))
                written.add(tid)
            return written

    def _finish_trials(
        self,
        items: list[CheckedFinish],
        worker: str | None,
        epochs: dict[str, list[dict[str, Any]]],
    ) -> set[str]:
        with self._locked() as d:
            self._require(d, [tid for tid, *_ in items])
            t, done = now(), set()
            for tid, state, result, error in items:
                doc = d.trials[tid]
                if may_finish(doc["state"], doc["worker"], state, worker):
                    if tid in epochs:
                        _extend_curve(doc, epochs[tid])
                    self._write(d, doc, finish_update(state, result, error, t))
                    done.add(tid)
            return done

    def _cancel_requested(self, trial_ids: list[str]) -> set[str]:
        with self._locked() as d:
            self._require(d, trial_ids)
            return {
                tid
                for tid in trial_ids
                if stop_requested(d.trials[tid]["state"], self._cancelled(d, d.trials[tid]))
            }

    def _requeue_stale(self, cutoff: float) -> list[str]:
        with self._locked() as d:
            docs = [
                doc
                for doc in d.trials.values()
                if is_stale(doc["state"], doc["heartbeat_at"], cutoff)
            ]
            for doc in docs:
                self._write(d, doc, REQUEUE_STALE)
            return sorted(doc["id"] for doc in docs)

    def _release_trial(self, trial_id: str, worker: str) -> bool:
        with self._locked() as d:
            doc = self._trial(d, trial_id)
            if not owns(doc["state"], doc["worker"], worker):
                return False
            self._write(d, doc, RELEASE)
            return True

    # ------------------------------------------------------------ queries
    def _get_trial(self, trial_id: str) -> TrialRecord:
        with self._locked() as d:
            return self._record(self._trial(d, trial_id))

    def _get_trials(self, trial_ids: list[str], fields: frozenset[str]) -> list[TrialRecord]:
        with self._locked() as d:
            self._require(d, trial_ids)
            return [self._record(d.trials[tid], fields) for tid in trial_ids]

    def _list_trials(
        self,
        experiment_id: str | None,
        states: list[str] | None,
        sort_by: str | None,
        descending: bool,
        limit: int | None,
        offset: int,
        since: int | None,
        fields: frozenset[str],
    ) -> list[TrialRecord]:
        with self._locked() as d:
            docs = [
                doc
                for doc in d.trials.values()
                if (experiment_id is None or experiment_id in doc["experiment_ids"])
                and (states is None or doc["state"] in states)
                and (since is None or doc["seq"] > since)
            ]
            if sort_by is None:  # creation order, or change order for a cursor
                docs.sort(
                    key=(lambda doc: doc["seq"])
                    if since is not None
                    else (lambda doc: doc["created_at"])
                )
                if descending:
                    docs.reverse()
            else:
                path = resolve_sort_path(sort_by)
                values = [(doc, value_at(doc, path)) for doc in docs]
                # stable sorts: ties stay in creation order; missing values last both ways
                present = sorted(
                    [(doc, v) for doc, v in values if v is not None],
                    key=lambda dv: json_sort_key(dv[1]),
                    reverse=descending,
                )
                docs = [doc for doc, _ in present] + [doc for doc, v in values if v is None]
            page = docs[offset:] if limit is None else docs[offset : offset + limit]
            return [self._record(doc, fields) for doc in page]

    def _rung_values(self, experiment_id: str, epoch: int, metric: str) -> list[float]:
        with self._locked() as d:
            values = []
            for doc in self._linked(d, experiment_id):
                at = doc["metrics"][epoch - 1] if len(doc["metrics"]) >= epoch else {}
                v = at.get(metric) if at.get("epoch") == epoch else None
                if is_number(v):
                    values.append(float(v))
            return values

    def latest_seq(self) -> int:
        with self._locked() as d:
            return d.seq


def _extend_curve(doc: dict[str, Any], epochs: list[dict[str, Any]]) -> None:
    """Append to a trial's curve the epochs it lacks (a new list: readers hold the old)."""
    last = doc["metrics"][-1].get("epoch") if doc["metrics"] else None
    doc["metrics"] = doc["metrics"] + json_copy(epochs_to_store(epochs, last))
