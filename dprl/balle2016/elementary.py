"""The constants of Balle, Gomrokchi & Precup (2016), Appendix A, Lemma 14: the paper's own
(elementary) proof of the smoothed Gaussian mechanism, with worse constants than Lemma 1,
whose proof (Nissim et al. 2011) is only available as a preprint.

The mechanism is the same as Lemma 1's: output ``N(mu_X, sigma_X^2 I)`` with
(a) ``sigma_X >= alpha ||mu_X - mu_X'||`` and (b) ``|ln sigma_X^2 - ln sigma_X'^2| <= beta`` for
all neighbours; only ``alpha`` and ``beta`` change.
"""

from __future__ import annotations

import numpy as np

from dprl.validation import require_delta, require_epsilon, require_int

#: Lemma 14 is stated for eps <= 5 only.
LEMMA14_MAX_EPSILON = 5.0


def lemma14_constants(eps: float, delta: float, d: int) -> tuple[float, float]:
    """``alpha = 15 sqrt(2 ln(4/delta)) / eps`` and
    ``beta = (2 ln 2) eps / (5 (sqrt(d) + sqrt(2 ln(4/delta)))^2)`` of Lemma 14 (Balle et al.
    2016, App. A), which makes the smoothed Gaussian mechanism ``(eps, delta)``-DP for
    ``eps <= 5`` (and ``beta <= ln 2``, implied here since ``delta < 1``)."""
    eps, delta, d = require_epsilon(eps), require_delta(delta), require_int("d", d)
    if eps > LEMMA14_MAX_EPSILON:
        raise ValueError(f"eps must be <= {LEMMA14_MAX_EPSILON} for Lemma 14 "
                         f"(Balle et al. 2016, App. A), got {eps}")
    root = np.sqrt(2 * np.log(4 / delta))
    alpha = 15 * root / eps
    beta = 2 * np.log(2) * eps / (5 * (np.sqrt(d) + root) ** 2)
    assert beta <= np.log(2)  # (sqrt(d) + root)^2 > (1 + sqrt(2 ln 4))^2 > 2 when eps <= 5
    return float(alpha), float(beta)
