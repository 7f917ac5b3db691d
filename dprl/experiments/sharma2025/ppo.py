"""Sharma et al. (2025), App. B.1 with PPO experts: do PPO experts agree more than CEM ones?

- ``sharma2025-cartpole-experts-ppo``: trial ``i`` trains 4 PPO agents (Schulman et al.
  2017; :mod:`dprl.sharma2025.ppo`: tanh MLPs (64, 64), RL Zoo's tuned CartPole-v1
  hyperparameters, 51 200 environment steps each, i.e. 200 updates of 20 epochs, 4000
  gradient steps) on setting ``10 i`` of CartPole's grid (every 10th setting: 100 of the
  1000) and keeps the 3 best on their own variant, as App. B.1 does. The convergence
  criterion is measured, not imposed: the share of kept experts at the 200-step cap on their
  own variant (``own_returns``, 10 greedy episodes). App. B.1's networks (512, 256, 64) cost
  about 14 times as much per update on this machine (measured: 186 ms against 13 ms per
  agent and update), some 5 CPU hours for these 400 agents: not run.
- ``sharma2025-acrobot-experts-ppo``: the same on every 10th Acrobot setting with RL
  Baselines3 Zoo's tuned Acrobot-v1 settings (:data:`ACROBOT_ZOO_PPO`, 10^6 environment
  steps each). Acrobot has no cap: convergence is measured by Gymnasium's reward threshold
  (-100) on the own variant and by the training curve.
- :func:`agreement_comparison`: App. B.1's data of several populations (:func:`ppo_and_cem`:
  the PPO experts and the converged CEM experts of the same settings), recorded on the
  default environment as the release experiments record it, and the share of each
  population's experts that agree with every action of a trajectory's first 10 / 20 / 40
  steps (:func:`dprl.sharma2025.agreement.prefix_agreement`).
- :func:`replicated_release`: the stable transitions DataRelease keeps from a population
  with every expert repeated to App. B.3's ``m`` (the shares above unchanged): at
  ``m = 300`` the threshold exceeds ``m`` and nothing is ever released.
- ``sharma2025-<env>-ppo-agreement`` (CartPole, Acrobot): both measurements of each
  population, one trial each (:class:`PPOComparisonConfig`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.experiments.sharma2025.experts import (CLASSIC, TWINS, GridConfig, classic_experts,
                                                 experts_id, result_arrays)
from dprl.experiments.sharma2025.release import twin_recorder
from dprl.seeding import named_stream, trial_index
from dprl.sharma2025.agreement import PREFIX_LENGTHS, prefix_agreement
from dprl.sharma2025.demonstrations import Demonstrations
from dprl.sharma2025.experts import ExpertPopulation
from dprl.sharma2025.ppo_settings import PPOSettings
from dprl.sharma2025.release import PAPER_EPSILONS, appendix_b3_parameters, data_release
from dprl.sharma2025.variants import DEFAULTS, variant_grid
from dprl.validation import require_choice, require_int

if TYPE_CHECKING:
    from dprl.sharma2025.ppo import MLPPolicies


@dataclasses.dataclass(frozen=True, kw_only=True)
class PPOExpertsConfig(GridConfig):
    """The environment (a twin of :data:`~dprl.experiments.sharma2025.experts.TWINS`) and PPO's
    settings."""

    env: str
    ppo: PPOSettings

    def __post_init__(self) -> None:
        super().__post_init__()
        require_choice("env", self.env, TWINS)


_SAMPLE = 2**20  # the named stream of the sampled trajectories


def ppo_experts_trials(config: PPOExpertsConfig,
                       rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """The PPO experts of each trial's setting (:func:`dprl.sharma2025.ppo.train_ppo_experts`,
    one torch thread), with the setting's parameter values."""
    from dprl.determinism import deterministic_torch
    from dprl.sharma2025.ppo import train_ppo_experts

    deterministic_torch()
    make_env, obs_dim, n_actions = TWINS[config.env]
    index = config.setting_index(rngs)
    settings = {name: values[index] for name, values in variant_grid(config.env).items()}
    out = train_ppo_experts(make_env, obs_dim, n_actions, settings, rngs, config.ppo,
                            DEFAULTS[config.env])
    return {**out, "setting_index": index,
            **{f"setting_{name}": value for name, value in settings.items()}}


#: Every 10th CartPole setting at paper scale.
STRIDE = 10
#: The smoke scale's PPO: small networks, two updates, short evaluations.
_SMOKE_PPO = PPOSettings(hidden=(16, 16), timesteps=512, n_envs=4, n_steps=32, minibatch=64,
                         n_epochs=2, eval_episodes=2, eval_horizon=50)


def _ppo_experts(env: str, root_seed: int, ppo: PPOSettings, n_trials: int, stride: int,
                 batch_size: int, what: str) -> Experiment:
    return register(Experiment(
        id=experts_id(env) + "-ppo",
        title=f"Sharma et al. (2025), App. B.1: {env} PPO experts ({what})",
        chapter="book/sharma2025/experts.ipynb",
        configs={"smoke": PPOExpertsConfig(n_trials=2, root_seed=root_seed, batch_size=2,
                                           stride=500, env=env, ppo=_SMOKE_PPO),
                 "paper": PPOExpertsConfig(n_trials=n_trials, root_seed=root_seed,
                                           batch_size=batch_size, stride=stride, env=env,
                                           ppo=ppo)},
        run_trials=ppo_experts_trials))


CARTPOLE_EXPERTS_PPO = _ppo_experts("CartPole", 2225, PPOSettings(timesteps=51_200), 100,
                                    STRIDE, 25, "every 10th of the 1000 variants")
#: RL Baselines3 Zoo's tuned Acrobot-v1 PPO (16 environments x 256 steps, minibatches of 64,
#: 4 epochs, gamma 0.99, GAE lambda 0.94, learning rate 3e-4, 10^6 steps), without the Zoo's
#: running normalisation of observations and rewards, which dprl.sharma2025.ppo lacks.
ACROBOT_ZOO_PPO = PPOSettings(timesteps=1_000_000, n_envs=16, n_steps=256, minibatch=64,
                              n_epochs=4, gamma=0.99, gae_lambda=0.94, learning_rate=3e-4)
ACROBOT_EXPERTS_PPO = _ppo_experts("Acrobot", 2227, ACROBOT_ZOO_PPO, 100, STRIDE, 10,
                                   "every 10th of the 1000 variants")


#: The PPO populations by environment.
PPO_EXPERTS = {"CartPole": CARTPOLE_EXPERTS_PPO, "Acrobot": ACROBOT_EXPERTS_PPO}


@lru_cache(maxsize=4)
def ppo_experts(scale: str = "paper", env: str = "CartPole") -> tuple[MLPPolicies, np.ndarray]:
    """The ``3 x n_settings`` PPO experts of ``env``, setting by setting, and the grid index
    of each expert's setting (committed at paper scale, recomputed at smoke scale)."""
    from dprl.sharma2025.ppo import MLPPolicies

    experiment = PPO_EXPERTS[require_choice("env", env, PPO_EXPERTS)]
    arrays = result_arrays(experiment, scale)
    parameters = arrays["parameters"]
    _, obs_dim, n_actions = TWINS[env]
    policies = MLPPolicies(parameters.reshape(-1, parameters.shape[-1]), obs_dim,
                           experiment.config(scale).ppo.hidden, n_actions)
    return policies, np.repeat(arrays["setting_index"], parameters.shape[1])


def cem_experts_of(settings: np.ndarray, converged: bool = True, scale: str = "paper",
                   env: str = "CartPole") -> ExpertPopulation:
    """The CEM experts of ``env`` (:func:`~dprl.experiments.sharma2025.experts.
    classic_experts`) of the grid settings ``settings`` (all of each setting's experts,
    setting by setting)."""
    config = CLASSIC[require_choice("env", env, TWINS), converged].config(scale)
    index = np.asarray(settings, dtype=np.int64)
    if index.ndim != 1 or not index.size or np.any(index % config.stride) or np.any(
            index < 0) or np.any(index >= config.n_trials * config.stride):
        raise ValueError(f"settings must be a non-empty 1-D array of grid indices that the "
                         f"{scale} population holds (multiples of {config.stride} below "
                         f"{config.n_trials * config.stride}), got {index}")
    keep = config.cem.keep
    rows = (index[:, None] // config.stride * keep + np.arange(keep)).ravel()
    return classic_experts(env, scale, converged).select(rows)


def demonstrations(experts: ExpertPopulation, per_expert: int, p_min: float, horizon: int,
                   data_rng: np.random.Generator, env: str = "CartPole") -> Demonstrations:
    """App. B.1's data set ``D^Pi`` of all of ``experts``: ``per_expert`` trajectories each on
    the default ``env`` (a twin), ``horizon`` steps, modified to ``p_min``, expert ``i``
    recorded from ``named_stream(data_rng, i)`` (:func:`dprl.sharma2025.datasets.record`), on
    demand."""
    recorder = twin_recorder(env, horizon, p_min, data_rng)
    return Demonstrations(experts, np.arange(experts.n_experts),
                          require_int("per_expert", per_expert), p_min, recorder)


def agreement_comparison(populations: Mapping[str, ExpertPopulation], n_trajectories: int,
                         rng: np.random.Generator, lengths: Sequence[int] = PREFIX_LENGTHS,
                         per_expert: int = 20, p_min: float = 0.02, horizon: int = 200,
                         env: str = "CartPole") -> dict[str, np.ndarray]:
    """Sharma et al. (2025), Alg. 1's quantity on several populations of ``env``'s experts:
    for each (name -> population), App. B.1's data set of all its experts
    (:func:`demonstrations`, from ``rng``'s named stream of the population's position;
    ``rng`` must be seeded by a ``SeedSequence``), ``n_trajectories`` of them drawn without
    replacement (the same draw for every population of the same size), and
    :func:`~dprl.sharma2025.agreement.prefix_agreement` on them:
    ``(n_trajectories, len(lengths))`` per population."""
    if not populations:
        raise ValueError("populations must not be empty")
    n_trajectories = require_int("n_trajectories", n_trajectories)
    out = {}
    for position, (name, experts) in enumerate(populations.items()):
        data = demonstrations(experts, per_expert, p_min, horizon, named_stream(rng, position),
                              env)
        if n_trajectories > data.n_trajectories:
            raise ValueError(f"n_trajectories must be <= the {data.n_trajectories} "
                             f"trajectories of population {name!r}, got {n_trajectories}")
        sample = np.sort(named_stream(rng, _SAMPLE).choice(data.n_trajectories,
                                                           n_trajectories, replace=False))
        out[name] = prefix_agreement(data, sample, lengths)
    return out


def replicated_release(experts: ExpertPopulation, replicas: int, eps: float, n_releases: int,
                       rng: np.random.Generator, per_expert: int = 20,
                       env: str = "CartPole") -> np.ndarray:
    """``|D_stable|`` (stable transitions) of ``n_releases`` runs of DataRelease (Sharma et
    al. 2025, Alg. 2, App. B.3's split and ``T`` at ``eps`` for ``env``, ``delta = 1/m``,
    ``p_min = 0.02``, ``L = 200``) on the population with every expert repeated ``replicas`` times
    (``m = replicas x n_experts``), each copy recording its own trajectories
    (:func:`demonstrations`, from ``named_stream(rng, 0)``; release ``r`` from
    ``named_stream(rng, 1, r)``). The copies leave the share of experts agreeing with a
    prefix unchanged, so a small population is released as one of ``m`` experts that agree
    as much (at ``m = 300``, App. B.3's threshold exceeds ``m``: nothing can be released).
    Returns ``(n_releases,)``."""
    replicas = require_int("replicas", replicas)
    n_releases = require_int("n_releases", n_releases)
    population = experts.select(np.repeat(np.arange(experts.n_experts), replicas))
    params = appendix_b3_parameters(require_choice("env", env, TWINS), eps, population.n_experts)
    if params is None:
        raise ValueError(f"eps must be one where App. B.3 runs a {env} release, got {eps}")
    data = demonstrations(population, per_expert, params.p_min, params.max_length,
                          named_stream(rng, 0), env)
    sizes = np.zeros(n_releases, dtype=np.int64)
    for r in range(n_releases):
        stream = named_stream(rng, 1, r)
        order = copy.deepcopy(stream).permutation(data.n_trajectories)  # Alg. 2's first draw
        data.prefetch(order[:params.n_queries])
        sizes[r] = data_release(data.n_trajectories, data.log_probs, params,
                                stream).prefix_lengths.sum()
    return sizes


def ppo_and_cem(scale: str = "paper", env: str = "CartPole") -> dict[str, ExpertPopulation]:
    """The PPO experts of ``env`` (``sharma2025-<env>-experts-ppo``) and the converged CEM
    experts of the same settings (``sharma2025-<env>-experts-converged``, 3 per setting)."""
    ppo, settings = ppo_experts(scale, env)
    return {"ppo": ppo, "cem": cem_experts_of(np.unique(settings), scale=scale, env=env)}


#: The populations of ``sharma2025-<env>-ppo-agreement``, trial by trial.
COMPARED = ("ppo", "cem")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PPOComparisonConfig(TrialConfig):
    """Trial ``i`` measures population ``COMPARED[i]`` of :func:`ppo_and_cem` (``env``'s
    experts at ``experts_scale``): prefix agreement on ``n_trajectories`` of its data
    (:func:`agreement_comparison`) and ``|D_stable|`` of ``n_releases`` releases at each of
    ``epsilons`` with every expert repeated ``replicas`` times (:func:`replicated_release`)."""

    env: str
    experts_scale: str
    n_trajectories: int
    epsilons: tuple[float, ...] = (7.5, 10.0)
    n_releases: int = 20
    replicas: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_trials != len(COMPARED):
            raise ValueError(f"n_trials must be {len(COMPARED)} (one per population of "
                             f"{COMPARED}), got {self.n_trials}")
        require_choice("env", self.env, PPO_EXPERTS)
        require_choice("experts_scale", self.experts_scale, ("smoke", "paper"))
        require_int("n_trajectories", self.n_trajectories)
        require_int("n_releases", self.n_releases)
        require_int("replicas", self.replicas)


def ppo_comparison_trials(config: PPOComparisonConfig,
                          rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Each trial's population: ``agreement`` ``(n_trajectories, 3)`` (prefixes of 10, 20,
    40 steps) from the trial's stream 0, ``stable`` ``(len(epsilons), n_releases)`` from its
    streams ``(1, k)``."""
    populations = ppo_and_cem(config.experts_scale, config.env)
    out: dict[str, list[np.ndarray]] = {"agreement": [], "stable": []}
    for rng in rngs:
        name = COMPARED[trial_index(rng)]
        experts = populations[name]
        out["agreement"].append(agreement_comparison(
            {name: experts}, config.n_trajectories, named_stream(rng, 0), env=config.env)[name])
        out["stable"].append(np.stack([
            replicated_release(experts, config.replicas, eps, config.n_releases,
                               named_stream(rng, 1, k), env=config.env)
            for k, eps in enumerate(config.epsilons)]))
    return {name: np.stack(values) for name, values in out.items()}


def _ppo_agreement(env: str, root_seed: int) -> Experiment:
    """The comparison on ``env``: at paper scale, at each of Fig. 3's eps where App. B.3 runs
    a release of ``env``, every expert repeated 10 times (m = 3000 for 300 experts)."""
    experts = PPO_EXPERTS[env]
    epsilons = tuple(eps for eps in PAPER_EPSILONS if appendix_b3_parameters(env, eps))
    return register(Experiment(
        id=f"sharma2025-{env.lower()}-ppo-agreement",
        title=f"Sharma et al. (2025): do PPO experts agree more than CEM experts? ({env}, the "
              f"same {experts.config('paper').n_trials} settings)",
        chapter="book/sharma2025/experts.ipynb",
        configs={"smoke": PPOComparisonConfig(n_trials=2, root_seed=root_seed, batch_size=1,
                                              env=env, experts_scale="smoke", n_trajectories=8,
                                              epsilons=(10.0,), n_releases=1, replicas=500),
                 "paper": PPOComparisonConfig(n_trials=2, root_seed=root_seed, batch_size=1,
                                              env=env, experts_scale="paper",
                                              n_trajectories=400, epsilons=epsilons)},
        run_trials=ppo_comparison_trials,
        after=(experts.id, CLASSIC[env, True].id)))


CARTPOLE_PPO_AGREEMENT = _ppo_agreement("CartPole", 2226)
ACROBOT_PPO_AGREEMENT = _ppo_agreement("Acrobot", 2229)
