"""The dnnframe web application: REST API (``/api/v1``) and live dashboard pages.

``flask --app dashboard run`` and ``dnnframe serve`` start it. Configuration is layered:
built-in defaults, then ``DNNFRAME_*`` environment variables (``DNNFRAME_STORE_URL`` →
``STORE_URL``), then ``test_config`` — the last so a test is never changed by the shell it
runs in.
"""

from __future__ import annotations

import atexit
import secrets
import threading
from typing import Any

from flask import Flask, current_app

from dnnframe import __version__, settings

DEFAULTS: dict[str, Any] = {
    "STORE_URL": None,            # None → open_store's default (sqlite:///dnnframe.db)
    "BROKER_URL": None,           # None → LocalExecutor process pool on this machine
    "WORKERS": None,              # local pool size (None → the executor's default)
    "API_TOKEN": None,            # when set, write endpoints need "Authorization: Bearer <token>"
    "FLOWER_URL": None,
    "RABBITMQ_UI_URL": None,
    "MAX_CONTENT_LENGTH": 8 * 1024 * 1024,  # request bodies (specs and CSV uploads)
    "MAX_UPLOAD_BYTES": None,     # CSV uploads (None → MAX_CONTENT_LENGTH)
    "MAX_TRIALS": 10_000,         # sweeps larger than this are refused before anything is stored
    "MAX_DATASET_CELLS": 20_000_000,  # generated datasets a web request may ask for (rows x features)
    "EXECUTOR": None,             # an Executor instance to use instead of make_executor (embedding)
    "CELERY_INSPECT_TIMEOUT": 1.0,
    "SESSION_COOKIE_SAMESITE": "Lax",  # with the CSRF token: cross-site form posts carry no session
}

def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the Flask application (API + UI blueprints, one JSON error handler)."""
    app = Flask(__name__)
    app.config.from_mapping(DEFAULTS)
    app.config.from_prefixed_env("DNNFRAME")
    app.config.from_mapping(settings.get().dashboard_config())  # typed: a token stays a string
    if test_config:
        app.config.from_mapping(test_config)
    if not app.config.get("SECRET_KEY"):
        # Only signs the session that carries the CSRF token; a per-process key is enough
        # for one server, set DNNFRAME_SECRET_KEY when running several behind a balancer.
        app.config["SECRET_KEY"] = secrets.token_hex(32)
    app.config["VERSION"] = __version__

    from .api import bp as api_bp
    from .errors import register_error_handlers
    from .ui import bp as ui_bp

    app.register_blueprint(api_bp)
    app.register_blueprint(ui_bp)
    register_error_handlers(app)
    app.extensions["dnnframe"] = Services(app)

    @app.after_request
    def _security_headers(response):  # type: ignore[no-untyped-def]
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        return response

    return app


class Services:
    """The store and executor one app uses, opened on first use (so importing is cheap)."""

    def __init__(self, app: Flask):
        self.config = app.config
        self._lock = threading.Lock()
        self._store = None
        self._executor = app.config.get("EXECUTOR")
        self._owns_executor = False

    @property
    def store(self):  # -> ResultStore
        if self._store is None:
            with self._lock:
                if self._store is None:
                    from dnnframe.store import open_store

                    self._store = open_store(self.config.get("STORE_URL"))
        return self._store

    def store_url(self) -> str | None:
        return self.config.get("STORE_URL")

    @property
    def executor(self):  # -> Executor
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    from dnnframe.executors import make_executor

                    url = self.config.get("STORE_URL")  # None → the executor's default
                    workers = self.config.get("WORKERS")
                    self._executor = make_executor(url, broker_url=self.config.get("BROKER_URL"),
                                                   workers=int(workers) if workers else None)
                    self._owns_executor = True
                    # the local pool's worker processes must not outlive the server
                    atexit.register(self.shutdown)
        return self._executor

    @property
    def has_executor(self) -> bool:
        return self._executor is not None

    def shutdown(self) -> None:
        """Stop the executor this app created (not one it was given) and close the store."""
        with self._lock:
            if self._executor is not None and self._owns_executor:
                self._executor.shutdown(wait=False)
                self._executor = None
            if self._store is not None:
                self._store.close()
                self._store = None


def services() -> Services:
    """The current app's :class:`Services`."""
    return current_app.extensions["dnnframe"]
