"""Wang & Hegde (2019), *Privacy-preserving Q-Learning with Functional Noise in Continuous
Spaces*: the functional noise, its privacy calibration, Algorithm 1 and the baselines.

- :mod:`~dprl.wang2019.functional_noise`: lazily evaluated Ornstein-Uhlenbeck sample paths
  (Alg. 1 lines 14-18, App. A Eq. (2), Prop. 9) and the dense Gaussian-process reference.
- :mod:`~dprl.wang2019.calibration`: the Gaussian-process mechanism (Prop. 4), Theorem 5's
  noise level and approximation factor, Lemma 8's uniform bound, and the generic
  composition bounds the paper compares with.
- :mod:`~dprl.wang2019.q_learning`: Algorithm 1 (Q-learning with functional noise) with the
  authors' DQN, batched over runs; :mod:`~dprl.wang2019.run_paths`: the batched OU paths it
  uses.
- :mod:`~dprl.wang2019.baselines` and :mod:`~dprl.wang2019.dp_sgd`: input perturbation,
  output perturbation (not private; utility only) and DP-SGD without amplification, calibrated
  for the same ``(eps, delta)`` under ``||r - r'||_inf <= 1`` (Sec. 4, Fig. 2).
- :mod:`~dprl.wang2019.utility`: the discrete line MDP, tabular Algorithm 1 with one noise
  path (J = 1) and the bound of Prop. 10.
- :mod:`~dprl.wang2019.benchmarks`: the speed workloads of Prop. 9.
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
