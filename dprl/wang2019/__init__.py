"""Wang & Hegde (2019), *Privacy-preserving Q-Learning with Functional Noise in Continuous
Spaces*: the functional noise and its privacy calibration.

- :mod:`~dprl.wang2019.functional_noise`: lazily evaluated Ornstein-Uhlenbeck sample paths
  (Alg. 1 lines 14-18, App. A Eq. (2), Prop. 9) and the dense Gaussian-process reference.
- :mod:`~dprl.wang2019.calibration`: the Gaussian-process mechanism (Prop. 4), Theorem 5's
  noise level and approximation factor, Lemma 8's uniform bound, and the generic
  composition bounds the paper compares with.
"""

from dprl.wang2019.functional_noise import (OUPath, conditional_moments,
                                            dense_conditional_moments, dense_conditional_sample,
                                            ou_kernel)

__all__ = [
    "OUPath",
    "conditional_moments",
    "dense_conditional_moments",
    "dense_conditional_sample",
    "ou_kernel",
]
