"""The experiment page's first read, in one response: its trials (as ``GET …/trials?history=1``
gives them) and the parameter importance of the metric it shows first.

The learning curves are most of those bytes, and the charts are all they feed: each curve
comes as columns (one list per metric, no key repeated per epoch) with its values to
:data:`HISTORY_DIGITS` significant digits, far below what a chart can show (its hover says
four). The table's metrics and timings keep every digit, and the API still gives the
curves whole. A finished experiment's answer is built and compressed once (brotli at its
best) and kept while nothing changes; a live one's is built each time and compressed fast.
After this read the page follows the experiment through the API (``trials?since=``).
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from collections import OrderedDict
from typing import Any

import brotli
from flask import Response, current_app, request, url_for

from dnnframe.metrics import is_number

from .assets import negotiate
from .context import services
from .importance import EVALUATORS, experiment_importances
from .params import VALUE_NAMES
from .query_args import MAX_PAGE
from .service import trials_page

HISTORY_DIGITS = 6
BEST_BYTES = 512 * 1024  # answers up to this size get brotli's best (192 trials: 0.4 MB)
_CACHE_SIZE = 16  # finished experiments' answers (each a few hundred KB with its copies)
_cache: OrderedDict[tuple[Any, ...], dict[str, bytes]] = OrderedDict()
_lock = threading.Lock()


def _rounded(value: Any) -> Any:
    if isinstance(value, float) and is_number(value) and value:
        return float(f"{value:.{HISTORY_DIGITS}g}")
    return value


def history_columns(history: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Per-epoch records as one list per key (None where an epoch lacks it), rounded."""
    keys = list(dict.fromkeys(k for record in history for k in record))
    return {k: [_rounded(record.get(k)) for record in history] for k in keys}


def page_json(store: Any, exp: Any, metric: str | None, evaluator: str | None) -> dict[str, Any]:
    """The answer: the first page of trials since the start (every trial of all but the
    largest sweeps; ``more`` says to read on from ``cursor``) and ``importance``, or None
    when the metric or evaluator is not one the API knows (the page asks the API then)."""
    rows = store.list_trials(exp.id, limit=MAX_PAGE + 1, since=0)
    page = trials_page(store, exp, rows, MAX_PAGE, 0, 0, history=True)
    # the API's page with each curve as columns: an answer of the page's own, not the API's
    body: dict[str, Any] = {
        **page,
        "trials": [
            {**trial, "history": history_columns(trial.get("history") or [])}
            for trial in page["trials"]
        ],
    }
    known = metric in VALUE_NAMES and evaluator in EVALUATORS
    body["importance"] = (
        experiment_importances(store, exp, metric, None, str(evaluator)) if known else None
    )
    return body


def _compress(raw: bytes, encoding: str, best: bool) -> bytes:
    if encoding == "br":
        # brotli's best takes about 0.8 s a MB: a larger answer (a sweep of many hundred
        # trials) gets the next level, a twentieth of the time for a fifth more bytes
        quality = 5 if not best else 11 if len(raw) <= BEST_BYTES else 9
        return brotli.compress(raw, quality=quality)
    return gzip.compress(raw, compresslevel=9 if best else 6, mtime=0)


def first_read(experiment_id: str, objective_metric: str) -> dict[str, str]:
    """The read the experiment page opens with, for the page's URL (its ``y`` and
    ``evaluator`` choices, as experiment.js reads them): the metric, the evaluator and the
    page-data URL. The page preloads it from its head, so the answer is in by the time its
    scripts ask, while plotly.js is still being compiled."""
    metric = request.args.get("y") or objective_metric
    evaluator = request.args.get("evaluator", "")
    evaluator = evaluator if evaluator in EVALUATORS else EVALUATORS[0]
    url = url_for(
        "ui.experiment_page_data", experiment_id=experiment_id, metric=metric, evaluator=evaluator
    )
    return {"metric": metric, "evaluator": evaluator, "url": url}


def page_response(experiment_id: str) -> Response:
    """``GET /experiments/<id>/page-data?metric=…&evaluator=…``."""
    store = services().store
    exp = store.get_experiment(experiment_id)
    metric = request.args.get("metric") or exp.objective[0]
    evaluator = request.args.get("evaluator") or EVALUATORS[0]
    key = None
    if exp.is_finished:
        latest = store.list_trials(exp.id, sort_by="seq", descending=True, limit=1)
        key = (store.url, exp.id, latest[0].seq if latest else 0, exp.n_trials, metric, evaluator)
    copies = None
    if key:
        with _lock:
            copies = _cache.get(key)
            if copies is not None:
                _cache.move_to_end(key)
    if copies is None:
        raw = current_app.json.dumps(
            page_json(store, exp, metric, evaluator), separators=(",", ":")
        ).encode()
        copies = {"identity": raw, "etag": hashlib.sha256(raw).hexdigest()[:24].encode()}
        if key:
            with _lock:
                _cache[key] = copies
                while len(_cache) > _CACHE_SIZE:
                    _cache.popitem(last=False)
    encoding = negotiate(request.headers.get("Accept-Encoding", "")) or "identity"
    if encoding not in copies:  # made once per encoding a client asks for
        copies[encoding] = _compress(copies["identity"], encoding, best=key is not None)
    response = Response(copies[encoding], mimetype="application/json")
    if encoding != "identity":
        response.headers["Content-Encoding"] = encoding
    response.vary.add("Accept-Encoding")
    response.set_etag(f"{copies['etag'].decode()}.{encoding}")
    response.cache_control.no_cache = True  # a reload asks again, and gets 304 if unchanged
    response.make_conditional(request)  # 304, in place, when the ETag matches
    return response
