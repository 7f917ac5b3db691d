"""Experiments of the Xie et al. (2019) chapters: the chain of Sec. 7 (Fig. 1, App. Fig. 5).

On-policy chain (N = 40, p = 0.5, gamma = 0.99, uniform start, horizon 200), tabular
features, eps = 0.1, delta = 1e-5. GPOPE runs ``N = m`` iterations (one pass on average; with
the full subsampling bound, eps = 0.1 cannot be certified at any sigma for m <= 300 with
N >= m, so the batch sizes start at 1000) with a fixed clipping bound and a constant step; its MSPBE uses the exact per-trajectory ``A, b, C`` of
Eq. 2.1 (dynamic programming). Data sets are nested: the first ``m`` trajectories of a trial's
sample. DP-LSW and DP-LSL (Balle et al. 2016) run on the same data sets at the same
``(eps, delta)``, with Lemma 1's constants and ``lambda = c sqrt(m)``.

- ``xie2019-chain-tuning``: the step sizes, chosen on *public* data (trials from another
  root seed, never the private runs): MSPBE of GPOPE for every step of the grid and every m.
- ``xie2019-chain``: Fig. 1(a) (MSPBE against m for GPOPE at the tuned step, 0.1x and 10x,
  DP-LSW, DP-LSL) and Fig. 1(b) / App. Fig. 5 (MSPBE against the step at ``m_fixed``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from dprl.balle2016 import dp_lsl, dp_lsw, first_visit_data
from dprl.envs import ChainMDP, stack_trajectories
from dprl.experiments.registry import Experiment, TrialConfig, register
from dprl.features import tabular_features
from dprl.policy_evaluation import exact_td_statistics, mspbe
from dprl.xie2019 import Prepared, gpope, prepare


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChainConfig(TrialConfig):
    """The chain, privacy, GPOPE's fixed settings and the grids (stated in the chapter)."""

    n_states: int = 40
    stay_prob: float = 0.5
    gamma: float = 0.99
    eps: float = 0.1
    delta: float = 1e-5
    batch_sizes: tuple[int, ...] = (1000, 3000, 10000)
    #: iterations per trajectory held: N = epochs * m
    epochs: float = 1.0
    clip: float = 0.01
    step_grid: tuple[float, ...] = tuple(float(10 ** (k / 2)) for k in range(-6, 3))
    #: GPOPE's steps per batch size, from ``xie2019-chain-tuning`` (a test checks they are its
    #: argmins); empty for the tuning experiment itself.
    tuned_steps: tuple[float, ...] = ()
    step_multipliers: tuple[float, ...] = (0.1, 1.0, 10.0)
    m_fixed: int = 1000
    ridge_scale: float = 100.0

    @property
    def mdp(self) -> ChainMDP:
        """The chain."""
        return ChainMDP(n_states=self.n_states, stay_prob=self.stay_prob, gamma=self.gamma)


def _setup(config: ChainConfig, rngs: Sequence[np.random.Generator]):
    mdp = config.mdp
    features = tabular_features(mdp.n_states)
    exact = exact_td_statistics(mdp, features, normalisation="trajectories")
    sample = stack_trajectories([mdp.sample(max(config.batch_sizes), g) for g in rngs])
    return mdp, features, exact, sample


def _gpope_mspbe(config: ChainConfig, mdp: ChainMDP, features: np.ndarray, exact, data,
                 step: float, rngs: Sequence[np.random.Generator],
                 prepared: Prepared) -> np.ndarray:
    """MSPBE of GPOPE at ``step`` on ``data`` (``prepared``: :func:`prepare` of it, shared by
    every step on the same data)."""
    n_iterations = max(1, round(config.epochs * data.batch_shape[-1]))
    theta, _ = gpope(data, features, mdp.gamma, step, n_iterations, config.clip,
                     config.eps, config.delta, rngs, prepared=prepared)
    return mspbe(theta, *exact)


def tuning_trials(config: ChainConfig,
                  rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """GPOPE's MSPBE ``(sizes, steps)`` per (public) trial."""
    mdp, features, exact, sample = _setup(config, rngs)
    out = np.empty((len(rngs), len(config.batch_sizes), len(config.step_grid)))
    for i, m in enumerate(config.batch_sizes):
        data = sample.first(m)
        prepared = prepare(data, features, mdp.gamma)
        for j, step in enumerate(config.step_grid):
            out[:, i, j] = _gpope_mspbe(config, mdp, features, exact, data, step, rngs,
                                        prepared)
    return {"mspbe": out}


def chain_trials(config: ChainConfig,
                 rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial: GPOPE's MSPBE ``(sizes, multipliers)``, DP-LSW's and DP-LSL's ``(sizes,)``,
    and GPOPE's MSPBE over the step grid at ``m_fixed`` ``(steps,)``."""
    if len(config.tuned_steps) != len(config.batch_sizes):
        raise ValueError("tuned_steps must give one step per batch size")
    mdp, features, exact, sample = _setup(config, rngs)
    rho = mdp.start_probabilities
    n = len(rngs)
    out = {"gpope": np.empty((n, len(config.batch_sizes), len(config.step_multipliers))),
           "dp_lsw": np.empty((n, len(config.batch_sizes))),
           "dp_lsl": np.empty((n, len(config.batch_sizes))),
           "step_sweep": np.empty((n, len(config.step_grid)))}
    for i, m in enumerate(config.batch_sizes):
        data = sample.first(m)
        prepared = prepare(data, features, mdp.gamma)
        for k, factor in enumerate(config.step_multipliers):
            out["gpope"][:, i, k] = _gpope_mspbe(config, mdp, features, exact, data,
                                                 factor * config.tuned_steps[i], rngs,
                                                 prepared)
        summary = first_visit_data(data, mdp.gamma, mdp.n_states, 1.0).summary
        out["dp_lsw"][:, i] = mspbe(dp_lsw(summary, features, rho, config.eps, config.delta,
                                           rngs), *exact)
        lam = config.ridge_scale * np.sqrt(m)
        out["dp_lsl"][:, i] = mspbe(dp_lsl(summary, features, rho, lam, config.eps,
                                           config.delta, rngs), *exact)
    data = sample.first(config.m_fixed)
    prepared = prepare(data, features, mdp.gamma)
    for j, step in enumerate(config.step_grid):
        out["step_sweep"][:, j] = _gpope_mspbe(config, mdp, features, exact, data, step, rngs,
                                               prepared)
    return out


TUNING = register(Experiment(
    id="xie2019-chain-tuning",
    title="Xie et al. (2019), chain: GPOPE step sizes tuned on public data",
    chapter="book/xie2019/chain-experiments.ipynb",
    configs={
        "smoke": ChainConfig(n_trials=2, root_seed=7, batch_size=2, eps=1.0,
                             batch_sizes=(200, 400), epochs=0.25, step_grid=(0.1, 1.0)),
        "paper": ChainConfig(n_trials=10, root_seed=7, batch_size=10),
    },
    run_trials=tuning_trials))

CHAIN = register(Experiment(
    id="xie2019-chain",
    title="Xie et al. (2019), Fig. 1 and App. Fig. 5: GPOPE, DP-LSW and DP-LSL on the chain",
    chapter="book/xie2019/chain-experiments.ipynb",
    configs={
        "smoke": ChainConfig(n_trials=3, root_seed=2019, batch_size=2, eps=1.0,
                             batch_sizes=(200, 400), epochs=0.25, step_grid=(0.1, 1.0),
                             tuned_steps=(0.3, 0.3), m_fixed=200),
        # tuned_steps: the argmins of xie2019-chain-tuning (10^-1.5 at every m; tested)
        "paper": ChainConfig(n_trials=100, root_seed=2019, batch_size=10,
                             tuned_steps=(10 ** (-3 / 2),) * 3),
    },
    run_trials=chain_trials, after=(TUNING.id,)))
