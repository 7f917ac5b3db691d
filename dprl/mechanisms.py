"""Output-perturbation mechanisms: Gaussian (classic and analytic calibration) and Laplace,
with the privacy-loss random variables the primer uses to demonstrate them empirically.

Sensitivities are L2 (Gaussian) or L1 (Laplace) sensitivities of the released query.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from dprl.accounting.calibration import smallest_sufficient_scale
from dprl.validation import require_array, require_delta, require_epsilon, require_positive

CALIBRATIONS = ("classic", "analytic")


def gaussian_sigma(sensitivity: float, eps: float, delta: float) -> float:
    """Classic Gaussian calibration sigma = Delta sqrt(2 ln(1.25/delta)) / eps, which gives
    (eps, delta)-DP for 0 < eps < 1 only (Dwork & Roth 2014, Thm. A.1)."""
    sensitivity = require_positive("sensitivity", sensitivity)
    eps = require_epsilon(eps)
    delta = require_delta(delta)
    if eps >= 1:
        raise ValueError(f"the classic Gaussian calibration (Dwork & Roth 2014, Thm. A.1) holds "
                         f"for eps < 1 only, got eps={eps}; use analytic_gaussian_sigma")
    return _representable_scale(_classic_sigma(sensitivity, eps, delta),
                                sensitivity=sensitivity, eps=eps, delta=delta)


def _classic_sigma(sensitivity: float, eps: float, delta: float) -> float:
    """The classic formula itself, unchecked (also a starting point for any eps)."""
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / eps


def gaussian_delta(eps: ArrayLike, sensitivity: float, sigma: float) -> float | np.ndarray:
    """Exact delta(eps) of the Gaussian mechanism (Balle & Wang 2018, Thm. 8):
    Phi(Delta/(2 sigma) - eps sigma/Delta) - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta),
    evaluated in log space (log_ndtr) so that large eps does not overflow. ``eps`` >= 0 may
    be a scalar (float returned) or an array (array of its shape returned); eps = 0 gives
    the total-variation distance of the two output distributions."""
    eps_array = require_array("eps", eps)
    if np.any(eps_array < 0):
        raise ValueError(f"eps must be >= 0, got min {eps_array.min()}")
    ratio = require_positive("sensitivity", sensitivity) / require_positive("sigma", sigma)
    log_first = special.log_ndtr(ratio / 2 - eps_array / ratio)
    log_second = eps_array + special.log_ndtr(-ratio / 2 - eps_array / ratio)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.where(log_second < log_first,
                         np.exp(log_first) * -np.expm1(log_second - log_first), 0.0)
    return float(delta) if delta.ndim == 0 else delta


def gaussian_epsilon(delta: float, sensitivity: float, sigma: float,
                     tol: float = 1e-12) -> float:
    """Smallest eps >= 0 with :func:`gaussian_delta` (eps) <= delta: the exact privacy
    profile of the Gaussian mechanism read at ``delta`` (Balle & Wang 2018, Thm. 8, whose
    delta(eps) is decreasing in eps). 0 if even eps = 0 meets ``delta`` (the total-variation
    distance is at most delta); otherwise found by bracketing and bisection to relative
    tolerance ``tol``, from the feasible side. The k-fold composition of Gaussian mechanisms
    of noise sigma has privacy loss N(k mu, 2 k mu) (losses add; Dwork & Rothblum 2016), the
    loss of one Gaussian of noise sigma / sqrt(k), so that sigma gives its exact eps too."""
    delta = require_delta(delta)
    sensitivity = require_positive("sensitivity", sensitivity)
    sigma = require_positive("sigma", sigma)
    tol = require_positive("tol", tol)
    if gaussian_delta(0.0, sensitivity, sigma) <= delta:
        return 0.0
    return smallest_sufficient_scale(lambda eps: gaussian_delta(eps, sensitivity, sigma),
                                     delta, initial=1.0, rtol=tol)


def analytic_gaussian_sigma(sensitivity: float, eps: float, delta: float,
                            tol: float = 1e-12) -> float:
    """Smallest sigma with :func:`gaussian_delta` (eps) <= delta, any eps > 0: the analytic
    Gaussian mechanism (Balle & Wang 2018, Thm. 8 and Alg. 1). The paper's Alg. 1 solves
    the same condition through a reparametrisation; here it is solved directly in sigma
    by bracketing and bisection to relative tolerance ``tol``, from the feasible side."""
    sensitivity = require_positive("sensitivity", sensitivity)
    eps = require_epsilon(eps)
    delta = require_delta(delta)
    tol = require_positive("tol", tol)
    arguments = dict(sensitivity=sensitivity, eps=eps, delta=delta)
    initial = _representable_scale(_classic_sigma(sensitivity, eps, delta), **arguments)
    try:
        sigma = smallest_sufficient_scale(lambda sigma: gaussian_delta(eps, sensitivity, sigma),
                                          delta, initial=initial, rtol=tol)
    except ValueError as error:
        raise ValueError(f"no noise scale calibrates sensitivity={sensitivity}, eps={eps}, "
                         f"delta={delta}: {error}") from error
    return _representable_scale(sigma, **arguments)


def laplace_scale(sensitivity: float, eps: float) -> float:
    """Laplace scale b = Delta_1 / eps, which gives eps-DP (Dwork, McSherry, Nissim & Smith
    2006, Prop. 1)."""
    sensitivity, eps = require_positive("sensitivity", sensitivity), require_epsilon(eps)
    return _representable_scale(sensitivity / eps, sensitivity=sensitivity, eps=eps)


def _representable_scale(scale: float, **arguments: float) -> float:
    """``scale`` when it is a positive finite float; otherwise the arguments it was computed
    from overflow (inf) or underflow (0, no noise at all) a float, and are refused."""
    if not (math.isfinite(scale) and scale > 0):
        given = ", ".join(f"{name}={value}" for name, value in arguments.items())
        raise ValueError(f"the noise scale from {given} is {scale}, not a positive finite "
                         "float: these arguments are out of range")
    return scale


def gaussian_mechanism(value: ArrayLike, sensitivity: float, eps: float, delta: float,
                       rng: np.random.Generator,
                       calibration: str = "classic") -> float | np.ndarray:
    """value + N(0, sigma^2 I), sigma from :func:`gaussian_sigma` (``"classic"``, Dwork &
    Roth 2014, Thm. A.1) or :func:`analytic_gaussian_sigma` (``"analytic"``, Balle & Wang
    2018, Thm. 8); (eps, delta)-DP for a query of L2 sensitivity ``sensitivity``. The
    shape of ``value`` is kept (a scalar gives a float)."""
    if calibration == "classic":
        sigma = gaussian_sigma(sensitivity, eps, delta)
    elif calibration == "analytic":
        sigma = analytic_gaussian_sigma(sensitivity, eps, delta)
    else:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
    return _perturb(value, rng, lambda gen, shape: gen.normal(0.0, sigma, shape))


def laplace_mechanism(value: ArrayLike, sensitivity: float, eps: float,
                      rng: np.random.Generator) -> float | np.ndarray:
    """value + Laplace(0, b) noise per coordinate, b = Delta_1 / eps: eps-DP for a query of
    L1 sensitivity ``sensitivity`` (Dwork et al. 2006, Prop. 1). Shape of ``value`` kept."""
    scale = laplace_scale(sensitivity, eps)
    return _perturb(value, rng, lambda gen, shape: gen.laplace(0.0, scale, shape))


def gaussian_privacy_loss(outputs: ArrayLike, mean: ArrayLike, neighbour_mean: ArrayLike,
                          sigma: float) -> float | np.ndarray:
    """Privacy loss ln p(o)/q(o) of p = N(mean, sigma^2 I) against q = N(neighbour_mean,
    sigma^2 I): (||o - mean'||^2 - ||o - mean||^2)/(2 sigma^2), evaluated as
    <mean - mean', o - (mean + mean')/2> / sigma^2 (Dwork & Rothblum 2016;
    Balle & Wang 2018, Lemma 3). Vector means: outputs along the last axis, one loss per
    output; scalar means: one loss per entry of ``outputs``. A ``sigma`` whose square is
    not a normal float (below 1.5e-154 or above 1.3e154) divides each factor by ``sigma``
    instead, so that the loss keeps its limit (0 at the midpoint, where it is 0 for every
    sigma; +-inf where it overflows) rather than turning into NaN."""
    sigma = require_positive("sigma", sigma)
    try:
        variance = sigma**2
    except OverflowError:
        variance = math.inf

    def per_coordinate(o, m, n):
        if np.finfo(float).tiny <= variance < math.inf:
            return (m - n) * (o - (m + n) / 2) / variance
        a, b = m - n, o - (m + n) / 2
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            return np.where((a == 0) | (b == 0), 0.0, (a / sigma) * (b / sigma))

    with np.errstate(invalid="ignore"):  # inf - inf across coordinates: raised below
        loss = _privacy_loss(outputs, mean, neighbour_mean, per_coordinate)
    if np.any(np.isnan(loss)):
        raise ValueError(f"the privacy loss overflows with opposite signs across coordinates "
                         f"(sigma = {sigma}): outputs or means too far apart for this sigma")
    return loss


def laplace_privacy_loss(outputs: ArrayLike, mean: ArrayLike, neighbour_mean: ArrayLike,
                         scale: float) -> float | np.ndarray:
    """Privacy loss ln p(o)/q(o) of p = Laplace(mean, b) against q = Laplace(neighbour_mean, b)
    per coordinate: (||o - mean'||_1 - ||o - mean||_1)/b, bounded in absolute value by
    ||mean - mean'||_1 / b <= eps (Dwork et al. 2006; Dwork & Roth 2014, Thm. 3.6). Shapes
    as in :func:`gaussian_privacy_loss`."""
    scale = require_positive("scale", scale)
    return _privacy_loss(outputs, mean, neighbour_mean,
                         lambda o, m, n: (np.abs(o - n) - np.abs(o - m)) / scale)


def gaussian_privacy_loss_distribution(sensitivity: float, sigma: float) -> tuple[float, float]:
    """Mean and variance (mu, 2 mu), mu = Delta^2/(2 sigma^2), of the Gaussian privacy loss
    under the first distribution, which is N(mu, 2 mu) (Dwork & Rothblum 2016; Balle & Wang
    2018, Lemma 3)."""
    mu = (require_positive("sensitivity", sensitivity)
          / require_positive("sigma", sigma)) ** 2 / 2
    return mu, 2 * mu


def _perturb(value: ArrayLike, rng: np.random.Generator,
             draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]
             ) -> float | np.ndarray:
    """value + draw(rng, value.shape), a float for a scalar value."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    value = require_array("value", value)
    noisy = value + draw(rng, value.shape)
    if not np.all(np.isfinite(noisy)):
        raise ValueError("value + noise overflows a float: the value or the noise scale is "
                         "out of range")
    return float(noisy) if noisy.ndim == 0 else noisy


def _privacy_loss(outputs: ArrayLike, mean: ArrayLike, neighbour_mean: ArrayLike,
                  per_coordinate: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
                  ) -> float | np.ndarray:
    """Sum over the last axis of ``per_coordinate`` losses (none for scalar means)."""
    mean = require_array("mean", mean)
    neighbour_mean = require_array("neighbour_mean", neighbour_mean)
    outputs = require_array("outputs", outputs)
    if mean.ndim > 1 or neighbour_mean.shape != mean.shape:
        raise ValueError(f"mean and neighbour_mean must be scalars or 1-D of one shape, got "
                         f"{mean.shape} and {neighbour_mean.shape}")
    if mean.ndim == 1 and (outputs.ndim == 0 or outputs.shape[-1] != mean.shape[0]):
        raise ValueError(f"outputs must have last axis of length {mean.shape[0]} (the means'), "
                         f"got shape {outputs.shape}")
    loss = per_coordinate(outputs, mean, neighbour_mean)
    loss = loss.sum(axis=-1) if mean.ndim == 1 else loss
    return float(loss) if np.ndim(loss) == 0 else loss
