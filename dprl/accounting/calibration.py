"""Calibration: the least noise that meets a privacy target, by bracketing and bisection."""

from __future__ import annotations

import math
from collections.abc import Callable

from numpy.typing import ArrayLike

from dprl.accounting.epsilon import poisson_subsampled_gaussian_epsilon
from dprl.accounting.orders import DEFAULT_ORDERS
from dprl.validation import require_delta, require_epsilon, require_positive, require_probability

#: How many doublings (or halvings) of the initial guess the bracket search may try.
_MAX_BRACKET_STEPS = 64


def smallest_sufficient_scale(fn: Callable[[float], float], target: float, *,
                              initial: float = 1.0, rtol: float = 1e-10) -> float:
    """Smallest x > 0 with fn(x) <= target, for fn non-increasing in x: the bracket
    [x/2, x] is found by doubling or halving ``initial``, then bisected geometrically until
    hi <= lo (1 + rtol). Returns hi, so fn(result) <= target < fn(result / (1 + rtol)).
    A numerical routine (no paper): every calibration in dprl reduces to it."""
    target = require_positive("target", target)
    initial = require_positive("initial", initial)
    rtol = require_positive("rtol", rtol)
    lo, hi = _bracket(fn, target, initial)
    while hi > lo * (1 + rtol):
        mid = math.sqrt(lo * hi)
        if mid in (lo, hi):  # adjacent floats: the bracket splits no further (looped forever)
            break
        lo, hi = (lo, mid) if fn(mid) <= target else (mid, hi)
    return hi


def calibrate_noise_multiplier(target_eps: float, delta: float,
                               epsilon_fn: Callable[[float, float], float], *,
                               initial: float = 1.0, rtol: float = 1e-9) -> float:
    """Smallest noise multiplier sigma with epsilon_fn(sigma, delta) <= target_eps, for an
    eps non-increasing in sigma (:func:`smallest_sufficient_scale`, relative tolerance
    ``rtol``), i.e. the inverse of any accountant, such as those of Abadi et al. 2016 or
    Mironov, Talwar & Zhang 2019."""
    target_eps = require_epsilon(target_eps, "target_eps")
    delta = require_delta(delta)
    return smallest_sufficient_scale(lambda sigma: epsilon_fn(sigma, delta), target_eps,
                                     initial=initial, rtol=rtol)


def calibrate_subsampled_gaussian(target_eps: float, delta: float, sampling_rate: float,
                                  steps: int, orders: ArrayLike = DEFAULT_ORDERS,
                                  method: str = "improved", rtol: float = 1e-9) -> float:
    """Smallest noise multiplier for which ``steps`` Poisson-subsampled Gaussian steps are
    (target_eps, delta)-DP by :func:`~dprl.accounting.poisson_subsampled_gaussian_epsilon`
    (Mironov, Talwar & Zhang 2019, Sec. 3.3; conversion ``method`` as in
    :func:`~dprl.accounting.rdp_to_dp`). Add/remove-one neighbours, sampling_rate in (0, 1]."""
    require_probability("sampling_rate", sampling_rate, open_low=True)
    return calibrate_noise_multiplier(
        target_eps, delta,
        lambda sigma, d: poisson_subsampled_gaussian_epsilon(sigma, sampling_rate, steps, d,
                                                             orders, method),
        rtol=rtol)


def _bracket(fn: Callable[[float], float], target: float, x: float) -> tuple[float, float]:
    """(lo, hi) = (x/2, x) with fn(lo) > target >= fn(hi), by doubling or halving x."""
    meets = fn(x) <= target
    for _ in range(_MAX_BRACKET_STEPS):
        step = 0.5 if meets else 2.0
        y = x * step
        if (fn(y) <= target) != meets:
            return (y, x) if meets else (x, y)
        x = y
    if meets:
        raise ValueError(f"target {target} is met at every scale down to {x}: nothing to "
                         f"calibrate (is the function really decreasing?)")
    raise ValueError(f"target {target} is unattainable: the function still exceeds it at "
                     f"scale {x} (e.g. eps below what the order grid can certify)")
