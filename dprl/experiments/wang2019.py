"""Experiments of Wang & Hegde (2019), Sec. 4: Fig. 1, Algorithm 1's learning curves.

The authors' 1-D MDP (:class:`~dprl.envs.LineMDP`) and DQN (MLP 1-16-16-2, RMSprop, batch 128,
gamma 0.999, replay 10,000, 100 episodes of 50 steps: ``AUTHORS_DQN``), one noise path per
action with kernel ``sigma^2 exp(-|x - y|)``, noise levels ``sigma`` and reset periods: a fresh
path every ``reset_period`` steps, i.e. reset factor ``J = T / reset_period`` for the
``T = 5000`` training steps (one SGD step per environment step, as in the authors' code).

Trial ``i`` is seed ``i``: it uses the same generator at every noise level and reset period
(common random numbers, as the authors' code reuses its seeds), so the curves differ only by
the noise. Per trial: the return of every training episode ``(periods, levels, episodes)`` and
the greedy return of the released noisy Q over ``evaluation_episodes`` episodes.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence

import numpy as np

from dprl.experiments.registry import Experiment, TrialConfig, register
from dprl.wang2019.q_learning import AUTHORS_DQN, MLPQ, evaluate_greedy, train


@dataclasses.dataclass(frozen=True, kw_only=True)
class Figure1Config(TrialConfig):
    """Noise levels, reset periods and episode counts (stated in the chapter)."""

    sigma_levels: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    reset_periods: tuple[int, ...] = (50, 500, 5000)
    n_episodes: int = 100
    evaluation_episodes: int = 100


def figure1_trials(config: Figure1Config,
                   rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Algorithm 1 for every (reset period, noise level) and trial, all trials at once."""
    levels, n = len(config.sigma_levels), len(rngs)
    returns = np.empty((n, len(config.reset_periods), levels, config.n_episodes))
    greedy = np.empty((n, len(config.reset_periods), levels))
    sigmas = np.repeat(config.sigma_levels, n)  # level-major: run k n + i is level k, trial i
    for j, period in enumerate(config.reset_periods):
        dqn = dataclasses.replace(AUTHORS_DQN, n_episodes=config.n_episodes, reset_period=period)
        result = train(MLPQ(), dqn, sigmas, [copy.deepcopy(g) for _ in range(levels)
                                             for g in rngs])
        evaluation = [copy.deepcopy(g).spawn(7)[6] for _ in range(levels) for g in rngs]
        values = evaluate_greedy(result.released, config.evaluation_episodes, evaluation)
        returns[:, j] = result.returns.reshape(levels, n, -1).swapaxes(0, 1)
        greedy[:, j] = values.reshape(levels, n).T
    return {"returns": returns, "greedy_returns": greedy}


FIGURE1 = register(Experiment(
    id="wang2019-figure1",
    title="Wang & Hegde (2019), Fig. 1: Algorithm 1 at several noise levels and reset factors",
    chapter="book/wang2019/experiments.ipynb",
    configs={"smoke": Figure1Config(n_trials=2, root_seed=0, batch_size=2,
                                    sigma_levels=(0.0, 0.6), reset_periods=(50,), n_episodes=3,
                                    evaluation_episodes=5),
             "paper": Figure1Config(n_trials=10, root_seed=0, batch_size=10)},
    run_trials=figure1_trials))
