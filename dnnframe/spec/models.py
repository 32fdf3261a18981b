"""The spec's data models: a resolved trial config, and a sweep that may hold search spaces."""

from __future__ import annotations

import hashlib
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..datasets import DatasetConfig, dataset_task
from ..jsonsafe import canonical_json
from ..metrics import (
    DEFAULT_OBJECTIVE_METRIC,
    DEFAULT_OBJECTIVE_MODE,
    EPOCH_STAND_IN,
    OBJECTIVE_METRICS,
    EpochMetric,
    Mode,
)
from ..vocabulary import (
    Activation,
    Init,
    Loss,
    LrScheduleKind,
    Normalization,
    NormPosition,
    Optimizer,
    Residual,
)

DEFAULT_MAX_TRIALS = 100_000
MAX_HIDDEN_LAYERS = 2000
MAX_WIDTH = 16384
# Hidden-to-hidden weights of one network: beyond this a trial cannot fit a worker's memory
# (400 MB per float64 copy; Adam keeps three more), so it is refused up front, not OOM-killed.
MAX_HIDDEN_WEIGHTS = 50_000_000

# The objective's names are the metric registry's keys, a tuple built at run time: pydantic
# checks them, mypy cannot read a Literal of a variable (the type is Any to it).
ObjectiveMetric = Literal[OBJECTIVE_METRICS]  # type: ignore[valid-type]
ObjectiveMode = Mode

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]
Width = Annotated[int, Field(ge=1, le=MAX_WIDTH)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- resolved config
class EarlyStopping(_Strict):
    """Stop when ``metric`` has not improved by ``min_delta`` for ``patience`` epochs."""

    metric: EpochMetric = Field("val_loss", description="the per-epoch metric watched")
    patience: int = Field(
        5, ge=1, le=100_000, description="epochs without improvement before training stops"
    )
    min_delta: NonNegFloat = Field(0.0, description="the least change that counts as improvement")


class ModelConfig(_Strict):
    """The network: ``hidden_layers`` dense layers of ``width`` units, then the output head.

    A hidden layer computes ``f(h) = dropout(activation(norm(h @ W + b)))``; with
    ``norm_position: pre`` the norm moves to the branch input, ``activation(norm(h) @ W + b)``.
    Where input and output widths agree, ``residual`` adds the input back: ``identity``
    ``h + f(h)``, ``rezero`` ``h + a*f(h)`` with a learnable ``a`` per layer starting at 0
    (Bachlechner et al. 2020), ``scaled`` ``h + f(h)/sqrt(hidden_layers)``, or with
    ``residual_learnable`` a learnable scalar per layer starting there (SkipInit, De &
    Smith 2020). ``normalization: batch`` keeps running statistics for evaluation.
    """

    hidden_layers: int = Field(
        1, ge=0, le=MAX_HIDDEN_LAYERS, description="dense hidden layers (0: the output head alone)"
    )
    width: Width | list[Width] = Field(
        32, description="units per hidden layer, or one width per layer: [64, 32, 16]"
    )
    activation: Activation = Field("relu", description="the hidden layers' nonlinearity")
    init: Init = Field("glorot", description="weight initialisation")
    dropout: Fraction = Field(0.0, description="dropout rate after each hidden layer's activation")
    residual: Residual = Field("none", description="none | identity (true) | rezero | scaled")
    residual_learnable: bool = Field(
        False, description="scaled: the branch scale is a learnable scalar per layer (SkipInit)"
    )
    normalization: Normalization = Field(
        "none", description="batch (running statistics for evaluation) or layer normalisation"
    )
    norm_position: NormPosition = Field(
        "post", description="post: normalise pre-activations; pre: normalise the branch input"
    )
    loss: Loss = Field("softmax_crossentropy", description="squared_error for regression datasets")

    @field_validator("residual", mode="before")
    @classmethod
    def _residual_bool(cls, v: Any) -> Any:
        # the boolean spelling of the first spec format: true was an identity shortcut
        if isinstance(v, bool):
            return "identity" if v else "none"
        return v

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if self.residual_learnable and self.residual != "scaled":
            raise ValueError(
                f"residual_learnable applies to residual: scaled only, but got residual="
                f"{self.residual!r}"
            )
        if self.norm_position == "pre" and self.normalization == "none":
            raise ValueError(
                "norm_position: pre needs a normalization (batch or layer), but got "
                "normalization='none'"
            )
        if isinstance(self.width, list) and len(self.width) != self.hidden_layers:
            raise ValueError(
                f"a width list needs one entry per hidden layer, but got {len(self.width)} "
                f"widths for hidden_layers={self.hidden_layers}"
            )
        widths = self.widths
        weights = sum(a * b for a, b in zip(widths, widths[1:]))
        if weights > MAX_HIDDEN_WEIGHTS:
            raise ValueError(
                f"the hidden layers have {weights:,} weights, more than the limit of "
                f"{MAX_HIDDEN_WEIGHTS:,} (each copy is {weights * 8 / 2**30:.1f} GiB in float64 "
                "and optimisers keep several); use fewer or narrower layers"
            )
        return self

    @property
    def widths(self) -> list[int]:
        """The width of each hidden layer."""
        if isinstance(self.width, list):
            return list(self.width)
        return [self.width] * self.hidden_layers


class LrSchedule(_Strict):
    """The learning rate per epoch: linear warm-up over ``warmup_epochs`` epochs, then
    ``cosine`` decay to zero at ``max_epochs``, ``step`` decay (times ``step_factor`` every
    ``step_epochs`` epochs), or ``none`` (constant). ``lr_schedule: cosine`` is short for
    ``{kind: cosine}``."""

    kind: LrScheduleKind = Field("none", description="none (constant), cosine or step decay")
    warmup_epochs: int = Field(
        0, ge=0, le=100_000, description="epochs of linear warm-up before the decay"
    )
    step_epochs: int = Field(10, ge=1, le=100_000, description="step: epochs between steps")
    step_factor: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = Field(
        0.1, description="step: the learning rate's multiplier at each step"
    )

    def factor(self, epoch: int, max_epochs: int) -> float:
        """The multiplier of the base learning rate during ``epoch`` (1-based)."""
        if epoch <= self.warmup_epochs:
            return epoch / (self.warmup_epochs + 1)
        after = epoch - self.warmup_epochs - 1  # epochs since warm-up ended
        if self.kind == "cosine":
            span = max(max_epochs - self.warmup_epochs, 1)
            return 0.5 * (1.0 + math.cos(math.pi * after / span))
        if self.kind == "step":
            return self.step_factor ** (after // self.step_epochs)
        return 1.0


# A loss that grew this many times past its value at initialisation (or past 1) has exploded:
# SGD at a huge rate reaches losses of 1e67 with finite values, which are no result to average.
DIVERGENCE_FACTOR = 1e4


class TrainingConfig(_Strict):
    """How the network is trained."""

    optimizer: Optimizer = Field("adam", description="the update rule")
    learning_rate: PositiveFloat = Field(1e-3, description="the base learning rate")
    momentum: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = Field(
        0.9, description="optimizer momentum and nesterov: the velocity's decay"
    )
    batch_size: int = Field(64, ge=1, le=1_000_000, description="rows per minibatch")
    max_epochs: int = Field(20, ge=1, le=100_000, description="epochs at most")
    early_stopping: EarlyStopping | None = Field(None, description="null: train max_epochs")
    l2: NonNegFloat = Field(0.0, description="L2 penalty on the weights")
    grad_clip: PositiveFloat | None = Field(
        None, description="rescale the gradient to this global L2 norm when it is larger"
    )
    lr_schedule: LrSchedule = Field(
        default_factory=LrSchedule, description="the learning rate per epoch"
    )
    divergence_factor: Annotated[float, Field(gt=1, allow_inf_nan=False)] | None = Field(
        DIVERGENCE_FACTOR,
        description="a loss above this multiple of max(its loss at initialisation, 1) ends the "
        "trial DIVERGED (null: only a NaN/inf loss does)",
    )

    @field_validator("lr_schedule", mode="before")
    @classmethod
    def _schedule_shorthand(cls, v: Any) -> Any:
        return {"kind": v} if isinstance(v, str) else v


class TrialConfig(_Strict):
    """One fully resolved configuration: what a worker trains. No search spaces remain."""

    dataset: DatasetConfig
    model: ModelConfig = Field(default_factory=ModelConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    seed: int = Field(0, ge=0, le=2**32 - 1)

    @model_validator(mode="after")
    def _check(self) -> TrialConfig:
        task = dataset_task(self.dataset, self.model.loss)
        if task == "regression" and self.model.loss != "squared_error":
            raise ValueError(
                f"dataset {self.dataset.name!r} is a regression task and needs model.loss: "
                f"squared_error, but got {self.model.loss!r}"
            )
        return self

    def canonical_json(self) -> str:
        """Key-sorted compact JSON: the same config gives the same text on every platform.

        Trial ids hash this text, so a config that uses none of the later layer-design
        options is written exactly as before they existed (see :func:`first_format`).
        """
        return canonical_json(first_format(self.model_dump(mode="json")))


# Options added after the first spec format, with the value that means "as before".
_LATER_MODEL_DEFAULTS = {
    "residual_learnable": False,
    "normalization": "none",
    "norm_position": "post",
}
_LATER_TRAINING_DEFAULTS = {
    "grad_clip": None,
    "lr_schedule": LrSchedule().model_dump(),
    "divergence_factor": DIVERGENCE_FACTOR,
}


def first_format(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with later options at their defaults left out and residual none/identity
    written as the booleans of the first format: ids of existing trials stay valid."""
    model = {k: v for k, v in doc["model"].items() if _LATER_MODEL_DEFAULTS.get(k, ...) != v}
    if model.get("residual") in ("none", "identity"):
        model["residual"] = model["residual"] == "identity"
    training = {
        k: v for k, v in doc["training"].items() if _LATER_TRAINING_DEFAULTS.get(k, ...) != v
    }
    return {**doc, "model": model, "training": training}


# --------------------------------------------------------------------------- spec with spaces
class Objective(_Strict):
    """What "best trial" means: the metric and whether higher or lower is better."""

    metric: ObjectiveMetric = Field(
        DEFAULT_OBJECTIVE_METRIC, description="the result the best trial is chosen by"
    )
    mode: ObjectiveMode = Field(DEFAULT_OBJECTIVE_MODE, description="max or min is better")


SearchMethod = Literal["grid", "random", "asha", "tpe", "cmaes"]
# Methods that sample the non-grid spaces (continuous spaces allowed), and those whose
# configurations come from a model of the results so far (a driver asks as results arrive).
SAMPLED_METHODS = ("random", "asha", "tpe", "cmaes")
MODEL_BASED_METHODS = ("tpe", "cmaes")


class SearchConfig(_Strict):
    """How the sweep is searched: the method, seeds, the objective, the trial cap, pruning.

    ``grid`` crosses every discrete space. ``random`` and ``asha`` cross the ``grid`` spaces
    and draw ``num_samples`` configurations of the others per grid point; ``asha`` then
    prunes trials at rungs of ``min_epochs * eta**k`` epochs (below ``max_epochs``) that are
    not in the top ``1/eta`` of the experiment's trials at that rung. ``tpe``/``cmaes`` ask an
    Optuna sampler for ``num_samples`` configurations in all, as results arrive;
    ``pruner: asha`` adds the same pruning to them (or to any other method).
    """

    method: SearchMethod = Field("grid", description="how configurations are chosen")
    num_samples: int = Field(
        1,
        ge=1,
        le=1_000_000,
        description="random/asha: samples per grid point; tpe/cmaes: configurations in all",
    )
    seeds: (
        Annotated[int, Field(ge=1, le=10_000)] | list[Annotated[int, Field(ge=0, le=2**32 - 1)]]
    ) = Field(
        1,
        description="how many seeds (3: seeds 0, 1, 2), or an explicit list [0, 7, 42]; "
        "tpe/cmaes take one",
    )
    random_seed: int = Field(0, ge=0, le=2**32 - 1, description="seed of the random sampler")
    objective: Objective = Field(default_factory=Objective, description="what best means")
    max_trials: int = Field(
        DEFAULT_MAX_TRIALS,
        ge=1,
        le=10_000_000,
        description="larger sweeps are refused before anything is stored",
    )
    pack_size: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="most trials trained together in one pack (default: automatic)",
    )
    pruner: Literal["none", "asha"] = Field(
        "none", description="asha: prune by successive halving (implied by method: asha)"
    )
    min_epochs: int = Field(1, ge=1, le=100_000, description="ASHA: epochs of the first rung")
    max_epochs: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="ASHA: epochs of a trial never pruned (default: training.max_epochs)",
    )
    eta: int = Field(3, ge=2, le=1000, description="ASHA: reduction factor between rungs")

    @model_validator(mode="after")
    def _check_pruning(self) -> SearchConfig:
        if self.method in MODEL_BASED_METHODS and len(self.seed_list) > 1:
            raise ValueError(
                f"method {self.method} trains each proposed configuration once; seeds must be 1 "
                f"or a single seed, but got {self.seeds}"
            )
        if not self.prunes:
            return self
        if self.max_epochs is not None and self.min_epochs >= self.max_epochs:
            raise ValueError(
                f"min_epochs < max_epochs must hold for ASHA, but got min_epochs="
                f"{self.min_epochs}, max_epochs={self.max_epochs}"
            )
        if self.objective.metric in ("train_seconds", "compile_seconds"):
            raise ValueError(
                f"ASHA compares trials on a metric reported every epoch; objective "
                f"{self.objective.metric!r} is not (use an accuracy or a loss)"
            )
        return self

    @property
    def prunes(self) -> bool:
        """True when trials are pruned at ASHA rungs."""
        return self.method == "asha" or self.pruner == "asha"

    @property
    def rung_metric(self) -> str:
        """The per-epoch metric ASHA compares at rungs (validation for a test objective)."""
        return EPOCH_STAND_IN.get(self.objective.metric, self.objective.metric)

    @field_validator("seeds")
    @classmethod
    def _seeds_unique(cls, v: int | list[int]) -> int | list[int]:
        if isinstance(v, list):
            if not v:
                raise ValueError("seeds must not be empty")
            if len(set(v)) != len(v):
                raise ValueError(f"seeds must be unique, but got {v}")
        return v

    @property
    def seed_list(self) -> list[int]:
        """The training seeds every configuration is repeated with."""
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)


class ExperimentSpec(BaseModel):
    """A validated sweep. ``dataset``, ``model`` and ``training`` may hold search spaces;
    they are kept as plain JSON (validated) and resolved by :func:`dnnframe.spec.expand`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        "experiment",
        min_length=1,
        max_length=200,
        description="shown in listings; `dnnframe status NAME` finds it",
    )
    description: str = Field(
        "", max_length=10_000, description="free text, shown with the experiment"
    )
    dataset: dict[str, Any]
    model: dict[str, Any] = Field(default_factory=dict)
    training: dict[str, Any] = Field(default_factory=dict)
    search: SearchConfig = Field(default_factory=SearchConfig)

    @field_validator("dataset", mode="before")
    @classmethod
    def _dataset_shorthand(cls, v: Any) -> Any:
        # `dataset: digits` is short for `dataset: {name: digits}`
        return {"name": v} if isinstance(v, str) else v

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain JSON (what the store keeps and the API returns)."""
        return self.model_dump(mode="json")

    @property
    def experiment_id(self) -> str:
        """Stable id: the same spec submitted twice is the same experiment."""
        digest = hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()
        return "exp-" + digest[:16]


def is_driven(spec: ExperimentSpec) -> bool:
    """True when ``spec``'s trials come from a driver (a model-based sampler, the
    ``search`` extra) rather than from expansion."""
    return spec.search.method in MODEL_BASED_METHODS
