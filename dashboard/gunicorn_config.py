"""gunicorn settings for the dashboard.

``gunicorn -c python:dashboard.gunicorn_config dashboard.wsgi:app`` uses them.

Every value can still be overridden on gunicorn's command line or in ``GUNICORN_CMD_ARGS``.
Loaded in gunicorn's master process before any worker starts, which is what lets it give
every worker the same session key. The master also runs the driver service (``dnnframe
drive``: the search drivers of tpe/cmaes experiments) as a child it restarts if it dies, so
the web workers only submit and read.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import Any

from gunicorn.util import parse_address

from dnnframe import settings
from dnnframe.search.child import DriverChild

# Processes × threads: a request mostly waits on the store, so threads are cheap concurrency.
# Each open page's live-update stream holds a thread too: the streams get their own, so
# requests keep web_threads however many pages are open.
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "gthread"
threads = settings.get().web_threads + settings.get().event_streams
# SIGTERM: stop accepting, let requests in flight finish for up to graceful_timeout seconds.
graceful_timeout = 20
timeout = 60
accesslog = "-"  # stdout, one line per request
errorlog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms pid=%(p)s'
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

# Sessions (and the CSRF token in them) are signed with SECRET_KEY; a key drawn by each
# worker would make a session from one worker invalid on the next. Without
# DNNFRAME_SECRET_KEY the master draws one key for all its workers: sessions then last as
# long as this server (several servers behind a balancer must set the variable).
_DREW_KEY = not os.environ.get("DNNFRAME_SECRET_KEY")
if _DREW_KEY:
    os.environ["DNNFRAME_SECRET_KEY"] = secrets.token_hex(32)


def on_starting(server: Any) -> None:
    """Compress the static files and plotly.js at the best level before any worker starts
    (dashboard/assets.py; seconds the first time a plotly version is seen, then read back
    from the cache directory), so no worker spends a core on it while serving."""
    from dashboard.assets import precompress

    started = time.monotonic()
    files = precompress()
    server.log.info(
        "static files ready, compressed: %d in %.1f s", len(files), time.monotonic() - started
    )


def when_ready(server: Any) -> None:
    """Default the allowed hosts to the addresses gunicorn listens on and start the driver
    service's supervisor (both before any worker forks)."""
    if _DREW_KEY:
        server.log.info(
            "DNNFRAME_SECRET_KEY is not set: the workers share a key drawn at start-up; "
            "set it to keep sessions across restarts or several servers"
        )
    hosts = []
    for address in server.cfg.bind:
        parsed = parse_address(address)
        if isinstance(parsed, tuple):  # not a unix socket or a file descriptor
            hosts.append(str(parsed[0]))
    if hosts:
        os.environ.setdefault("DNNFRAME_BIND_HOST", ",".join(hosts))
    server.dnnframe_driver = DriverChild().start()


def on_exit(server: Any) -> None:
    """Stop the driver service with the server (it releases its leases as it stops)."""
    driver = getattr(server, "dnnframe_driver", None)
    if driver is not None:
        driver.stop()
