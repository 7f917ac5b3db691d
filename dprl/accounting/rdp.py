"""Renyi-DP curves of the Gaussian mechanism and of the Poisson-subsampled Gaussian.

Both take the noise multiplier sigma = (noise standard deviation) / (L2 sensitivity) and
the add/remove-one neighbouring relation (the relation dp-accounting's ``RdpAccountant``
uses for ``PoissonSampledDpEvent``).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from dprl.accounting.logspace import log_abs_binom, log_abs_expm1
from dprl.accounting.orders import as_orders
from dprl.validation import require_positive, require_probability

#: Relative accuracy at which the fractional-order series stops.
_SERIES_RTOL = 1e-15
#: Terms after which the fractional-order series is declared divergent.
_SERIES_MAX_TERMS = 2**21


def gaussian_rdp(orders: ArrayLike, noise_multiplier: float) -> np.ndarray:
    """RDP of the Gaussian mechanism, eps(alpha) = alpha / (2 sigma^2) (Mironov 2017, Prop. 7).

    ``orders`` is a scalar or 1-D array of orders > 1; the result has its shape.
    """
    orders = as_orders(orders)
    sigma = require_positive("noise_multiplier", noise_multiplier)
    with np.errstate(over="ignore", divide="ignore"):
        rdp = orders / (2 * np.float64(sigma) ** 2)
    if not np.all(np.isfinite(rdp)):
        raise ValueError(f"orders / (2 noise_multiplier^2) overflows a float (noise_multiplier="
                         f"{sigma}, largest order {np.max(orders)})")
    return rdp


def poisson_subsampled_gaussian_rdp(orders: ArrayLike, noise_multiplier: float,
                                    sampling_rate: float) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian (Mironov, Talwar & Zhang 2019, Sec. 3.3).

    eps(alpha) = log(A_alpha) / (alpha - 1), A_alpha the alpha-th moment of the likelihood
    ratio of (1 - q) N(0, sigma^2) + q N(1, sigma^2) against N(0, sigma^2); add/remove-one
    neighbours (MTZ 2019, Sec. 3 shows this direction of the divergence is the larger).
    Integer orders: the exact binomial sum (MTZ 2019, Sec. 3.3), summed in log space as
    A_alpha - 1 = sum_{k>=2} C(alpha,k) (1-q)^(alpha-k) q^k (e^{k(k-1)/(2 sigma^2)} - 1) so that
    tiny values keep full relative precision. Fractional orders: the two erfc series of
    MTZ 2019, Sec. 3.3, with signed generalised binomial coefficients. Their tails
    alternate with power-law magnitudes, so the sum is taken as the mean of the last two
    partial sums, stopped when the last two magnitudes differ by < 2e-15 of the total
    (which bounds the error of that mean by 1e-15 relative). q = 1 gives
    :func:`gaussian_rdp`; q = 0 gives 0.
    """
    orders = as_orders(orders)
    sigma = require_positive("noise_multiplier", noise_multiplier)
    q = require_probability("sampling_rate", sampling_rate)
    if q == 0:
        return np.zeros_like(orders)
    if q == 1:
        return gaussian_rdp(orders, sigma)
    log_a = [_log_a_integer(int(a), sigma, q) if a == round(a) else _log_a_fractional(a, sigma, q)
             for a in orders.ravel()]
    return np.reshape(log_a, orders.shape) / (orders - 1)


def poisson_subsampled_gaussian_rdp_quadrature(orders: ArrayLike, noise_multiplier: float,
                                               sampling_rate: float,
                                               dps: int = 30) -> np.ndarray:
    """Reference value of :func:`poisson_subsampled_gaussian_rdp` by numerical integration of
    its definition (Mironov, Talwar & Zhang 2019, Sec. 3, Eq. for A_alpha), any order > 1:

    A_alpha = E_{z ~ N(0, sigma^2)} (1 - q + q e^{(2z - 1)/(2 sigma^2)})^alpha,
    eps(alpha) = log(A_alpha) / (alpha - 1),

    integrating (ratio^alpha - 1) times the N(0, sigma^2) density (so that log1p keeps the
    precision of a tiny A_alpha - 1) with mpmath's tanh-sinh quadrature at ``dps`` decimal
    digits, split at the points where the integrand changes shape (0, 1/2, the crossing
    z0 = sigma^2 log(1/q - 1) + 1/2 of the two terms of the ratio, alpha). Slow (~0.1 s per
    order) and meant to validate the series, not to account; no truncation of any series is
    involved, which makes it independent of both dprl's and dp-accounting's evaluations.
    Add/remove-one neighbours; q = 0 gives 0.
    """
    orders = as_orders(orders)
    sigma = require_positive("noise_multiplier", noise_multiplier)
    q = require_probability("sampling_rate", sampling_rate)
    if isinstance(dps, bool) or not isinstance(dps, int) or dps < 15:
        raise ValueError(f"dps must be an integer >= 15, got {dps!r}")
    if q == 0:
        return np.zeros_like(orders)
    with mpmath.workdps(dps):
        s, p = mpmath.mpf(sigma), mpmath.mpf(q)
        z0 = s**2 * mpmath.log(1 / p - 1) + mpmath.mpf(1) / 2 if q < 1 else mpmath.mpf(1) / 2
        values = []
        for alpha in orders.ravel():
            a = mpmath.mpf(float(alpha))

            def integrand(z, a=a):
                ratio = (1 - p) + p * mpmath.exp((2 * z - 1) / (2 * s**2))
                return mpmath.npdf(z, 0, s) * (ratio**a - 1)

            points = sorted({-mpmath.inf, -40 * s, mpmath.mpf(0), mpmath.mpf(1) / 2, z0, a,
                             40 * s + a, mpmath.inf})
            log_a = mpmath.log1p(mpmath.quad(integrand, points, maxdegree=10))
            values.append(float(log_a / (a - 1)))
    return np.reshape(values, orders.shape)[()]


def _log_a_integer(alpha: int, sigma: float, q: float) -> float:
    """log A_alpha for integer alpha >= 2 through the binomial sum for A_alpha - 1."""
    k = np.arange(2, alpha + 1, dtype=float)
    log_terms = (log_abs_binom(alpha, k) + k * math.log(q) + (alpha - k) * math.log1p(-q)
                 + log_abs_expm1(k * (k - 1) / (2 * sigma**2)))
    return float(np.logaddexp(0.0, special.logsumexp(log_terms)))


def _log_a_fractional(alpha: float, sigma: float, q: float) -> float:
    """log A_alpha for fractional alpha: MTZ 2019, Sec. 3.3, A_alpha = A_0 + A_1 with

    A_0 = sum_i C(alpha,i) q^i (1-q)^(alpha-i) e^{(i^2-i)/(2 sigma^2)} Phi((z0 - i)/sigma),
    A_1 = sum_i C(alpha,i) q^(alpha-i) (1-q)^i e^{(j^2-j)/(2 sigma^2)} Phi((j - z0)/sigma),
    j = alpha - i, z0 = sigma^2 log(1/q - 1) + 1/2, summed in chunks of doubling size.
    For q < 1/2 the binomial series 1 = sum_i C(alpha,i) q^i (1-q)^(alpha-i) is subtracted
    term by term from A_0 (each e^x Phi - 1 taken by expm1), so that A_alpha - 1 keeps its
    relative precision when it is tiny.
    """
    minus_one = q < 0.5
    scale, total = -np.inf, 0.0  # the partial sum is total * e^scale
    start, size = 0, 256
    while start < _SERIES_MAX_TERMS:
        i = np.arange(start, start + size, dtype=float)
        log_terms, signs, clean_tail = _series_terms(alpha, sigma, q, i, minus_one)
        new_scale = max(scale, float(np.max(log_terms)))
        terms = np.sum(signs * np.exp(log_terms - new_scale), axis=0)
        total = total * math.exp(scale - new_scale) + float(np.sum(terms))
        scale = new_scale
        if (i[-1] > alpha + 1 and clean_tail and terms[-2] * terms[-1] <= 0
                and abs(terms[-2] + terms[-1]) < 2 * _SERIES_RTOL * abs(total)):
            log_sum = scale + math.log(total - terms[-1] / 2)
            return float(np.logaddexp(0.0, log_sum)) if minus_one else log_sum
        start, size = start + size, 2 * size
    raise RuntimeError(f"the series for A_alpha did not converge within {_SERIES_MAX_TERMS} "
                       f"terms (alpha={alpha}, sigma={sigma}, q={q})")


def _series_terms(alpha: float, sigma: float, q: float, i: np.ndarray,
                  minus_one: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """Log-magnitudes and signs, shape (2, len(i)), of the i-th terms of A_0 (less the
    binomial series when ``minus_one``) and A_1; and whether the last two terms take their
    signs from C(alpha, i) alone (so that the tail alternates)."""
    z0 = sigma**2 * math.log(1 / q - 1) + 0.5
    j = alpha - i
    log_c = log_abs_binom(alpha, i)
    x0 = (i * i - i) / (2 * sigma**2) + special.log_ndtr((z0 - i) / sigma)
    log_t0 = log_c + i * math.log(q) + j * math.log1p(-q) + (
        log_abs_expm1(x0) if minus_one else x0)
    log_t1 = (log_c + j * math.log(q) + i * math.log1p(-q) + (j * j - j) / (2 * sigma**2)
              + special.log_ndtr((j - z0) / sigma))
    sign = special.gammasgn(j + 1)
    sign0 = sign * np.sign(x0) if minus_one else sign
    return (np.stack([log_t0, log_t1]), np.stack([sign0, sign]),
            bool(np.all(sign0[-2:] == sign[-2:])))
