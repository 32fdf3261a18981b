"""The REST API's answers about experiments and their trials, each a TypedDict like every
response object (:mod:`.responses` says why), and each a component schema of the OpenAPI
document (:func:`.openapi_schemas.response_schemas`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from typing_extensions import NotRequired, TypedDict

from dnnframe.states import EXPERIMENT_STATUSES

from .responses import about, one_of
from .service import TRIAL_STATES

# --------------------------------------------------------------------------- trials


class Trial(TypedDict):
    """A trial: its configured values and every number it recorded."""

    id: str
    state: Annotated[str, one_of(TRIAL_STATES)]
    seq: Annotated[
        int, about("its change cursor: it grows with every change of the trial (trials?since=)")
    ]
    params: Annotated[
        dict[str, Any],
        about(
            "every configured value by its leaf name (learning_rate, lr_schedule.kind; "
            "per-layer widths read 64x32), the seed and the dataset's name"
        ),
    ]
    metrics: Annotated[
        dict[str, float],
        about(
            "its final metrics; while it runs, its latest epoch's validation and training "
            "accuracy and loss"
        ),
    ]
    epoch: Annotated[int | None, about("its latest epoch")]
    epochs_run: int
    train_seconds: float | None
    compile_seconds: float | None
    total_seconds: float | None
    n_params: Annotated[int | None, about("the network's parameter count")]
    worker: Annotated[str | None, about("the worker that claimed it last")]
    attempts: Annotated[int, about("how many times a worker claimed it")]
    started_at: Annotated[float | None, about("Unix seconds")]
    finished_at: Annotated[float | None, about("Unix seconds")]
    error: NotRequired[
        Annotated[
            str | None,
            about(
                "why it failed, diverged or was cancelled: the last line in a list, the whole "
                "report from GET of the trial"
            ),
        ]
    ]
    history: NotRequired[
        Annotated[
            list[dict[str, Any]],
            about("one object of metrics per epoch: with history=1, and from GET of the trial"),
        ]
    ]
    config: NotRequired[
        Annotated[
            dict[str, Any],
            about(
                "GET of the trial: the configuration it trains (the spec with every search space "
                "resolved)"
            ),
        ]
    ]
    result: NotRequired[
        Annotated[
            dict[str, Any] | None, about("GET of the trial: its result as stored, once it finished")
        ]
    ]
    experiment_ids: NotRequired[
        Annotated[list[str], about("GET of the trial: the experiments sharing it")]
    ]
    created_at: NotRequired[float]
    heartbeat_at: NotRequired[float | None]
    timings: NotRequired[Annotated[dict[str, Any], about("GET of the trial: seconds by phase")]]
    pack: NotRequired[
        Annotated[
            dict[str, Any] | None,
            about(
                "GET of the trial: the pack it trained in (its timings are its share of the pack's)"
            ),
        ]
    ]
    environment: NotRequired[
        Annotated[
            dict[str, Any] | None,
            about("GET of the trial: the host and library versions it trained with"),
        ]
    ]


# --------------------------------------------------------------------------- experiments

COUNTS = "trial state → how many"
RERUNS = (
    "trials trained again after their worker was lost (claimed more than once); "
    "`status_text` says so too"
)
GRAPHS = (
    "while trials run and none is over yet: how many of the experiment's graphs are "
    "built (compiled); null otherwise"
)


class GraphsProgress(TypedDict):
    """How far a starting experiment's graphs are built."""

    ready: int
    total: int


class ExperimentObjective(TypedDict):
    """The metric the experiment ranks its trials by, and which way is better."""

    metric: str
    mode: Annotated[str, one_of(("max", "min"))]


class ExperimentSearch(TypedDict):
    """How the experiment searches, for its charts."""

    method: Annotated[
        str | None, about("the search method; null for a spec another version stored")
    ]
    prunes: Annotated[bool, about("whether ASHA stops unpromising trials early")]
    rung_metric: Annotated[str | None, about("the per-epoch metric ASHA compares")]
    rungs: Annotated[list[int], about("the epochs at which ASHA compares")]


class TiedConfiguration(TypedDict):
    """A configuration whose mean ties with the best one's."""

    params: dict[str, Any]
    n: int
    n_diverged: int
    n_pruned: int
    sd: float
    trial_ids: list[str]


class BestConfiguration(TypedDict):
    """The configuration (every parameter but the seed) with the best mean of the objective
    over its seeds."""

    params: dict[str, Any]
    mean: float
    sd: Annotated[float, about("sample standard deviation over its seeds; 0 for one")]
    n: Annotated[
        int, about("seeds counted: complete or pruned with a value, or diverged (as the worst)")
    ]
    n_diverged: Annotated[
        int, about("of the n seeds, those that diverged: counted as the metric's worst value")
    ]
    n_pruned: Annotated[int, about("of the n seeds, those pruned: counted with their value")]
    trial_ids: list[str]
    best_trial_id: Annotated[str, about("its trial with the best value (a trained one first)")]
    n_configurations: Annotated[int, about("configurations ranked")]
    ties: list[TiedConfiguration]


class Experiment(TypedDict):
    """An experiment with its progress (trials by state); GET of one experiment adds its
    spec, objective, search and best results."""

    id: str
    name: str
    n_trials: Annotated[int, about("the trials the sweep expands to")]
    created_at: Annotated[float, about("Unix seconds")]
    cancel_requested: bool
    counts: Annotated[dict[str, int], about(COUNTS)]
    finished: Annotated[
        int, about("trials that ran to an end (complete, failed, diverged or pruned)")
    ]
    progress: Annotated[float, about("finished / n_trials")]
    status: Annotated[str, one_of(EXPERIMENT_STATUSES)]
    can_cancel: Annotated[bool, about("trials are still queued or running")]
    reruns: Annotated[int, about(RERUNS)]
    status_text: Annotated[
        str,
        about(
            "the status in words, with how many trials failed, diverged, were pruned or cancelled"
        ),
    ]
    spec: NotRequired[Annotated[dict[str, Any], about("GET of one experiment: the spec as stored")]]
    objective: NotRequired[ExperimentObjective]
    search: NotRequired[ExperimentSearch]
    best_trial: NotRequired[
        Annotated[Trial | None, about("GET of one experiment: the trial with the best objective")]
    ]
    best_configuration: NotRequired[
        Annotated[
            BestConfiguration | None,
            about(
                "GET of one experiment: the configuration (every parameter but the seed) with the "
                "best mean of the objective over its seeds, its sd, seed count and trials; `ties`: "
                "the configurations with the same mean, which only the order's rule (more seeds, "
                "smaller sd, smallest trial id) puts after it"
            ),
        ]
    ]
    graphs: NotRequired[Annotated[GraphsProgress | None, about("GET of one experiment: " + GRAPHS)]]


class _Page(TypedDict):
    limit: int
    offset: int
    more: Annotated[bool, about("another page follows")]


class ExperimentList(_Page):
    """A page of experiments, newest first."""

    experiments: list[Experiment]


class TrialList(_Page):
    """A page of an experiment's trials, with the experiment's progress."""

    experiment_id: str
    trials: list[Trial]
    cursor: Annotated[
        int, about("the largest seq on this page (since=cursor asks for what changed after it)")
    ]
    n_trials: int
    counts: Annotated[dict[str, int], about(COUNTS)]
    status: Annotated[str, one_of(EXPERIMENT_STATUSES)]
    status_text: str
    reruns: Annotated[int, about(RERUNS)]
    can_cancel: bool
    graphs: Annotated[GraphsProgress | None, about(GRAPHS)]


class Submitted(TypedDict):
    """A submitted sweep."""

    id: str
    name: str
    n_trials: int
    new_trials: Annotated[
        int,
        about(
            "trials this submission created (others were stored "
            "before, shared with another experiment)"
        ),
    ]
    queued_trials: Annotated[int, about("trials handed to the executor")]
    created: Annotated[bool, about("false: the same spec was submitted before")]
    url: Annotated[str, about("the experiment's page")]
    api_url: Annotated[str, about("the experiment in this API")]


class Validated(TypedDict):
    """A valid spec, not stored."""

    valid: Literal[True]
    n_trials: int
    experiment_id: Annotated[
        str, about("the id it would have (the same spec, the same experiment)")
    ]
    spec: Annotated[dict[str, Any], about("the spec with every default filled in")]


class Deleted(TypedDict):
    """A deleted experiment."""

    id: str
    deleted: Literal[True]
    deleted_trials: int


class Cancelled(Experiment):
    """A cancelled experiment, as it is now."""

    cancelled_trials: Annotated[
        int, about("queued trials cancelled (running ones stop after their epoch)")
    ]
