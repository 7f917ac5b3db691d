"""Evaluating learned policies as Sharma et al. (2025, Sec. 6) do: undiscounted returns of
episodes on the default environment, CartPole to 1000 steps, Acrobot to 200, LunarLander to
Gymnasium's 1000, HIV over its 50 steps of 20 days.

A policy is a function from observations ``(n, d)`` (float32 as recorded in the data; HIV:
``log10`` of the state) to actions ``(n,)``; every episode of a call runs in lockstep, and
the start states come from ``rng``, so a policy and the random policy can be evaluated on
the same starts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dprl.envs.acrobot import AcrobotVariants
from dprl.envs.cartpole import CartPoleVariants
from dprl.envs.episodes import simulate
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.envs.lunar_lander import DEFAULT_VARIANT, run_episodes
from dprl.sharma2025.hiv_experts import policy_returns
from dprl.sharma2025.release import N_ACTIONS
from dprl.validation import require_choice, require_int

#: Observations ``(n, d)`` -> actions ``(n,)``.
Act = Callable[[np.ndarray], np.ndarray]

#: Sec. 6's evaluation horizons.
EVALUATION_HORIZONS = {"CartPole": 1000, "Acrobot": 200, "LunarLander": 1000, "HIV": 50}

#: Observation size and number of actions (:data:`dprl.sharma2025.release.N_ACTIONS`) of
#: each environment.
SPACES = {env: (dim, N_ACTIONS[env])
          for env, dim in {"CartPole": 4, "Acrobot": 6, "LunarLander": 8, "HIV": 6}.items()}


def _check_env(env: str) -> str:
    return require_choice("env", env, EVALUATION_HORIZONS)


def episode_returns(env: str, act: Act, n_episodes: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Returns ``(n_episodes,)`` of ``act`` on ``env``'s default setting (module docstring);
    HIV, deterministic from its fixed initial state, draws nothing from ``rng``."""
    n = require_int("n_episodes", n_episodes)
    horizon = EVALUATION_HORIZONS[_check_env(env)]
    if env in ("CartPole", "Acrobot"):
        twin = (CartPoleVariants if env == "CartPole" else AcrobotVariants)(horizon=horizon)
        episodes = simulate(twin, lambda obs, _: act(obs.astype(np.float32)), n, rng)
        return episodes.rewards.sum(axis=-1)
    if env == "LunarLander":
        seeds = rng.integers(0, 2**31 - 1, size=(1, n))
        return run_episodes(DEFAULT_VARIANT, lambda obs, live, t: act(obs), seeds,
                            horizon).returns[0]
    return policy_returns(HIVTreatmentMDP.sharma2025(),
                          lambda t, obs: act(obs.astype(np.float32)), n)


def uniform_act(env: str, rng: np.random.Generator) -> Act:
    """The uniformly random policy of ``env`` (Fig. 3's 0), drawing from ``rng``."""
    n_actions = SPACES[_check_env(env)][1]
    return lambda obs: rng.integers(n_actions, size=len(obs))
