"""LunarLander experts for Sharma et al. (2025, App. B.1), by a cheaper route than the paper's.

The paper trains PPO agents (hidden layers 512, 256, 64; 1e6 updates) on each of 1000
variants of LunarLander-v3 and keeps the 3 best per variant (3000 experts). That is out of
reach on two CPU cores, so the book's experts are *parameterised controllers*: the decision
rule of Gymnasium's hand-written ``heuristic`` (``gymnasium.envs.box2d.lunar_lander``,
discrete actions) with its constants as 9 free parameters (:data:`PARAMETER_NAMES`;
:data:`HEURISTIC_PARAMETERS` give Gymnasium's rule exactly). For every variant, the
cross-entropy method (:class:`CEMConfig`) fits them from a generic prior, ``N(0, 1)``
independently per parameter (not centred on the hand-tuned values), and keeps the 3 best
candidates (:func:`train_setting`). The experts are evaluated on Gymnasium's default
environment (:func:`evaluate_on_default`) and record their demonstrations there, acting
by App. B.1's ``p_min`` modification (:func:`record_trajectories`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dprl.envs.lunar_lander import (DEFAULT_VARIANT, N_ACTIONS, OBSERVATION_DIM, TIME_LIMIT,
                                    LanderEpisodes, LanderVariant, run_episodes)
from dprl.seeding import named_stream
from dprl.sharma2025.datasets import ExpertData, checked_picks, pick
from dprl.sharma2025.experts import pmin_actions, pmin_levels
from dprl.validation import (frozen_copy, require_array, require_int, require_nonnegative,
                             require_positive, require_probability)

#: The constants of Gymnasium's ``heuristic``, in its order of appearance; where it uses one
#: value twice, so do the parameters (``descent_gain`` in flight and after leg contact,
#: ``threshold`` for the main and for the side engines).
PARAMETER_NAMES = (
    "angle_x_gain",          # angle_targ = x * 0.5 + vx * 1.0, ...
    "angle_vx_gain",
    "angle_limit",           # ... clipped to [-0.4, 0.4]
    "hover_x_gain",          # hover_targ = 0.55 |x|
    "angle_error_gain",      # angle_todo = (angle_targ - angle) * 0.5 - angular_speed * 1.0
    "angular_speed_gain",
    "hover_error_gain",      # hover_todo = (hover_targ - y) * 0.5 - vy * 0.5; after leg
    "descent_gain",          # contact: angle_todo = 0, hover_todo = -vy * 0.5
    "threshold",             # main engine if hover_todo > |angle_todo| and > 0.05, else
)                            # right engine if angle_todo < -0.05, left if > 0.05, else noop
N_PARAMETERS = len(PARAMETER_NAMES)

#: Gymnasium's hand-tuned values of :data:`PARAMETER_NAMES` (its ``heuristic`` exactly).
HEURISTIC_PARAMETERS = np.array([0.5, 1.0, 0.4, 0.55, 0.5, 1.0, 0.5, 0.5, 0.05])


@dataclass(frozen=True)
class LanderControllers:
    """``m`` experts, each Gymnasium's LunarLander ``heuristic`` with its own constants:
    ``parameters`` ``(m, 9)`` in the order of :data:`PARAMETER_NAMES`. An
    :class:`~dprl.sharma2025.experts.ExpertPopulation` (Sharma et al. 2025, Assumption 3.4).

    The rule is computed in float32 with the parameters rounded to float32, as Gymnasium's
    ``heuristic`` computes on its float32 observations (NumPy 2 promotion rules), so that
    :data:`HEURISTIC_PARAMETERS` reproduce its actions exactly.
    """

    parameters: np.ndarray
    n_actions: int = N_ACTIONS

    def __post_init__(self) -> None:
        parameters = require_array("parameters", self.parameters, shape=(None, N_PARAMETERS))
        object.__setattr__(self, "parameters", frozen_copy(parameters))
        if self.n_actions != N_ACTIONS:
            raise ValueError(f"n_actions must be {N_ACTIONS}, got {self.n_actions}")

    @property
    def n_experts(self) -> int:
        """``m``."""
        return self.parameters.shape[0]

    def select(self, index: np.ndarray) -> LanderControllers:
        """The experts ``index`` (integer indices), in that order, as a population."""
        index = np.asarray(index)
        if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer):
            raise ValueError(f"index must be a 1-D integer array, got {index.dtype} "
                             f"{index.shape}")
        if index.size and (index.min() < 0 or index.max() >= self.n_experts):
            raise ValueError(f"index must lie in [0, {self.n_experts - 1}]")
        return LanderControllers(self.parameters[index])

    def greedy_actions(self, observations: np.ndarray) -> np.ndarray:
        """Each expert's action ``(m, n)`` int64 for observations ``(m, n, 8)`` (expert ``i``
        on ``observations[i]``) or ``(1, n, 8)`` (all on the same), by
        :func:`heuristic_actions`."""
        s = require_array("observations", observations, ndim=3, dtype=np.float32)
        if s.shape[0] not in (1, self.n_experts) or s.shape[2] != OBSERVATION_DIM:
            raise ValueError(f"observations must have shape (1 or {self.n_experts}, n, "
                             f"{OBSERVATION_DIM}), got {s.shape}")
        return heuristic_actions(self.parameters[:, None, :], s)

    def actions_of(self, observations: np.ndarray, experts: np.ndarray) -> np.ndarray:
        """The actions ``(q,)`` of experts ``experts`` ``(q,)`` at ``observations``
        ``(q, 8)``, one pair per row (as :meth:`greedy_actions`, bit for bit)."""
        s = require_array("observations", observations, shape=(None, OBSERVATION_DIM),
                          dtype=np.float32, nonempty=False)
        experts = np.asarray(experts)
        if experts.shape != s.shape[:1] or not np.issubdtype(experts.dtype, np.integer):
            raise ValueError(f"experts must be {s.shape[0]} integer indices, got "
                             f"{experts.dtype} {experts.shape}")
        if experts.size and (experts.min() < 0 or experts.max() >= self.n_experts):
            raise ValueError(f"experts must lie in [0, {self.n_experts - 1}]")
        return heuristic_actions(self.parameters[experts], s)


def heuristic_actions(parameters: np.ndarray, observations: np.ndarray) -> np.ndarray:
    """Gymnasium's LunarLander ``heuristic`` (discrete branch) with its constants replaced by
    ``parameters`` ``(..., 9)`` (:data:`PARAMETER_NAMES`), at ``observations`` ``(..., 8)``
    (the two broadcast; elementwise, in float32): int64 actions of the broadcast shape."""
    (x_gain, vx_gain, limit, hover_x, angle_gain, spin_gain, hover_gain, descent,
     threshold) = np.moveaxis(np.asarray(parameters, dtype=np.float32), -1, 0)
    x, y, vx, vy, angle, spin, leg_1, leg_2 = np.moveaxis(
        np.asarray(observations, dtype=np.float32), -1, 0)
    target = x * x_gain + vx * vx_gain
    target = np.where(target > limit, limit, target)
    target = np.where(target < -limit, -limit, target)
    angle_todo = (target - angle) * angle_gain - spin * spin_gain
    hover_todo = (hover_x * np.abs(x) - y) * hover_gain - vy * descent
    contact = (leg_1 != 0) | (leg_2 != 0)
    angle_todo = np.where(contact, np.float32(0), angle_todo)
    hover_todo = np.where(contact, -vy * descent, hover_todo)
    main = (hover_todo > np.abs(angle_todo)) & (hover_todo > threshold)
    side = np.where(angle_todo < -threshold, 3, np.where(angle_todo > threshold, 1, 0))
    return np.where(main, 2, side).astype(np.int64)


@dataclass(frozen=True)
class CEMConfig:
    """The cross-entropy method of :func:`train_setting`.

    A candidate's *score* is its mean return over ``episodes`` training episodes, the same
    seeds for every candidate of the run (common random numbers: scores compare across
    rounds), each cut at ``max_steps`` with ``truncation_penalty`` subtracted when the
    episode is still running (else hovering until the cut would score like landing).
    Each of ``iterations`` rounds draws ``population`` candidates from
    ``N(mean, diag(std^2))`` (first round: the prior ``N(0, prior_std^2 I)``), ranks them
    with the ``keep`` best candidates so far, and moves ``mean`` and ``std`` a fraction
    ``smoothing`` of the way to the mean and std of the ``n_elite`` best, then adds
    ``std_floor`` to ``std``. The experts are the ``keep`` best candidates of all rounds;
    their returns are measured on ``eval_episodes`` fresh episodes at Gymnasium's limit.
    """

    population: int = 20
    n_elite: int = 5
    iterations: int = 8
    episodes: int = 2
    max_steps: int = 300
    truncation_penalty: float = 100.0
    prior_std: float = 1.0
    smoothing: float = 0.8
    std_floor: float = 0.05
    keep: int = 3
    eval_episodes: int = 2

    def __post_init__(self) -> None:
        for name in ("population", "n_elite", "iterations", "episodes", "max_steps", "keep",
                     "eval_episodes"):
            object.__setattr__(self, name, require_int(name, getattr(self, name)))
        for name in ("prior_std", "std_floor"):
            object.__setattr__(self, name, require_positive(name, getattr(self, name)))
        object.__setattr__(self, "truncation_penalty",
                           require_nonnegative("truncation_penalty", self.truncation_penalty))
        object.__setattr__(self, "smoothing",
                           require_probability("smoothing", self.smoothing, open_low=True))
        if max(self.n_elite, self.keep) > self.population:
            raise ValueError(f"n_elite and keep must be <= population = {self.population}, "
                             f"got {self.n_elite} and {self.keep}")
        if self.max_steps > TIME_LIMIT:
            raise ValueError(f"max_steps must be <= {TIME_LIMIT}, got {self.max_steps}")


def _seeds(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Episode seeds for ``env.reset(seed=)`` drawn from ``rng``."""
    return rng.integers(0, 2**31, size=shape)


def _check_rng(rng: np.random.Generator) -> None:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")


def controller_episodes(parameters: np.ndarray, variant: LanderVariant, seeds: np.ndarray,
                        max_steps: int = TIME_LIMIT) -> LanderEpisodes:
    """Episodes ``(m, n)`` of the (greedy) controllers ``parameters`` ``(m, 9)`` on
    ``variant``, expert ``i`` playing the episodes seeded by ``seeds[i]`` (``(m, n)``, or
    ``(1, n)``: every expert on the same seeds)."""
    controllers = LanderControllers(parameters)
    seeds = np.asarray(seeds)
    if seeds.ndim != 2 or seeds.shape[0] not in (1, controllers.n_experts):
        raise ValueError(f"seeds must have shape (1 or {controllers.n_experts}, n), "
                         f"got {seeds.shape}")
    n = seeds.shape[1]

    def act(observations: np.ndarray, episodes: np.ndarray, t: int) -> np.ndarray:
        return controllers.actions_of(observations, episodes // n)

    return run_episodes(variant, act, np.broadcast_to(seeds, (controllers.n_experts, n)),
                        max_steps)


def train_setting(variant: LanderVariant, rng: np.random.Generator,
                  config: CEMConfig = CEMConfig()) -> tuple[np.ndarray, np.ndarray]:
    """The experts of one training setting (Sharma et al. 2025, App. B.1: the best 3 agents
    of a setting, by CEM in place of PPO, :class:`CEMConfig`): the parameters
    ``(keep, 9)`` of the best candidates, best first, and their mean returns ``(keep,)``
    on ``variant`` over fresh episodes. Every draw (candidates, episode seeds) comes from
    ``rng``: the same ``rng`` state gives the same experts."""
    _check_rng(rng)
    if not isinstance(config, CEMConfig):
        raise ValueError(f"config must be a CEMConfig, got {type(config).__name__}")
    mean, std = np.zeros(N_PARAMETERS), np.full(N_PARAMETERS, config.prior_std)
    seeds = _seeds(rng, (1, config.episodes))
    best, best_scores = np.empty((0, N_PARAMETERS)), np.empty(0)
    for _ in range(config.iterations):
        drawn = mean + std * rng.standard_normal((config.population, N_PARAMETERS))
        episodes = controller_episodes(drawn, variant, seeds, config.max_steps)
        scores = (episodes.returns - config.truncation_penalty * ~episodes.terminated
                  ).mean(axis=1)
        pool, pool_scores = np.concatenate([best, drawn]), np.concatenate([best_scores, scores])
        order = np.argsort(-pool_scores, kind="stable")
        elite = pool[order[:config.n_elite]]
        mean += config.smoothing * (elite.mean(axis=0) - mean)
        std += config.smoothing * (elite.std(axis=0) - std)
        std += config.std_floor
        best, best_scores = pool[order[:config.keep]], pool_scores[order[:config.keep]]
    fresh = _seeds(rng, (1, config.eval_episodes))
    return best, controller_episodes(best, variant, fresh).returns.mean(axis=1)


def evaluate_on_default(parameters: np.ndarray, n_episodes: int,
                        rng: np.random.Generator) -> np.ndarray:
    """Mean returns ``(m,)`` of the (greedy) experts ``parameters`` ``(m, 9)`` over the same
    ``n_episodes`` episodes (seeds drawn from ``rng``) of Gymnasium's default LunarLander-v3
    at its 1000-step limit: the returns whose histogram is Sharma et al. (2025), Fig. 2
    (left). An expert's return does not depend on the others evaluated with it."""
    _check_rng(rng)
    seeds = _seeds(rng, (1, require_int("n_episodes", n_episodes)))
    return controller_episodes(parameters, DEFAULT_VARIANT, seeds).returns.mean(axis=1)


def record_trajectories(experts: LanderControllers, experts_index: Sequence[int],
                        per_expert: int, max_steps: int, p_min: float,
                        rng: np.random.Generator, picks: np.ndarray | None = None) -> ExpertData:
    """``per_expert`` demonstrations of each of ``experts`` on Gymnasium's default
    LunarLander-v3, cut after ``max_steps`` steps, by App. B.1's modified experts
    (:func:`~dprl.sharma2025.experts.pmin_actions`; the paper's ``p_min`` is 0.02): Sharma
    et al. (2025, Sec. 6) aggregated data set, in :class:`~dprl.sharma2025.datasets.ExpertData`
    layout. Expert ``k`` of ``experts`` is the global expert ``experts_index[k]`` and draws
    only from ``named_stream(rng, experts_index[k])`` (its episode seeds, then one uniform
    per step), as :func:`dprl.sharma2025.datasets.record` does: its trajectories are the
    same bits whatever experts are recorded with it. With ``picks``, only trajectory
    ``picks[k]`` of expert ``k`` is recorded (same bits), one per expert."""
    if not isinstance(experts, LanderControllers):
        raise ValueError(f"experts must be LanderControllers, got {type(experts).__name__}")
    per_expert = require_int("per_expert", per_expert)
    max_steps = require_int("max_steps", max_steps)
    pmin_levels(N_ACTIONS, p_min)
    index = np.asarray(experts_index)
    if index.shape != (experts.n_experts,) or not np.issubdtype(index.dtype, np.integer):
        raise ValueError(f"experts_index must name each of the {experts.n_experts} experts")
    if picks is not None:
        picks = checked_picks(picks, index.size, per_expert)
    streams = [named_stream(rng, int(i)) for i in index]
    seeds = pick(np.stack([_seeds(g, (per_expert,)) for g in streams]), picks)
    uniforms = pick(np.stack([g.random((per_expert, max_steps)) for g in streams]), picks)
    per_expert = seeds.shape[1]
    uniforms = uniforms.reshape(-1, max_steps)

    def act(observations: np.ndarray, episodes: np.ndarray, t: int) -> np.ndarray:
        greedy = experts.actions_of(observations, episodes // per_expert)
        return pmin_actions(greedy, uniforms[episodes, t], N_ACTIONS, p_min)

    episodes = run_episodes(DEFAULT_VARIANT, act, seeds, max_steps)
    last = np.take_along_axis(episodes.observations, episodes.lengths[..., None, None], axis=2)
    ended = np.arange(max_steps + 1)[:, None] > episodes.lengths[..., None, None]
    return ExpertData(np.where(ended, last, episodes.observations),
                      np.maximum(episodes.actions, 0), episodes.rewards, episodes.lengths,
                      episodes.terminated)
