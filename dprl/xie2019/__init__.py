"""Xie, Thomas & Miklau (2019), *Privacy Preserving Off-Policy Evaluation*: GPOPE
(gradient-perturbed GTD2) and its privacy analysis.

- :mod:`~dprl.xie2019.privacy`: Lemma 1 and Theorem 1 as printed, the full subsampling bound
  of Wang, Balle & Kasiviswanathan (2019, Thm. 9) for the same mechanism, the noise
  calibration GPOPE uses, and the parameter relations of Table 1 (App. A).
"""

from dprl.xie2019.privacy import (RELATION_PARAMETERS, gpope_delta, gpope_epsilon, gpope_sigma,
                                  lemma1_delta, lemma1_log_moment, lemma1_sigma,
                                  relation_signs, theorem1_constant)

__all__ = [
    "RELATION_PARAMETERS",
    "gpope_delta",
    "gpope_epsilon",
    "gpope_sigma",
    "lemma1_delta",
    "lemma1_log_moment",
    "lemma1_sigma",
    "relation_signs",
    "theorem1_constant",
]
