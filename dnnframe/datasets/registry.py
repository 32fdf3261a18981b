"""The built-in datasets: scikit-learn's shipped data, synthetic generators, MNIST-1D.

Each entry of :data:`REGISTRY` names its task, the pydantic model of its parameters and a
loader returning raw ``(X, y)``; splitting and standardising happen in
:mod:`.splitting`. Everything is generated or read offline.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..exceptions import DatasetError
from .dataset import Task


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    random_state: int = Field(0, ge=0, le=2**32 - 1, description="seed of the generator")


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MoonsParams(_Params):
    n_samples: int = Field(1000, ge=10, le=1_000_000, description="rows generated")
    noise: float = Field(
        0.2,
        ge=0,
        le=10,
        allow_inf_nan=False,
        description="standard deviation of the Gaussian noise added",
    )


class CirclesParams(_Params):
    n_samples: int = Field(1000, ge=10, le=1_000_000, description="rows generated")
    noise: float = Field(
        0.1,
        ge=0,
        le=10,
        allow_inf_nan=False,
        description="standard deviation of the Gaussian noise added",
    )
    factor: float = Field(
        0.5,
        gt=0,
        lt=1,
        allow_inf_nan=False,
        description="inner circle's radius relative to the outer's",
    )


class SpiralsParams(_Params):
    n_samples: int = Field(1000, ge=10, le=1_000_000, description="rows generated")
    n_classes: int = Field(2, ge=2, le=20, description="classes, one arm each")
    turns: float = Field(
        1.5, gt=0, le=10, allow_inf_nan=False, description="turns of each spiral arm"
    )
    noise: float = Field(
        0.2,
        ge=0,
        le=10,
        allow_inf_nan=False,
        description="Gaussian noise added, standard deviation noise/10 (arms span radius 1)",
    )


class ClassificationParams(_Params):
    n_samples: int = Field(1000, ge=10, le=1_000_000, description="rows generated")
    n_features: int = Field(20, ge=1, le=10_000, description="feature columns")
    n_informative: int = Field(10, ge=1, le=10_000, description="features that carry the signal")
    n_redundant: int = Field(
        0,
        ge=0,
        le=10_000,
        description="features that are linear combinations of the informative ones",
    )
    n_classes: int = Field(2, ge=2, le=1000, description="classes")
    class_sep: float = Field(
        1.0,
        gt=0,
        le=100,
        allow_inf_nan=False,
        description="how far apart the classes lie (larger is easier)",
    )


class RegressionParams(_Params):
    n_samples: int = Field(1000, ge=10, le=1_000_000, description="rows generated")
    n_features: int = Field(10, ge=1, le=10_000, description="feature columns")
    n_informative: int = Field(5, ge=1, le=10_000, description="features that carry the signal")
    noise: float = Field(
        0.1,
        ge=0,
        le=1000,
        allow_inf_nan=False,
        description="standard deviation of the Gaussian noise added",
    )


class Mnist1dParams(_Params):
    num_samples: int = Field(
        5000, ge=100, le=200_000, description="rows generated (MNIST-1D's num_samples)"
    )
    random_state: int = Field(42, ge=0, le=2**32 - 1, description="seed of the generator")


def _sk(loader: str, task: Task) -> Callable[[Any], tuple[np.ndarray, np.ndarray]]:
    def load(_params: Any) -> tuple[np.ndarray, np.ndarray]:
        import sklearn.datasets as skd

        bunch = getattr(skd, loader)()
        return bunch.data, bunch.target

    return load


def _moons(p: MoonsParams):
    from sklearn.datasets import make_moons

    return make_moons(n_samples=p.n_samples, noise=p.noise, random_state=p.random_state)


def _circles(p: CirclesParams):
    from sklearn.datasets import make_circles

    return make_circles(
        n_samples=p.n_samples, noise=p.noise, factor=p.factor, random_state=p.random_state
    )


def _spirals(p: SpiralsParams):
    rng = np.random.default_rng(p.random_state)
    per_class = [
        p.n_samples // p.n_classes + (1 if i < p.n_samples % p.n_classes else 0)
        for i in range(p.n_classes)
    ]
    xs, ys = [], []
    for k, n in enumerate(per_class):
        r = np.linspace(0.05, 1.0, n)
        theta = 2 * math.pi * p.turns * r + 2 * math.pi * k / p.n_classes
        pts = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)
        xs.append(pts + rng.normal(scale=p.noise * 0.1, size=pts.shape))
        ys.append(np.full(n, k))
    return np.concatenate(xs), np.concatenate(ys)


def _classification(p: ClassificationParams):
    from sklearn.datasets import make_classification

    if p.n_informative + p.n_redundant > p.n_features:
        raise ValueError(
            f"n_informative + n_redundant <= n_features must hold, but got "
            f"{p.n_informative} + {p.n_redundant} > {p.n_features}"
        )
    if p.n_classes > 2**p.n_informative:
        raise ValueError(
            f"n_classes <= 2**n_informative must hold, but got n_classes={p.n_classes}, "
            f"n_informative={p.n_informative}"
        )
    return make_classification(
        n_samples=p.n_samples,
        n_features=p.n_features,
        n_informative=p.n_informative,
        n_redundant=p.n_redundant,
        n_classes=p.n_classes,
        class_sep=p.class_sep,
        random_state=p.random_state,
    )


def _regression(p: RegressionParams):
    from sklearn.datasets import make_regression

    if p.n_informative > p.n_features:
        raise ValueError(
            f"n_informative <= n_features must hold, but got {p.n_informative} > {p.n_features}"
        )
    return make_regression(
        n_samples=p.n_samples,
        n_features=p.n_features,
        n_informative=p.n_informative,
        noise=p.noise,
        random_state=p.random_state,
    )


def _mnist1d(p: Mnist1dParams):
    try:
        from mnist1d.data import get_dataset_args, make_dataset
    except ImportError:
        raise DatasetError(
            "dataset 'mnist1d' needs the optional extra: pip install 'dnnframe[mnist1d]'"
        ) from None
    args = get_dataset_args()
    args.num_samples, args.seed = p.num_samples, p.random_state
    data = make_dataset(args)  # generated offline from the package's templates
    X = np.concatenate([data["x"], data["x_test"]])
    y = np.concatenate([data["y"], data["y_test"]])
    return X, y


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    task: Task
    params: type[BaseModel]
    load: Callable[[Any], tuple[np.ndarray, np.ndarray]]
    description: str


REGISTRY: dict[str, DatasetInfo] = {
    info.name: info
    for info in [
        DatasetInfo(
            "digits",
            "classification",
            _NoParams,
            _sk("load_digits", "classification"),
            "8x8 handwritten digits, 1797 samples, 64 features, 10 classes (scikit-learn)",
        ),
        DatasetInfo(
            "iris",
            "classification",
            _NoParams,
            _sk("load_iris", "classification"),
            "Iris flowers, 150 samples, 4 features, 3 classes (scikit-learn)",
        ),
        DatasetInfo(
            "wine",
            "classification",
            _NoParams,
            _sk("load_wine", "classification"),
            "Wine cultivars, 178 samples, 13 features, 3 classes (scikit-learn)",
        ),
        DatasetInfo(
            "breast_cancer",
            "classification",
            _NoParams,
            _sk("load_breast_cancer", "classification"),
            "Breast cancer Wisconsin, 569 samples, 30 features, 2 classes (scikit-learn)",
        ),
        DatasetInfo(
            "diabetes",
            "regression",
            _NoParams,
            _sk("load_diabetes", "regression"),
            "Diabetes progression, 442 samples, 10 features, regression (scikit-learn)",
        ),
        DatasetInfo(
            "moons",
            "classification",
            MoonsParams,
            _moons,
            "two interleaving half circles (generated)",
        ),
        DatasetInfo(
            "circles",
            "classification",
            CirclesParams,
            _circles,
            "two concentric circles (generated)",
        ),
        DatasetInfo(
            "spirals",
            "classification",
            SpiralsParams,
            _spirals,
            "interleaved spiral arms (generated)",
        ),
        DatasetInfo(
            "classification",
            "classification",
            ClassificationParams,
            _classification,
            "scikit-learn make_classification (generated)",
        ),
        DatasetInfo(
            "regression",
            "regression",
            RegressionParams,
            _regression,
            "scikit-learn make_regression (generated)",
        ),
        DatasetInfo(
            "mnist1d",
            "classification",
            Mnist1dParams,
            _mnist1d,
            "MNIST-1D, 40 features, 10 classes (generated offline; extra 'mnist1d')",
        ),
    ]
}


def list_datasets() -> list[dict[str, Any]]:
    """Name, task, description and parameter schema of every built-in dataset, plus csv."""
    out = [
        {
            "name": i.name,
            "task": i.task,
            "description": i.description,
            "params": i.params.model_json_schema().get("properties", {}),
        }
        for i in REGISTRY.values()
    ]
    out.append(
        {
            "name": "csv",
            "task": "classification or regression (by loss)",
            "description": "a user CSV: path (or upload id) and label_column",
            "params": {},
        }
    )
    return out
