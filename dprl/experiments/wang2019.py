"""Experiments of Wang & Hegde (2019), Sec. 4: Fig. 1, Algorithm 1's learning curves, and
Fig. 2, Algorithm 1 against the three baselines at the same (eps, delta).

The authors' 1-D MDP (:class:`~dprl.envs.LineMDP`) and DQN (MLP 1-16-16-2, RMSprop, batch 128,
gamma 0.999, replay 10,000, 100 episodes of 50 steps: ``AUTHORS_DQN``), one noise path per
action with kernel ``sigma^2 exp(-|x - y|)``, noise levels ``sigma`` and reset periods: a fresh
path every ``reset_period`` steps, i.e. reset factor ``J = T / reset_period`` for the
``T = 5000`` training steps (one SGD step per environment step, as in the authors' code).

Trial ``i`` is seed ``i``: it uses the same generator at every noise level and reset period
(common random numbers, as the authors' code reuses its seeds), so the curves differ only by
the noise. Per trial: the return of every training episode ``(periods, levels, episodes)`` and
the greedy return of the released noisy Q over ``evaluation_episodes`` episodes.

Fig. 2 keeps that configuration (reset every episode) and, for each eps, runs Algorithm 1
with sigma and beta from Theorem 5 under each reading of
:func:`~dprl.wang2019.calibration.dqn_calibration` and the baselines of
:mod:`dprl.wang2019.baselines` calibrated for the same (eps, delta): input perturbation,
output perturbation (not private; utility only) and DP-SGD without amplification. Trial ``i``
is seed ``i`` for every method and eps (the plain DQN inside output perturbation is Fig. 1's
sigma = 0 run bit for bit when the root seeds agree). Per trial: the true return of every
training episode ``(eps levels, methods, episodes)`` and the greedy return of each released
function (the network plus its path; the network; the perturbed table; the network).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence

import numpy as np

from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.wang2019.baselines import (BaselineResult, evaluate_table_greedy, train_dp_sgd,
                                     train_input_perturbation, train_output_perturbation)
from dprl.wang2019.calibration import READINGS, dqn_calibration
from dprl.wang2019.lipschitz import (exact_lipschitz, finite_difference_lipschitz,
                                     spectral_lipschitz)
from dprl.wang2019.q_functions import MLPQ
from dprl.wang2019.q_learning import (ALGORITHM1, AUTHORS_DQN, QLearningConfig, evaluate_greedy,
                                      train)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Figure1Config(TrialConfig):
    """Noise levels, reset periods and episode counts (stated in the chapter)."""

    sigma_levels: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    reset_periods: tuple[int, ...] = (50, 500, 5000)
    n_episodes: int = 100
    evaluation_episodes: int = 100


def _copies(rngs: Sequence[np.random.Generator], levels: int) -> list[np.random.Generator]:
    """Fresh copies of the trials' generators for ``levels`` settings, level-major (run
    ``k n + i`` is setting k, trial i)."""
    return [copy.deepcopy(g) for _ in range(levels) for g in rngs]


def _evaluation_streams(rngs: Sequence[np.random.Generator],
                        levels: int) -> list[np.random.Generator]:
    """Child 6 of each trial's seed sequence (children 0-5 train, 7 is privacy noise), for
    the greedy evaluation, level-major as :func:`_copies`."""
    return [copy.deepcopy(g).spawn(7)[6] for _ in range(levels) for g in rngs]


def _per_trial(values: np.ndarray, levels: int, n: int) -> np.ndarray:
    """Level-major runs (levels n, ...) as (n, levels, ...)."""
    return values.reshape(levels, n, *values.shape[1:]).swapaxes(0, 1)


def figure1_trials(config: Figure1Config,
                   rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Algorithm 1 for every (reset period, noise level) and trial, all trials at once."""
    levels, n = len(config.sigma_levels), len(rngs)
    returns = np.empty((n, len(config.reset_periods), levels, config.n_episodes))
    greedy = np.empty((n, len(config.reset_periods), levels))
    sigmas = np.repeat(config.sigma_levels, n)
    for j, period in enumerate(config.reset_periods):
        dqn = dataclasses.replace(AUTHORS_DQN, n_episodes=config.n_episodes, reset_period=period)
        result = train(MLPQ(), dqn, sigmas, _copies(rngs, levels))
        values = evaluate_greedy(result.released, config.evaluation_episodes,
                                 _evaluation_streams(rngs, levels))
        returns[:, j] = _per_trial(result.returns, levels, n)
        greedy[:, j] = _per_trial(values, levels, n)
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


#: The methods of Fig. 2: Algorithm 1 under each reading of Theorem 5, then the baselines.
FIGURE2_METHODS = tuple(f"ours-{reading}" for reading in READINGS) + ("input", "output",
                                                                       "dp_sgd")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Figure2Config(TrialConfig):
    """Privacy levels, delta (the titles of Fig. 2), episodes and reset period (Fig. 1's)."""

    eps_levels: tuple[float, ...] = (0.9, 0.45)
    delta: float = 1e-4
    n_episodes: int = 100
    reset_period: int = 50
    evaluation_episodes: int = 100


def figure2_dqn(config: Figure2Config) -> QLearningConfig:
    """The authors' DQN with the episodes and reset period of ``config`` (Fig. 1's)."""
    return dataclasses.replace(AUTHORS_DQN, n_episodes=config.n_episodes,
                               reset_period=config.reset_period)


def _ours(config: Figure2Config, rngs: Sequence[np.random.Generator], eps: float,
          reading: str) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 at Theorem 5's sigma and beta for ``eps`` under ``reading``: training
    returns (n, E) and greedy returns of the released Q + g (n,)."""
    dqn = figure2_dqn(config)
    calibration = dqn_calibration(eps, dqn, reading, delta_total=config.delta)
    result = train(MLPQ(), dataclasses.replace(dqn, beta=calibration.beta),
                   np.full(len(rngs), calibration.sigma), _copies(rngs, 1))
    return result.returns, evaluate_greedy(result.released, config.evaluation_episodes,
                                           _evaluation_streams(rngs, 1))


def _baseline_greedy(result: BaselineResult, config: Figure2Config,
                     evaluation: list[np.random.Generator]) -> np.ndarray:
    """Greedy return of what a baseline releases: the perturbed table (output perturbation)
    or the trained network (its noise path is zero)."""
    if result.method == "output":
        return evaluate_table_greedy(result.grid, result.released_q,
                                     config.evaluation_episodes, evaluation)
    return evaluate_greedy(result.training.released, config.evaluation_episodes, evaluation)


def figure2_trials(config: Figure2Config,
                   rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Every method at every eps level for all trials (one batch per method)."""
    levels, n = len(config.eps_levels), len(rngs)
    returns = np.empty((n, levels, len(FIGURE2_METHODS), config.n_episodes))
    greedy = np.empty((n, levels, len(FIGURE2_METHODS)))
    for m, method in enumerate(FIGURE2_METHODS):
        if method.startswith("ours-"):
            for k, eps in enumerate(config.eps_levels):
                returns[:, k, m], greedy[:, k, m] = _ours(config, rngs, eps,
                                                          method.removeprefix("ours-"))
            continue
        trainer = {"input": train_input_perturbation, "output": train_output_perturbation,
                   "dp_sgd": train_dp_sgd}[method]
        result = trainer(figure2_dqn(config), np.repeat(config.eps_levels, n), config.delta,
                         _copies(rngs, levels))
        returns[:, :, m] = _per_trial(result.returns, levels, n)
        greedy[:, :, m] = _per_trial(_baseline_greedy(
            result, config, _evaluation_streams(rngs, levels)), levels, n)
    return {"returns": returns, "greedy_returns": greedy}


FIGURE2 = register(Experiment(
    id="wang2019-figure2",
    title="Wang & Hegde (2019), Fig. 2: Algorithm 1 against input perturbation, output "
          "perturbation and DP-SGD at eps = 0.9 and 0.45, delta = 1e-4",
    chapter="book/wang2019/experiments.ipynb",
    configs={"smoke": Figure2Config(n_trials=2, root_seed=0, batch_size=2, n_episodes=3,
                                    evaluation_episodes=5),
             "paper": Figure2Config(n_trials=10, root_seed=0, batch_size=5)},
    run_trials=figure2_trials))


# --- Theorem 5's Lipschitz constant along training (issue 15) ------------------------------

@dataclasses.dataclass(frozen=True, kw_only=True)
class LipschitzConfig(TrialConfig):
    """Fig. 2's privacy levels, delta and DQN (reset every episode); parameters checked at
    initialisation and every ``checkpoint_every`` episodes."""

    eps_levels: tuple[float, ...] = (0.9, 0.45)
    delta: float = 1e-4
    n_episodes: int = 100
    reset_period: int = 50
    checkpoint_every: int = 10


def lipschitz_settings(config: LipschitzConfig) -> list[tuple[str, float | None]]:
    """The runs whose networks are measured: the plain DQN, Algorithm 1 in the DQN at Fig. 2's
    "updates" calibration, and Algorithm 1 read literally at its own, per eps level."""
    return [("dqn", None)] + [(name, eps) for name in ("ours-updates", "algorithm1")
                              for eps in config.eps_levels]


def setting_run(name: str, eps: float | None, config: LipschitzConfig | Figure2Config,
                composition: str = "theorem5") -> tuple[QLearningConfig, float]:
    """The training config and noise level of a run (Wang & Hegde 2019, Alg. 1 and Thm. 5):
    ``"dqn"`` (no noise), ``"ours-updates"`` (the authors' DQN, every update counted) or
    ``"algorithm1"`` (:data:`ALGORITHM1`, its T/B iterations counted), composed by
    ``composition``."""
    if name == "dqn":
        return figure2_dqn(config), 0.0
    if name == "ours-updates":
        dqn, reading = figure2_dqn(config), "updates"
    elif name == "algorithm1":
        dqn, reading = dataclasses.replace(ALGORITHM1, n_episodes=config.n_episodes), "iterations"
    else:
        raise ValueError(f"unknown run {name!r}")
    calibration = dqn_calibration(eps, dqn, reading, delta_total=config.delta,
                                  composition=composition)
    return dataclasses.replace(dqn, beta=calibration.beta), calibration.sigma


def lipschitz_trials(config: LipschitzConfig,
                     rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Exact, spectral-norm and grid Lipschitz constants (trials, checkpoints, settings,
    actions) of every setting's network at initialisation (checkpoint 0) and after every
    ``checkpoint_every`` episodes (:mod:`dprl.wang2019.lipschitz`)."""
    measures = {"exact": exact_lipschitz, "spectral": spectral_lipschitz,
                "finite_difference": finite_difference_lipschitz}
    settings = lipschitz_settings(config)
    n_checkpoints = config.n_episodes // config.checkpoint_every + 1
    out = {key: np.empty((len(rngs), n_checkpoints, len(settings), MLPQ().n_actions))
           for key in measures}
    for j, (name, eps) in enumerate(settings):
        dqn, sigma = setting_run(name, eps, config)

        def record(episode: int, params: tuple, j: int = j) -> None:
            if (episode + 1) % config.checkpoint_every == 0:
                for key, measure in measures.items():
                    out[key][:, (episode + 1) // config.checkpoint_every, j] = measure(params)

        train(MLPQ(), dqn, np.full(len(rngs), sigma), _copies(rngs, 1), on_episode=record)
    return out


LIPSCHITZ = register(Experiment(
    id="wang2019-lipschitz",
    title="Wang & Hegde (2019), Thm. 5: the Q-network's Lipschitz constant along training "
          "(plain DQN, Algorithm 1 in the DQN, Algorithm 1 read literally)",
    chapter="book/wang2019/experiments.ipynb",
    configs={"smoke": LipschitzConfig(n_trials=2, root_seed=0, batch_size=2, n_episodes=4,
                                      checkpoint_every=2),
             "paper": LipschitzConfig(n_trials=10, root_seed=0, batch_size=10)},
    run_trials=lipschitz_trials))


# --- Fig. 2 on equal terms (issue 15) ------------------------------------------------------

@dataclasses.dataclass(frozen=True, kw_only=True)
class Figure2VariantConfig(Figure2Config):
    """Fig. 2's settings and the runs (name, composition) of :func:`setting_run` to make."""

    runs: tuple[tuple[str, str], ...] = (("ours-updates", "exact"),)


def figure2_variant_trials(config: Figure2VariantConfig,
                           rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Every run of ``config.runs`` at every eps level for all trials: training returns
    (n, levels, runs, E) and greedy returns of the released Q + g (n, levels, runs)."""
    levels = len(config.eps_levels)
    returns = np.empty((len(rngs), levels, len(config.runs), config.n_episodes))
    greedy = np.empty((len(rngs), levels, len(config.runs)))
    for m, (name, composition) in enumerate(config.runs):
        for k, eps in enumerate(config.eps_levels):
            dqn, sigma = setting_run(name, eps, config, composition)
            result = train(MLPQ(), dqn, np.full(len(rngs), sigma), _copies(rngs, 1))
            returns[:, k, m] = result.returns
            greedy[:, k, m] = evaluate_greedy(result.released, config.evaluation_episodes,
                                              _evaluation_streams(rngs, 1))
    return {"returns": returns, "greedy_returns": greedy}


def _variant(runs: tuple[tuple[str, str], ...]) -> dict[str, Figure2VariantConfig]:
    """Smoke and paper configs of a Fig. 2 variant making ``runs``."""
    return {"smoke": Figure2VariantConfig(n_trials=2, root_seed=0, batch_size=2, n_episodes=3,
                                          evaluation_episodes=5, runs=runs),
            "paper": Figure2VariantConfig(n_trials=10, root_seed=0, batch_size=10, runs=runs)}


FIGURE2_EXACT = register(Experiment(
    id="wang2019-figure2-exact",
    title="Wang & Hegde (2019), Fig. 2 on equal terms: Algorithm 1 in the DQN with its updates "
          "composed exactly at delta = 1e-4, as the baselines",
    chapter="book/wang2019/experiments.ipynb",
    configs=_variant((("ours-updates", "exact"),)),
    run_trials=figure2_variant_trials))

ALGORITHM1_RUNS = register(Experiment(
    id="wang2019-algorithm1",
    title="Wang & Hegde (2019), Algorithm 1 read literally (one plain SGD step per B "
          "transitions, squared loss, a fresh path per iteration) at Fig. 2's privacy levels, "
          "composed by Theorem 5 and exactly",
    chapter="book/wang2019/experiments.ipynb",
    configs=_variant((("algorithm1", "theorem5"), ("algorithm1", "exact"))),
    run_trials=figure2_variant_trials))
