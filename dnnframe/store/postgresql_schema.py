"""The PostgreSQL store's tables, as numbered migrations recorded in ``schema_version``.

A store is at version N when ``schema_version`` holds the rows 1..N. Opening a store applies
the migrations it lacks, in order, each in the transaction that records it, under an
advisory lock so two processes opening a new store at once do not both apply one. A store
at a version above the last one known here was written by a newer dnnframe and is refused.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import SchemaVersionError, StoreCorruptError, StoreError
from .base import now

# Any constant, the same in every dnnframe: the migrating opener holds it (per database).
_MIGRATION_LOCK = 0x646E6E66

# Ids and names are compared and sorted byte-wise (COLLATE "C"), as SQLite and MongoDB do,
# whatever the database's locale. ``ord`` numbers rows in creation order (the tie-break of
# every listing); ``seq`` is the change cursor (see postgresql.py).
MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
CREATE TABLE experiments (
    id TEXT COLLATE "C" PRIMARY KEY, name TEXT NOT NULL, spec JSONB NOT NULL,
    n_trials INTEGER NOT NULL, created_at DOUBLE PRECISION NOT NULL,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE, ord BIGSERIAL NOT NULL);
CREATE TABLE trials (
    id TEXT COLLATE "C" PRIMARY KEY, state TEXT COLLATE "C" NOT NULL, config JSONB NOT NULL,
    result JSONB, metrics JSONB NOT NULL DEFAULT '[]', error TEXT, worker TEXT COLLATE "C",
    attempts INTEGER NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION, finished_at DOUBLE PRECISION,
    heartbeat_at DOUBLE PRECISION, seq BIGINT NOT NULL, ord BIGSERIAL NOT NULL);
CREATE INDEX trials_seq ON trials (seq);
CREATE INDEX trials_state ON trials (state, heartbeat_at);
CREATE INDEX trials_created ON trials (created_at, ord);
CREATE TABLE experiment_trials (
    experiment_id TEXT COLLATE "C" NOT NULL REFERENCES experiments(id),
    trial_id TEXT COLLATE "C" NOT NULL REFERENCES trials(id),
    PRIMARY KEY (experiment_id, trial_id));
CREATE INDEX experiment_trials_trial ON experiment_trials (trial_id, experiment_id);
CREATE TABLE change_counter (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), value BIGINT NOT NULL);
INSERT INTO change_counter (value) VALUES (0);
CREATE TABLE workers (
    name TEXT COLLATE "C" PRIMARY KEY, host TEXT, pid INTEGER, current_trial TEXT,
    trials_done INTEGER NOT NULL DEFAULT 0, last_seen DOUBLE PRECISION NOT NULL,
    info JSONB NOT NULL DEFAULT '{}');
CREATE TABLE held_dispatch (
    trial_id TEXT COLLATE "C" PRIMARY KEY, queue TEXT NOT NULL,
    held_at DOUBLE PRECISION NOT NULL, ord BIGSERIAL NOT NULL);
CREATE TABLE applied_ops (
    op TEXT PRIMARY KEY, answer JSONB, at DOUBLE PRECISION NOT NULL);
CREATE INDEX applied_ops_at ON applied_ops (at);
""",
    ),
    (
        2,
        """
CREATE TABLE leases (
    name TEXT COLLATE "C" PRIMARY KEY, owner TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL);
""",
    ),
    # notes go with what they are about (notes.py)
    (
        3,
        """
CREATE TABLE experiment_notes (
    experiment_id TEXT COLLATE "C" PRIMARY KEY REFERENCES experiments(id) ON DELETE CASCADE,
    text TEXT NOT NULL, version BIGINT NOT NULL, updated_at DOUBLE PRECISION NOT NULL);
CREATE TABLE trial_notes (
    trial_id TEXT COLLATE "C" PRIMARY KEY REFERENCES trials(id) ON DELETE CASCADE,
    text TEXT NOT NULL, version BIGINT NOT NULL, updated_at DOUBLE PRECISION NOT NULL);
""",
    ),
]
TABLES = (
    "schema_version",
    "experiments",
    "trials",
    "experiment_trials",
    "change_counter",
    "workers",
    "held_dispatch",
    "applied_ops",
    "leases",
    "experiment_notes",
    "trial_notes",
)


def latest_version() -> int:
    return MIGRATIONS[-1][0]


def migrate(conn: Any, where: str, create: bool) -> int:
    """Bring the store in ``conn``'s current schema up to the latest version (committed).

    Returns the version it is at. Raises StoreError (nothing there and not ``create``),
    StoreCorruptError (other tables and no ``schema_version``: left untouched) or
    SchemaVersionError (a newer dnnframe's store).
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        }
        if "schema_version" not in tables:
            if not create:
                raise StoreError(
                    f"no store at {where!r}: the database holds no dnnframe "
                    "tables (nothing has been run with this store yet?)"
                )
            if tables:
                raise StoreCorruptError(
                    f"store {where!r}: the database holds other tables "
                    f"({', '.join(sorted(tables))}) and no dnnframe schema_version table; it "
                    "was left untouched. Name another database in the URL."
                )
            conn.execute(
                "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, "
                "applied_at DOUBLE PRECISION NOT NULL)"
            )
        version = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]
        if version > latest_version():
            raise SchemaVersionError(
                f"store {where!r} has schema version {version}, written by a newer dnnframe; "
                f"this dnnframe reads up to version {latest_version()}. Upgrade dnnframe "
                "(pip install -U dnnframe) to open it."
            )
        for number, sql in MIGRATIONS:
            if number > version:
                conn.execute(sql)
                conn.execute("INSERT INTO schema_version VALUES (%s, %s)", (number, now()))
                version = number
    return version
