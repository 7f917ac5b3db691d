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
"""

__version__ = "0.1.0"
