"""The dnnframe web application: REST API (``/api/v1``) and live dashboard pages.

``flask --app dashboard run`` and ``dnnframe serve`` start it. Configuration is layered:
the app's own keys (``DEFAULTS``), then every setting it takes, set or default
(:class:`dnnframe.settings.Settings`, the one typed reading of the ``DNNFRAME_*`` environment
variables and the one home of their defaults: ``DNNFRAME_STORE_URL`` → ``STORE_URL``;
``settings`` given explicitly replaces that reading), then ``test_config`` — the last so a
test is never changed by the shell it runs in.
"""

from __future__ import annotations

import secrets
from typing import Any

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from dnnframe import __version__
from dnnframe.settings import Settings
from dnnframe.settings import get as get_settings

from . import api_events, api_notes  # noqa: F401  (their routes join the API's blueprint)
from .api import bp as api_bp
from .api_docs import bp as api_docs_bp
from .assets import install_assets
from .compression import install_compression
from .context import Services, services
from .errors import register_error_handlers
from .security import (
    check_allowed_host,
    default_allowed_hosts,
    every_response_headers,
    install_guess_throttle,
    may_see_details,
    parse_hosts,
)
from .ui import bp as ui_bp

__all__ = ["DEFAULTS", "Services", "create_app", "services"]

# The app's own keys, which are no setting; every setting's default, the dashboard's
# limits among them, is in dnnframe.settings.Settings (its dashboard_config gives them all).
DEFAULTS: dict[str, Any] = {
    "EXECUTOR": None,  # an Executor instance to use instead of make_executor (embedding)
    # without a broker, who trains: "here" (a process pool of this process) or "service" (the
    # one pool of the server's driver service, `dnnframe drive`, which dnnframe serve starts;
    # trials are handed to it through the store, so gunicorn's workers share one pool)
    "LOCAL_POOL": "here",
    "SESSION_COOKIE_SAMESITE": "Lax",  # with the CSRF token: cross-site form posts carry no session
}


def create_app(
    test_config: dict[str, Any] | None = None, settings: Settings | None = None
) -> Flask:
    """Build the Flask application (API + UI blueprints, one JSON error handler), configured
    by ``settings`` (default: as the environment says now) and then ``test_config``."""
    app = Flask(__name__)
    app.config.from_mapping(DEFAULTS)
    app.config.from_mapping((settings or get_settings()).dashboard_config())
    if test_config:
        app.config.from_mapping(test_config)
    if not app.config.get("SECRET_KEY"):
        # One process (the laptop server) may draw its own key; gunicorn's configuration
        # draws one in its master for all its workers (dashboard/gunicorn_config.py).
        app.config["SECRET_KEY"] = secrets.token_hex(32)
    app.config["ALLOWED_HOSTS"] = parse_hosts(
        app.config.get("ALLOWED_HOSTS")
    ) or default_allowed_hosts(app.config.get("BIND_HOST"))
    app.config["VERSION"] = __version__

    proxies = int(app.config.get("TRUSTED_PROXIES") or 0)
    if proxies:
        # the client's address (token-guess throttle, "local client" checks), scheme and
        # host as the proxies saw them, from the last `proxies` hops of the headers only
        # (wrapping wsgi_app is how Flask's docs install middleware; mypy sees a method)
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app,
            x_for=proxies,
            x_proto=proxies,
            x_host=proxies,
            x_port=proxies,
        )
    app.register_blueprint(api_bp)
    app.register_blueprint(api_docs_bp)
    app.register_blueprint(ui_bp)
    register_error_handlers(app, may_see_details)
    install_guess_throttle(app)
    app.before_request(check_allowed_host)
    install_assets(app)
    install_compression(app)
    app.extensions["dnnframe"] = Services(app)
    app.after_request(every_response_headers)
    return app
