"""The WSGI entry point for production servers.

``gunicorn -c python:dashboard.gunicorn_config dashboard.wsgi:app`` (what
``dnnframe serve --production`` runs) serves the dashboard with several worker processes.
"""

from __future__ import annotations

from dashboard import create_app

app = create_app()
