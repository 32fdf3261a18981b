"""How the MongoDB backend keeps the dispatch outbox (the contract is in outbox.py): one
document per held trial in ``held_dispatch``, keyed by the trial id."""

from __future__ import annotations

from typing import Any

from pymongo.errors import PyMongoError

from ..exceptions import StoreError
from .base_trials import now
from .mongo_connect import redact, retry


class MongoOutbox:
    """The outbox of :class:`~dnnframe.store.mongodb.MongoStore`: each entry taken by one
    atomic ``find_one_and_delete``, so with several takers each goes to one."""

    _db: Any
    url: str

    @retry
    def _hold_dispatch(self, items: list[tuple[str, str]]) -> None:
        for tid, queue in items:  # rare (a broker outage): one round trip each is fine
            self._db.held_dispatch.replace_one(
                {"_id": tid}, {"queue": queue, "held_at": now()}, upsert=True
            )

    def _take_dispatch(self, limit: int) -> list[tuple[str, str]]:
        taken: list[tuple[str, str]] = []
        try:
            for doc in self._oldest_held(limit):
                # one atomic delete per entry: with several takers each entry goes to one
                if self._db.held_dispatch.find_one_and_delete({"_id": doc["_id"]}) is not None:
                    taken.append((doc["_id"], doc["queue"]))
        except PyMongoError as exc:
            # Not retried whole (a rerun would lose what was deleted already): give back
            # what this call took, then fail.
            if taken:
                self._hold_dispatch(taken)
            raise StoreError(f"store {redact(self.url)}: {exc}") from exc
        return taken

    @retry
    def _oldest_held(self, limit: int) -> list[dict[str, Any]]:
        return list(self._db.held_dispatch.find().sort([("held_at", 1), ("_id", 1)]).limit(limit))
