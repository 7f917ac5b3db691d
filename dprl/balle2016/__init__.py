"""Balle, Gomrokchi & Precup (2016), *Differentially Private Policy Evaluation*: first-visit
Monte Carlo statistics, the LSW and LSL estimators and their private versions DP-LSW and
DP-LSL (smooth-sensitivity Gaussian output perturbation).

Neighbouring relation (Sec. 2.1): data sets of the same size ``m`` that differ in one
trajectory (replace-one). Every first-visit return must lie in ``[0, F_max]`` for a public
``F_max`` (``R_max / (1 - gamma)`` unless a smaller public bound is given, Sec. 3.1).

- :mod:`~dprl.balle2016.statistics`: ``F_{x,s}``, ``|X_s|``, ``F_X``, ``K_X``, ``Gamma_X``.
- :mod:`~dprl.balle2016.estimators`: objectives (Eqs. 3, 6, 10), LSW (Eq. 8), LSL (Eq. 11).
- :mod:`~dprl.balle2016.smooth_sensitivity`: ``alpha, beta`` (Lemma 1), ``phi_k`` and the
  beta-smooth bounds ``psi`` (Eqs. 9, 12; Lemmas 4, 5, 9).
- :mod:`~dprl.balle2016.mechanisms`: noise scales and releases of Algorithms 1 and 2, and a
  global-sensitivity comparison.
- :mod:`~dprl.balle2016.chain_sampler`: the exact law of the statistics of ``m`` chain
  trajectories, drawn without simulating them (Sec. 6 at any batch size).
- :mod:`~dprl.balle2016.utility`: excess empirical risk, its expectation and bounds (Sec. 5).
- :mod:`~dprl.balle2016.calibration`: an exact calibration of Lemma 1's ``alpha`` (beyond the
  paper).
"""

from dprl.balle2016.estimators import (lsl, lsw, objective, ridge_objective,
                                       weighted_objective)
from dprl.balle2016.mechanisms import (dp_lsl, dp_lsl_noise_scale, dp_lsw, dp_lsw_noise_scale,
                                       gaussian_perturbation, lsl_global_noise_scale,
                                       lsw_global_noise_scale, ridge_constant, ridge_threshold)
from dprl.balle2016.smooth_sensitivity import (LEMMA9_VARIANTS, lsl_local_bound,
                                               lsl_smooth_bound, lsw_local_bound,
                                               lsw_smooth_bound, smoothing_constants)
from dprl.balle2016.statistics import (FirstVisitData, FirstVisitSummary, first_visit_data,
                                       stack_summaries, visit_weights)

__all__ = [
    "LEMMA9_VARIANTS",
    "FirstVisitData",
    "FirstVisitSummary",
    "dp_lsl",
    "dp_lsl_noise_scale",
    "dp_lsw",
    "dp_lsw_noise_scale",
    "first_visit_data",
    "gaussian_perturbation",
    "lsl",
    "lsl_global_noise_scale",
    "lsl_local_bound",
    "lsl_smooth_bound",
    "lsw",
    "lsw_global_noise_scale",
    "lsw_local_bound",
    "lsw_smooth_bound",
    "objective",
    "ridge_constant",
    "ridge_objective",
    "ridge_threshold",
    "smoothing_constants",
    "stack_summaries",
    "visit_weights",
    "weighted_objective",
]
