"""The dashboard as a WSGI application for production servers (``gunicorn dashboard.wsgi:app``)."""

from dashboard import create_app

app = create_app()
