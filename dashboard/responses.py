"""The REST API's response objects, each a TypedDict: the one statement of what an answer
holds. The code that builds an answer is typed with these (mypy checks every key it writes
and its type, at no cost when it runs), and the OpenAPI document's component schemas are
generated from them by pydantic (:func:`.openapi_schemas.response_schemas`), so the two cannot
drift apart. Here: the answers about the server, errors, importance, workers and uploads, and
the helpers every response object uses; experiments and their trials are in
:mod:`.experiment_responses`.

A TypedDict, not a pydantic model: the views build plain dicts for ``jsonify``, a thousand
trials to a page, and validating each on the way out would cost time for nothing the type
checker does not already see. Objects stay open in the document (more properties may
come), as a client written against an older server expects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from .importance import EVALUATORS


def one_of(values: Iterable[str]) -> Any:
    """A str the code passes through from elsewhere, whose values the document lists."""
    return Field(json_schema_extra={"enum": list(values)})


def about(text: str) -> Any:
    """A property's description in the document."""
    return Field(description=text)


# --------------------------------------------------------------------------- meta


class Health(TypedDict):
    """The server is up and its store answers."""

    status: Literal["ok"]
    version: Annotated[str, about("the server's dnnframe version")]
    executor: Annotated[
        Literal["local", "celery"],
        about("who trains: this server's process pool, or Celery workers"),
    ]
    store_ms: Annotated[float, about("how long the store took to answer, in milliseconds")]


class FieldError(TypedDict):
    """One invalid field."""

    path: Annotated[str, about("where: a spec path (model.width), a query parameter or a header")]
    message: str


class Error(TypedDict):
    """Every error answer."""

    status: Annotated[int, about("the HTTP status again")]
    error: Annotated[str, about("the status's reason phrase")]
    message: Annotated[str, about("what is wrong, in words")]
    errors: NotRequired[Annotated[list[FieldError], about("each invalid field")]]
    fields: NotRequired[
        Annotated[
            dict[str, str], about("POST /validate of the sweep form: form field → its problem")
        ]
    ]
    spec: NotRequired[
        Annotated[
            dict[str, Any],
            about("POST /validate of the sweep form: the spec the form's valid fields make"),
        ]
    ]


class Note(TypedDict):
    """The free text kept on an experiment or a trial."""

    text: Annotated[str, about("the note (empty when none was written)")]
    version: Annotated[
        int,
        about(
            "how many times it was saved (0: never); send it back "
            "with a save, to be refused (409) if another came between"
        ),
    ]
    updated_at: Annotated[float | None, about("Unix seconds of the last save")]


# --------------------------------------------------------------------------- importance


class Divergence(TypedDict):
    """The trials that diverged, which a ranking counts as the worst value."""

    n_diverged: Annotated[int, about("DIVERGED trials")]
    diverged_at: NotRequired[
        Annotated[
            dict[str, list[Any]],
            about(
                "parameter → the values at which every trial diverged (while trials at another "
                "value trained)"
            ),
        ]
    ]


class ImportanceResult(Divergence):
    """The importances of an experiment's parameters, as computed."""

    importances: Annotated[
        dict[str, float], about("parameter → importance (with noise_floor, they sum to 1)")
    ]
    ranking: Annotated[list[str], about("the parameters, most important first (never the seed)")]
    params: Annotated[list[str], about("the parameters the trials vary, but the seed")]
    n_trials: Annotated[
        int,
        about(
            "trials counted: complete and pruned ones with a value "
            "of the metric, and diverged ones (as the worst)"
        ),
    ]
    n_pruned: Annotated[int, about("PRUNED trials counted, at the value they stopped at")]
    worst: NotRequired[
        Annotated[
            float,
            about("the value diverged trials count as: the metric's bound, else the worst reached"),
        ]
    ]
    sampled: NotRequired[Annotated[int, about("how many of the trials a forest evaluator saw")]]
    note: NotRequired[str]
    few_trials: NotRequired[
        Annotated[bool, about("fewer than 5 trials a varied parameter: a rough guide")]
    ]
    noise_floor: NotRequired[
        Annotated[float, about("the seed's importance: what the draw alone explains")]
    ]
    below_noise: NotRequired[
        Annotated[list[str], about("parameters that matter no more than the seed")]
    ]


class Importance(ImportanceResult):
    """Parameter importance for one metric of an experiment."""

    experiment_id: str
    metric: str
    mode: Annotated[str, one_of(("max", "min"))]
    evaluator: Annotated[str, one_of(EVALUATORS)]


# --------------------------------------------------------------------------- workers, data


class Worker(TypedDict):
    """A worker the store has seen."""

    name: str
    host: str | None
    pid: int | None
    current_trial: str | None
    trials_done: int
    last_seen: Annotated[float, about("Unix seconds")]
    info: dict[str, Any]
    alive: bool


class CeleryView(TypedDict):
    """What the Celery workers on the broker say they run."""

    ok: Annotated[bool, about("false: the broker did not answer (`error` says why)")]
    workers: NotRequired[list[str]]
    active: NotRequired[
        Annotated[dict[str, list[Any]], about("worker → the arguments of its running tasks")]
    ]
    error: NotRequired[str]


class WrongStore(TypedDict):
    """A worker on the broker that serves another store: it takes none of these packs."""

    node: str
    store: str
    message: str


class Workers(TypedDict):
    """The workers, live ones first, and Celery's view when a broker is configured."""

    workers: list[Worker]
    celery: CeleryView | None
    wrong_store: list[WrongStore]


class Upload(TypedDict):
    """A stored CSV dataset."""

    id: Annotated[str, about("its content hash: the spec's dataset.upload")]
    filename: str | None
    header: list[str]
    rows: int
    label_candidates: Annotated[list[str], about("columns that can be the label")]
    bytes: int
