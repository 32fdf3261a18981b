"""The hidden layers as segments (dnnframe/engine/segments.py), and the compile key made from
the graph's own split of widths into them: two configs share a compile key exactly when
their graphs are built from the same segments.

The property is checked over many random width lists (and a grid of hand-picked ones), under
static shapes (JAX) and not, for packs either side of the size that unrolls short runs and
for other unrolled run lengths, in designs whose first layer depends on its widths and not.
"The same graph" is over every dataset width: the key cannot see the dataset's width, so it
keeps a width the graph keeps only for some inputs (the first layer's under a shortcut or
pre-norm). The checker is shown to catch a key and a graph that split apart."""

from __future__ import annotations

import random
from dataclasses import FrozenInstanceError

import pytest

from dnnframe.engine import graphkey, packgraph
from dnnframe.engine.blocks import LayerDesign
from dnnframe.engine.flags import DEFAULT_MODE, JAX_MODE
from dnnframe.engine.segments import Segment, split_widths
from dnnframe.spec import TrialConfig

BIG = graphkey.UNROLL_MIN_PACK
ALPHABET = (3, 4, 8)  # few widths: equal runs, and equal keys, are common
# width lists of depths 1..10: one width, two runs, three runs, runs either side of the
# unrolled limit, widths equal to iris's 4 features and not
GRID = sorted(
    {
        tuple(w)
        for w in (
            *([width] * d for d in range(1, 11) for width in (4, 8, 16)),
            *(
                [a] * m + [b] * n
                for m in range(1, 7)
                for n in (1, 2, 4, 5)
                for a, b in ((4, 8), (8, 4), (16, 8), (8, 16))
            ),
            *(
                [a] * m + [b] + [a] * n
                for m in (1, 3, 5)
                for n in (1, 4, 5)
                for a, b in ((8, 4), (16, 32))
            ),
        )
        if len(w) <= 10
    }
)
DESIGNS = [
    {},
    {"normalization": "batch"},
    {"residual": "identity"},
    {"residual": "scaled", "residual_learnable": True},
    {"residual": "rezero", "normalization": "layer", "norm_position": "pre"},
    {"normalization": "layer", "norm_position": "pre"},
]


def random_widths(seed: int, n: int = 150) -> list[tuple[int, ...]]:
    rng = random.Random(seed)
    lists = {()}
    while len(lists) < n:
        lists.add(tuple(rng.choice(ALPHABET) for _ in range(rng.randint(1, 9))))
    return sorted(lists)


def trial(widths: tuple[int, ...], design: dict) -> TrialConfig:
    return TrialConfig.model_validate(
        {
            "dataset": {"name": "iris"},
            "model": {
                "hidden_layers": len(widths),
                "width": list(widths) or 4,
                "activation": "tanh",
                **design,
            },
            "training": {"optimizer": "sgd", "learning_rate": 0.1, "batch_size": 32},
        }
    )


def graph_shape(config: TrialConfig, static: bool, pack_size: int, inputs: list[int]) -> tuple:
    """The segments the compiled graph of ``config`` is built from, for each input width."""
    model = config.model
    design, mode = LayerDesign.from_model(model), JAX_MODE if static else DEFAULT_MODE
    return tuple(
        packgraph.graph_segments(
            packgraph.segments_for(n, model.widths, static=static, pack_size=pack_size)[0],
            design,
            mode,
        )
        for n in inputs
    )


def disagreements(
    monkeypatch, population: list[tuple[int, ...]], design: dict, static: bool, pack_size: int
) -> list[tuple]:
    """Pairs of width lists that share a compile key but not a graph, or a graph but not a
    key (none when the two partitions of ``population`` are the same)."""
    monkeypatch.delenv("PYTENSOR_FLAGS", raising=False)
    monkeypatch.setenv("THEANO_FLAGS", "mode=JAX" if static else "device=cpu")
    # every input width that can matter: each width a list has, and one none has
    inputs = sorted({w for widths in population for w in widths}) + [999]
    configs = [trial(w, design) for w in population]
    keys = [graphkey.compile_key(c, pack_size) for c in configs]
    graphs = [graph_shape(c, static, pack_size, inputs) for c in configs]
    first_of_key: dict[str, int] = {}
    first_of_graph: dict[tuple, int] = {}
    found = []
    for i, (key, graph) in enumerate(zip(keys, graphs)):
        j = first_of_key.setdefault(key, i)
        if graphs[j] != graph:
            found.append(("one key, two graphs", population[j], population[i]))
        j = first_of_graph.setdefault(graph, i)
        if keys[j] != key:
            found.append(("one graph, two keys", population[j], population[i]))
    return found


SCENARIOS = [  # (static, pack size, UNROLLED_RUN, UNROLLED_RUN_STATIC)
    (False, 1, 4, 1),
    (False, BIG - 1, 4, 1),
    (False, BIG, 4, 1),
    (False, 10 * BIG, 4, 1),
    (False, BIG, 1, 1),
    (False, BIG, 2, 1),
    (False, BIG, 7, 1),
    (True, 1, 4, 1),
    (True, BIG, 4, 1),
    (True, 1, 4, 2),
    (True, BIG, 4, 3),
]


@pytest.mark.parametrize("design", DESIGNS, ids=lambda d: "-".join(map(str, d.values())) or "plain")
@pytest.mark.parametrize("static, pack_size, unrolled, unrolled_static", SCENARIOS)
def test_equal_compile_keys_are_equal_graphs(
    monkeypatch, design, static, pack_size, unrolled, unrolled_static
):
    monkeypatch.setattr(graphkey, "UNROLLED_RUN", unrolled)
    monkeypatch.setattr(graphkey, "UNROLLED_RUN_STATIC", unrolled_static)
    population = random_widths(seed=len(design) * 100 + pack_size + unrolled) + GRID
    assert disagreements(monkeypatch, population, design, static, pack_size) == []
    # the property is not empty: keys both merge width lists and keep them apart
    keys = {graphkey.compile_key(trial(w, design), pack_size) for w in population}
    assert 2 < len(keys) < len(population)


def _split_with(unrolled_change):
    return lambda n, widths, unrolled: split_widths(n, widths, unrolled_change(unrolled))


@pytest.mark.parametrize(
    "module, name, wrong, design, static, pack_size",
    [
        # the key unrolls one layer more than the graph (a key per depth the graph scans)
        (graphkey, "split_widths", _split_with(lambda u: u + 1), {}, False, BIG),
        # the graph never unrolls where the key does (one key, two graphs)
        (packgraph, "split_widths", _split_with(lambda u: 0), {}, False, BIG),
        # under JAX the graph unrolls two layers, the key one
        (packgraph, "split_widths", _split_with(lambda u: 2), {}, True, 1),
        # the key drops the first width that a shortcut's graph keeps for some inputs
        (
            graphkey,
            "_runs",
            lambda w, static, entry, u: graphkey_runs(w, static, False, u),
            {"residual": "identity"},
            False,
            BIG,
        ),
        # the graph keeps every width under the C backend, the key none
        (packgraph, "graph_segments", lambda segments, design, mode: segments, {}, False, 1),
    ],
)
def test_the_check_finds_a_key_and_a_graph_that_split_apart(
    monkeypatch, module, name, wrong, design, static, pack_size
):
    population = random_widths(seed=1) + GRID
    assert disagreements(monkeypatch, population, design, static, pack_size) == []
    monkeypatch.setattr(module, name, wrong)
    assert disagreements(monkeypatch, population, design, static, pack_size)


graphkey_runs = graphkey._runs  # the real one, for a mutation above that wraps it


def test_a_segment_is_a_frozen_value():
    dense, stack = Segment.dense(4, 8), Segment.stack(8)
    assert (dense.kind, dense.n_in, dense.n_out, dense.width, dense.is_stack) == (
        "dense",
        4,
        8,
        8,
        False,
    )
    assert (stack.n_in, stack.n_out, stack.width, stack.is_stack) == (8, 8, 8, True)
    assert Segment.dense(4, 8) == dense and hash(Segment.dense(4, 8)) == hash(dense)
    assert len({dense, Segment.dense(4, 8), stack, Segment.stack(8), Segment.stack(None)}) == 3
    with pytest.raises(FrozenInstanceError):
        dense.n_out = 16  # type: ignore[misc]
    with pytest.raises(ValueError, match="a stack maps its width onto itself, not 4 → 8"):
        Segment("stack", 4, 8)
    with pytest.raises(ValueError, match="a segment is 'dense' or 'stack', not 'conv'"):
        Segment("conv", 4, 8)  # type: ignore[arg-type]
    assert Segment.stack(None).width is None
    with pytest.raises(ValueError, match="run-time width"):
        _ = Segment.stack(None).known_width


def test_split_widths_unrolls_short_runs_and_stacks_the_rest_of_long_ones():
    dense, stack = Segment.dense, Segment.stack
    widths = [8] * 3 + [6] + [3, 3]
    assert split_widths(4, widths, 2) == (
        (dense(4, 8), stack(8), dense(8, 6), dense(6, 3), dense(3, 3)),
        (2,),
    )
    assert split_widths(None, widths, 0) == (
        (dense(None, 8), stack(8), dense(8, 6), stack(6), dense(6, 3), stack(3)),
        (2, 0, 1),
    )
    assert split_widths(4, [], 4) == ((), ())


def test_a_pack_shape_is_a_key_of_the_model_caches():
    """PackShape (with its segments) keys the in-process cache by value and the disk cache by
    its ``repr``: equal shapes made apart are one key, and one repr."""

    def shape(widths):
        segments, counts = packgraph.segments_for(4, widths)
        return packgraph.PackShape(
            n_features=4,
            n_outputs=3,
            activation="tanh",
            design=LayerDesign(),
            dropout=False,
            grad_clip=False,
            loss="softmax_crossentropy",
            classification=True,
            optimizer="sgd",
            dtype="float64",
            mode=DEFAULT_MODE,
            shared_input=False,
            segments=packgraph.graph_segments(segments, LayerDesign(), DEFAULT_MODE),
        )

    assert shape([8, 8]) == shape([16] * 5) and hash(shape([8, 8])) == hash(shape([16] * 5))
    assert repr(shape([8, 8])) == repr(shape([16] * 5))
    assert shape([8, 8]) != shape([8, 16])
