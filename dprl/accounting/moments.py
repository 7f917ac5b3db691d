"""The moments accountant of Abadi et al. (2016), "Deep learning with differential privacy".

The log moment alpha_M(lambda) of a mechanism M is lambda times its Renyi divergence of
order lambda + 1: alpha_M(lambda) = lambda * RDP(lambda + 1) (as Mironov 2017 notes), so the
moments accountant is RDP accounting on the integer orders lambda + 1 with the classic
conversion. Abadi et al. analyse Poisson sampling with rate q (add/remove-one neighbours).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from dprl.validation import require_array, require_delta, require_int, require_positive

#: Abadi et al. (2016, Sec. 3.1): "in practice, we compute alpha(lambda) for lambda <= 32".
DEFAULT_MAX_LAMBDA = 32


def moments_accountant_log_moment(lam: ArrayLike, noise_multiplier: float,
                                  sampling_rate: float) -> np.ndarray:
    """Leading term of the log-moment bound of one Poisson-subsampled Gaussian step
    (Abadi et al. 2016, Lemma 3): alpha(lambda) <= q^2 lambda (lambda + 1)/((1 - q) sigma^2)
    + O(q^3 lambda^3 / sigma^3); the O(.) remainder is dropped, as in the proof of the
    paper's Theorem 1, so this is the paper's working bound, not a proven one.

    Lemma 3 needs sigma >= 1, q < 1/(16 sigma) and integers 1 <= lambda <= sigma^2 ln(1/(q sigma));
    anything else raises. ``lam`` is a scalar or 1-D array; the result has its shape.
    """
    lam_max = _lemma3_max_lambda(noise_multiplier, sampling_rate)
    lam = require_array("lam", lam)
    if lam.ndim > 1 or np.any(lam != np.round(lam)) or np.any(lam < 1) or np.any(lam > lam_max):
        raise ValueError(f"lam must hold integers in [1, {lam_max}] (Abadi et al. 2016, Lemma 3:"
                         f" lambda <= sigma^2 ln(1/(q sigma))), got {lam.tolist()}")
    q, sigma = sampling_rate, noise_multiplier
    return q**2 * lam * (lam + 1) / ((1 - q) * sigma**2)


def moments_accountant_epsilon(noise_multiplier: float, sampling_rate: float, steps: int,
                               delta: float,
                               max_lambda: int = DEFAULT_MAX_LAMBDA) -> tuple[float, int]:
    """eps of T Poisson-subsampled Gaussian steps by the moments accountant (Abadi et al.
    2016): log moments compose additively (Thm. 2, part 1) and the tail bound
    delta = min_lambda exp(T alpha(lambda) - lambda eps) (Thm. 2, part 2) gives
    eps = min_lambda (T alpha(lambda) + log(1/delta)) / lambda over integers
    1 <= lambda <= min(max_lambda, sigma^2 ln(1/(q sigma))), alpha(lambda) from
    :func:`moments_accountant_log_moment` (its O(q^3 lambda^3/sigma^3) remainder dropped).
    Returns (eps, the minimising lambda).
    """
    lam_max = min(require_int("max_lambda", max_lambda, minimum=1),
                  _lemma3_max_lambda(noise_multiplier, sampling_rate))
    steps = require_int("steps", steps, minimum=1)
    delta = require_delta(delta)
    lam = np.arange(1, lam_max + 1, dtype=float)
    eps = (steps * moments_accountant_log_moment(lam, noise_multiplier, sampling_rate)
           - math.log(delta)) / lam
    best = int(np.argmin(eps))
    return float(eps[best]), best + 1


def _lemma3_max_lambda(noise_multiplier: float, sampling_rate: float) -> int:
    """floor(sigma^2 ln(1/(q sigma))) after checking sigma >= 1 and 0 < q < 1/(16 sigma)."""
    sigma = require_positive("noise_multiplier", noise_multiplier)
    q = require_positive("sampling_rate", sampling_rate)
    if sigma < 1:
        raise ValueError(f"the moments accountant's Lemma 3 (Abadi et al. 2016) needs "
                         f"noise_multiplier >= 1, got {sigma}")
    if q >= 1 / (16 * sigma):
        raise ValueError(f"the moments accountant's Lemma 3 (Abadi et al. 2016) needs "
                         f"sampling_rate < 1/(16 sigma) = {1 / (16 * sigma)}, got {q}")
    return math.floor(sigma**2 * math.log(1 / (q * sigma)))
