"""The WSGI entry point for production servers.

``gunicorn -c python:dashboard.gunicorn_config dashboard.wsgi:app`` (what
``dnnframe serve --production`` runs) serves the dashboard with several worker processes;
the gunicorn master also runs the driver service (see dashboard/gunicorn_config.py). Without a
broker that service's process pool trains every trial: the web workers hand trials to it
through the store rather than each starting a pool of its own.
"""

from __future__ import annotations

from dashboard import create_app

app = create_app({"LOCAL_POOL": "service"})
