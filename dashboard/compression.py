"""Compressed responses, for every client that accepts them: the API's JSON (an experiment's
trials with their histories run to hundreds of KB) and the pages. Flask-Compress picks the
encoding from the client's Accept-Encoding (zstd, brotli or gzip) and sets ``Vary:
Accept-Encoding``. The static files and plotly.js are not its: they are compressed once, at
the best level, by assets.py, and come with their Content-Encoding already set, which
Flask-Compress leaves as it is.

Server-sent events are never compressed: a compressor holds bytes back until it has enough,
and a live stream must reach the browser one event at a time. ``text/event-stream`` is not
among the types compressed, so an event stream passes through as the view wrote it.
"""

from __future__ import annotations

from flask import Flask
from flask_compress import Compress

# the types worth compressing; text/event-stream must never be one (see above)
MIMETYPES = [
    "text/html",
    "text/css",
    "text/javascript",
    "application/javascript",
    "application/json",
    "image/svg+xml",
    "text/plain",
]

# Files sent as streams (send_file: the API docs' Swagger UI files) are compressed as they
# stream, gzip among the encodings so a gzip-only client gets them compressed too. Their
# endpoints answer a revalidation with 304 against the compressed ETag.
STREAMED_ALGORITHMS = ["zstd", "br", "gzip"]
CONDITIONAL_ENDPOINTS = ["api_docs.asset"]


def install_compression(app: Flask) -> None:
    """Compress ``app``'s responses (its configuration may set any ``COMPRESS_*`` first)."""
    app.config.setdefault("COMPRESS_MIMETYPES", MIMETYPES)
    app.config.setdefault("COMPRESS_ALGORITHM_STREAMING", STREAMED_ALGORITHMS)
    app.config.setdefault("COMPRESS_STREAMING_ENDPOINT_CONDITIONAL", CONDITIONAL_ENDPOINTS)
    if "text/event-stream" in app.config["COMPRESS_MIMETYPES"]:
        raise ValueError(
            "COMPRESS_MIMETYPES must not hold text/event-stream: a compressed "
            "event stream holds events back instead of sending each at once"
        )
    Compress(app)
