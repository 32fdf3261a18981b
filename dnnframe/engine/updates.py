"""Optimisers as symbolic update rules (Lasagne ``updates`` style).

``make_updates(name, params, grads, hyper)`` returns ``(updates, state)``: the update
pairs for ``pytensor.function`` and the optimiser's own shared variables (each paired
with the parameter whose shape it follows), which the engine zeroes before each pack so a
cached compiled function starts every pack fresh. Hyperparameters (learning rate,
momentum) are shared scalars, or callables ``param -> expression`` (the engine broadcasts
one value per pack member).
"""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt

OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam", "rmsprop")
ADAM_BETA1, ADAM_BETA2, ADAM_EPS = 0.9, 0.999, 1e-8
RMSPROP_RHO, RMSPROP_EPS = 0.9, 1e-6


def _zeros_like(p):
    value = p.get_value(borrow=True)
    return pytensor.shared(np.zeros(value.shape, dtype=value.dtype), name=f"{p.name}.state")


def make_updates(name: str, params: list, grads: list, lr, momentum) -> tuple[list, list]:
    """Update pairs and optimiser state for ``name`` in sgd, momentum, nesterov, adam, rmsprop.

    ``momentum`` (shared scalar) is used by momentum and nesterov; adam and rmsprop use the
    fixed constants of this module (beta1=0.9, beta2=0.999; rho=0.9). ``lr`` and
    ``momentum`` may be callables giving the value to use for a parameter.
    """
    lr_of = lr if callable(lr) else (lambda p: lr)
    mom_of = momentum if callable(momentum) else (lambda p: momentum)
    updates, state = [], []
    if name == "sgd":
        updates = [(p, p - lr_of(p) * g) for p, g in zip(params, grads)]
    elif name in ("momentum", "nesterov"):
        for p, g in zip(params, grads):
            v = _zeros_like(p)
            state.append((v, p))
            lr_p, mom_p = lr_of(p), mom_of(p)
            v_new = mom_p * v - lr_p * g
            updates.append((v, v_new))
            # Nesterov in the Sutskever et al. 2013 / Lasagne formulation
            step = mom_p * v_new - lr_p * g if name == "nesterov" else v_new
            updates.append((p, p + step))
    elif name == "adam":
        t = pytensor.shared(np.asarray(0.0, dtype=params[0].dtype), name="adam.t")
        state.append((t, None))
        t_new = t + 1
        one = pt.constant(1.0, dtype=params[0].dtype)
        for p, g in zip(params, grads):
            a_t = lr_of(p) * pt.sqrt(one - ADAM_BETA2**t_new) / (one - ADAM_BETA1**t_new)
            m, v = _zeros_like(p), _zeros_like(p)
            state += [(m, p), (v, p)]
            m_new = ADAM_BETA1 * m + (1 - ADAM_BETA1) * g
            v_new = ADAM_BETA2 * v + (1 - ADAM_BETA2) * g**2
            updates += [(m, m_new), (v, v_new), (p, p - a_t * m_new / (pt.sqrt(v_new) + ADAM_EPS))]
        updates.append((t, t_new))
    elif name == "rmsprop":
        for p, g in zip(params, grads):
            acc = _zeros_like(p)
            state.append((acc, p))
            acc_new = RMSPROP_RHO * acc + (1 - RMSPROP_RHO) * g**2
            updates += [(acc, acc_new), (p, p - lr_of(p) * g / pt.sqrt(acc_new + RMSPROP_EPS))]
    else:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, but got {name!r}")
    # keep every update in the parameter's dtype (float32 stays float32)
    updates = [(var, pt.cast(expr, var.dtype)) for var, expr in updates]
    return updates, state
