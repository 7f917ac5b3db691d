"""A tighter calibration of the smoothed Gaussian mechanism behind DP-LSW and DP-LSL (beyond
Balle et al. 2016): the smallest ``alpha`` of Lemma 1 for a given ``beta``, computed from the
exact privacy profile of two Gaussians instead of the proof's constants.

Lemma 1 (Nissim et al. 2011) releases ``N(mu_X, sigma_X^2 I_d)`` and asks, for neighbours,
(a) ``sigma_X, sigma_X' >= alpha ||mu_X - mu_X'||`` and (b) ``|ln sigma_X^2 - ln sigma_X'^2|
<= beta``; it then takes ``alpha = 5 sqrt(2 ln(2/delta)) / eps`` and ``beta = eps / (4 (d +
ln(2/delta)))``. Scaling ``sigma_X`` to 1, every pair allowed by (a) and (b) is
``P = N(0, I_d)`` against ``Q = N(Delta e_1, r^2 I_d)`` with ``|ln r| <= beta/2`` and
``Delta <= min(1, r)/alpha``, and the mechanism is ``(eps, delta)``-DP iff every such pair has
hockey-stick divergence ``E_P[(1 - e^{eps - L})_+] <= delta`` (``L = ln dP/dQ``). Writing
``x = (x_1, x_perp)``, ``L`` depends on ``x_1`` and ``R = ||x_perp||^2`` (chi-square with
``d - 1`` degrees of freedom under ``P``, ``r^2`` times one under ``Q``), so the divergence
is a one-dimensional integral over ``R`` of Gaussian probabilities (``d >= 2``).
The supremum over the allowed pairs is taken on a grid (the divergence grows with ``Delta``,
checked in the tests, so ``Delta`` sits at its bound); this is a numerical calibration, not a
proof.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from dprl.validation import require_delta, require_epsilon, require_int, require_positive

_RATIOS = 9  # grid of r = exp(t beta / 2), t in [-1, 1]


_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(400)  # Gauss-Legendre on (-1, 1)


def _region_probability(a: float, b: float, c: np.ndarray, mean: float,
                        sd: float) -> np.ndarray:
    """``Pr[a x^2 - b x + c > 0]`` for ``x ~ N(mean, sd^2)``, one value per ``c``; the roots
    by the cancellation-free quadratic formula, so ``a`` near 0 is as accurate as ``a = 0``."""
    def below(x: np.ndarray) -> np.ndarray:
        return special.ndtr((x - mean) / sd)

    if a == 0:
        return below(c / b) if b > 0 else (c > 0).astype(float)
    disc = b**2 - 4 * a * c
    root = np.sqrt(np.maximum(disc, 0.0))
    q = (b + np.sign(b or 1.0) * root) / 2  # a x^2 - b x + c = a (x - x1)(x - x2)
    with np.errstate(divide="ignore", invalid="ignore"):
        x1, x2 = q / a, np.where(q != 0, c / q, 0.0)
    lo, hi = np.minimum(x1, x2), np.maximum(x1, x2)
    between = np.where(disc > 0, below(hi) - below(lo), 0.0)
    return 1 - between if a > 0 else between


def _tail(log_r: float, shift: float, d: int, eps: float, under_q: bool) -> float:
    """``Pr[L > eps]`` under ``P`` (or ``Q`` when ``under_q``), ``L = ln dP/dQ`` with
    ``P = N(0, I_d)``, ``Q = N(shift e_1, r^2 I_d)``. With ``R = ||x_perp||^2``,
    ``L = d ln r + a (x_1^2 + R) - shift x_1 / r^2 + shift^2 / (2 r^2)``, ``a = (r^-2 - 1)/2``:
    for each ``R`` the event is a quadratic inequality in ``x_1`` (Gaussian probabilities),
    integrated over ``R``'s chi-square law by Gauss-Legendre in its quantile."""
    r2 = np.exp(2 * log_r)
    a = (1 / r2 - 1) / 2
    scale, mean, sd = (r2, shift, np.sqrt(r2)) if under_q else (1.0, 0.0, 1.0)
    u = (_NODES + 1) / 2
    R = scale * special.chdtri(d - 1, 1 - u)  # the u-quantile of scale * chi2(d - 1)
    c = d * log_r + a * R + shift**2 / (2 * r2) - eps
    return float(_WEIGHTS @ _region_probability(a, shift / r2, c, mean, sd) / 2)


def gaussian_pair_delta(eps: float, shift: float, log_ratio: float, d: int) -> float:
    """Hockey-stick divergence ``sup_S P(S) - e^eps Q(S)`` of ``P = N(0, I_d)`` from
    ``Q = N(shift e_1, e^{2 log_ratio} I_d)``: the ``delta`` at ``eps`` of that pair
    (``log_ratio = 0`` is the Gaussian mechanism of Balle & Wang 2018, Thm. 8)."""
    eps, d = require_epsilon(eps), require_int("d", d, minimum=2)
    shift = float(shift)
    if shift < 0:
        raise ValueError(f"shift must be >= 0, got {shift}")
    log_ratio = float(log_ratio)
    p = _tail(log_ratio, shift, d, eps, under_q=False)
    q = _tail(log_ratio, shift, d, eps, under_q=True)
    return max(p - np.exp(eps) * q, 0.0)


def smooth_gaussian_delta(eps: float, alpha: float, beta: float, d: int) -> float:
    """The largest :func:`gaussian_pair_delta` over the pairs Lemma 1's conditions allow:
    ``|ln r| <= beta/2`` (a grid of ratios) and ``Delta = min(1, r)/alpha``."""
    alpha, beta = require_positive("alpha", alpha), require_positive("beta", beta)
    return max(gaussian_pair_delta(eps, min(1.0, np.exp(t)) / alpha, t, d)
               for t in np.linspace(-beta / 2, beta / 2, _RATIOS))


def smooth_gaussian_alpha(eps: float, delta: float, beta: float, d: int,
                          rtol: float = 1e-4) -> float:
    """The smallest ``alpha`` (to relative ``rtol``, rounded up) with
    :func:`smooth_gaussian_delta` ``<= delta``: Lemma 1's ``alpha`` recalibrated exactly for
    the given ``beta``. Raises if no ``alpha`` works (``beta`` too large for ``delta``)."""
    eps, delta = require_epsilon(eps), require_delta(delta)
    if smooth_gaussian_delta(eps, 1e12, beta, d) > delta:
        raise ValueError(f"beta = {beta} alone (variances differing by e^beta) already costs "
                         f"more than delta = {delta} at eps = {eps} in dimension {d}")
    low, high = 1e-3, 1e12
    while high / low > 1 + rtol:
        middle = np.sqrt(low * high)
        if smooth_gaussian_delta(eps, middle, beta, d) <= delta:
            high = middle
        else:
            low = middle
    return float(high)
