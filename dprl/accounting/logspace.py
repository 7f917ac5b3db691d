"""Log-space arithmetic shared by the RDP bounds (sums of huge or tiny positive terms)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import special


def log_abs_binom(n: ArrayLike, k: ArrayLike) -> np.ndarray:
    """log |C(n, k)| for real ``n`` and integer ``k >= 0`` (the generalised binomial
    coefficient n (n-1) ... (n-k+1) / k!, through log-gamma; its sign is
    ``scipy.special.gammasgn(n - k + 1)`` for non-integer ``n > -1``)."""
    n, k = np.asarray(n, dtype=float), np.asarray(k, dtype=float)
    return special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)


def log_abs_expm1(x: ArrayLike) -> np.ndarray:
    """log |e^x - 1| for any real x (-inf at x = 0), accurate for tiny |x| and large x."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(x > 0, x + np.log(-np.expm1(-np.abs(x))), np.log(-np.expm1(-np.abs(x))))
