"""How the MongoDB backend keeps the worker registry (the contract is in workers.py): one
document per worker in ``workers``, keyed by its name."""

from __future__ import annotations

from typing import Any

from ..jsonsafe import json_safe
from .base_trials import now
from .mongo_connect import retry
from .records import WorkerRecord


class MongoWorkers:
    """The workers of :class:`~dnnframe.store.mongodb.MongoStore`: a registration is one
    upsert replacing the worker's document."""

    _db: Any
    url: str

    @retry
    def _register_worker(
        self,
        name: str,
        host: str | None,
        pid: int | None,
        current_trial: str | None,
        trials_done: int,
        info: dict[str, Any] | None,
    ) -> None:
        self._db.workers.replace_one(
            {"_id": name},
            {
                "host": host,
                "pid": pid,
                "current_trial": current_trial,
                "trials_done": trials_done,
                "last_seen": now(),
                "info": json_safe(info or {}),
            },
            upsert=True,
        )

    @retry
    def list_workers(self, seen_within_s: float | None = None) -> list[WorkerRecord]:
        query = {} if seen_within_s is None else {"last_seen": {"$gte": now() - seen_within_s}}
        return [
            WorkerRecord(
                name=d["_id"],
                host=d.get("host"),
                pid=d.get("pid"),
                current_trial=d.get("current_trial"),
                trials_done=d.get("trials_done", 0),
                last_seen=d["last_seen"],
                info=d.get("info") or {},
            )
            for d in self._db.workers.find(query).sort("_id", 1)
        ]
