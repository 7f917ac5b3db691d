"""Expert-level against trajectory-level privacy (Sharma et al. 2025, Def. 3.3, Sec. 3.2).

Removing one expert removes all ``|D^pi|`` of its trajectories. A DP-SGD run accounted at the
trajectory level (each trajectory Poisson-sampled at rate ``q = b / n``) therefore says little
about an expert who contributed ``k`` trajectories: group privacy turns its ``(eps, delta)``
into ``(k eps, k e^{(k - 1) eps} delta)``, and an attacker who plants ``k`` trajectories whose
clipped gradients point the same way sees, per step, ``N(J C, s^2 C^2)`` with
``J ~ Binomial(k, q)`` against ``N(0, s^2 C^2)``. Expert-level DP-SGD (Alg. 4) samples experts
instead, each with probability ``b / m`` and one transition each, so that one expert moves
one clipped gradient and the usual Poisson-subsampled Gaussian accounting applies with
``q = b / m``.

Accounting is by dp-accounting's privacy loss distributions (PLD; Koskela et al. 2020,
Doroshenko et al. 2022), the accountant Sharma et al. (Sec. 6) use.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr
from scipy.stats import binom

from dprl.accounting.pld import pmf_pair_epsilon
from dprl.validation import (require_delta, require_epsilon, require_int, require_positive,
                             require_probability)


def group_privacy(eps: float, delta: float, k: int) -> tuple[float, float]:
    """Group privacy (Vadhan 2017, "The complexity of differential privacy", Lemma 2.2): an
    ``(eps, delta)``-DP mechanism is ``(k eps, k e^{(k - 1) eps} delta)``-DP for data sets that
    differ in ``k`` records."""
    eps, delta = require_epsilon(eps), require_delta(delta)
    k = require_int("k", k)
    return k * eps, k * math.exp((k - 1) * eps) * delta


def aligned_group_epsilon(noise_multiplier: float, sampling_rate: float, group_size: int,
                          steps: int, delta: float, bins_per_sigma: int = 40) -> float:
    """eps at ``delta`` that an attacker attains against trajectory-level DP-SGD by planting
    one expert's ``group_size`` trajectories with aligned clipped gradients (module
    docstring): the PLD of ``sum_j Binomial(j; k, q) N(j, s^2)`` against ``N(0, s^2)`` (both
    orders; the larger eps), composed over ``steps``. The output is binned to width
    ``s / bins_per_sigma`` and cut at 12 ``s`` from the extreme means; binning and cutting are
    post-processing and the privacy loss is rounded down (dp-accounting's optimistic
    estimate, on a grid of 1e-5), so this is a lower bound on the expert-level eps of the mechanism."""
    s = require_positive("noise_multiplier", noise_multiplier)
    q = require_probability("sampling_rate", sampling_rate, open_low=True)
    k, bins = require_int("group_size", group_size), require_int("bins_per_sigma", bins_per_sigma)
    edges = np.arange(-12 * s, k + 12 * s + s / bins, s / bins)
    weights = binom.pmf(np.arange(k + 1), k, q)
    cdf = ndtr((edges[None, :] - np.arange(k + 1)[:, None]) / s)
    mixture, gaussian = weights @ np.diff(cdf, axis=1), np.diff(cdf[0])
    keep = (mixture > 0) & (gaussian > 0)
    log_p = dict(enumerate(np.log(mixture[keep])))
    log_q = dict(enumerate(np.log(gaussian[keep])))
    delta = require_delta(delta)
    steps = require_int("steps", steps)
    return pmf_pair_epsilon(log_q, log_p, steps, delta, pessimistic=False,
                            discretization=1e-5)
