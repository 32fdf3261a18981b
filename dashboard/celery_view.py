"""The dashboard's view of the Celery workers on its broker: what they run now, and those
that serve another store (they would leave this store's packs on the queue). A broker that
is down or slow never breaks a page: each answer is bounded by a timeout."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from dnnframe.executors.liveness import live_nodes, store_label
from dnnframe.extras import require

if TYPE_CHECKING:
    from .responses import CeleryView, WrongStore


def wrong_store(broker: str, timeout: float, store: Any, store_url: str | None) -> list[WrongStore]:
    """Workers on the broker that serve another store than this dashboard's (they name it,
    and have not registered in this one): they leave this store's packs on the queue."""
    mine = store_label(store_url)
    registered = {w.name for w in live_nodes(store)}
    try:
        replies = celery_app(broker).control.broadcast(
            "dnnframe_store", reply=True, timeout=timeout
        )
    except Exception:  # noqa: BLE001 - a broker hiccup must not break the page
        return []
    wrong: list[WrongStore] = []
    for reply in replies or []:
        for node, answer in reply.items():
            theirs = answer.get("store") if isinstance(answer, dict) else None
            if theirs and theirs != mine and node not in registered:
                wrong.append(
                    {
                        "node": node,
                        "store": theirs,
                        "message": (
                            f"{node} uses the store {theirs}, not this dashboard's {mine}: it takes "
                            "none of these sweeps' packs; give it the same DNNFRAME_STORE_URL"
                        ),
                    }
                )
    return sorted(wrong, key=lambda w: w["node"])


@functools.lru_cache(maxsize=4)
def celery_app(broker: str) -> Any:
    # one client app per broker, so its connection pool is reused across requests
    celery = require("celery", "celery", "the dashboard's view of the Celery workers")
    app = celery.Celery("dnnframe-dashboard", broker=broker)
    # a page must not hang on a broker that is down: fail fast instead of retrying
    app.conf.broker_connection_timeout = 1.0
    app.conf.broker_connection_max_retries = 1
    app.conf.broker_transport_options = {
        "max_retries": 1,
        "interval_start": 0,
        "interval_step": 0.2,
    }
    return app


def celery_inspect(broker: str, timeout: float) -> CeleryView:
    try:
        inspect = celery_app(broker).control.inspect(timeout=timeout)
        active = inspect.active() or {}
        return {
            "ok": True,
            "workers": sorted(active),
            "active": {name: [t.get("args") for t in tasks] for name, tasks in active.items()},
        }
    except Exception as exc:  # noqa: BLE001 - a broker hiccup must not break the page
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
