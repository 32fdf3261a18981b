"""The REST API's response objects, each a TypedDict: the one statement of what an answer
holds. The code that builds an answer is typed with these (mypy checks every key it writes
and its type, at no cost when it runs), and the OpenAPI document's component schemas are
generated from them by pydantic (:func:`response_schemas`), so the two cannot drift apart.

A TypedDict, not a pydantic model: the views build plain dicts for ``jsonify``, a thousand
trials to a page, and validating each on the way out would cost time for nothing the type
checker does not already see. Objects stay open in the document (more properties may
come), as a client written against an older server expects.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema
from typing_extensions import NotRequired, TypedDict

from dnnframe.states import EXPERIMENT_STATUSES

from .importance import EVALUATORS
from .service import TRIAL_STATES


def _enum(values: Iterable[str]) -> Any:
    # a str the code passes through from elsewhere, whose values the document lists
    return Field(json_schema_extra={"enum": list(values)})


def _about(text: str) -> Any:
    return Field(description=text)


# --------------------------------------------------------------------------- meta


class Health(TypedDict):
    """The server is up and its store answers."""

    status: Literal["ok"]
    version: Annotated[str, _about("the server's dnnframe version")]
    executor: Annotated[Literal["local", "celery"],
                        _about("who trains: this server's process pool, or Celery workers")]
    store_ms: Annotated[float, _about("how long the store took to answer, in milliseconds")]


class FieldError(TypedDict):
    """One invalid field."""

    path: Annotated[str, _about("where: a spec path (model.width), a query parameter or a "
                                "header")]
    message: str


class Error(TypedDict):
    """Every error answer."""

    status: Annotated[int, _about("the HTTP status again")]
    error: Annotated[str, _about("the status's reason phrase")]
    message: Annotated[str, _about("what is wrong, in words")]
    errors: NotRequired[Annotated[list[FieldError], _about("each invalid field")]]
    fields: NotRequired[Annotated[
        dict[str, str], _about("POST /validate of the sweep form: form field → its problem")]]
    spec: NotRequired[Annotated[
        dict[str, Any], _about("POST /validate of the sweep form: the spec the form's valid "
                               "fields make")]]


# --------------------------------------------------------------------------- trials


class Trial(TypedDict):
    """A trial: its configured values and every number it recorded."""

    id: str
    state: Annotated[str, _enum(TRIAL_STATES)]
    seq: Annotated[int, _about("its change cursor: it grows with every change of the trial "
                               "(trials?since=)")]
    params: Annotated[dict[str, Any], _about(
        "every configured value by its leaf name (learning_rate, lr_schedule.kind; "
        "per-layer widths read 64x32), the seed and the dataset's name")]
    metrics: Annotated[dict[str, float], _about(
        "its final metrics; while it runs, its latest epoch's validation and training "
        "accuracy and loss")]
    epoch: Annotated[int | None, _about("its latest epoch")]
    epochs_run: int
    train_seconds: float | None
    compile_seconds: float | None
    total_seconds: float | None
    n_params: Annotated[int | None, _about("the network's parameter count")]
    worker: Annotated[str | None, _about("the worker that claimed it last")]
    attempts: Annotated[int, _about("how many times a worker claimed it")]
    started_at: Annotated[float | None, _about("Unix seconds")]
    finished_at: Annotated[float | None, _about("Unix seconds")]
    error: NotRequired[Annotated[str | None, _about(
        "why it failed, diverged or was cancelled: the last line in a list, the whole "
        "report from GET of the trial")]]
    history: NotRequired[Annotated[list[dict[str, Any]], _about(
        "one object of metrics per epoch: with history=1, and from GET of the trial")]]
    config: NotRequired[Annotated[dict[str, Any], _about(
        "GET of the trial: the configuration it trains (the spec with every search space "
        "resolved)")]]
    result: NotRequired[Annotated[dict[str, Any] | None, _about(
        "GET of the trial: its result as stored, once it finished")]]
    experiment_ids: NotRequired[Annotated[list[str], _about(
        "GET of the trial: the experiments sharing it")]]
    created_at: NotRequired[float]
    heartbeat_at: NotRequired[float | None]
    timings: NotRequired[Annotated[dict[str, Any], _about(
        "GET of the trial: seconds by phase")]]
    pack: NotRequired[Annotated[dict[str, Any] | None, _about(
        "GET of the trial: the pack it trained in (its timings are its share of the "
        "pack's)")]]
    environment: NotRequired[Annotated[dict[str, Any] | None, _about(
        "GET of the trial: the host and library versions it trained with")]]


# --------------------------------------------------------------------------- experiments

COUNTS = "trial state → how many"
RERUNS = ("trials trained again after their worker was lost (claimed more than once); "
          "`status_text` says so too")
GRAPHS = ("while trials run and none is over yet: how many of the experiment's graphs are "
          "built (compiled); null otherwise")


class GraphsProgress(TypedDict):
    """How far a starting experiment's graphs are built."""

    ready: int
    total: int


class ExperimentObjective(TypedDict):
    """The metric the experiment ranks its trials by, and which way is better."""

    metric: str
    mode: Annotated[str, _enum(("max", "min"))]


class ExperimentSearch(TypedDict):
    """How the experiment searches, for its charts."""

    method: Annotated[str | None, _about("the search method; null for a spec another "
                                         "version stored")]
    prunes: Annotated[bool, _about("whether ASHA stops unpromising trials early")]
    rung_metric: Annotated[str | None, _about("the per-epoch metric ASHA compares")]
    rungs: Annotated[list[int], _about("the epochs at which ASHA compares")]


class TiedConfiguration(TypedDict):
    """A configuration whose mean ties with the best one's."""

    params: dict[str, Any]
    n: int
    sd: float
    trial_ids: list[str]


class BestConfiguration(TypedDict):
    """The configuration (every parameter but the seed) with the best mean of the objective
    over its seeds."""

    params: dict[str, Any]
    mean: float
    sd: Annotated[float, _about("sample standard deviation over its seeds; 0 for one")]
    n: Annotated[int, _about("seeds that completed with a value")]
    trial_ids: list[str]
    best_trial_id: Annotated[str, _about("its trial with the best value")]
    n_configurations: Annotated[int, _about("configurations ranked")]
    ties: list[TiedConfiguration]


class Experiment(TypedDict):
    """An experiment with its progress (trials by state); GET of one experiment adds its
    spec, objective, search and best results."""

    id: str
    name: str
    n_trials: Annotated[int, _about("the trials the sweep expands to")]
    created_at: Annotated[float, _about("Unix seconds")]
    cancel_requested: bool
    counts: Annotated[dict[str, int], _about(COUNTS)]
    finished: Annotated[int, _about("trials that ran to an end (complete, failed, diverged "
                                    "or pruned)")]
    progress: Annotated[float, _about("finished / n_trials")]
    status: Annotated[str, _enum(EXPERIMENT_STATUSES)]
    can_cancel: Annotated[bool, _about("trials are still queued or running")]
    reruns: Annotated[int, _about(RERUNS)]
    status_text: Annotated[str, _about("the status in words, with how many trials failed, "
                                       "diverged, were pruned or cancelled")]
    spec: NotRequired[Annotated[dict[str, Any], _about("GET of one experiment: the spec as "
                                                       "stored")]]
    objective: NotRequired[ExperimentObjective]
    search: NotRequired[ExperimentSearch]
    best_trial: NotRequired[Annotated[Trial | None, _about(
        "GET of one experiment: the trial with the best objective")]]
    best_configuration: NotRequired[Annotated[BestConfiguration | None, _about(
        "GET of one experiment: the configuration (every parameter but the seed) with the "
        "best mean of the objective over its seeds, its sd, seed count and trials; `ties`: "
        "the configurations with the same mean, which only the order's rule (more seeds, "
        "smaller sd, smallest trial id) puts after it")]]
    graphs: NotRequired[Annotated[GraphsProgress | None, _about("GET of one experiment: "
                                                                + GRAPHS)]]


class _Page(TypedDict):
    limit: int
    offset: int
    more: Annotated[bool, _about("another page follows")]


class ExperimentList(_Page):
    """A page of experiments, newest first."""

    experiments: list[Experiment]


class TrialList(_Page):
    """A page of an experiment's trials, with the experiment's progress."""

    experiment_id: str
    trials: list[Trial]
    cursor: Annotated[int, _about("the largest seq on this page (since=cursor asks for what "
                                  "changed after it)")]
    n_trials: int
    counts: Annotated[dict[str, int], _about(COUNTS)]
    status: Annotated[str, _enum(EXPERIMENT_STATUSES)]
    status_text: str
    reruns: Annotated[int, _about(RERUNS)]
    can_cancel: bool
    graphs: Annotated[GraphsProgress | None, _about(GRAPHS)]


class Submitted(TypedDict):
    """A submitted sweep."""

    id: str
    name: str
    n_trials: int
    new_trials: Annotated[int, _about("trials this submission created (others were stored "
                                      "before, shared with another experiment)")]
    queued_trials: Annotated[int, _about("trials handed to the executor")]
    created: Annotated[bool, _about("false: the same spec was submitted before")]
    url: Annotated[str, _about("the experiment's page")]
    api_url: Annotated[str, _about("the experiment in this API")]


class Validated(TypedDict):
    """A valid spec, not stored."""

    valid: Literal[True]
    n_trials: int
    experiment_id: Annotated[str, _about("the id it would have (the same spec, the same "
                                         "experiment)")]
    spec: Annotated[dict[str, Any], _about("the spec with every default filled in")]


class Deleted(TypedDict):
    """A deleted experiment."""

    id: str
    deleted: Literal[True]
    deleted_trials: int


class Cancelled(Experiment):
    """A cancelled experiment, as it is now."""

    cancelled_trials: Annotated[int, _about("queued trials cancelled (running ones stop "
                                            "after their epoch)")]


# --------------------------------------------------------------------------- importance


class Divergence(TypedDict):
    """The trials that diverged, which a ranking counts as the worst value."""

    n_diverged: Annotated[int, _about("DIVERGED trials")]
    diverged_at: NotRequired[Annotated[dict[str, list[Any]], _about(
        "parameter → the values at which every trial diverged (while trials at another "
        "value trained)")]]


class ImportanceResult(Divergence):
    """The importances of an experiment's parameters, as computed."""

    importances: Annotated[dict[str, float], _about(
        "parameter → importance (with noise_floor, they sum to 1)")]
    ranking: Annotated[list[str], _about("the parameters, most important first (never the "
                                         "seed)")]
    params: Annotated[list[str], _about("the parameters the trials vary, but the seed")]
    n_trials: Annotated[int, _about("trials counted: complete and pruned ones with a value "
                                    "of the metric, and diverged ones (as the worst)")]
    n_pruned: Annotated[int, _about("PRUNED trials counted, at the value they stopped at")]
    worst: NotRequired[Annotated[float, _about("the value diverged trials count as: the "
                                               "metric's bound, else the worst reached")]]
    sampled: NotRequired[Annotated[int, _about("how many of the trials a forest evaluator "
                                               "saw")]]
    note: NotRequired[str]
    few_trials: NotRequired[Annotated[bool, _about(
        "fewer than 5 trials a varied parameter: a rough guide")]]
    noise_floor: NotRequired[Annotated[float, _about(
        "the seed's importance: what the draw alone explains")]]
    below_noise: NotRequired[Annotated[list[str], _about(
        "parameters that matter no more than the seed")]]


class Importance(ImportanceResult):
    """Parameter importance for one metric of an experiment."""

    experiment_id: str
    metric: str
    mode: Annotated[str, _enum(("max", "min"))]
    evaluator: Annotated[str, _enum(EVALUATORS)]


# --------------------------------------------------------------------------- workers, data


class Worker(TypedDict):
    """A worker the store has seen."""

    name: str
    host: str | None
    pid: int | None
    current_trial: str | None
    trials_done: int
    last_seen: Annotated[float, _about("Unix seconds")]
    info: dict[str, Any]
    alive: bool


class CeleryView(TypedDict):
    """What the Celery workers on the broker say they run."""

    ok: Annotated[bool, _about("false: the broker did not answer (`error` says why)")]
    workers: NotRequired[list[str]]
    active: NotRequired[Annotated[dict[str, list[Any]], _about(
        "worker → the arguments of its running tasks")]]
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

    id: Annotated[str, _about("its content hash: the spec's dataset.upload")]
    filename: str | None
    header: list[str]
    rows: int
    label_candidates: Annotated[list[str], _about("columns that can be the label")]
    bytes: int


# The component schemas these give, by name; a TypedDict they refer to joins them.
RESPONSES: tuple[type, ...] = (Health, Experiment, ExperimentList, Trial, TrialList, Deleted,
                               Cancelled, Workers, Importance, Error, Submitted, Validated,
                               Upload)


class _NoFieldTitles(GenerateJsonSchema):
    # "N Trials" above n_trials says nothing: a property's name is its title
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def response_schemas(ref_prefix: str) -> dict[str, Any]:
    """The JSON Schemas of :data:`RESPONSES` and the objects they hold, by name, referring
    to each other as ``ref_prefix`` + name (a fresh copy: the caller may change it)."""
    return json.loads(_schemas_json(ref_prefix))


@functools.cache
def _schemas_json(ref_prefix: str) -> str:
    # pydantic takes about 20 ms to build them, the same every time
    _, top = TypeAdapter.json_schemas(
        [(t.__name__, "serialization", TypeAdapter(t)) for t in RESPONSES],
        ref_template=ref_prefix + "{model}", schema_generator=_NoFieldTitles)
    schemas: dict[str, Any] = top["$defs"]
    for schema in schemas.values():  # a docstring's line breaks are no part of its text
        if "description" in schema:
            schema["description"] = " ".join(schema["description"].split())
    missing = {t.__name__ for t in RESPONSES} - set(schemas)
    if missing:  # pydantic names a def after its class unless two classes share a name
        raise RuntimeError(f"no schema named {sorted(missing)}")
    return json.dumps(schemas)
