"""The WSGI entry point for production servers.

``gunicorn -c python:dashboard.gunicorn_config dashboard.wsgi:app`` (what
``dnnframe serve --production`` runs) serves the dashboard with several worker processes. One of them resumes the search
drivers a previous server left unfinished.
"""

from __future__ import annotations

from dashboard import create_app

app = create_app()
app.extensions["dnnframe"].resume_search()
