"""The REST API's live updates: server-sent event streams of one experiment or of several,
routes of the API's blueprint (:mod:`.api`) like the others."""

from __future__ import annotations

from flask import Response

from dnnframe.exceptions import NotFoundError

from .api import EXPERIMENT, bp
from .context import services
from .errors import RETRY_LATER, APIError
from .events import MAX_STREAMED
from .events import stream as event_stream
from .headers import Header
from .operations import content, no_content, operation
from .query_args import IntArg, RepeatedArg
from .service import update_json

# a stream's headers: nothing between the server and the page may keep or hold back events
STREAM_HEADERS = (
    Header("Cache-Control", "no cache may keep the stream", value="no-cache"),
    Header("X-Accel-Buffering", "nginx passes each event on at once", value="no"),
)
STREAMS_FULL_RETRY_SECONDS = "30"
EVENT_STREAM = {
    "text/event-stream": {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"enum": ["trials", "change", "note", "end"]},
            "data": {"type": "string", "description": "JSON"},
        },
    }
}


@bp.get("/experiments/<experiment_id>/events")
@operation(
    "experimentEvents",
    path=EXPERIMENT,
    query=[IntArg("since", "the reader's cursor: the first event announces it at once", default=0)],
    responses={
        200: content("an event stream (text/event-stream)", EVENT_STREAM, STREAM_HEADERS),
        204: no_content("the experiment is finished: nothing to stream"),
    },
    errors=(503,),
)
def experiment_events(experiment_id: str, since: int) -> Response:
    """Server-sent events: `trials` (the changed trials and the experiment's counts) as they
    change; `change`: catch up with trials?since=; `note`: the experiment's note (its `kind`,
    `id`, text, version and updated_at) after each save; `end`: the
    experiment is finished and the stream closes.

    An experiment already finished answers 204, which EventSource does not retry. A server
    that streams to as many pages as it may answers 503: poll trials?since= instead."""
    svc = services()
    if svc.store.get_experiment(experiment_id).is_finished:  # 404 for an unknown id
        return _nothing_to_stream()
    return _event_response([experiment_id], [], since, [])


@bp.get("/events")
@operation(
    "events",
    query=[
        RepeatedArg(
            "trial",
            "a trial whose note a page shows: its saves come as `note` events (repeated)",
            max_items=MAX_STREAMED,
            min_items=0,
        ),
        RepeatedArg(
            "experiment",
            "an experiment id (repeated for each)",
            max_items=MAX_STREAMED,
            required=True,
        ),
    ],
    responses={
        200: content("an event stream (text/event-stream)", EVENT_STREAM, STREAM_HEADERS),
        204: no_content("every experiment is finished: nothing to stream"),
    },
    errors=(503,),
)
def events(experiment: list[str], trial: list[str]) -> Response:
    """One event stream for several experiments, as each experiment's own stream gives them,
    every event naming its `experiment_id` (a browser's tabs share one); `end` at once for an
    experiment finished or unknown. `note` events carry the experiments' notes and those of
    the trials named, each naming its `kind` and `id`."""
    store = services().store
    live: list[str] = []
    ended: list[str] = []
    for experiment_id in experiment:
        try:
            (ended if store.get_experiment(experiment_id).is_finished else live).append(
                experiment_id
            )
        except NotFoundError:  # gone: its tab stops listening, the others go on
            ended.append(experiment_id)
    if not live:
        return _nothing_to_stream()
    return _event_response(live, ended, None, trial)


def _nothing_to_stream() -> Response:
    # a 204 has no body, so no Content-Type (werkzeug would say text/html, and the page
    # policy would follow)
    response = Response(status=204)
    del response.headers["Content-Type"]
    return response


def _event_response(
    live: list[str], ended: list[str], since: int | None, trials: list[str]
) -> Response:
    svc = services()
    svc.feed.describe = update_json
    # a page shows its experiment's note, a trial page its trial's too
    notes = [("experiment", e) for e in live] + [("trial", t) for t in trials]
    starts = svc.feed.open_stream(live, notes)
    if starts is None:
        raise APIError(
            503,
            f"this server already streams to {svc.feed.max_streams} pages; poll "
            "trials?since= instead",
            headers=RETRY_LATER.pair(STREAMS_FULL_RETRY_SECONDS),
        )
    response = Response(
        event_stream(svc.feed, starts, since, ended, notes), mimetype="text/event-stream"
    )
    for header in STREAM_HEADERS:
        response.headers.update(header.pair())
    return response
