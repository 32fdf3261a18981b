"""Flower's ``/metrics`` behind the same login as its pages and API.

Flower 2 serves its Prometheus metrics (worker names, task names and counts) to anyone,
even with ``FLOWER_BASIC_AUTH`` set. When the Celery command line has loaded Flower (as
``celery -A tasks flower`` does before it imports this app), its metrics handler is given
the check every other Flower page has; a scraper then sends the login (Prometheus:
``basic_auth``). ``/healthcheck`` stays open for the container's healthcheck.
"""

from __future__ import annotations

import sys


def require_login_for_metrics() -> bool:
    """Wrap Flower's metrics handler in its login check, once; True if Flower is loaded."""
    monitor = sys.modules.get("flower.views.monitor")
    if monitor is None:
        return False
    # Flower's web framework, imported only where Flower is (it is an optional extra).
    from tornado import web

    handler = monitor.Metrics
    if not handler.__dict__.get("_dnnframe_login"):
        handler.get = web.authenticated(handler.get)
        handler._dnnframe_login = True
    return True
