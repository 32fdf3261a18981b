"""Who may write, and from where: allowed hosts, the API token, same-site checks, CSRF tokens.

Reads are public. Writes need ``Authorization: Bearer <DNNFRAME_API_TOKEN>`` when a token is
set; without one, a browser write must come from this site and a non-JSON body must echo the
session's CSRF token. Every request must name an allowed host, so a page served from another
name that resolves to this server (DNS rebinding) gets nothing from it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import math
import re
import secrets
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, g, request, session
from limits import RateLimitItem, parse
from limits.errors import ConfigurationError
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from dnnframe.exceptions import brief
from dnnframe.settings import SettingsError

from .errors import APIError
from .headers import SECONDS, Header

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# Binding one of these listens on every interface; it is not a name a browser uses.
WILDCARD_ADDRESSES = ("0.0.0.0", "::")


# --------------------------------------------------------------------------- allowed hosts
def default_allowed_hosts(bind_hosts: str | None = None) -> list[str]:
    """The bound addresses (a comma list) and this machine's local names.

    A wildcard bind adds the machine's host names (a container's name, say); any other name
    a server is reached by goes into ``DNNFRAME_ALLOWED_HOSTS``.
    """
    hosts = list(LOCAL_HOSTS)
    for bound in (bind_hosts or "").split(","):
        bound = bound.strip().strip("[]")
        if not bound:
            continue
        if bound in WILDCARD_ADDRESSES:
            hosts += [socket.gethostname(), socket.getfqdn()]
        else:
            hosts.append(bound)
    return list(dict.fromkeys(h.lower() for h in hosts if h))


def parse_hosts(value: str | Iterable[str] | None) -> list[str]:
    """``"a, b"`` or ``["a", "b"]`` → lower-case host names; ``*`` allows any host."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(h).strip().strip("[]").lower() for h in items if str(h).strip()]


def request_hostname(host_header: str) -> str | None:
    """The host name of a Host header (``[::1]:5000`` → ``::1``), None when malformed."""
    try:
        return urlsplit("//" + host_header).hostname
    except ValueError:
        return None


def check_allowed_host() -> None:
    """Refuse a request whose Host header names a host this server does not answer to."""
    allowed = current_app.config["ALLOWED_HOSTS"]
    if "*" in allowed:
        return
    name = request_hostname(request.host)
    if name is None or name.rstrip(".") not in allowed:
        raise APIError(
            400,
            f"the Host header names {brief(request.host)}, which this server does "
            f"not answer to (allowed: {', '.join(allowed)}); add it to "
            "DNNFRAME_ALLOWED_HOSTS if it is yours",
            [{"path": "Host", "message": "not an allowed host"}],
        )


# --------------------------------------------------------------------------- every response
# what every response says besides its content (the API document declares them on each)
EVERY_RESPONSE = (
    Header(
        "X-Content-Type-Options",
        "the browser takes the Content-Type as given, never guessing another from the body",
        value="nosniff",
    ),
    Header(
        "X-Frame-Options",
        "no page, this site's included, may show this one in a frame",
        value="DENY",
    ),
)


def every_response_headers(response: Response) -> Response:
    """Give a response the headers of :data:`EVERY_RESPONSE` and, for an HTML page, its
    Content-Security-Policy (after the request)."""
    for header in EVERY_RESPONSE:
        for name, value in header.pair().items():
            response.headers.setdefault(name, value)
    return content_security_policy(response)


# --------------------------------------------------------------------------- page policy
# No page builds code from strings ('unsafe-eval'): plotly draws only SVG charts (its WebGL
# ones would need it), and scripts injected into a page stay blocked: only this site's files
# and scripts carrying the response's nonce run.


def csp_nonce() -> str:
    """This response's nonce: an inline ``<script nonce="...">`` of a template runs."""
    if "csp_nonce" not in g:
        g.csp_nonce = secrets.token_urlsafe(16)
    return g.csp_nonce


def content_security_policy(response: Response) -> Response:
    """Give an HTML page its Content-Security-Policy (after the request)."""
    if response.mimetype != "text/html":
        return response
    scripts = f"'self' 'nonce-{csp_nonce()}'"
    response.headers.setdefault(
        "Content-Security-Policy",
        "; ".join(
            [
                "default-src 'self'",
                f"script-src {scripts}",
                "style-src 'self' 'unsafe-inline'",  # plotly styles its charts inline
                "img-src 'self' data: blob:",
                "font-src 'self' data:",
                "connect-src 'self'",
                "object-src 'none'",
                "base-uri 'none'",
                "form-action 'self'",
                "frame-ancestors 'none'",
            ]
        ),
    )
    return response


# --------------------------------------------------------------------------- redirects
# A path on this site: one leading slash, then no second slash or backslash (browsers read
# "//x" and "/\\x" as another host), and no whitespace or control character (browsers drop
# tabs and newlines from a URL, so "/\t/evil.example" becomes "//evil.example").
_LOCAL_PATH = re.compile(r"/(?![/\\])[^\\\s\x00-\x1f\x7f]*")


def local_path(url: str | None) -> str | None:
    """``url`` when it is a path on this site (safe to redirect to), else None."""
    if not url or not _LOCAL_PATH.fullmatch(url):
        return None
    parts = urlsplit(url)
    return url if not parts.scheme and not parts.netloc else None


# --------------------------------------------------------------------------- secrets
def same_secret(given: object, expected: object) -> bool:
    """Compare a secret the client sent with ours in constant time (never leak by timing)."""
    return bool(expected) and hmac.compare_digest(str(given).encode(), str(expected).encode())


def csrf_token() -> str:
    """The session's CSRF token (created on first use)."""
    token = session.get("csrf")
    if not token:
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def csrf_given_matches() -> bool:
    """True when the request echoes the session's CSRF token (form field or header)."""
    given = request.headers.get("X-CSRF-Token") or request.form.get("csrf_token") or ""
    return same_secret(given, session.get("csrf") or "")


def token_digest(token: str) -> str:
    """A keyed hash of an API token, kept in the session instead of a bare "signed in" flag.

    Comparing it with the current token's digest on every write means changing
    DNNFRAME_API_TOKEN signs every browser out. Keyed with SECRET_KEY because the session
    cookie is signed, not encrypted: a plain hash would let its holder guess a weak token offline.
    """
    key = current_app.config["SECRET_KEY"]
    key = key if isinstance(key, bytes) else str(key).encode()
    return hmac.new(key, b"dnnframe-api-token:" + token.encode(), hashlib.sha256).hexdigest()


def session_signed_in() -> bool:
    """True when this browser session gave the server's current API token at /login."""
    expected = current_app.config.get("API_TOKEN")
    given = session.get("token_hash")
    if not expected or not isinstance(given, str):
        return False
    return same_secret(given, token_digest(str(expected)))


# --------------------------------------------------------------------------- token guessing
THROTTLED = Header(
    "Retry-After",
    "seconds until the oldest wrong token of this client leaves the window, and it may try again",
    schema=SECONDS,
)


class GuessThrottle:
    """Wrong API tokens per client (its address), over a moving window: a client past the
    limit is refused (429 with Retry-After) before its token is even compared, whichever
    token it sends, until its oldest wrong guess leaves the window. Other clients, the one
    holding the right token among them, are not affected. Counts are kept in ``storage``
    (a ``limits`` storage URI): ``memory://`` per server process (each gunicorn worker
    allows the limit), ``redis://…`` shared by every process that names it."""

    def __init__(self, limit: str, storage: str):
        self._limit: RateLimitItem = parse(limit)
        try:
            backend = storage_from_string(storage)
        except ConfigurationError as exc:
            hint = (
                " (redis:// needs the redis package: pip install 'dnnframe[redis]')"
                if storage.startswith("redis")
                else ""
            )
            raise SettingsError(
                f"DNNFRAME_TOKEN_GUESS_STORAGE={brief(storage)}: {exc}{hint}"
            ) from None
        self._limiter = MovingWindowRateLimiter(backend)

    @staticmethod
    def of(app: Flask) -> GuessThrottle:
        return app.extensions["dnnframe_token_guesses"]

    def check(self, client: str) -> None:
        """Raise 429 when ``client`` has made too many wrong guesses lately."""
        if self._limiter.test(self._limit, client):
            return
        reset_at, _ = self._limiter.get_window_stats(self._limit, client)
        wait = max(1, math.ceil(reset_at - time.time()))
        raise APIError(
            429,
            f"too many wrong API tokens from this client: try again in {wait} s",
            headers=THROTTLED.pair(str(wait)),
        )

    def wrong(self, client: str) -> None:
        """Count one wrong guess from ``client``."""
        self._limiter.hit(self._limit, client)


def install_guess_throttle(app: Flask) -> None:
    app.extensions["dnnframe_token_guesses"] = GuessThrottle(
        app.config["TOKEN_GUESS_LIMIT"], app.config["TOKEN_GUESS_STORAGE"]
    )


def check_token_guess(given: str, expected: str) -> bool:
    """Compare a token a client sent with ours, throttled per client (see GuessThrottle)."""
    throttle = GuessThrottle.of(current_app)
    client = request.remote_addr or "unknown"
    throttle.check(client)
    if same_secret(given, expected):
        return True
    throttle.wrong(client)
    return False


def may_see_details() -> bool:
    """Whether this client may read what is wrong inside the server (store URLs, driver
    reports): the API token's holder (bearer token or signed-in session) when a token is
    set; without one, a client on this machine only."""
    expected = current_app.config.get("API_TOKEN")
    if not expected:
        return request.remote_addr in LOCAL_HOSTS
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and given:
        try:
            return check_token_guess(given.strip(), str(expected))
        except APIError:  # throttled: this answer is already an error; just no details
            return False
    return session_signed_in()


# --------------------------------------------------------------------------- the API token
# the attribute require_token sets on the views it guards
TOKEN_GUARD = "requires_token"
CHALLENGE = Header(
    "WWW-Authenticate", "how to authenticate: a bearer token", value='Bearer realm="dnnframe"'
)


def require_token(
    view: Callable[..., Any] | None = None, *, json_only: bool = False, allow_session: bool = False
) -> Callable[..., Any]:
    """Guard a write endpoint: the bearer token when one is set, same-site checks otherwise.

    Without a configured token a browser could still be made to write from another site
    (cookies play no part, so SameSite does not help), so such requests must come from this
    site (Origin/Referer) and a body a cross-site form can send must carry the session's
    CSRF token; JSON bodies need no token (a cross-site page cannot send one without CORS).
    ``json_only`` endpoints refuse any other body themselves, with a clearer 400.
    ``allow_session`` also lets a dashboard session that signed in (plus its CSRF token)
    through, for endpoints the pages call.
    """
    if view is None:
        return functools.partial(require_token, json_only=json_only, allow_session=allow_session)

    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        expected = current_app.config.get("API_TOKEN")
        if not expected:
            check_same_site(check_body=not json_only)
        elif not (
            allow_session
            and "Authorization" not in request.headers
            and session_signed_in()
            and csrf_given_matches()
        ):
            _check_bearer(str(expected))
        return view(*args, **kwargs)

    # the API document reads this: a guarded write says it takes the bearer token
    setattr(wrapped, TOKEN_GUARD, True)
    return wrapped


def _check_bearer(expected: str) -> None:
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    challenge = CHALLENGE.pair()
    if scheme.lower() != "bearer" or not given:
        raise APIError(
            401,
            "this endpoint needs an API token: send 'Authorization: Bearer <token>'",
            headers=challenge,
        )
    if not check_token_guess(given.strip(), expected):
        raise APIError(401, "the API token is wrong", headers=challenge)


def _netloc(url: str) -> tuple[str, int] | None:
    """(host, port) of an absolute http(s) URL, or None when it is not one (e.g. Origin: null)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def _same_host(url: str) -> bool:
    origin = _netloc(url)
    if origin is None:
        return False
    # request.host omits a default port; take the origin's scheme for it (a TLS proxy in
    # front makes request.scheme "http" while the browser's origin is https)
    scheme = url.split(":", 1)[0].lower()
    return _netloc(f"{scheme}://{request.host}") == origin


def check_same_site(check_body: bool = True) -> None:
    """Refuse a write that a browser sent from another site (unauthenticated API only).

    Browsers send Origin on every cross-origin POST (Referer when an old one does not), so
    a header naming another host (or ``Origin: null``) is refused. Clients such as curl send
    neither and pass: ``curl -F file=@data.csv …/datasets`` works on a token-less server.
    A browser request from this site with a body other than JSON must also echo the
    session's CSRF token, as the dashboard's own forms do.
    """
    origin = request.headers.get("Origin")
    header, value = (
        ("Origin", origin) if origin is not None else ("Referer", request.headers.get("Referer"))
    )
    if value is not None and not _same_host(value):
        raise APIError(
            403,
            f"cross-site request refused: the {header} header ({brief(value)}) "
            f"names another site than this server ({brief(request.host)})",
            [{"path": header, "message": "must name this server"}],
        )
    has_body = bool(request.content_length) or bool(request.mimetype)
    if not check_body or value is None or request.is_json or not has_body:
        return
    if not csrf_given_matches():
        raise APIError(
            403,
            f"a {request.mimetype or 'non-JSON'} body needs the dashboard "
            "session's CSRF token (field csrf_token or header X-CSRF-Token) while "
            "no API token is configured; send JSON, or set DNNFRAME_API_TOKEN and "
            "send 'Authorization: Bearer <token>'",
            [{"path": "csrf_token", "message": "missing or stale"}],
        )
