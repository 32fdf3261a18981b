"""The REST API's reference page: Swagger UI over ``/api/v1/openapi.json``, its files served
from the flask-swagger-ui package (no CDN: the page works where the server has no internet
and the browser reaches only this site).

flask-swagger-ui's own blueprint renders an inline script without a nonce, which the
dashboard's Content-Security-Policy blocks; so only its files are used, with a page of ours
whose one inline script carries the response's nonce.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from flask import Blueprint, abort, render_template, send_from_directory, url_for

from .operations import outside_document
from .security import csp_nonce

bp = Blueprint("api_docs", __name__, url_prefix="/api/docs")

# the files the page loads; nothing else of the package's folder is served
ASSETS = frozenset(
    {
        "swagger-ui.css",
        "index.css",
        "swagger-ui-bundle.js",
        "swagger-ui-standalone-preset.js",
        "favicon-32x32.png",
        "favicon-16x16.png",
    }
)


def _dist() -> str:
    return str(resources.files("flask_swagger_ui") / "dist")


@bp.get("/")
@outside_document("the page that shows the document, HTML")
def page() -> Any:
    """Swagger UI: every endpoint, its parameters and schemas, and "try it out"."""
    return render_template("api_docs.html", nonce=csp_nonce(), spec_url=url_for("api.openapi"))


@bp.get("/<name>")
@outside_document("the page's scripts, styles and icons")
def asset(name: str) -> Any:
    if name not in ASSETS:
        abort(404)
    return send_from_directory(_dist(), name, max_age=24 * 3600)
