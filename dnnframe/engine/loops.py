"""Elementwise C loops that the compiler can vectorise.

PyTensor's C ``Elemwise`` walks every tensor whose shape is not fixed in its type through a
loop of run-time strides, one element at a time: GCC cannot vectorise it. A pack's tensors
are all of run-time shape, so its elementwise work (layer norm's gradient, the optimisers'
updates, every fused loop) ran at 1-4 ns per element where NumPy's loops take a few tenths.

:class:`ContiguousElemwise` is the same op with one more loop, taken at run time when every
operand is C-contiguous over the trailing axes its broadcasting pattern leaves uniform: a
flat inner loop over those axes, where each operand is either a whole row (unit stride) or
one value (broadcast there, read once), under ``#pragma GCC ivdep``. The outer axes keep any
strides. Anything else (a transposed view, say) takes PyTensor's loop. Each element is the
same sequence of IEEE operations either way.

:data:`CONTIGUOUS_LOOPS` swaps ``Elemwise`` for it after elementwise fusion and before the
in-place pass (which keeps the class: it rebuilds nodes with ``type(op)``).
"""

from __future__ import annotations

from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.tensor.elemwise import Elemwise

from .pytensor_wall.internals import LoopElemwise


def _tail_start(patterns: list[tuple[bool, ...]], ndim: int) -> int:
    """The first axis of the longest suffix over which every operand is either broadcast
    in every axis or in none (``patterns``: per operand, broadcast or not per axis)."""
    start = ndim
    while start > 0 and all(len({p[k] for k in range(start - 1, ndim)}) == 1 for p in patterns):
        start -= 1
    return start


_FAIL = "__dnnframe_contiguous_loop_cannot_fail__"


class _Plan:
    """What the contiguous loop of one node iterates: its operands (the distinct inputs,
    then the outputs not computed in place), which axes each is broadcast along, where the
    uniform tail starts, and the outputs that alias an input."""

    def __init__(self, node, inplace_pattern: dict):
        self.ndim = node.outputs[0].type.ndim
        inputs = list(dict.fromkeys(node.inputs))  # a variable given twice is one operand
        aliased = {o: inputs.index(node.inputs[i]) for o, i in inplace_pattern.items()}
        self.outputs = [o for o in range(len(node.outputs)) if o not in aliased]
        self.operands = inputs + [node.outputs[o] for o in self.outputs]
        self.names = [f"i{k}" for k in range(len(inputs))] + [f"o{o}" for o in self.outputs]
        self.input_names = [f"i{inputs.index(v)}" for v in node.inputs]
        self.output_names = [f"o{o}" for o in range(len(node.outputs))]
        self.aliases = [(f"o{o}", f"i{k}") for o, k in aliased.items()]
        self.patterns = [tuple(s == 1 for s in v.type.shape) for v in self.operands]
        self.tail = _tail_start(self.patterns, self.ndim)
        self.dtypes = [v.type.dtype_specs()[1] for v in self.operands]


class ContiguousElemwise(LoopElemwise):
    """``Elemwise`` with a vectorisable loop for operands contiguous over their trailing
    axes (see the module's docstring); results are the same. The loop is a function of its
    own in the node's support code, never inlined: inside PyTensor's node code (whatever
    GCC's reason) it stayed scalar."""

    def _plan(self, node) -> _Plan | None:
        if node.outputs[0].type.ndim == 0 or self.openmp:
            return None
        return _Plan(node, self.inplace_pattern)

    def _task(self, node, nodename: str, plan: _Plan) -> str | None:
        """The scalar op's code for one element, on the loop function's names; None if it
        can fail (the function has no way to report it)."""
        task = self.scalar_code(
            node,
            nodename + "_scalar_",
            [f"{n}_i" for n in plan.input_names],
            [f"{n}_i" for n in plan.output_names],
            {"fail": _FAIL},
        )
        return None if _FAIL in task else task

    def c_support_code_apply(self, node, nodename):
        code = super().c_support_code_apply(node, nodename)
        plan = self._plan(node)
        task = self._task(node, nodename, plan) if plan else None
        if task is None:
            return code
        return code + "".join(
            self._function(plan, nodename, task, tail) for tail in range(plan.tail, plan.ndim)
        )

    def _function(self, plan: _Plan, nodename: str, task: str, tail: int) -> str:
        """The loop with the inner loop over axes ``tail...``: one function per tail, as
        the operands' strides decide at run time which one applies."""
        outer = range(tail)
        params = [f"npy_intp n{k}" for k in outer] + ["npy_intp T"]
        for name, dtype, p in zip(plan.names, plan.dtypes, plan.patterns):
            params.append(f"{dtype}* __restrict__ {name}_p")
            params += [f"npy_intp {name}_s{k}" for k in outer if not p[k]]
        written = {n for n in plan.names if n.startswith("o")} | {i for _, i in plan.aliases}
        body, inner = [], []
        for name, dtype, p in zip(plan.names, plan.dtypes, plan.patterns):
            offset = "".join(f" + k{k} * {name}_s{k}" for k in outer if not p[k])
            body.append(f"{dtype}* __restrict__ {name}_c = {name}_p{offset};")
            if p[tail] and name in written:  # then every operand is one value (T is 1)
                body.append(f"{dtype}& {name}_i = {name}_c[0];")
            elif p[tail]:  # one value along the whole tail: read once
                body.append(f"const {dtype} {name}_i = {name}_c[0];")
            else:
                inner.append(f"{dtype}& {name}_i = {name}_c[j];")
        defines = "".join(f"#define {o}_i {i}_i\n" for o, i in plan.aliases)
        undefs = "".join(f"#undef {o}_i\n" for o, _ in plan.aliases)
        return "\n".join(
            [
                f"__attribute__((noinline)) static void {nodename}_contiguous{tail}("
                f"{', '.join(params)}) {{",
                *[f"for (npy_intp k{k} = 0; k{k} < n{k}; ++k{k}) {{" for k in outer],
                *body,
                "#pragma GCC ivdep",
                "for (npy_intp j = 0; j < T; ++j) {",
                *inner,
                defines,
                task,
                undefs,
                "}",
                *["}"] * tail,
                "}",
                "",
            ]
        )

    def wrap_loop(self, node, nodename, inames, onames, loop):
        """PyTensor's loop behind a run-time test for the contiguous ones."""
        plan = self._plan(node)
        if plan is None or self._task(node, nodename, plan) is None:
            return loop
        # PyTensor's names for the operands: the inputs', then the allocated outputs'
        names = list(dict.fromkeys(inames)) + [onames[o] for o in plan.outputs]
        lengths = []  # each axis's length, from an operand not broadcast along it (else 1)
        for k in range(plan.ndim):
            owner = next((n for n, p in zip(names, plan.patterns) if not p[k]), None)
            lengths.append(f"{owner}_n{k}" if owner else "1")
        # the longest tail over which every operand that is a whole row is C-contiguous
        for tail in reversed(range(plan.tail, plan.ndim)):
            cond, args = [], lengths[:tail] + [" * ".join(lengths[tail:])]
            for name, dtype, p in zip(names, plan.dtypes, plan.patterns):
                args.append(f"({dtype}*) PyArray_DATA({name})")
                args += [f"{name}_stride{k}" for k in range(tail) if not p[k]]
                if not p[tail]:
                    cond.append(f"{name}_stride{plan.ndim - 1} == 1")
                    cond += [
                        f"{name}_stride{k} == {name}_stride{k + 1} * {lengths[k + 1]}"
                        for k in range(tail, plan.ndim - 1)
                    ]
            call = f"{nodename}_contiguous{tail}({', '.join(args)});"
            loop = f"if ({' && '.join(cond) or '1'}) {{\n{call}\n}} else {{\n{loop}\n}}"
        return loop

    def c_code_cache_version_apply(self, node):
        version = super().c_code_cache_version_apply(node)
        return (*version, ("contiguous", 6)) if version else version


def _contiguous(fgraph, node):
    if type(node.op) is not Elemwise:
        return None
    op = node.op
    new = ContiguousElemwise(
        op.scalar_op, op.inplace_pattern, name=op.name, nfunc_spec=op.nfunc_spec, openmp=op.openmp
    )
    return new.make_node(*node.inputs).outputs


# compile_mode runs it after fusion (49) and before the in-place pass (50.5); the rewrite
# wraps a plain function, which pickles by name with the compiled model
CONTIGUOUS_LOOPS = in2out(
    node_rewriter([Elemwise])(_contiguous), name="contiguous_elementwise_loops"
)
