"""Sharma et al. (2025), Alg. 2 on the book's expert populations: the released stable sets.

Trial ``r`` (20 per environment; 10 for LunarLander and HIV, whose simulators are slower)
runs DataRelease once for every cell ``(eps, m, hiv_split)`` of an environment,
each from its own named stream of the trial: the budget split and ``T`` of App. B.3
(:func:`dprl.sharma2025.release.appendix_b3_split`, ``delta = 1/m``), ``L`` the data's
horizon, ``p_min = 0.02``. The data set is ``D^Pi`` of the first ``m`` experts of a fixed
public permutation of the population (nested: the 1000 experts of ``m = 1000`` are among the
2000 of ``m = 2000``), ``N = 20`` trajectories each on the default environment, recorded on
demand from every expert's own stream (:mod:`dprl.sharma2025.demonstrations`), so a release
records only its ``T`` queried trajectories.

Per cell and queried trajectory (padded with -1 to the largest ``T``): the expert, the
trajectory's index within it, its length ``|tau|`` and its stable prefix length ``k``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from dprl.engine.registry import Experiment, TrialConfig, get, register
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.experiments.sharma2025.experts import (TWINS, classic_experts, experts_id, hiv_experts,
                                                 lander_experts, require_population, result_id)
from dprl.seeding import named_stream, trial_index
from dprl.sharma2025.agreement import PREFIX_LENGTHS, prefix_agreement
from dprl.sharma2025.datasets import ExpertData, record
from dprl.sharma2025.demonstrations import Demonstrations, Recorder
from dprl.sharma2025.experts import ExpertPopulation
from dprl.sharma2025.hiv_experts import record_trajectories as record_hiv
from dprl.sharma2025.lander_experts import record_trajectories
from dprl.sharma2025.release import appendix_b3_split, data_release, release_parameters
from dprl.validation import require_choice, require_int, require_probability

#: A cell: total eps, number of experts m, and the HIV budget-split reading.
Cell = tuple[float, int, str]

_SUBSET_KEY = 2**31  # the data seed's stream of the public expert permutation


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReleaseConfig(TrialConfig):
    """The environment, its release cells, and the data set (stated in the module);
    ``converged``: the population trained to convergence (CartPole, Acrobot)."""

    env: str
    cells: tuple[Cell, ...]
    horizon: int = 200
    per_expert: int = 20
    p_min: float = 0.02
    data_seed: int
    experts_scale: str = "paper"
    converged: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        require_population(self.env, self.converged)


def twin_recorder(env: str, horizon: int, p_min: float, data_rng: np.random.Generator
                  ) -> Recorder:
    """How demonstrations are recorded on the default ``env`` (a twin of
    :data:`~dprl.experiments.sharma2025.experts.TWINS`), ``horizon`` steps, modified to
    ``p_min`` (:func:`dprl.sharma2025.datasets.record`; expert ``i`` from the stream
    ``named_stream(data_rng, i)``)."""
    twin = TWINS[require_choice("env", env, TWINS)][0](horizon=require_int("horizon", horizon))
    p_min = require_probability("p_min", p_min, open_low=True)

    def recorder(experts: ExpertPopulation, index: np.ndarray, per_expert: int,
                 picks: np.ndarray | None = None) -> ExpertData:
        return record(twin, experts, index, per_expert, p_min, data_rng, picks)

    return recorder


def population(config: ReleaseConfig) -> tuple[ExpertPopulation, Recorder]:
    """The experts of ``config.env`` and how their demonstrations are recorded (every
    expert ``i`` from the stream ``named_stream(data_rng, i)`` of the data seed)."""
    data_rng = np.random.default_rng(np.random.SeedSequence(config.data_seed))
    if config.env in TWINS:
        return (classic_experts(config.env, config.experts_scale, config.converged),
                twin_recorder(config.env, config.horizon, config.p_min, data_rng))
    if config.env == "LunarLander":

        def lander_recorder(experts: ExpertPopulation, index: np.ndarray, per_expert: int,
                            picks: np.ndarray | None = None) -> ExpertData:
            return record_trajectories(experts, index, per_expert, config.horizon, config.p_min,
                                       data_rng, picks)

        return lander_experts(config.experts_scale), lander_recorder
    if config.env == "HIV":
        mdp = HIVTreatmentMDP.sharma2025(horizon=config.horizon)

        def hiv_recorder(experts: ExpertPopulation, index: np.ndarray, per_expert: int,
                         picks: np.ndarray | None = None) -> ExpertData:
            episodes = record_hiv(experts, mdp, per_expert,
                                  [named_stream(data_rng, int(i)) for i in index], config.p_min,
                                  picks)
            shape = episodes.lengths.shape
            return ExpertData(episodes.observations, episodes.actions, episodes.rewards,
                              np.full(shape, config.horizon), np.zeros(shape, dtype=bool))

        return hiv_experts(config.experts_scale), hiv_recorder
    raise ValueError(f"no population for env {config.env!r}")


def members(n_experts: int, m: int, data_seed: int) -> np.ndarray:
    """The first ``m`` experts of the public permutation of ``n_experts`` drawn from the data
    seed (nested in ``m``)."""
    rng = np.random.default_rng(np.random.SeedSequence(data_seed, spawn_key=(_SUBSET_KEY,)))
    return rng.permutation(n_experts)[:m]


def release_trials(config: ReleaseConfig,
                   rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """One DataRelease per cell per trial (module docstring)."""
    experts, recorder = population(config)
    budgets = [appendix_b3_split(config.env, eps, m, split) for eps, m, split in config.cells]
    width = max(budget.n_queries for budget in budgets)
    names = ("queried_expert", "queried_trajectory", "queried_length", "prefix_length")
    out = {name: np.full((len(rngs), len(config.cells), width), -1, dtype=np.int64)
           for name in names}
    for c, ((_, m, _), budget) in enumerate(zip(config.cells, budgets)):
        params = release_parameters(budget.eps1, budget.delta1, budget.n_queries,
                                    config.horizon, config.p_min)
        data = Demonstrations(experts, members(experts.n_experts, m, config.data_seed),
                              config.per_expert, config.p_min, recorder)
        for r, rng in enumerate(rngs):
            stream = named_stream(rng, c)
            order = copy.deepcopy(stream).permutation(data.n_trajectories)  # Alg. 2's first draw
            data.prefetch(order[:params.n_queries])
            result = data_release(data.n_trajectories, data.log_probs, params, stream)
            t = result.queried
            columns = (data.members[t // config.per_expert], t % config.per_expert,
                       result.queried_lengths, result.prefix_lengths)
            for name, column in zip(names, columns):
                out[name][r, c, :len(t)] = column
    return out


def release_id(env: str, converged: bool = False) -> str:
    """The id of ``env``'s release result (:func:`~dprl.experiments.sharma2025.experts.result_id`)."""
    return result_id(env, "release", converged)


def _release(env: str, paper_cells: tuple[Cell, ...], smoke_cells: tuple[Cell, ...],
             root_seed: int, data_seed: int, horizon: int, n_releases: int = 20,
             converged: bool = False) -> Experiment:
    common = dict(env=env, horizon=horizon, data_seed=data_seed, converged=converged)
    return register(Experiment(
        id=release_id(env, converged),
        title=f"Sharma et al. (2025), Alg. 2: released stable prefixes, {env}"
              + (", experts trained to convergence" if converged else ""),
        chapter="book/sharma2025/data-release.ipynb",
        configs={"smoke": ReleaseConfig(n_trials=2, root_seed=root_seed, batch_size=1,
                                        cells=smoke_cells, experts_scale="smoke", **common),
                 "paper": ReleaseConfig(n_trials=n_releases, root_seed=root_seed, batch_size=5,
                                        cells=paper_cells, **common)},
        run_trials=release_trials, after=(experts_id(env, converged),)))


B3 = "appendix_b3"
#: CartPole and Acrobot on the book's first populations and (``-converged``, the same cells,
#: releases and data seeds) on the populations trained to convergence.
CARTPOLE_RELEASE, CARTPOLE_RELEASE_CONVERGED = (
    _release("CartPole", ((7.5, 3000, B3), (10.0, 3000, B3)), ((10.0, 30, B3),), 52, 51, 200,
             converged=converged) for converged in (False, True))
ACROBOT_RELEASE, ACROBOT_RELEASE_CONVERGED = (
    _release("Acrobot",
             tuple((eps, m, B3) for eps in (5.0, 7.5, 10.0) for m in (1000, 2000, 3000)),
             ((10.0, 30, B3), (10.0, 20, B3)), 62, 61, 200, converged=converged)
    for converged in (False, True))
#: LunarLander trajectories are cut at 500 steps (the paper gives no length): most App. B.1
#: experts' episodes end by then (the share is printed in the experts chapter), and recording
#: costs about the same as at Gymnasium's 1000.
LUNARLANDER_RELEASE = _release("LunarLander", ((7.5, 3000, B3), (10.0, 3000, B3)),
                               ((10.0, 6, B3),), 72, 71, 500, n_releases=10)
#: HIV under both readings of its budget split (App. B.3's 3/4, and Sec. 6's eps1 = eps).
S6 = "section6"
HIV_RELEASE = _release("HIV", ((7.5, 3000, B3), (10.0, 3000, B3), (7.5, 3000, S6),
                               (10.0, 3000, S6)), ((10.0, 6, B3), (10.0, 6, S6)), 82, 81, 50,
                       n_releases=10)


def stable_transitions(arrays: Mapping[str, np.ndarray], cell: int) -> np.ndarray:
    """``|D_stable|`` of every release of ``cell`` in a release result's ``arrays``: the sum of
    the released prefix lengths ``k`` over its queried trajectories, ``(n_releases,)``."""
    k = np.asarray(arrays["prefix_length"])[:, cell]
    return np.where(k >= 0, k, 0).sum(axis=1)


# --- what the populations agree on ---------------------------------------------------------

#: A population: the environment and whether it is the one trained to convergence.
Population = tuple[str, bool]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AgreementConfig(TrialConfig):
    """Trial ``i`` measures population ``populations[i]`` on ``n_trajectories`` trajectories
    drawn from its release data set of ``m`` experts (the release config at ``release_scale``),
    at the prefix lengths ``lengths``."""

    populations: tuple[Population, ...]
    m: int
    n_trajectories: int
    lengths: tuple[int, ...] = PREFIX_LENGTHS
    release_scale: str = "paper"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_trials != len(self.populations):
            raise ValueError(f"n_trials must equal the {len(self.populations)} populations")


def agreement_trials(config: AgreementConfig,
                     rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial: the sampled trajectories (sorted indices into the data set) and their
    :func:`~dprl.sharma2025.agreement.prefix_agreement` ``(n_trajectories, len(lengths))``."""
    out: dict[str, list[np.ndarray]] = {"trajectories": [], "agreement": []}
    for rng in rngs:
        env, converged = config.populations[trial_index(rng)]
        release = get(release_id(env, converged)).config(config.release_scale)
        experts, recorder = population(release)
        data = Demonstrations(experts, members(experts.n_experts, config.m, release.data_seed),
                              release.per_expert, release.p_min, recorder)
        sample = np.sort(rng.choice(data.n_trajectories, config.n_trajectories, replace=False))
        out["trajectories"].append(sample)
        out["agreement"].append(prefix_agreement(data, sample, config.lengths))
    return {name: np.stack(values) for name, values in out.items()}


#: The populations measured, in trial order.
AGREEMENT_POPULATIONS = tuple((env, converged) for env in ("CartPole", "Acrobot")
                              for converged in (False, True))
AGREEMENT = register(Experiment(
    id="sharma2025-agreement",
    title="Sharma et al. (2025), Alg. 1: what the expert populations agree on (prefixes of "
          "recorded trajectories)",
    chapter="book/sharma2025/experts.ipynb",
    configs={"smoke": AgreementConfig(n_trials=len(AGREEMENT_POPULATIONS), root_seed=91,
                                      batch_size=2, populations=AGREEMENT_POPULATIONS, m=20,
                                      n_trajectories=10, release_scale="smoke"),
             "paper": AgreementConfig(n_trials=len(AGREEMENT_POPULATIONS), root_seed=91,
                                      batch_size=1, populations=AGREEMENT_POPULATIONS,
                                      m=3000, n_trajectories=400)},
    run_trials=agreement_trials,
    after=tuple(experts_id(env, converged) for env, converged in AGREEMENT_POPULATIONS)))
