"""The compile key (exactly what the compiled function depends on: not the length of a
scanned run, nor under the C backend the hidden widths) and the pack key (what trains
together in one call: the widths, depth and batch size too).

Most tests here ask for the key of a pack big enough to unroll short runs (``BIG``); a small
pack scans every run, so every depth of a structure shares its graph
(:func:`test_a_small_pack_scans_every_run`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dnnframe.engine import graphkey, pack_key
from dnnframe.engine.graphkey import pack_key_fields

BIG = graphkey.UNROLL_MIN_PACK  # a pack that unrolls runs of up to UNROLLED_RUN layers


def compile_key(config, pack_size: int = BIG) -> str:
    return graphkey.compile_key(config, pack_size)


def compile_key_fields(config, pack_size: int = BIG) -> dict:
    return graphkey.compile_key_fields(config, pack_size)


BASE = {
    "dataset": {"name": "iris"},
    "model": {"hidden_layers": 2, "width": 16, "activation": "tanh"},
    "training": {"optimizer": "sgd", "learning_rate": 0.1, "batch_size": 32, "max_epochs": 20},
}


def variant(**changes) -> dict:
    doc = {k: dict(v) if isinstance(v, dict) else v for k, v in BASE.items()}
    for path, value in changes.items():
        section, _, name = path.partition("__")
        if name:
            doc[section][name] = value
        else:
            doc[section] = value
    return doc


def test_fields_are_literal(monkeypatch):
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    monkeypatch.delenv("THEANO_FLAGS", raising=False)
    compiled = {
        "v": "6",
        "dataset": {
            "name": "iris",
            "params": {},
            "path": None,
            "upload": None,
            "label_column": None,
            "test_fraction": 0.2,
            "validation_fraction": 0.1,
            "standardize": True,
            "split_seed": 0,
        },
        "runs": ["w", "w"],
        "activation": "tanh",
        "residual": "none",
        "residual_learnable": False,
        "normalization": "none",
        "norm_position": "post",
        "dropout": False,
        "grad_clip": False,
        "loss": "softmax_crossentropy",
        "optimizer": "sgd",
        "dtype": "float64",
    }
    assert compile_key_fields(BASE) == compiled
    # a pack of one scans the run; trials are packed by that form, plus their widths
    scanned = {**compiled, "runs": ["w", "stack"]}
    assert compile_key_fields(BASE, 1) == compile_key_fields(BASE, BIG - 1) == scanned
    assert pack_key_fields(BASE) == {**scanned, "widths": [16, 16], "batch_size": 32}
    assert compile_key(BASE).startswith("iris-wxw-tanh-sgd-float64-")
    assert compile_key(BASE, 1).startswith("iris-wxstack-tanh-sgd-float64-")
    assert pack_key(BASE).startswith("iris-16x2-b32-tanh-sgd-float64-")


def test_a_small_pack_scans_every_run(c_backend):
    """A pack smaller than UNROLL_MIN_PACK pays no graph per depth: a run of one is a layer
    and a stack of 0 real layers, so every depth of a structure shares one graph."""
    depths = [1, 2, 3, 4, 10, 100, 1000, 2000]
    assert len({compile_key(variant(model__hidden_layers=d), BIG - 1) for d in depths}) == 1
    assert compile_key_fields(variant(model__hidden_layers=1), 1)["runs"] == ["w", "stack"]
    assert len({pack_key(variant(model__hidden_layers=d)) for d in depths}) == len(depths)
    # the same pack key whatever the pack's size: trials are packed before sizes are known
    assert pack_key_fields(variant(model__hidden_layers=3))["runs"] == ["w", "stack"]


def test_short_runs_are_unrolled_and_longer_ones_share_one_key(c_backend):
    """Under the C backend a run of up to four layers is unrolled (its own key per depth); a
    longer one is a layer plus a scanned stack, whose length is out of the compile key."""
    shallow = [1, 2, 3, 4]
    assert [compile_key_fields(variant(model__hidden_layers=d))["runs"] for d in shallow] == [
        ["w"],
        ["w", "w"],
        ["w", "w", "w"],
        ["w", "w", "w", "w"],
    ]
    assert len({compile_key(variant(model__hidden_layers=d)) for d in shallow}) == 4
    deep = [5, 6, 10, 100, 1000, 2000]
    assert len({compile_key(variant(model__hidden_layers=d)) for d in shallow + deep}) == 5
    assert compile_key_fields(variant(model__hidden_layers=5))["runs"] == ["w", "stack"]
    depths = shallow + deep
    assert len({pack_key(variant(model__hidden_layers=d)) for d in depths}) == len(depths)

    # runs of equal widths are split wherever they stand, by their own length
    def widths(w):
        return variant(model__width=w, model__hidden_layers=len(w))

    assert compile_key(widths([32] + [8] * 5)) == compile_key(widths([32] + [8] * 9))
    assert compile_key(widths([32] * 5 + [8])) == compile_key(widths([32] * 7 + [8]))
    assert compile_key(widths([32, 8, 8])) != compile_key(widths([32, 8, 8, 8]))
    assert compile_key(widths([32, 8])) != compile_key(widths([32] + [8] * 5))
    assert compile_key_fields(widths([32, 8, 8] + [6] * 6))["runs"] == ["w", "w", "w", "w", "stack"]


def test_run_time_values_share_one_key():
    """20 trials differing in seed, learning rate, momentum, L2, dropout rate, init,
    epochs and early stopping get one key."""
    configs = []
    for i in range(20):
        configs.append(
            variant(
                seed=i,
                training__learning_rate=10.0 ** -(1 + i % 5),
                training__momentum=0.5 + i / 100,
                training__l2=i * 1e-4,
                training__max_epochs=5 + i,
                training__early_stopping=None if i % 2 else {"patience": 1 + i},
                model__init=["glorot", "he", "lecun", "orthogonal"][i % 4],
            )
        )
    assert len({pack_key(c) for c in configs}) == 1
    # a dropout rate, a clipping threshold and a schedule are run-time values
    assert pack_key(variant(model__dropout=0.1)) == pack_key(variant(model__dropout=0.5))
    assert pack_key(variant(training__grad_clip=0.1)) == pack_key(variant(training__grad_clip=5.0))
    assert pack_key(variant(training__lr_schedule="cosine")) == pack_key(BASE)
    assert pack_key(variant(training__divergence_factor=None)) == pack_key(BASE)


@pytest.mark.parametrize(
    "change",
    [
        {"dataset": {"name": "wine"}},
        {"dataset": {"name": "iris", "split_seed": 1}},
        {"model__hidden_layers": 3},  # one more unrolled layer
        {"model__hidden_layers": 5},  # a layer and a scanned stack
        {"model__activation": "relu"},
        {"model__residual": True},
        {"model__residual": "rezero"},
        {"model__residual": "scaled"},
        {"model__residual": "scaled", "model__residual_learnable": True},
        {"model__normalization": "batch"},
        {"model__normalization": "layer", "model__norm_position": "pre"},
        {"model__normalization": "layer"},
        {"training__grad_clip": 1.0},
        {"model__dropout": 0.2},
        {"model__loss": "squared_error"},
        {"training__optimizer": "adam"},
    ],
)
def test_graph_changes_change_both_keys(change):
    assert compile_key(variant(**change)) != compile_key(BASE)
    assert pack_key(variant(**change)) != pack_key(BASE)


@pytest.fixture
def c_backend(monkeypatch):
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    monkeypatch.delenv("THEANO_FLAGS", raising=False)


def test_widths_are_out_of_the_compile_key_under_the_c_backend(c_backend):
    """A width is a run-time shape there: every width of a structure (the runs of equal
    widths, and which of them are stacks) shares one key; the pack key keeps the widths."""

    def widths(w):
        return variant(model__width=w, model__hidden_layers=len(w))

    same = [widths([1] * 6), widths([16] * 6), widths([64] * 9), widths([1024] * 5)]
    assert len({compile_key(c) for c in same}) == 1
    assert len({pack_key(c) for c in same}) == len(same)
    assert compile_key(widths([32, 8, 8])) == compile_key(widths([4, 64, 64]))
    assert compile_key(widths([32, 8])) == compile_key(widths([1, 2]))
    # an unrolled run's layers are each a dense layer: two runs of one are two layers
    assert compile_key(widths([32, 8])) == compile_key(widths([8, 8]))
    assert compile_key(widths([32] + [8] * 5)) != compile_key(widths([8] * 6))
    assert compile_key(widths([32] + [8] * 5)) == compile_key(widths([32] + [8] * 12))


@pytest.mark.parametrize(
    "design",
    [
        {"model__residual": "identity"},
        {"model__normalization": "layer", "model__norm_position": "pre"},
    ],
)
def test_the_first_width_stays_where_the_first_layer_may_be_a_shortcut(c_backend, design):
    """With a shortcut or pre-norm the first layer's design depends on whether its width
    equals the input's, which the key cannot see: that width stays (later ones go)."""

    def widths(w):
        return variant(model__width=w, model__hidden_layers=len(w), **design)

    assert compile_key(widths([4] * 6)) != compile_key(widths([16] * 6))
    assert compile_key(widths([4] + [8] * 5)) == compile_key(widths([4] + [32] * 5))
    assert compile_key_fields(widths([4] * 5 + [8] * 5))["runs"] == [4, "stack", "w", "stack"]
    # an unrolled layer after the first of its run is a shortcut (or pre-norm) layer whose
    # widths the graph keeps
    assert compile_key_fields(widths([4, 8, 8]))["runs"] == [4, "w", 8]
    assert compile_key(widths([4, 8, 8])) != compile_key(widths([4, 32, 32]))


@pytest.mark.parametrize("flags", ["device=cuda", "device=gpu1,floatX=float64", "mode=JAX"])
def test_widths_stay_in_the_compile_key_under_jax(monkeypatch, flags):
    """XLA compiles static shapes: each width is its own graph there."""
    monkeypatch.setenv("THEANO_FLAGS", flags)
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    assert compile_key_fields(BASE)["runs"] == [16, "stack"]
    assert compile_key(variant(model__width=32)) != compile_key(BASE)
    # static depths: a single layer is unrolled, its own graph
    assert compile_key_fields(variant(model__hidden_layers=1))["runs"] == [16]
    assert compile_key_fields(variant(model__width=[8, 16, 16], model__hidden_layers=3))[
        "runs"
    ] == [8, 16, "stack"]
    monkeypatch.setenv("PYTENSOR_FLAGS", "mode=CVM")
    monkeypatch.setenv("THEANO_FLAGS", "floatX=float64")
    assert compile_key(variant(model__width=32)) == compile_key(BASE)


def test_the_batch_size_changes_the_pack_only():
    assert compile_key(variant(training__batch_size=16)) == compile_key(BASE)
    assert pack_key(variant(training__batch_size=16)) != pack_key(BASE)


def test_dtype_follows_the_flags(monkeypatch):
    monkeypatch.setenv("THEANO_FLAGS", "floatX=float32,device=cpu")
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    assert compile_key_fields(BASE)["dtype"] == "float32"
    monkeypatch.setenv("PYTENSOR_FLAGS", "floatX=float64")
    assert compile_key_fields(BASE)["dtype"] == "float64"


@pytest.mark.parametrize(
    "theano, pytensor, dtype, static",
    [
        ("", "", "float64", False),
        ("device=cuda", "", "float32", True),
        ("device=gpu1,floatX=float64", "", "float64", True),
        ("device=cuda", "mode=CVM", "float32", True),  # a GPU trains through JAX whatever the mode
        ("device=cuda", "device=cpu", "float64", False),  # PYTENSOR_FLAGS' device wins
        ("mode=jax", "", "float64", True),
        ("mode=JAX", "mode=CVM", "float64", False),
        ("mode=FAST_RUN,floatX=float32", "floatX=float64", "float64", False),
        ("device=opencl0", "", "float64", False),  # no such backend: refused when training starts
        ("gpuarray.preallocate=0.9,bare,device=cuda0", "", "float32", True),
    ],
)
def test_the_keys_read_the_flags_as_the_engine_does(monkeypatch, theano, pytensor, dtype, static):
    """The floatX and static shapes come from flags.translate, the engine's own reading,
    silently (a submission is not the place to warn about GPU-only flags) and without
    probing the machine's BLAS libraries."""
    import warnings

    from dnnframe.engine import flags

    monkeypatch.setenv("THEANO_FLAGS", theano)
    monkeypatch.setenv("PYTENSOR_FLAGS", pytensor)
    monkeypatch.setattr(flags, "default_blas", lambda: pytest.fail("the key probed the BLAS"))
    graphkey._flags_for.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (graphkey.process_dtype(), graphkey.process_static_widths()) == (dtype, static)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        settings = flags.translate(theano, pytensor, blas=False)
    assert settings.backend == ("jax" if static else "c")
    graphkey._flags_for.cache_clear()


def test_typed_and_dict_configs_agree():
    from dnnframe.spec import TrialConfig

    assert pack_key(TrialConfig.model_validate(BASE)) == pack_key(BASE)
    assert compile_key(TrialConfig.model_validate(BASE)) == compile_key(BASE)


def test_importing_the_engine_does_not_load_pytensor():
    code = (
        "import sys, dnnframe.engine as e; e.pack_key({'dataset': {'name': 'iris'}}); "
        "print('pytensor' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_pack_keys_are_each_configs_pack_key():
    """The memo groups by every field the key reads: the same keys as one by one, for dicts
    (defaults given or left out) and validated configs alike."""
    from dnnframe.spec import TrialConfig

    configs = [
        variant(
            training__learning_rate=lr,
            model__dropout=p,
            model__init=init,
            training__grad_clip=clip,
            model__hidden_layers=d,
        )
        for lr in (0.1, 0.01)
        for p in (0.0, 0.2, 0.5)
        for init in ("he", "glorot")
        for clip in (None, 1.0, 2.0)
        for d in (1, 3)
    ]
    configs += [
        variant(model__residual="none"),
        variant(dataset={"name": "wine"}),
        variant(training__batch_size=8),
        variant(training__optimizer="adam"),
    ]
    typed = [TrialConfig.model_validate(c) for c in configs]
    expected = [pack_key(c) for c in configs]
    assert graphkey.pack_keys(configs) == expected == graphkey.pack_keys(typed)
    assert len(set(expected)) == 2 * 2 * 2 + 4  # depth x dropout on/off x clip on/off, + 4
