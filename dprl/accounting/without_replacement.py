"""RDP of the Gaussian mechanism run on a sample drawn without replacement.

Wang, Balle & Kasiviswanathan (WBK), "Subsampled Renyi differential privacy and analytical
moments accountant" (AISTATS 2019), with sampling fraction gamma = m / n (m = sample size,
n = dataset size) and the replace-one neighbouring relation (n is public; the relation
dp-accounting's ``RdpAccountant`` uses for ``SampledWithoutReplacementDpEvent``). The
noise multiplier sigma is the noise standard deviation over the replace-one L2
sensitivity, so the base Gaussian has eps(alpha) = alpha / (2 sigma^2) and eps(inf) = inf.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from dprl.accounting.logspace import log_abs_binom, log_abs_expm1
from dprl.accounting.orders import as_orders
from dprl.validation import require_int, require_positive


def sampled_without_replacement_gaussian_rdp(orders: ArrayLike, noise_multiplier: float,
                                             sample_size: int, dataset_size: int) -> np.ndarray:
    """Upper bound on the RDP of the subsampled Gaussian, all terms of WBK 2019, Thm. 9:

    eps'(alpha) <= log(1 + gamma^2 C(alpha,2) min{4(e^{eps(2)} - 1), 2 e^{eps(2)}}
                   + sum_{j=3}^{alpha} 2 gamma^j C(alpha,j) e^{(j-1) eps(j)}) / (alpha - 1),

    the min{2, (e^{eps(inf)} - 1)^j} factors being 2 for the Gaussian. Integer orders >= 2
    only (the theorem's); summed in log space. At gamma = 1 this is still a valid bound,
    though looser than :func:`~dprl.accounting.gaussian_rdp`. Replace-one neighbours.
    """
    orders = as_orders(orders, integer=True)
    sigma = require_positive("noise_multiplier", noise_multiplier)
    log_gamma = _log_sampling_fraction(sample_size, dataset_size)
    j = np.arange(3, int(orders.max()) + 1, dtype=float)
    log_a = _log_moment(orders.ravel(), sigma, log_gamma, _log_theorem9_factors(j, sigma))
    return log_a.reshape(orders.shape) / (orders - 1)


def sampled_without_replacement_gaussian_rdp_approx(orders: ArrayLike, noise_multiplier: float,
                                                    sample_size: int,
                                                    dataset_size: int) -> np.ndarray:
    """Leading-order APPROXIMATION (not a bound) to WBK 2019, Thm. 9: only the j = 2 term,

    eps'(alpha) ~ log(1 + gamma^2 C(alpha,2) min{4(e^{eps(2)} - 1), 2 e^{eps(2)}}) / (alpha - 1),

    i.e. ~ gamma^2 alpha min{2(e^{1/sigma^2} - 1), e^{1/sigma^2}} for small gamma. Dropping
    the j >= 3 terms understates the bound, badly at large alpha or gamma. Integer orders.
    """
    orders = as_orders(orders, integer=True)
    sigma = require_positive("noise_multiplier", noise_multiplier)
    log_gamma = _log_sampling_fraction(sample_size, dataset_size)
    return np.logaddexp(0.0, _log_second_order_term(orders, sigma, log_gamma)) / (orders - 1)


def _log_sampling_fraction(sample_size: int, dataset_size: int) -> float:
    """log gamma = log(m / n) after checking 1 <= m <= n."""
    m = require_int("sample_size", sample_size, minimum=1)
    n = require_int("dataset_size", dataset_size, minimum=1)
    if m > n:
        raise ValueError(f"sample_size must be <= dataset_size, got {m} > {n}")
    return math.log(m) - math.log(n)


def _log_second_order_term(orders: np.ndarray, sigma: float, log_gamma: float) -> np.ndarray:
    """log of gamma^2 C(alpha,2) min{4(e^{eps(2)} - 1), 2 e^{eps(2)}}, eps(2) = 1/sigma^2."""
    eps2 = 1 / sigma**2
    return (2 * log_gamma + log_abs_binom(orders, 2)
            + min(math.log(4) + float(log_abs_expm1(eps2)), math.log(2) + eps2))


def _log_theorem9_factors(j: np.ndarray, sigma: float) -> np.ndarray:
    """log of Thm. 9's factor 2 e^{(j-1) eps(j)} of the j-th term, eps(j) = j/(2 sigma^2)."""
    return math.log(2) + (j - 1) * j / (2 * sigma**2)


#: the most (order, j) entries summed at once by :func:`_log_moment`
_TERM_BLOCK = 2**22


def _log_moment(alphas: np.ndarray, sigma: float, log_gamma: float,
                factors: np.ndarray) -> np.ndarray:
    """``log(1 + gamma^2 C(alpha,2) min{..} + sum_{j=3}^{alpha} gamma^j C(alpha,j) f_j)`` for
    every order of ``alphas`` (1-d), ``factors = log f_j``, ``j = 3..max(alphas)``: the sum of
    WBK 2019, Thm. 9 / 27, all orders at once (in blocks of orders)."""
    j = np.arange(3, factors.size + 3, dtype=float)
    out = np.empty(alphas.shape)
    rows = max(1, _TERM_BLOCK // max(j.size, 1))
    for start in range(0, alphas.size, rows):
        alpha = alphas[start:start + rows, None]
        terms = np.where(j <= alpha, factors + j * log_gamma + log_abs_binom(alpha, j), -np.inf)
        second = _log_second_order_term(alpha, sigma, log_gamma)
        out[start:start + rows] = special.logsumexp(
            np.concatenate([np.zeros(alpha.shape), second, terms], axis=1), axis=1)
    return out


#: The largest order at which :func:`sampled_without_replacement_gaussian_rdp_tight` uses the
#: forward differences (dp-accounting 0.6.0's limit); above it the j >= 3 terms are Thm. 9's.
FORWARD_DIFFERENCE_ORDERS = 256


def sampled_without_replacement_gaussian_rdp_tight(orders: ArrayLike, noise_multiplier: float,
                                                   sample_size: int,
                                                   dataset_size: int) -> np.ndarray:
    """Upper bound on the RDP of the subsampled Gaussian by the Gaussian-specific
    strengthening of WBK 2019, Thm. 9 (their Thm. 27, as dp-accounting 0.6.0 computes it for
    ``SampledWithoutReplacementDpEvent`` under replace-one):

    eps'(alpha) <= log(1 + gamma^2 C(alpha,2) min{4(e^{eps(2)} - 1), 2 e^{eps(2)}}
                   + sum_{j=3}^{alpha} gamma^j C(alpha,j) min{4 sqrt(|D_lo(j)| |D_hi(j)|),
                   2 e^{(j-1) eps(j)}}) / (alpha - 1),

    ``D_lo(j), D_hi(j)`` the forward differences of orders ``2 floor(j/2)``, ``2 ceil(j/2)``
    of ``k -> exp((k-1) k / (2 sigma^2))`` at 0. Each term is at most Thm. 9's, so the bound
    is never looser than :func:`sampled_without_replacement_gaussian_rdp`. Orders above
    :data:`FORWARD_DIFFERENCE_ORDERS` take Thm. 9's terms (as dp-accounting does). Integer
    orders >= 2. The forward differences are taken in log space with signs, vectorised, in
    the order dp-accounting takes them, and each is then raised by a bound on its rounding
    error (:func:`_log_forward_differences`): dp-accounting's own values fall below the exact
    differences by factors up to ~e^2.5 at noise multipliers >= 8 (cancellation), which an
    upper bound must not do. Where that error is negligible the two agree to rounding."""
    orders = as_orders(orders, integer=True)
    sigma = require_positive("noise_multiplier", noise_multiplier)
    log_gamma = _log_sampling_fraction(sample_size, dataset_size)
    low = orders <= FORWARD_DIFFERENCE_ORDERS
    rdp = np.empty(orders.shape)
    if (~low).any():
        rdp[~low] = sampled_without_replacement_gaussian_rdp(orders[~low], sigma, sample_size,
                                                             dataset_size)
    if low.any():
        alphas = orders[low]
        largest = int(alphas.max())
        j = np.arange(3, largest + 1, dtype=float)
        deltas = _log_forward_differences(sigma, largest)
        lo, hi = deltas[2 * np.floor(j / 2).astype(int) - 1], deltas[2 * np.ceil(j / 2)
                                                                      .astype(int) - 1]
        factors = np.minimum(math.log(4) + 0.5 * (lo + hi), _log_theorem9_factors(j, sigma))
        rdp[low] = _log_moment(alphas, sigma, log_gamma, factors) / (alphas - 1)
    return rdp


def _log_forward_differences(sigma: float, count: int) -> np.ndarray:
    """Upper bounds on ``log |Delta^(l+1) g(0)|``, ``l = 0..count+1``, of ``g(k) = exp((k-1)
    k / (2 sigma^2))``: ``count + 2`` successive first differences of ``g(0..count+2)`` kept
    as (log magnitude, sign) pairs (dp-accounting's ``_get_forward_diffs``, vectorised), each
    raised by the bound ``4 (l+2) 2^(l+1) u (1 + max log g) max g`` on the error that
    rounding (unit ``u``) in ``l + 1`` levels of differences can accumulate (each level
    doubles the error it inherits and adds ``~u`` times the largest value it holds, which is
    at most ``2^level max g``; a value stored as a logarithm ``L`` carries a relative error
    ``~u L``)."""
    k = np.arange(count + 3, dtype=float) - 1
    magnitudes, signs = k * (k + 1) / (2 * sigma**2), np.ones(count + 3, dtype=bool)
    levels = np.arange(1, count + 3, dtype=float)
    log_error = (math.log(4 * np.finfo(float).eps) + np.log(levels + 1) + levels * math.log(2)
                 + math.log1p(magnitudes.max()) + np.maximum.accumulate(magnitudes)[1:])
    deltas = np.empty(count + 2)
    for level in range(count + 2):
        a, b, sign_a, sign_b = magnitudes[:-1], magnitudes[1:], signs[:-1], signs[1:]
        top, bottom = np.maximum(a, b), np.minimum(a, b)
        with np.errstate(invalid="ignore", divide="ignore"):
            apart = np.where(a == b, -np.inf, top + np.log1p(-np.exp(bottom - top)))
            together = np.logaddexp(a, b)
        same = sign_a == sign_b
        magnitudes = np.where(same, apart, together)
        signs = np.where(same, (b >= a) == sign_b, sign_b)
        deltas[level] = magnitudes[0]
    return np.logaddexp(deltas, log_error)
