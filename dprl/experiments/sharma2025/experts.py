"""Sharma et al. (2025), App. B.1: the expert populations of the book.

Trial ``i`` of an experts experiment trains the experts of setting ``i`` of the environment's
variant grid (:func:`dprl.sharma2025.variants.variant_grid`); its generator is the setting's
only source of randomness, so any setting's experts can be recomputed alone.

- ``sharma2025-cartpole-experts``, ``sharma2025-acrobot-experts``: one-hidden-layer tanh
  networks trained by the noisy cross-entropy method on the vectorised twins, the 3 best of 4
  runs per setting, each run stopped at a random budget (:mod:`dprl.sharma2025.cem`): the
  book's weakened populations. ``sharma2025-<env>-experts-converged``: the 3 best of 8 runs
  per setting, every run trained all 24 iterations, as App. B.1's fully trained agents are
  (the experts chapter measures the convergence).
- ``sharma2025-lunarlander-experts``: the 9 constants of Gymnasium's heuristic lander trained
  by the cross-entropy method from a generic prior, the 3 best candidates per setting
  (:mod:`dprl.sharma2025.lander_experts`); their default-environment returns are measured on
  the same ``default_episodes`` episodes for every expert (seeds from ``evaluation_seed``).
- ``sharma2025-hiv-experts``: per setting, the candidates of batched fitted Q iteration
  with the setting's penalties and noise and their own bootstrap weights
  (:mod:`dprl.sharma2025.hiv_experts`), their returns on their own setting and on the default
  one. Every draw of a setting comes from the streams of ``SeedSequence(root_seed)`` named by
  the setting's grid index, so a setting trained alone gives the same bits. App. B.1's
  selection across settings (the best of each, then the 1000 best second-best) is made from
  the committed candidates by :func:`hiv_experts`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from dprl.envs.acrobot import AcrobotVariants
from dprl.envs.cartpole import CartPoleVariants
from dprl.engine.batches import compute_trials
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.engine.results import current_arrays
from dprl.seeding import trial_index
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.envs.lunar_lander import LanderVariant
from dprl.sharma2025.cem import CEMSettings, train_experts
from dprl.sharma2025.hiv_experts import (HIVExpertProtocol, HIVExperts, default_returns,
                                         select_experts, train_candidates)
from dprl.sharma2025.hiv_settings import hiv_settings
from dprl.sharma2025.lander_experts import CEMConfig as LanderCEM
from dprl.sharma2025.lander_experts import LanderControllers, evaluate_on_default, train_setting
from dprl.sharma2025.mlp_policies import TanhPolicies
from dprl.sharma2025.variants import DEFAULTS, variant_grid
from dprl.validation import require_choice

TWINS = {"CartPole": (CartPoleVariants, 4, 2), "Acrobot": (AcrobotVariants, 6, 3)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridConfig(TrialConfig):
    """Trial ``i`` trains the experts of setting ``i * stride`` of the environment's grid (1:
    every setting)."""

    stride: int = 1

    def setting_index(self, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """The grid index of each trial's setting."""
        return np.array([trial_index(rng) * self.stride for rng in rngs])


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassicExpertsConfig(GridConfig):
    """The environment (``"CartPole"`` or ``"Acrobot"``) and the cross-entropy method's
    settings."""

    env: str
    cem: CEMSettings

    def __post_init__(self) -> None:
        super().__post_init__()
        require_choice("env", self.env, TWINS)


def classic_experts_trials(config: ClassicExpertsConfig,
                           rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """The experts of each trial's setting (:func:`dprl.sharma2025.cem.train_experts`), with
    the setting's parameter values."""
    make_env, obs_dim, n_actions = TWINS[config.env]
    index = config.setting_index(rngs)
    settings = {name: values[index] for name, values in variant_grid(config.env).items()}
    out = train_experts(make_env, obs_dim, n_actions, settings, rngs, config.cem,
                        DEFAULTS[config.env])
    return {**out, **{f"setting_{name}": value for name, value in settings.items()}}


def result_id(env: str, kind: str, converged: bool = False) -> str:
    """``sharma2025-<env>-<kind>``: a result on ``env``'s first population or, ``converged``,
    on the one trained to convergence (``-converged``)."""
    return f"sharma2025-{env.lower()}-{kind}" + ("-converged" if converged else "")


def require_population(env: str, converged: bool) -> None:
    """Refuse a population trained to convergence where the book has none (it has one for
    the environments of :data:`TWINS`)."""
    if converged and env not in TWINS:
        raise ValueError(f"converged populations exist for {sorted(TWINS)}, not {env!r}")


def experts_id(env: str, converged: bool = False) -> str:
    """The id of ``env``'s experts result (:func:`result_id`)."""
    return result_id(env, "experts", converged)


def _classic(env: str, root_seed: int, cem: CEMSettings) -> Experiment:
    smoke = CEMSettings(**{**dataclasses.asdict(cem), "iterations": 3, "population": 6,
                           "elite": 2, "eval_episodes": 2, "horizon": 50})
    converged = cem.budgets == "full"
    return register(Experiment(
        id=experts_id(env, converged),
        title=f"Sharma et al. (2025), App. B.1: {env} experts (noisy CEM on 1000 variants"
              + (", trained to convergence)" if converged else ")"),
        chapter="book/sharma2025/experts.ipynb",
        configs={"smoke": ClassicExpertsConfig(n_trials=10, root_seed=root_seed, batch_size=5,
                                               env=env, cem=smoke, stride=100),
                 "paper": ClassicExpertsConfig(n_trials=1000, root_seed=root_seed,
                                               batch_size=100, env=env, cem=cem)},
        run_trials=classic_experts_trials))


CARTPOLE_EXPERTS = _classic("CartPole", 2025, CEMSettings())
ACROBOT_EXPERTS = _classic("Acrobot", 2026, CEMSettings())
#: Trained to convergence (module docstring); their own root seeds.
CONVERGED = CEMSettings(runs=8, iterations=24, budgets="full")
CARTPOLE_EXPERTS_CONVERGED = _classic("CartPole", 2125, CONVERGED)
ACROBOT_EXPERTS_CONVERGED = _classic("Acrobot", 2126, CONVERGED)


@lru_cache(maxsize=8)
def classic_experts(env: str, scale: str = "paper", converged: bool = False) -> TanhPolicies:
    """The ``3 x n_settings`` experts of ``env`` (``"CartPole"`` or ``"Acrobot"``; ``converged``:
    trained to convergence), setting by setting: the committed result at paper scale (which
    must be current), recomputed at smoke scale."""
    require_choice("env", env, TWINS)
    experiment = CLASSIC[env, converged]
    parameters = result_arrays(experiment, scale)["parameters"]
    _, obs_dim, n_actions = TWINS[env]
    return TanhPolicies(parameters.reshape(-1, parameters.shape[-1]), obs_dim,
                        experiment.config(scale).cem.n_hidden, n_actions)


@lru_cache(maxsize=2)
def lander_experts(scale: str = "paper") -> LanderControllers:
    """The ``3 x n_settings`` LunarLander experts, setting by setting (as
    :func:`classic_experts`)."""
    parameters = result_arrays(LUNARLANDER_EXPERTS, scale)["parameters"]
    return LanderControllers(parameters.reshape(-1, parameters.shape[-1]))


def result_arrays(experiment: Experiment, scale: str) -> dict[str, np.ndarray]:
    """The arrays of ``experiment`` at ``scale``: committed (paper, checked current) or
    computed now, without writing anything (smoke)."""
    if scale != "paper":
        config = experiment.config(scale)
        return compute_trials(experiment, config, range(config.n_trials))
    return current_arrays(experiment.id)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LanderExpertsConfig(GridConfig):
    """The cross-entropy method per setting and the default-environment evaluation."""

    cem: LanderCEM
    default_episodes: int = 5
    evaluation_seed: int


def lander_experts_trials(config: LanderExpertsConfig,
                          rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Each trial's setting trained alone (:func:`dprl.sharma2025.lander_experts.train_setting`),
    then evaluated on the default LunarLander-v3."""
    grid = variant_grid("LunarLander")
    index = config.setting_index(rngs)
    trained = [train_setting(LanderVariant.sharma2025(*(float(grid[name][i]) for name in grid)),
                             rng, config.cem) for i, rng in zip(index, rngs)]
    parameters = np.stack([p for p, _ in trained])
    default = [evaluate_on_default(p, config.default_episodes,
                                   np.random.default_rng(config.evaluation_seed))
               for p in parameters]
    return {"parameters": parameters, "own_returns": np.stack([r for _, r in trained]),
            "default_returns": np.stack(default),
            **{f"setting_{name}": values[index] for name, values in grid.items()}}


LUNARLANDER_EXPERTS = register(Experiment(
    id="sharma2025-lunarlander-experts",
    title="Sharma et al. (2025), App. B.1: LunarLander experts (CEM on the heuristic's "
          "constants, 1000 variants)",
    chapter="book/sharma2025/experts.ipynb",
    configs={"smoke": LanderExpertsConfig(
                 n_trials=2, root_seed=2027, batch_size=1, stride=500, default_episodes=1,
                 evaluation_seed=7, cem=LanderCEM(population=4, n_elite=2, iterations=1,
                                                  episodes=1, max_steps=100, eval_episodes=1)),
             "paper": LanderExpertsConfig(n_trials=1000, root_seed=2027, batch_size=10,
                                          evaluation_seed=7, cem=LanderCEM())},
    run_trials=lander_experts_trials))


@dataclasses.dataclass(frozen=True, kw_only=True)
class HIVExpertsConfig(GridConfig):
    """The fitted Q iteration protocol."""

    protocol: HIVExpertProtocol


def hiv_experts_trials(config: HIVExpertsConfig,
                       rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """The candidates of each trial's setting (:func:`~dprl.sharma2025.hiv_experts.
    train_candidates`, all settings of the batch at once) and their default-setting returns."""
    mdp = HIVTreatmentMDP.sharma2025()
    settings = hiv_settings(config.setting_index(rngs))
    candidates = train_candidates(mdp, settings, config.protocol,
                                  np.random.default_rng(np.random.SeedSequence(config.root_seed)))
    S, K = candidates.own_returns.shape
    every = HIVExperts(candidates.weights.reshape(S * K, *candidates.weights.shape[2:]),
                       config.protocol.degree, settings.take(np.repeat(np.arange(S), K)),
                       np.zeros(S * K, dtype=np.int64), candidates.own_returns.ravel())
    return {"weights": candidates.weights, "own_returns": candidates.own_returns,
            "last_change": candidates.last_change,
            "default_returns": default_returns(every, mdp).reshape(S, K),
            "setting_drug_penalties": settings.drug_penalties,
            "setting_efficacy_noise": settings.efficacy_noise}


HIV_EXPERTS = register(Experiment(
    id="sharma2025-hiv-experts",
    title="Sharma et al. (2025), App. B.1: HIV experts (batched fitted Q iteration on 2000 "
          "settings)",
    chapter="book/sharma2025/experts.ipynb",
    configs={"smoke": HIVExpertsConfig(
                 n_trials=4, root_seed=2028, batch_size=2, stride=500,
                 protocol=HIVExpertProtocol(n_rounds=2, patients_per_round=2, n_iterations=5,
                                            n_noisy_evaluations=1, n_second_best=2)),
             "paper": HIVExpertsConfig(n_trials=2000, root_seed=2028, batch_size=200,
                                       protocol=HIVExpertProtocol())},
    run_trials=hiv_experts_trials))


@lru_cache(maxsize=2)
def hiv_experts(scale: str = "paper") -> HIVExperts:
    """App. B.1's 3000 HIV experts (2000 at smoke scale + its second-best count) selected from
    the committed candidates (:func:`~dprl.sharma2025.hiv_experts.select_experts`)."""
    arrays = result_arrays(HIV_EXPERTS, scale)
    config = HIV_EXPERTS.config(scale)
    setting, candidate, rank = select_experts(arrays["own_returns"],
                                              config.protocol.n_second_best)
    settings = hiv_settings(np.arange(config.n_trials) * config.stride).take(setting)
    return HIVExperts(arrays["weights"][setting, candidate], config.protocol.degree, settings,
                      rank, arrays["own_returns"][setting, candidate])


CLASSIC = {("CartPole", False): CARTPOLE_EXPERTS, ("Acrobot", False): ACROBOT_EXPERTS,
           ("CartPole", True): CARTPOLE_EXPERTS_CONVERGED,
           ("Acrobot", True): ACROBOT_EXPERTS_CONVERGED}
