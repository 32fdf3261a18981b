"""The dashboard's one API error type and the one handler that turns errors into JSON.

Views raise :class:`APIError` (or let a ``SpecError``/``DatasetError``/``NotFoundError`` or an
HTTP exception escape); they never build error JSON by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, current_app, jsonify, render_template, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from dnnframe.exceptions import (
    BrokerUnavailableError,
    DatasetError,
    NotFoundError,
    SpecError,
    StoreError,
)

from .headers import SECONDS, Header

if TYPE_CHECKING:
    from .responses import Error


# sent with a 503 when waiting helps: a broker that is down, event streams all taken
RETRY_LATER = Header(
    "Retry-After",
    "when waiting helps (the message broker is down, or the "
    "server streams to as many pages as it may): seconds to wait before "
    "trying again",
    required=False,
    schema=SECONDS,
)
BROKER_RETRY_SECONDS = "30"


class APIError(Exception):
    """An error answered as JSON: ``{"status", "error", "message", "errors"?}``.

    ``errors`` lists field problems as ``{"path": "model.width", "message": ...}`` so a
    client (or the sweep form) can show each one next to its field.
    """

    def __init__(
        self,
        status: int,
        message: str,
        errors: list[dict[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        details: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}
        # what went wrong inside (a store URL, a driver's report): logged, and shown only
        # to a client allowed to see it (see register_error_handlers)
        self.details = details

    def to_dict(self) -> Error:
        """The JSON body of the error response."""
        try:
            phrase = HTTPStatus(self.status).phrase
        except ValueError:
            phrase = "Error"
        body: Error = {
            "status": self.status,
            "error": phrase,
            "message": _cut(self.message, MAX_MESSAGE),
        }
        if self.errors is not None:
            body["errors"] = [
                {
                    "path": _cut(str(e["path"]), MAX_FIELD_MESSAGE),
                    "message": _cut(str(e["message"]), MAX_FIELD_MESSAGE),
                }
                for e in self.errors
            ]
        return body


# Refusals stay short whatever was sent: messages quote values briefly at their source;
# these bounds catch any message that still grew with the input.
MAX_MESSAGE = 2000
MAX_FIELD_MESSAGE = 400


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


# Page endpoints that scripts call with fetch(): their errors are JSON whatever Accept says,
# so the page can show the server's message instead of failing to parse an HTML page.
JSON_ENDPOINTS = {"ui.upload"}


def _wants_json() -> bool:
    # API paths always answer JSON; pages answer JSON only when the client asks for it.
    if request.path.startswith("/api/") or request.endpoint in JSON_ENDPOINTS:
        return True
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json"


def to_api_error(exc: BaseException) -> APIError:
    """Map any error the views let escape onto an :class:`APIError`."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, SpecError):
        return APIError(
            400,
            "the spec is invalid: "
            + "; ".join(f"{e['path'] or '<root>'}: {e['message']}" for e in exc.errors),
            exc.errors,
        )
    if isinstance(exc, DatasetError):
        return APIError(400, str(exc), [{"path": "dataset", "message": str(exc)}])
    if isinstance(exc, NotFoundError):
        # the store names its own location after "not found in": not the client's business
        what = str(exc).partition(" not found in ")[0]
        return APIError(404, what if what == str(exc) else f"{what} not found")
    if isinstance(exc, StoreError):
        return APIError(503, "the result store is unavailable", details=str(exc))
    if isinstance(exc, BrokerUnavailableError):
        return APIError(
            503,
            "the message broker is unavailable; the trials are stored and "
            "will be sent when it is back",
            headers=RETRY_LATER.pair(BROKER_RETRY_SECONDS),
            details=str(exc),
        )
    if isinstance(exc, HTTPException):
        headers = {}
        if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
            headers["Allow"] = ", ".join(exc.valid_methods)
        message = exc.description or exc.name
        if exc.code == 413:
            limit = _content_limit()
            message = f"the request body is larger than the limit of {limit} bytes"
        return APIError(exc.code or 500, message, headers=headers)
    return APIError(500, "internal server error (the details are in the server log)")


def _content_limit() -> int | None:
    return current_app.config.get("MAX_CONTENT_LENGTH")


def register_error_handlers(app: Flask, may_see_details: Callable[[], bool]) -> None:
    """Install the one handler: JSON for the API, a plain page for browsers.

    An error's ``details`` (what is wrong inside: a store URL, a driver's report) always go
    to the log, and into the answer only when ``may_see_details()`` says this client may
    see them; everyone else gets the public message.
    """

    @app.errorhandler(Exception)
    def handle(exc: Exception) -> Response | tuple[Any, int]:
        error = to_api_error(exc)
        if error.status >= 500 and error.details is None:
            app.logger.exception(
                "unhandled error on %s %s", request.method, request.path, exc_info=exc
            )
        if error.details is not None:
            app.logger.warning(
                "%s %s: %s: %s", request.method, request.path, error.message, error.details
            )
            if may_see_details():
                error.message = f"{error.message}: {error.details}"
            else:
                error.message += " (the details are in the server log)"
        if _wants_json():
            response = jsonify(error.to_dict())
        else:
            response = app.make_response(render_template("error.html", error=error))
        response.status_code = error.status
        for key, value in error.headers.items():
            response.headers[key] = value
        return response
