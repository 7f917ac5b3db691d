"""Xie, Thomas & Miklau (2019), *Privacy Preserving Off-Policy Evaluation*: GPOPE
(gradient-perturbed GTD2) and its privacy analysis.

- :mod:`~dprl.xie2019.prepared`: the per-trajectory estimates (Eq. 2.2) and the primal-dual
  gradient (Eq. 4.1) they give, made ready once.
- :mod:`~dprl.xie2019.gpope`: GTD2 (Eq. 2.3) and GPOPE (Algorithm 1), vectorised over data
  sets and over runs (step sizes, privacy levels) on the same data.
- :mod:`~dprl.xie2019.privacy`: Lemma 1 and Theorem 1 as printed, the full subsampling bound
  of Wang, Balle & Kasiviswanathan (2019, Thm. 9) for the same mechanism, the noise
  calibration GPOPE uses, and the parameter relations of Table 1 (App. A).
- :mod:`~dprl.xie2019.baselines`: the sample statistics ``(A, b, C)`` for any feature table,
  LSTD and WIS-LSTD (Sec. 7's non-private baselines).
"""

from dprl.xie2019.baselines import episode_statistics, lstd, wis_lstd
from dprl.xie2019.gpope import gpope, gpope_runs, gradient_norms, primal_dual_descent
from dprl.xie2019.prepared import Prepared, prepare
from dprl.xie2019.privacy import (CALIBRATIONS, RELATION_PARAMETERS, Calibrations,
                                  calibrated_sigma, calibrations, certified_epsilon,
                                  dp_accounting_epsilon,
                                  dp_accounting_sigma, exact_log_moment, gpope_delta,
                                  gpope_epsilon, gpope_sigma, lemma1_delta, lemma1_log_moment,
                                  lemma1_sigma, paper_pair_epsilon, pld_epsilon, pld_sigma,
                                  relation_signs,
                                  theorem1_constant, theorem1_premise, tightest_epsilon,
                                  tightest_sigma)

__all__ = [
    "CALIBRATIONS",
    "Calibrations",
    "Prepared",
    "RELATION_PARAMETERS",
    "calibrated_sigma",
    "calibrations",
    "certified_epsilon",
    "dp_accounting_epsilon",
    "dp_accounting_sigma",
    "episode_statistics",
    "exact_log_moment",
    "gpope",
    "gpope_delta",
    "gpope_epsilon",
    "gpope_runs",
    "gpope_sigma",
    "gradient_norms",
    "lemma1_delta",
    "lemma1_log_moment",
    "lemma1_sigma",
    "paper_pair_epsilon",
    "pld_epsilon",
    "pld_sigma",
    "lstd",
    "prepare",
    "primal_dual_descent",
    "relation_signs",
    "theorem1_constant",
    "theorem1_premise",
    "tightest_epsilon",
    "tightest_sigma",
    "wis_lstd",
]
