"""The static files and plotly.js, compressed once at the best level and cached by the browser.

plotly.min.js is 4.8 MB, and compressed as it streams it was most of an experiment page's
bytes (1.45 MB at zstd's fast level). Each file is compressed once instead: brotli at its
highest quality (1.11 MB for plotly.js; 8 s of one core, so plotly's copy is made in a
background thread while the first requests get a quick one, and kept on disk by content
for the next process), else gzip -9 for a client without brotli.

Every URL the pages build for these files carries the file's content hash (``?v=…``): a
response to that URL never changes, so the browser keeps it a year without asking again
(``immutable``), and a changed file gets a new URL. A request without the current hash
(an old page, a hand-typed URL) gets the file with ``no-cache``: the browser asks again
each time and gets 304 against the ETag, which names the content and the encoding.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import mimetypes
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import brotli
import plotly
from flask import Flask, Response, abort, request

from dashboard import plotly_bundle
from dnnframe import settings

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
# one year, the most RFC 9111 caches are asked to honour; the URL changes with the content
IMMUTABLE_MAX_AGE = 365 * 24 * 3600
# the best compression of a file larger than this takes seconds (plotly.js: 8 s): it is made
# in the background, and requests meanwhile get the quick one
BACKGROUND_BYTES = 512 * 1024
# bump to drop the copies on disk (their names hold it)
DISK_FORMAT = "1"
# a client's preference among these is ours: the smallest first
ENCODINGS = ("br", "gzip")


def _best(data: bytes, encoding: str) -> bytes:
    if encoding == "br":
        return brotli.compress(data, quality=11, lgwin=24)
    return gzip.compress(data, compresslevel=9, mtime=0)


def _quick(data: bytes, encoding: str) -> bytes:
    if encoding == "br":
        return brotli.compress(data, quality=5)
    return gzip.compress(data, compresslevel=6, mtime=0)


def cache_dir() -> Path:
    """``$DNNFRAME_CACHE_DIR/assets``, else ``$XDG_CACHE_HOME/dnnframe/assets`` (by default
    ``~/.cache/dnnframe/assets``): compressed copies, by content hash."""
    base = (settings.get().cache_dir or "").strip()
    if base:
        return Path(base) / "assets"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "dnnframe" / "assets"


def negotiate(accept_encoding: str) -> str | None:
    """The encoding to send for this Accept-Encoding header (None: as it is)."""
    accepted: dict[str, float] = {}
    for part in accept_encoding.split(","):
        name, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        accepted[name.strip().lower()] = q
    for encoding in ENCODINGS:
        if accepted.get(encoding, accepted.get("*", 0.0)) > 0:
            return encoding
    return None


@dataclass
class Asset:
    """One file as it was when read: its bytes, content hash and compressed copies."""

    path: Path
    mtime_ns: int
    data: bytes
    digest: str
    mimetype: str
    best: dict[str, bytes] = field(default_factory=dict)
    quick: dict[str, bytes] = field(default_factory=dict)
    working: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def version(self) -> str:
        return self.digest[:16]

    def _disk(self, encoding: str) -> Path:
        return cache_dir() / f"{self.digest}-{DISK_FORMAT}.{encoding}"

    def _load(self, encoding: str) -> bytes | None:
        try:
            return self._disk(encoding).read_bytes()
        except OSError:
            return None

    def _store(self, encoding: str, body: bytes) -> None:
        path = self._disk(encoding)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.part")
            part.write_bytes(body)
            part.replace(path)  # whole or absent: another process may read it meanwhile
        except OSError:
            log.debug("could not keep %s's compressed copy at %s", self.path, path, exc_info=True)

    def compress(self, encoding: str) -> bytes:
        """The best compressed copy, made now if neither memory nor disk holds it."""
        body = self.best.get(encoding)
        if body is None:
            body = self._load(encoding)
            if body is None:
                body = _best(self.data, encoding)
                self._store(encoding, body)
            self.best[encoding] = body
        return body

    def _background(self, encoding: str) -> None:
        try:
            try:  # a copy for later: let the requests of now go first (Linux: per thread)
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
            except (AttributeError, OSError):
                pass
            self.compress(encoding)
        finally:
            with self.lock:
                self.working.discard(encoding)
                if encoding in self.best:
                    self.quick.pop(encoding, None)  # its stand-in is needed no more

    def body(self, encoding: str) -> tuple[bytes, bool]:
        """The bytes to send in ``encoding``, and whether they are the best copy (a large
        file's is made in the background on a first request; the quick one stands in)."""
        if encoding in self.best:
            return self.best[encoding], True
        if len(self.data) <= BACKGROUND_BYTES:
            with self.lock:
                return self.compress(encoding), True
        on_disk = self._load(encoding)
        if on_disk is not None:
            self.best[encoding] = on_disk
            return on_disk, True
        with self.lock:
            if encoding not in self.working and encoding not in self.best:
                self.working.add(encoding)
                threading.Thread(
                    target=self._background,
                    args=(encoding,),
                    daemon=True,
                    name=f"compress {self.path.name}",
                ).start()
            if encoding not in self.quick:
                self.quick[encoding] = _quick(self.data, encoding)
            return self.quick[encoding], False


_assets: dict[Path, Asset] = {}
_assets_lock = threading.Lock()


def asset(path: Path, derive: Callable[[bytes], bytes] | None = None) -> Asset:
    """``path``'s :class:`Asset` (its bytes passed through ``derive`` when given: one path
    is always read the same way), read again when the file changed (a stat per call)."""
    stat = path.stat()
    held = _assets.get(path)
    if held is not None and held.mtime_ns == stat.st_mtime_ns:
        return held
    data = path.read_bytes()
    if derive is not None:
        data = derive(data)
    mimetype = (
        "text/javascript"
        if path.suffix == ".js"
        else mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    )
    fresh = Asset(path, stat.st_mtime_ns, data, hashlib.sha256(data).hexdigest(), mimetype)
    with _assets_lock:
        _assets[path] = fresh
    return fresh


def plotly_path() -> Path:
    """plotly.js as the installed plotly package ships it (nothing comes from a CDN)."""
    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def plotly_asset() -> Asset:
    """plotly.js as the pages load it: with only the trace types they draw registered."""
    return asset(plotly_path(), plotly_bundle.trim)


def static_path(filename: str) -> Path | None:
    """The file under dashboard/static that ``filename`` names, or None (never outside)."""
    path = (STATIC / filename).resolve()
    if not path.is_relative_to(STATIC.resolve()) or not path.is_file():
        return None
    return path


def respond(found: Asset) -> Response:
    """``found`` as this request asks for it: compressed when the client accepts it, 304
    when its ETag matches, cached for a year when the URL holds the current hash."""
    encoding = negotiate(request.headers.get("Accept-Encoding", ""))
    body, best = found.body(encoding) if encoding else (found.data, True)
    response = Response(body, mimetype=found.mimetype)
    if encoding:
        response.headers["Content-Encoding"] = encoding
    # the ETag names the bytes sent: the content, its encoding, and the quick stand-in
    response.set_etag(f"{found.version}.{encoding or 'identity'}{'' if best else '.quick'}")
    response.vary.add("Accept-Encoding")
    if request.args.get("v") == found.version and best:
        response.cache_control.public = True
        response.cache_control.max_age = IMMUTABLE_MAX_AGE
        response.cache_control.immutable = True
    else:
        response.cache_control.no_cache = True
    response.make_conditional(request)  # 304, in place, when the ETag matches
    return response


def serve_static(filename: str) -> Response:
    path = static_path(filename)
    if path is None:
        abort(404)
    return respond(asset(path))


def serve_plotly() -> Response:
    if not plotly_path().is_file():
        abort(404, description="plotly.min.js is missing from the installed plotly package")
    return respond(plotly_asset())


def _version_urls(endpoint: str, values: dict[str, object]) -> None:
    if "v" in values:
        return
    try:
        if endpoint == "static":
            path = static_path(str(values.get("filename", "")))
            if path is not None:
                values["v"] = asset(path).version
        elif endpoint == "ui.plotly_js":
            values["v"] = plotly_asset().version
    except OSError:  # a missing file is the view's 404, not a broken page
        pass


def install_assets(app: Flask) -> None:
    """Serve ``/static`` this way (plotly.js's view calls :func:`serve_plotly`), and give
    every URL built for them the content hash."""
    app.view_functions["static"] = serve_static
    app.url_defaults(_version_urls)


def precompress() -> list[Path]:
    """Make the best copy of every file in both encodings now (the disk keeps them for
    every process): gunicorn's master calls it before its workers start."""
    files = [asset(p) for p in sorted(STATIC.rglob("*")) if p.is_file()] + [plotly_asset()]
    for found in files:
        for encoding in ENCODINGS:
            found.compress(encoding)
    return [found.path for found in files]


if __name__ == "__main__":
    for done in precompress():
        print(done)
