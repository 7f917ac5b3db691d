"""dprl: differentially private reinforcement learning, reproduced.

The package behind the dprl book. Submodules:

- :mod:`dprl.mechanisms`: Gaussian (classic and analytic) and Laplace mechanisms.
- :mod:`dprl.accounting`: Renyi-DP accounting, conversions, composition, calibration.
- :mod:`dprl.envs`: Gymnasium environments (the chain of Balle et al. 2016) and exact solutions;
  a vectorised MountainCar-v0 twin.
- :mod:`dprl.control`: linear Q-learning (Watkins's Q(lambda)) and the policies it yields.
- :mod:`dprl.features`: tabular, state-aggregation and Fourier features.
- :mod:`dprl.policy_evaluation`: Monte Carlo, TD(0), LSTD, GTD2 and the MSPBE.
- :mod:`dprl.balle2016`: DP-LSW and DP-LSL with smooth sensitivity (Balle et al. 2016).
- :mod:`dprl.xie2019`: GPOPE, its privacy and utility analysis, LSTD and WIS-LSTD (Xie et al. 2019).
- :mod:`dprl.wang2019`: the Ornstein-Uhlenbeck functional-noise sampler and the noise
  calibration of Wang & Hegde (2019).
- :mod:`dprl.experiments`: the experiment registry, runner, provenance and result loader.
- :mod:`dprl.plotting`: the book's figure style.
- :mod:`dprl.determinism`: deterministic torch, generators tied to numpy streams.
- :mod:`dprl.floating_point`: the CPU dispatch pinned so that results are the same bits on
  every x86-64-v3 machine (set here, before numpy is loaded).
"""

import warnings

from dprl import floating_point

_unpinned = floating_point.pin()
if _unpinned:
    warnings.warn("dprl: numpy is not pinned to the reproducible floating-point configuration "
                  "(results may differ in the last bits from the committed ones; set the "
                  "variables before numpy is imported, e.g. with `make lab` or "
                  "`env $(python -m dprl env) jupyter lab`): " + "; ".join(_unpinned),
                  RuntimeWarning, stacklevel=2)

__version__ = "0.1.0"
