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
    second = _log_second_order_term(orders, sigma, log_gamma)
    log_sums = [special.logsumexp(np.append(_log_higher_order_terms(int(a), sigma, log_gamma), s))
                for a, s in zip(orders.ravel(), second.ravel())]
    return np.logaddexp(0.0, np.reshape(log_sums, orders.shape)) / (orders - 1)


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


def _log_higher_order_terms(alpha: int, sigma: float, log_gamma: float) -> np.ndarray:
    """logs of 2 gamma^j C(alpha,j) e^{(j-1) eps(j)}, j = 3..alpha, eps(j) = j/(2 sigma^2)."""
    j = np.arange(3, alpha + 1, dtype=float)
    return math.log(2) + j * log_gamma + log_abs_binom(alpha, j) + (j - 1) * j / (2 * sigma**2)
