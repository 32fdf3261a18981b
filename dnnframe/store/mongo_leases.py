"""How the MongoDB backend stores leases (the contract and the rule are in leases.py)."""

from __future__ import annotations

from typing import Any

from pymongo.errors import DuplicateKeyError

from .leases import LeaseRecord
from .mongo_connect import retry


class MongoLeases:
    """Leases of :class:`~dnnframe.store.mongodb.MongoStore`: a conditional upsert on the
    lease's ``_id``; when another live owner holds it the filter misses and the insert the
    upsert falls back to fails on the unique ``_id``."""

    _db: Any
    url: str

    @retry
    def _acquire_lease(self, name: str, owner: str, at: float, expires_at: float) -> bool:
        try:
            self._db.leases.update_one(
                {"_id": name, "$or": [{"owner": owner}, {"expires_at": {"$lte": at}}]},
                {"$set": {"owner": owner, "expires_at": expires_at}},
                upsert=True,
            )
        except DuplicateKeyError:
            return False
        return True

    @retry
    def _release_lease(self, name: str, owner: str) -> bool:
        return self._db.leases.delete_one({"_id": name, "owner": owner}).deleted_count > 0

    @retry
    def _list_leases(self, prefix: str) -> list[LeaseRecord]:
        docs = self._db.leases.find({"_id": {"$gte": prefix}}) if prefix else self._db.leases.find()
        return [
            LeaseRecord(d["_id"], d["owner"], d["expires_at"])
            for d in docs
            if d["_id"].startswith(prefix)
        ]
