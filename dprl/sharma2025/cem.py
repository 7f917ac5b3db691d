"""Experts for CartPole and Acrobot, trained by the noisy cross-entropy method.

Sharma et al. (2025, App. B.1) train PPO agents on each of 1000 environment variants and keep
the 3 best per variant. The book's substitute, feasible on 2 CPU cores, trains the small
networks of :mod:`dprl.sharma2025.mlp_policies` by the cross-entropy method with added noise
(Szita & Lorincz 2006, "Learning Tetris using the noisy cross-entropy method"): a diagonal
Gaussian over the parameters, from a generic prior ``N(0, init_std^2 I)``; per iteration,
``population`` candidates each play ``episodes`` episodes of ``horizon`` steps on their run's
variant, the ``elite`` best (mean return) refit the mean and standard deviation, and
``extra_std`` (decaying linearly to 0 at the last iteration) is added to the deviation.

Every setting trains ``runs`` independent runs; the runs' final means are the candidates, of
which the ``keep`` best on their own variant are that setting's experts (App. B.1's "top
3"). With ``budgets="full"`` every run trains all ``iterations``, as App. B.1's fully
trained agents do; with ``budgets="random"`` each run is stopped at its own budget, drawn
uniformly from ``1 .. iterations``: the book's first populations, weakened for a wide spread
of quality (the paper keeps the top 3 of fully trained PPO agents), kept as an ablation.

All runs of all settings step together in one vectorised twin
(:class:`dprl.envs.cartpole.CartPoleVariants`, :class:`dprl.envs.acrobot.AcrobotVariants`);
each setting draws only from its own generator, so a setting's experts are the same bits
whatever settings it is trained with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dprl.envs.episodes import VectorEnv
from dprl.seeding import named_stream
from dprl.sharma2025.mlp_policies import TanhPolicies, n_parameters
from dprl.validation import require_choice, require_int, require_nonnegative, require_positive

#: ``make_env(**parameters)``: a twin whose parameters are ``(n,)`` arrays, one per copy.
EnvFactory = Callable[..., VectorEnv]

_BUDGETS, _CANDIDATES, _STARTS, _EVALUATION = 0, 1, 2, 3  # named streams of a setting

#: How long each run trains (module docstring).
BUDGETS = ("random", "full")


@dataclass(frozen=True, kw_only=True)
class CEMSettings:
    """The cross-entropy method's settings (module docstring); the defaults are the book's
    paper-scale experts."""

    n_hidden: int = 16
    runs: int = 4
    keep: int = 3
    iterations: int = 12
    population: int = 16
    elite: int = 4
    episodes: int = 1
    horizon: int = 200
    init_std: float = 1.0
    extra_std: float = 0.2
    eval_episodes: int = 10
    budgets: str = "random"

    def __post_init__(self) -> None:
        require_choice("budgets", self.budgets, BUDGETS)
        for name in ("n_hidden", "runs", "keep", "iterations", "population", "elite",
                     "episodes", "horizon", "eval_episodes"):
            require_int(name, getattr(self, name))
        if self.keep > self.runs:
            raise ValueError(f"keep must be <= runs = {self.runs}, got {self.keep}")
        if self.elite > self.population:
            raise ValueError(f"elite must be <= population = {self.population}, got {self.elite}")
        require_positive("init_std", self.init_std)
        require_nonnegative("extra_std", self.extra_std)


def episode_returns(make_env: EnvFactory, parameters: Mapping[str, np.ndarray],
                    policies: TanhPolicies, starts: np.ndarray, horizon: int) -> np.ndarray:
    """Undiscounted returns ``(m, E)`` of greedy network ``i`` on variant ``i`` (parameters
    ``(m,)`` each) from the start states ``(m, E, state_dim)``, truncated after ``horizon``
    steps (rewards stop at termination; Gymnasium's semantics)."""
    m, n_episodes = starts.shape[:2]
    env = make_env(**{name: np.repeat(value, n_episodes) for name, value in parameters.items()})
    states = starts.reshape(m * n_episodes, -1)
    alive = np.ones(m * n_episodes, dtype=bool)
    total = np.zeros(m * n_episodes)
    for _ in range(horizon):
        observations = env.observe(states).reshape(m, n_episodes, -1)
        actions = policies.greedy_actions(observations).ravel()
        following, rewards, terminated = env.step(states, actions)
        total = total + np.where(alive, rewards, 0.0)
        alive = alive & ~terminated
        states = np.where(alive[:, None], following, states)
        if not alive.any():
            break
    return total.reshape(m, n_episodes)


def _start_states(env: VectorEnv, rngs: Sequence[np.random.Generator], shape: tuple[int, ...],
                  stream: tuple[int, ...]) -> np.ndarray:
    """Start states ``(settings, *shape, state_dim)``, each setting's from its named stream."""
    size = int(np.prod(shape))
    return np.stack([env.reset(size, named_stream(rng, *stream)).reshape(*shape, -1)
                     for rng in rngs])


def train_experts(make_env: EnvFactory, obs_dim: int, n_actions: int,
                  settings: Mapping[str, np.ndarray], rngs: Sequence[np.random.Generator],
                  cem: CEMSettings, default: Mapping[str, float]) -> dict[str, np.ndarray]:
    """Train ``cem.runs`` runs per setting (module docstring) and keep the ``cem.keep`` best.

    ``settings`` maps each variant parameter to ``(S,)`` values and ``rngs`` holds one
    generator per setting. Returns per setting: ``parameters (S, keep, P)``, ``budgets``,
    ``own_returns`` (mean over ``eval_episodes`` on the setting's own variant) and
    ``default_returns`` (on the ``default`` variant) ``(S, keep)``, and the elite mean return
    of every run and iteration ``curves (S, runs, iterations)``.
    """
    n_settings, runs, K = len(rngs), cem.runs, cem.population
    if any(np.shape(v) != (n_settings,) for v in settings.values()):
        raise ValueError(f"every settings array must have shape ({n_settings},)")
    size = n_parameters(obs_dim, cem.n_hidden, n_actions)
    probe = make_env(**{name: np.asarray([value]) for name, value in default.items()})
    run_settings = {name: np.repeat(value, runs) for name, value in settings.items()}
    budgets = (np.stack([named_stream(rng, _BUDGETS).integers(1, cem.iterations + 1, runs)
                         for rng in rngs]) if cem.budgets == "random"
               else np.full((n_settings, runs), cem.iterations))
    mean = np.zeros((n_settings, runs, size))
    std = np.full((n_settings, runs, size), cem.init_std)
    stopped = mean.copy()
    curves = np.zeros((n_settings, runs, cem.iterations))
    noise = [named_stream(rng, _CANDIDATES) for rng in rngs]
    for it in range(cem.iterations):
        eps = np.stack([g.standard_normal((runs, K, size)) for g in noise])
        candidates = mean[:, :, None, :] + std[:, :, None, :] * eps
        starts = _start_states(probe, rngs, (runs * K, cem.episodes), (_STARTS, it))
        policies = TanhPolicies(candidates.reshape(-1, size), obs_dim, cem.n_hidden, n_actions)
        scores = episode_returns(
            make_env, {n: np.repeat(v, K) for n, v in run_settings.items()}, policies,
            starts.reshape(n_settings * runs * K, cem.episodes, -1), cem.horizon)
        scores = scores.mean(axis=1).reshape(n_settings, runs, K)
        order = np.argsort(-scores, axis=2, kind="stable")[:, :, :cem.elite]
        elites = np.take_along_axis(candidates, order[..., None], axis=2)
        curves[:, :, it] = np.take_along_axis(scores, order, axis=2).mean(axis=2)
        extra = cem.extra_std * (1 - it / cem.iterations)
        mean, std = elites.mean(axis=2), np.sqrt(elites.var(axis=2) + extra ** 2)
        stopped = np.where((budgets == it + 1)[..., None], mean, stopped)
    own = _evaluate(make_env, run_settings, stopped, obs_dim, n_actions, cem, rngs, 0)
    best = np.argsort(-own, axis=1, kind="stable")[:, :cem.keep]
    kept = np.take_along_axis(stopped, best[..., None], axis=1)
    defaults = {name: np.full(n_settings * cem.keep, value) for name, value in default.items()}
    return {"parameters": kept, "budgets": np.take_along_axis(budgets, best, axis=1),
            "own_returns": np.take_along_axis(own, best, axis=1),
            "default_returns": _evaluate(make_env, defaults, kept, obs_dim, n_actions, cem,
                                         rngs, 1),
            "curves": curves}


def _evaluate(make_env: EnvFactory, parameters: Mapping[str, np.ndarray], nets: np.ndarray,
              obs_dim: int, n_actions: int, cem: CEMSettings,
              rngs: Sequence[np.random.Generator], which: int) -> np.ndarray:
    """Mean greedy return ``(S, n)`` of the networks ``(S, n, P)`` on the given variants
    (``(S * n,)`` each), over ``eval_episodes`` episodes from each setting's stream."""
    n_settings, n = nets.shape[:2]
    probe = make_env(**{name: value[:1] for name, value in parameters.items()})
    starts = _start_states(probe, rngs, (n, cem.eval_episodes), (_EVALUATION, which))
    policies = TanhPolicies(nets.reshape(n_settings * n, -1), obs_dim, cem.n_hidden, n_actions)
    returns = episode_returns(make_env, parameters, policies,
                              starts.reshape(n_settings * n, cem.eval_episodes, -1), cem.horizon)
    return returns.mean(axis=1).reshape(n_settings, n)
