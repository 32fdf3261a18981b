"""Helpers for the store tests. One contract suite, every backend: a real SQLite file, mongomock, and a real MongoDB server
whenever DNNFRAME_TEST_MONGODB_URL is set (no MongoDB server can be installed here)."""

from __future__ import annotations

import os
import uuid

MONGODB_URL = os.environ.get("DNNFRAME_TEST_MONGODB_URL")
# The real-server case joins the suite only when a server is configured;
# test_store_mongodb.py::test_real_mongodb_server says once, explicitly, when it is not.
BACKENDS = ["sqlite", "mongomock"] + (["mongodb"] if MONGODB_URL else [])


def store_url(backend: str, tmp_path) -> str:
    """A fresh, empty store URL for ``backend``."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    db = f"dnnframe_test_{uuid.uuid4().hex[:12]}"
    if backend == "mongomock":
        return f"mongomock://localhost/{db}"
    assert MONGODB_URL, "backend 'mongodb' needs DNNFRAME_TEST_MONGODB_URL"
    return MONGODB_URL.rstrip("/") + "/" + db


