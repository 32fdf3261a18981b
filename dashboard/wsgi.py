"""The WSGI entry point for production servers.

``gunicorn -c python:dashboard.gunicorn_config dashboard.wsgi:app`` (what
``dnnframe serve --production`` runs) serves the dashboard with several worker processes;
the gunicorn master also runs the driver service (see dashboard/gunicorn_config.py).
"""

from __future__ import annotations

from dashboard import create_app

app = create_app()
