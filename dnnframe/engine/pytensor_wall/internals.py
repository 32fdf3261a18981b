"""The overrides and patches of PyTensor's internals (see the package's docstring). Importing
this module imports PyTensor: call :func:`~dnnframe.engine.pytensor_wall.configure` first."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from pytensor.compile.mode import get_mode
from pytensor.tensor.elemwise import Elemwise

from . import ConfigureFirstWarning, configured

if not configured():  # every module that builds graphs imports this one
    warnings.warn(
        "dnnframe's engine was imported before dnnframe.engine.pytensor_wall.configure(): "
        "call it first (dnnframe.engine.train and train_pack do), so PyTensor reads the "
        "flags THEANO_FLAGS asks for",
        ConfigureFirstWarning,
        stacklevel=2,
    )
_APPLIED: set[str] = set()  # the patches applied in this process, by name


# Where the engine's rewrites go in PyTensor's rewrite database (pytensor.compile.optdb),
# by the passes they follow or precede; tests/engine/test_pytensor_wall.py checks each
# against the installed PyTensor's own positions.
POSITIONS = {
    "after_stabilize": 1.51,  # where PyTensor runs local_second_to_alloc (stabilize: 1.5)
    "before_blas": 1.6,  # BlasOpt (1.7) picks the C products
    "after_specialize": 2.01,  # specialize: 2, uncanonicalize: 3
    "after_fusion": 50.4,  # elemwise_fusion: 49, inplace_elemwise: 50.5 (keeps type(op))
}


def extend_mode(mode: str, excluded: tuple[str, ...], rewrites: list[tuple[Any, str]]):
    """PyTensor's mode ``mode`` less the rewrites named in ``excluded``, plus each
    ``(rewrite, place)`` at :data:`POSITIONS`\\ [place], in the order given."""
    return (
        get_mode(mode)
        .excluding(*excluded)
        .register(*[(rewrite, POSITIONS[place]) for rewrite, place in rewrites])
    )


class LoopElemwise(Elemwise):
    """``Elemwise`` whose C loop a subclass may replace: :meth:`wrap_loop` gets the loop
    PyTensor generated and returns the code to run instead (by default, the same)."""

    def _c_all(self, node, nodename, inames, onames, sub):
        decl, checks, alloc, loop, rest = super()._c_all(node, nodename, inames, onames, sub)
        return decl, checks, alloc, self.wrap_loop(node, nodename, inames, onames, loop), rest

    def wrap_loop(
        self, node, nodename: str, inames: list[str], onames: list[str], loop: str
    ) -> str:
        return loop

    def scalar_code(
        self, node, nodename: str, inames: list[str], onames: list[str], sub: dict
    ) -> str:
        """The scalar op's C code for one element of ``node``, on the given names (through
        the scalar node PyTensor keeps on the node's tag)."""
        if not hasattr(node.tag, "fake_node"):
            self.prepare_node(node, None, None, "c")
        return self.scalar_op.c_code(node.tag.fake_node, nodename, inames, onames, sub)


# The per-host facts PyTensor works out by running the compiler in every process: the CPU's
# -march flags (part of every C module's key) and whether the BLAS's gemv reads y when beta
# is 0. diskcache.py keeps them per host; these read and set PyTensor's copies.
def _gemv_check():
    # PyTensor's memo of its gemv test: the function, whose attribute holds the answer
    from pytensor.tensor import blas_c

    check = getattr(blas_c, "must_initialize_y_gemv", None)
    return check if hasattr(check, "_force_init_beta") else None


def host_facts() -> dict[str, Any]:
    """``{"march": [...] | None, "gemv-beta": bool | None}``: what PyTensor knows so far."""
    from pytensor.link.c.cmodule import GCC_compiler

    check = _gemv_check()
    march = GCC_compiler.march_flags
    return {
        "march": list(march) if march is not None else None,
        "gemv-beta": check._force_init_beta if check is not None else None,
    }


def set_host_facts(read: Callable[[str], Any]) -> None:
    """Give PyTensor each fact it has not worked out itself, as ``read(name)`` returns it
    (names and values as :func:`host_facts` has them; None or a wrong type is ignored)."""
    from pytensor.link.c.cmodule import GCC_compiler

    if GCC_compiler.march_flags is None:
        march = read("march")
        if isinstance(march, list) and all(isinstance(f, str) for f in march):
            GCC_compiler.march_flags = march  # type: ignore[assignment]  # typed None there
    check = _gemv_check()
    if check is not None and check._force_init_beta is None:
        answer = read("gemv-beta")
        if isinstance(answer, bool):
            check._force_init_beta = answer


def use_stdlib_ext_suffix() -> None:
    """PyTensor reads the extension-module suffix through setuptools' copy of sysconfig,
    importing all of setuptools (a large part of a cached load); the stdlib gives the same."""
    if "ext_suffix" in _APPLIED:
        return
    import sysconfig

    from pytensor.link.c import cmodule

    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if suffix and hasattr(cmodule, "_get_ext_suffix"):
        cmodule._get_ext_suffix = lambda: suffix
    _APPLIED.add("ext_suffix")


def warm_c_linker() -> None:
    """Import the C linker's lazily imported modules (setuptools among them) and read
    PyTensor's compiledir index, as the first load in a fresh process would."""
    from pytensor.link.c import cutils, cvm, exceptions  # noqa: F401  - setuptools among them
    from pytensor.link.c.basic import get_module_cache

    get_module_cache()
