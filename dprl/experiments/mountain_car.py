"""Experiments of Xie et al. (2019), Sec. 7 and App. D, on Mountain Car (Figs. 2, 3, App. Fig. 6).

- ``xie2019-mountain-car-policy``: the evaluated policy, learned by Watkins's Q(lambda) with the
  order-5 Fourier basis (Konidaris et al. 2011; the paper says "Q-learning"; one-step
  Q-learning did not reach the goal reliably in our runs, lambda = 0.9 does): its weights, its
  learning curve and the returns of its greedy policy.
- ``xie2019-mountain-car-tuning``: the constant step of GPOPE at every privacy level, and of
  non-private GTD2, chosen on *public* data (another root seed) for every batch size.
- ``xie2019-mountain-car``: on-policy (the greedy learned policy): GPOPE at the tuned step,
  0.1x and 10x, DP-LSW, LSTD and GTD2 against m (Fig. 2(a)); GPOPE at several eps (Fig.
  3(a)); every step of the grid at ``m_fixed`` and every level (Fig. 2(b), App. Fig. 6).
  Off-policy (target: the uniform policy; behaviour: the learned policy epsilon-greedy):
  GPOPE at several eps, GTD2 and WIS-LSTD (Fig. 3(b)).

The value function is linear in the 36 Fourier features of the scaled state, gamma = 0.99 (the
paper does not state it), delta = 1e-5. GPOPE runs ``N = epochs * m`` iterations (the paper
does not state N; with one pass even noiseless GTD2 barely leaves theta = 0 here) with
clipping bound ``h``; the noise is calibrated for that N. Every run (policy, batch size, eps,
step) draws from its own named stream of the trial, so the same run is the same bits in every
figure. MSPBE uses ``A, b, C`` of Eq. 2.1 estimated from ``reference_episodes`` independent
episodes (a fixed public seed). DP-LSW (Balle et al. 2016) needs finitely many states: it runs
on a public grid of ``grid_cells^2`` cells (first-visit returns per cell, features at the cell
centres, uniform ``rho``) on the cost ``-r = 1`` per step, whose returns lie in
``[0, 1/(1-gamma)]`` as its privacy proof requires; its estimate is negated.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from dprl.balle2016 import dp_lsw, first_visit_data
from dprl.control.linear_q import EpsilonGreedyPolicy, greedy_policy, q_learning
from dprl.envs import MountainCar, Trajectories, mountain_car_features
from dprl.envs.episodes import (Episodes, UniformPolicy, feature_table, stack_episodes,
                                importance_ratios as episode_ratios)
from dprl.experiments.off_policy import RunTable, runs_mspbe, tuned_steps
from dprl.experiments.registry import Experiment, TrialConfig, register
from dprl.policy_evaluation import mspbe
from dprl.seeding import named_stream, trial_generator
from dprl.xie2019 import Prepared, prepare
from dprl.xie2019.baselines import episode_statistics, lstd, wis_lstd

_REFERENCE_CHUNK = 2000


@dataclasses.dataclass(frozen=True, kw_only=True)
class PolicyConfig(TrialConfig):
    """Q(lambda) settings for the evaluated policy (stated in the chapter)."""

    order: int = 5
    step: float = 0.002
    trace_decay: float = 0.9
    n_episodes: int = 300
    n_evaluation: int = 1000


def policy_trials(config: PolicyConfig,
                  rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial: Q(lambda) weights ``(3, d)``, the learning curve and the greedy returns."""
    features = mountain_car_features(config.order)
    env = MountainCar()
    out = {"weights": [], "training_returns": [], "greedy_returns": []}
    for rng in rngs:
        learned = q_learning(env, features, config.step * features.step_size_scaling(),
                             config.n_episodes, rng, epsilon=0.0,
                             trace_decay=config.trace_decay)
        episodes = env.simulate(config.n_evaluation, greedy_policy(learned.weights[0],
                                                                   features), rng)
        out["weights"].append(learned.weights[0])
        out["training_returns"].append(learned.returns[0])
        out["greedy_returns"].append(episodes.rewards.sum(axis=-1))
    return {key: np.stack(value) for key, value in out.items()}


POLICY = register(Experiment(
    id="xie2019-mountain-car-policy",
    title="Xie et al. (2019), Mountain Car: the evaluated policy (Q(lambda), Fourier order 5)",
    chapter="book/xie2019/mountain-car.ipynb",
    configs={"smoke": PolicyConfig(n_trials=1, root_seed=1998, batch_size=1, n_episodes=30,
                                   n_evaluation=5),
             "paper": PolicyConfig(n_trials=1, root_seed=1998, batch_size=1)},
    run_trials=policy_trials))


@dataclasses.dataclass(frozen=True, kw_only=True)
class MountainCarConfig(TrialConfig):
    """Privacy, GPOPE, the grids and the off-policy behaviour (stated in the chapter).

    GPOPE and GTD2 run ``N = epochs * m`` iterations with a constant step. The steps are tuned
    on public data (``xie2019-mountain-car-tuning``, another root seed) for every batch size
    and privacy level: ``tuned_steps[i][k]`` is the step at ``batch_sizes[i]`` and
    ``eps_levels[k]``, the last entry of each row GTD2's (no privacy); likewise
    ``tuned_steps_off`` off-policy. Fig. 2(a) uses ``eps`` (one of ``eps_levels``)."""

    policy_scale: str = "paper"
    gamma: float = 0.99
    eps: float = 0.1
    delta: float = 1e-5
    eps_levels: tuple[float, ...] = (0.1, 1.0, 10.0)
    batch_sizes: tuple[int, ...] = (1000, 3000, 10000)
    epochs: float = 10.0
    clip: float = 1.0
    step_grid: tuple[float, ...] = tuple(float(10 ** (k / 2)) for k in range(-8, 1))  # 1e-4..1
    tuned_steps: tuple[tuple[float, ...], ...] = ()
    tuned_steps_off: tuple[tuple[float, ...], ...] = ()
    step_multipliers: tuple[float, ...] = (0.1, 1.0, 10.0)
    m_fixed: int = 1000
    behaviour_epsilon: float = 0.5
    reference_episodes: int = 20000
    reference_seed: int = 1
    grid_cells: int = 12

    @property
    def levels(self) -> tuple[float, ...]:
        """The privacy levels of the runs: ``eps_levels``, then ``inf`` (GTD2)."""
        return (*self.eps_levels, math.inf)


@lru_cache(maxsize=4)
def policy_weights(scale: str) -> np.ndarray:
    """The evaluated policy's weights ``(3, 36)``: trial 0 of ``xie2019-mountain-car-policy``
    at ``scale``, recomputed (it is deterministic; the committed result records it)."""
    config = POLICY.config(scale)
    return policy_trials(config, [trial_generator(config.root_seed, 0)])["weights"][0]


def _policies(config: MountainCarConfig):
    """The features, the evaluated (greedy) policy and the off-policy behaviour."""
    return _policy_pair(config.policy_scale, config.behaviour_epsilon)


def evaluated_policy(config: MountainCarConfig) -> EpsilonGreedyPolicy:
    """The on-policy evaluated policy: greedy in the learned Q (``policy_scale``'s weights)."""
    return _policies(config)[1]


def _policy_pair(policy_scale: str, behaviour_epsilon: float):
    weights, features = policy_weights(policy_scale), mountain_car_features()
    behaviour = EpsilonGreedyPolicy(weights, features, behaviour_epsilon)
    return features, greedy_policy(weights, features), behaviour


def importance_ratios(episodes: Episodes) -> np.ndarray:
    """``rho_t = pi(a_t | o_t) / pi_b(a_t | o_t)`` for the uniform target (1/3 each), 0 on
    padding, from the behaviour probabilities the episodes recorded."""
    return episode_ratios(UniformPolicy(MountainCar().n_actions), episodes)


def reference_statistics(config: MountainCarConfig, off_policy: bool
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A, b, C`` (Eq. 2.1) of the on- or off-policy problem from ``reference_episodes``
    episodes drawn with the public ``reference_seed``, in chunks (mean of chunk means)."""
    return _reference_statistics(config.policy_scale, config.behaviour_epsilon, config.gamma,
                                 config.reference_episodes, config.reference_seed, off_policy)


@lru_cache(maxsize=8)
def _reference_statistics(policy_scale: str, behaviour_epsilon: float, gamma: float,
                          n_episodes: int, seed: int, off_policy: bool) -> tuple:
    features, target, behaviour = _policy_pair(policy_scale, behaviour_epsilon)
    rng = np.random.default_rng([seed, int(off_policy)])
    parts = []
    for _ in range(0, n_episodes, _REFERENCE_CHUNK):
        episodes = MountainCar().simulate(_REFERENCE_CHUNK, behaviour if off_policy else target,
                                          rng)
        trajectories, table = feature_table(episodes, features)
        ratios = importance_ratios(episodes) if off_policy else None
        parts.append(episode_statistics(trajectories, table, gamma, ratios))
    return tuple(np.mean([p[k] for p in parts], axis=0) for k in range(3))


def _samples(config: MountainCarConfig, policy, streams: Sequence[np.random.Generator]
             ) -> Episodes:
    m = max(config.batch_sizes)
    return stack_episodes([MountainCar().simulate(m, policy, g) for g in streams])


_DATA, _DP_LSW, _RUN = 0, 1, 2  # first key of the data, DP-LSW and GPOPE / GTD2 streams


@dataclasses.dataclass(frozen=True)
class _Ready:
    """Data sets prepared once for every GPOPE run on them, and the non-private least-squares
    estimate on the same data (LSTD on-policy, WIS-LSTD off-policy), ``(datasets, d)``."""

    prepared: Prepared
    least_squares: np.ndarray


def _ready(data: Episodes, features, gamma: float, off_policy: bool) -> _Ready:
    """The feature table of ``data`` lives only here (it is the largest array)."""
    trajectories, table = feature_table(data, features)
    ratios = importance_ratios(data) if off_policy else None
    least_squares = (wis_lstd(trajectories, table, gamma, ratios, normalisation="trajectories")
                     if off_policy else
                     lstd(trajectories, table, gamma, normalisation="trajectories"))
    return _Ready(prepare(trajectories, table, gamma, ratios), least_squares)


def _prefix(off_policy: bool, size: int) -> tuple[int, int, int]:
    """The first names of a run's stream: (runs, policy, batch size); the level and the step
    follow (:func:`dprl.experiments.off_policy.run_thetas`)."""
    return _RUN, int(off_policy), size


def _cells(config: MountainCarConfig, observations: np.ndarray) -> np.ndarray:
    """The public grid cell of each observation (row-major over position, velocity)."""
    env, k = MountainCar(), config.grid_cells
    scaled = (observations - env.observation_low) / (env.observation_high - env.observation_low)
    # observations lie in the box; the upper edge belongs to the last cell
    index = np.minimum(np.floor(scaled * k).astype(np.int64), k - 1)
    return index[..., 0] * k + index[..., 1]


def cell_features(config: MountainCarConfig, features) -> np.ndarray:
    """The Fourier features of the grid cells' centres, ``(grid_cells^2, d)``."""
    env, k = MountainCar(), config.grid_cells
    centres = (np.arange(k) + 0.5) / k
    grid = np.stack(np.meshgrid(centres, centres, indexing="ij"), axis=-1).reshape(-1, 2)
    return features(env.observation_low + grid * (env.observation_high - env.observation_low))


def grid_costs(config: MountainCarConfig, data: Episodes) -> Trajectories:
    """``data`` as trajectories on the public grid's cells (the states of DP-LSW) with the
    cost ``-r = 1`` per step, so every first-visit return lies in ``[0, 1/(1 - gamma)]``
    (Balle et al. 2016, Sec. 2.2)."""
    cells = np.where(np.arange(data.horizon + 1) <= data.lengths[..., None],
                     _cells(config, np.nan_to_num(data.observations)), -1)
    return Trajectories(cells, -data.rewards, data.lengths, data.terminated, (0.0, 1.0))


def dp_lsw_theta(config: MountainCarConfig, data: Episodes, features, rngs) -> np.ndarray:
    """DP-LSW (Balle et al. 2016, Algorithm 1) on the grid cells, for the cost ``-r``; the
    value estimate is the negated weight vector ``(*datasets, d)``."""
    n_cells = config.grid_cells**2
    summary = first_visit_data(grid_costs(config, data), config.gamma, n_cells,
                               r_max=1.0).summary
    theta = dp_lsw(summary, cell_features(config, features), np.full(n_cells, 1 / n_cells),
                   config.eps, config.delta, rngs)
    return -theta


def tuning_trials(config: MountainCarConfig,
                  rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """MSPBE ``(sizes, levels, steps)`` per (public) trial, on- and off-policy: GPOPE at each
    of ``eps_levels`` and GTD2 (the last level), every step of the grid."""
    features, target, behaviour = _policies(config)
    out = {}
    for name, policy, off in (("on_policy", target, False), ("off_policy", behaviour, True)):
        sample = _samples(config, policy, [named_stream(g, _DATA, int(off)) for g in rngs])
        exact = reference_statistics(config, off)
        values = np.empty((len(rngs), len(config.batch_sizes), len(config.levels),
                           len(config.step_grid)))
        for i, m in enumerate(config.batch_sizes):
            ready = _ready(sample.first(m), features, config.gamma, off)
            runs = [(step, eps) for eps in config.levels for step in config.step_grid]
            values[:, i] = runs_mspbe(config, ready.prepared, exact, rngs, _prefix(off, i),
                                      runs).reshape(values[:, i].shape)
        out[name] = values
    return out


def _on_policy(config: MountainCarConfig, rngs, out: dict[str, np.ndarray]) -> None:
    features, target, _ = _policies(config)
    sample = _samples(config, target, [named_stream(g, _DATA, 0) for g in rngs])
    exact = reference_statistics(config, False)
    main = config.eps_levels.index(config.eps)
    for i, m in enumerate(config.batch_sizes):
        data, steps = sample.first(m), config.tuned_steps[i]
        ready, table = _ready(data, features, config.gamma, False), RunTable()
        multiplied = [table.add(factor * steps[main], config.eps)
                      for factor in config.step_multipliers]
        levels = [table.add(step, eps) for step, eps in zip(steps, config.levels)]
        sweep = ([table.add(step, eps) for eps in config.levels for step in config.step_grid]
                 if m == config.m_fixed else [])
        values = table.compute(config, ready.prepared, exact, rngs, _prefix(False, i))
        out["gpope"][:, i] = values[:, multiplied]
        out["gpope_eps"][:, i] = values[:, levels[:-1]]
        out["gtd2"][:, i] = values[:, levels[-1]]
        if sweep:
            out["step_sweep"][:] = values[:, sweep].reshape(out["step_sweep"].shape)
        out["lstd"][:, i] = mspbe(ready.least_squares, *exact)
        noise = [named_stream(g, _DP_LSW, i) for g in rngs]
        out["dp_lsw"][:, i] = mspbe(dp_lsw_theta(config, data, features, noise), *exact)


def _off_policy(config: MountainCarConfig, rngs, out: dict[str, np.ndarray]) -> None:
    features, _, behaviour = _policies(config)
    sample = _samples(config, behaviour, [named_stream(g, _DATA, 1) for g in rngs])
    exact = reference_statistics(config, True)
    for i, m in enumerate(config.batch_sizes):
        ready = _ready(sample.first(m), features, config.gamma, True)
        runs = list(zip(config.tuned_steps_off[i], config.levels))
        values = runs_mspbe(config, ready.prepared, exact, rngs, _prefix(True, i), runs)
        out["gpope_off"][:, i], out["gtd2_off"][:, i] = values[:, :-1], values[:, -1]
        out["wis_lstd"][:, i] = mspbe(ready.least_squares, *exact)


def mountain_car_trials(config: MountainCarConfig,
                        rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial, MSPBE of, on-policy: GPOPE at ``eps`` ``(sizes, multipliers)`` (Fig. 2(a))
    and at every level ``(sizes, eps_levels)`` (Fig. 3(a)), GTD2, LSTD and DP-LSW
    ``(sizes,)``, every step at ``m_fixed`` ``(levels, steps)`` (Fig. 2(b), App. Fig. 6);
    off-policy: GPOPE ``(sizes, eps_levels)``, GTD2 and WIS-LSTD ``(sizes,)`` (Fig. 3(b))."""
    sizes, levels = len(config.batch_sizes), len(config.levels)
    for name in ("tuned_steps", "tuned_steps_off"):
        steps = getattr(config, name)
        if len(steps) != sizes or any(len(row) != levels for row in steps):
            raise ValueError(f"{name} must give one step per batch size and level "
                             f"({sizes} x {levels}), got {steps}")
    if config.eps not in config.eps_levels or config.m_fixed not in config.batch_sizes:
        raise ValueError("eps must be one of eps_levels and m_fixed one of batch_sizes")
    n = len(rngs)
    out = {"gpope": np.empty((n, sizes, len(config.step_multipliers))),
           "gpope_eps": np.empty((n, sizes, levels - 1)), "gtd2": np.empty((n, sizes)),
           "lstd": np.empty((n, sizes)), "dp_lsw": np.empty((n, sizes)),
           "step_sweep": np.empty((n, levels, len(config.step_grid))),
           "gpope_off": np.empty((n, sizes, levels - 1)), "gtd2_off": np.empty((n, sizes)),
           "wis_lstd": np.empty((n, sizes))}
    _on_policy(config, rngs, out)
    _off_policy(config, rngs, out)
    return out


def tuned(result: dict[str, np.ndarray], step_grid: Sequence[float]
          ) -> dict[str, tuple[tuple[float, ...], ...]]:
    """The step of the grid with the least mean MSPBE over the public trials, per batch size
    and level, on- and off-policy: the ``tuned_steps`` / ``tuned_steps_off`` of the private
    runs, from a ``xie2019-mountain-car-tuning`` result."""
    return {name: tuned_steps(result[key], step_grid)
            for name, key in (("tuned_steps", "on_policy"), ("tuned_steps_off", "off_policy"))}


_SMOKE = dict(policy_scale="smoke", eps=1.0, eps_levels=(1.0, 10.0), batch_sizes=(50, 100),
              epochs=2.0, step_grid=(1e-3, 1e-2), m_fixed=50, reference_episodes=2000)

TUNING = register(Experiment(
    id="xie2019-mountain-car-tuning",
    title="Xie et al. (2019), Mountain Car: GPOPE and GTD2 step sizes tuned on public data",
    chapter="book/xie2019/mountain-car.ipynb",
    configs={"smoke": MountainCarConfig(n_trials=2, root_seed=11, batch_size=2, **_SMOKE),
             "paper": MountainCarConfig(n_trials=10, root_seed=11, batch_size=5)},
    run_trials=tuning_trials, after=(POLICY.id,)))

_SMOKE_STEPS = ((1e-2, 1e-2, 1e-2),) * 2


def _half_decades(*rows: tuple[int, ...]) -> tuple[tuple[float, ...], ...]:
    """Steps ``10^(k/2)`` per batch size (rows) and level, as the step grid writes them."""
    return tuple(tuple(float(10 ** (k / 2)) for k in row) for row in rows)


MOUNTAIN_CAR = register(Experiment(
    id="xie2019-mountain-car",
    title="Xie et al. (2019), Figs. 2, 3 and App. Fig. 6: GPOPE on Mountain Car",
    chapter="book/xie2019/mountain-car.ipynb",
    configs={"smoke": MountainCarConfig(n_trials=2, root_seed=2020, batch_size=2,
                                        tuned_steps=_SMOKE_STEPS, tuned_steps_off=_SMOKE_STEPS,
                                        **_SMOKE),
             # tuned(xie2019-mountain-car-tuning) (tested)
             "paper": MountainCarConfig(
                 n_trials=100, root_seed=2020, batch_size=5,
                 tuned_steps=_half_decades((-8, -6, -5, -1), (-8, -6, -4, -1), (-8, -5, -4, -1)),
                 tuned_steps_off=_half_decades((-8, -7, -5, -1), (-8, -6, -4, -1),
                                               (-8, -5, -4, -1)))},
    run_trials=mountain_car_trials, after=(POLICY.id, TUNING.id)))

__all__ = ["MOUNTAIN_CAR", "POLICY", "TUNING", "MountainCarConfig", "cell_features",
           "dp_lsw_theta", "evaluated_policy", "grid_costs", "importance_ratios", "policy_weights", "reference_statistics",
           "tuned"]
