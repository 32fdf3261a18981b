"""A network's hidden layers as the compiled graph builds them: a tuple of
:class:`Segment`, and the one split of hidden widths into them (:func:`split_widths`).

A run of equal hidden widths is either unrolled, one dense layer per width, or a dense
layer (its input width differs from the run's, except possibly for the very first layer)
followed by a scanned stack of the rest of the run, so the graph does not grow with depth.
The graph (:func:`~dnnframe.engine.packgraph.segments_for`) and the compile key
(:func:`~dnnframe.engine.graphkey.compile_key_fields`) both split widths here: were they to
split apart, one compile key would name two graphs, or one graph two keys.

This module imports neither PyTensor nor NumPy (the compile key is made without them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

SegmentKind = Literal["dense", "stack"]
DENSE: SegmentKind = "dense"
STACK: SegmentKind = "stack"


@dataclass(frozen=True)
class Segment:
    """One piece of a network's hidden layers: a dense layer ``n_in → n_out``, or a scanned
    stack of layers of one width (``n_in == n_out``; its number of layers is held apart, see
    :func:`split_widths`). A width of None is a run-time shape (see
    :func:`~dnnframe.engine.packgraph.graph_segments`); a dense layer's ``n_in`` is None
    too where the input's width is not known (the compile key's split).

    Frozen and compared by value: a tuple of segments is part of
    :class:`~dnnframe.engine.packgraph.PackShape`, the key of the compiled-model caches (the
    disk cache's by its ``repr``)."""

    kind: SegmentKind
    n_in: int | None
    n_out: int | None

    def __post_init__(self) -> None:
        if self.kind not in (DENSE, STACK):
            raise ValueError(f"a segment is {DENSE!r} or {STACK!r}, not {self.kind!r}")
        if self.kind == STACK and self.n_in != self.n_out:
            raise ValueError(f"a stack maps its width onto itself, not {self.n_in} → {self.n_out}")

    @classmethod
    def dense(cls, n_in: int | None, n_out: int | None) -> Segment:
        return cls(DENSE, n_in, n_out)

    @classmethod
    def stack(cls, width: int | None) -> Segment:
        return cls(STACK, width, width)

    @property
    def is_stack(self) -> bool:
        return self.kind == STACK

    @property
    def width(self) -> int | None:
        """The output width (a stack's one width)."""
        return self.n_out

    @property
    def known_width(self) -> int:
        """:attr:`width` where it must be known: a pack's own segments, not the graph's."""
        if self.n_out is None:
            raise ValueError(f"{self} has a run-time width, not a pack's own")
        return self.n_out


def split_widths(
    n_features: int | None, widths: Sequence[int], unrolled: int
) -> tuple[tuple[Segment, ...], tuple[int, ...]]:
    """Hidden ``widths`` after an input of ``n_features`` (None where it is not known) as
    segments, and the number of layers of each stack, in order.

    A run of equal widths of up to ``unrolled`` layers (see
    :func:`~dnnframe.engine.graphkey.unrolled_run`) is that many dense layers; a longer one
    is a dense layer and a stack of the rest of the run (of 0 real layers for a run of one
    where ``unrolled`` is 0)."""
    segments: list[Segment] = []
    counts: list[int] = []
    prev = n_features
    i = 0
    while i < len(widths):
        w = widths[i]
        j = i + 1
        while j < len(widths) and widths[j] == w:
            j += 1
        if j - i <= unrolled:
            segments += [Segment.dense(prev, w)] + [Segment.dense(w, w)] * (j - i - 1)
        else:
            segments += [Segment.dense(prev, w), Segment.stack(w)]
            counts.append(j - i - 1)
        prev, i = w, j
    return tuple(segments), tuple(counts)
