"""Composition: additive RDP composition and the advanced composition theorem."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from dprl.accounting.orders import as_rdp_curve
from dprl.validation import require_delta, require_epsilon, require_int, require_probability


def compose_rdp(*rdp_curves: ArrayLike) -> np.ndarray:
    """RDP of the adaptive composition of mechanisms: the per-order sum of their curves,
    all evaluated on the same orders (Mironov 2017, Prop. 1)."""
    if not rdp_curves:
        raise ValueError("compose_rdp needs at least one RDP curve")
    curves = [as_rdp_curve(f"rdp_curves[{k}]", c) for k, c in enumerate(rdp_curves)]
    shapes = {c.shape for c in curves}
    if len(shapes) > 1:
        raise ValueError(f"all RDP curves must share the orders' shape, got shapes {shapes}")
    return np.sum(curves, axis=0)


def self_compose_rdp(rdp: ArrayLike, steps: int) -> np.ndarray:
    """RDP of ``steps`` adaptive runs of one mechanism: steps * rdp (Mironov 2017, Prop. 1)."""
    return require_int("steps", steps, minimum=1) * as_rdp_curve("rdp", rdp)


def advanced_composition(eps: float, delta: float, k: int,
                         delta_prime: float) -> tuple[float, float]:
    """Advanced composition of k adaptively chosen (eps, delta)-DP mechanisms (Dwork & Roth
    2014, Thm. 3.20; Cor. 3.21 is its eps < 1 specialisation): (eps', k delta + delta')-DP with
    eps' = sqrt(2 k ln(1/delta')) eps + k eps (e^eps - 1). delta = 0 (pure DP) is allowed.
    Returns (eps', k delta + delta'); a total delta >= 1 is a vacuous guarantee.
    """
    eps = require_epsilon(eps)
    delta = require_probability("delta", delta, open_high=True)
    k = require_int("k", k, minimum=1)
    delta_prime = require_delta(delta_prime, "delta_prime")
    eps_total = math.sqrt(2 * k * math.log(1 / delta_prime)) * eps + k * eps * math.expm1(eps)
    return eps_total, k * delta + delta_prime

