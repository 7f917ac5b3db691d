"""Sharma et al. (2025, Sec. 6): one training run of Figs. 3-4 and Tables 1-2, computed.

Trial ``i`` of a training experiment is the run ``config.runs[i]`` (:class:`Run`; which runs
each experiment holds: :mod:`dprl.experiments.sharma2025.runs`): non-private CQL/BCQ on all
of ``D^Pi``, the expert-level DP-SGD baseline at the whole ``(eps, delta = 1/m)``, or
selective DP-SGD ("ours") at Table 3's ``p`` with App. B.3's budget split, its ``D_stable``
being the stable prefixes of release trial ``seed`` of the matching cell of
``sharma2025-<env>-release``. Every run draws from its trial's streams only
(:func:`dprl.sharma2025.training.run_streams`), so any run recomputes alone.

The data are the first ``m`` members of the release's public permutation, all ``N = 20``
trajectories each (:mod:`dprl.sharma2025.training_data`), cached under ``data/cache``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from dprl.engine.registry import TrialConfig, get
from dprl.engine.results import result_paths
from dprl.experiments.sharma2025.experts import experts_id, require_population, result_arrays
from dprl.experiments.sharma2025.release import members, population, release_id
from dprl.kernel_paths import require_kernels
from dprl.paths import REPO_ROOT
from dprl.seeding import trial_index
from dprl.sharma2025.accounting import ACCOUNTANTS, selective_epsilon
from dprl.sharma2025.protocol import OPTIMIZERS
from dprl.sharma2025.release import appendix_b3_split
from dprl.validation import require_choice, require_int, require_positive, require_probability

if TYPE_CHECKING:  # torch is imported where a run computes: listing experiments stays fast
    from dprl.sharma2025.offline_rl import ExpertTransitions, Transitions
    from dprl.sharma2025.training import Schedule
    from dprl.sharma2025.training_data import TrainingData

CACHE_DIR = REPO_ROOT / "data" / "cache"

METHODS = ("nonprivate", "dpsgd", "ours")

#: Budget splits of "ours": App. B.3's (HIV: also Sec. 6's), or ``eps1 = 3 eps / 4`` at any
#: eps (Table 2's ablation; ``p = 1``, so its ``D_stable`` is never used).
SPLITS = ("appendix_b3", "section6", "three_quarters")

#: HIV rewards (up to ~1e8 per step) are trained on in units of 1e6 (Fig. 2's unit).
REWARD_SCALES = {"CartPole": 1.0, "Acrobot": 1.0, "LunarLander": 1.0, "HIV": 1e-6}


@dataclasses.dataclass(frozen=True)
class Run:
    """One training run: ``algorithm`` (CQL/BCQ), ``method`` (:data:`METHODS`), total
    ``eps`` (0 for non-private), ``split`` of ours (:data:`SPLITS`), Alg. 3's ``p``, the
    learning rate and batch size, the accounting ``reading`` of ours, the number of experts
    ``m`` and the replicate ``seed`` (ours: the release trial it trains on). ``steps``
    overrides the config's cap; a ``noise_multiplier`` (Table 3's ``s``) replaces the
    calibrated one, and the run then trains "until the privacy budget is used up" (Sec. 6):
    :func:`~dprl.sharma2025.accounting.steps_for_budget` steps at the paper's rate.
    ``optimizer``: Adam or Alg. 4's plain SGD (:data:`~dprl.sharma2025.protocol.OPTIMIZERS`)."""

    algorithm: str
    method: str
    learning_rate: float
    batch_size: int
    eps: float = 0.0
    split: str = "appendix_b3"
    p: float = 1.0
    reading: str = "paper"
    m: int = 3000
    seed: int = 0
    steps: int | None = None
    noise_multiplier: float | None = None
    optimizer: str = "adam"

    def __post_init__(self) -> None:
        require_choice("method", self.method, METHODS)
        require_choice("optimizer", self.optimizer, OPTIMIZERS)
        require_choice("split", self.split, SPLITS)
        require_probability("p", self.p)
        if self.method == "ours" and self.split == "three_quarters" and self.p != 1:
            raise ValueError("the three_quarters split is run with p = 1 only")
        if self.steps is not None:
            require_int("steps", self.steps)
        if self.noise_multiplier is not None:
            require_positive("noise_multiplier", self.noise_multiplier)
            if self.method == "nonprivate" or self.reading != "paper" or self.steps is not None:
                raise ValueError("noise_multiplier is given only to private runs of the paper's "
                                 "reading without steps (their steps spend the budget)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingConfig(TrialConfig):
    """The environment, its runs (one per trial), the step cap and the evaluation; the
    population, data and releases are those of ``sharma2025-<env>-release`` at
    ``release_scale``; noise is calibrated by ``accountant`` (PLD, Sec. 6's; the smoke scale
    uses RDP, fast where PLD's discretisation is slow: large rates, little noise); the
    networks' products take the ``kernels`` path (:mod:`dprl.kernels`: ``"portable"``, the
    same bits on every x86-64-v3 CPU; ``"vendor"``, torch's MKL, for results made before
    issue 27 until they are regenerated); ``eval_window``: the checkpoints are spread over
    the last steps of each run (:class:`~dprl.sharma2025.training.Schedule`); ``converged``:
    the population trained to convergence and its releases (CartPole, Acrobot)."""

    env: str
    runs: tuple[Run, ...]
    steps: int
    release_scale: str = "paper"
    accountant: str = "pld"
    kernels: str = "portable"
    target_every: int = 100
    checkpoints: int = 5
    eval_episodes: int = 10
    eval_window: int | None = None
    converged: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        require_population(self.env, self.converged)
        if self.n_trials != len(self.runs):
            raise ValueError(f"n_trials must equal the {len(self.runs)} runs")
        require_choice("accountant", self.accountant, ACCOUNTANTS)
        require_kernels(self.kernels)

    def schedule(self, steps: int | None = None) -> Schedule:
        """The schedule of a run of ``steps`` steps (default: the config's cap)."""
        from dprl.sharma2025.training import Schedule

        return Schedule(self.steps if steps is None else steps, self.target_every,
                        self.checkpoints, self.eval_episodes, self.eval_window)


@lru_cache(maxsize=2)
def training_data(env: str, release_scale: str, m: int, converged: bool = False) -> TrainingData:
    """All trajectories of the first ``m`` members of ``env``'s release data (``converged``:
    of the population trained to convergence; cached)."""
    from dprl.sharma2025.training_data import cached_training_data, record_training_data

    config = get(release_id(env, converged)).config(release_scale)
    experts, recorder = population(config)
    chosen = members(experts.n_experts, m, config.data_seed)
    experts_sidecar = result_paths(experts_id(env, converged), "paper")[1]
    key = {"env": env, "scale": release_scale, "m": m, "data_seed": config.data_seed,
           "per_expert": config.per_expert, "horizon": config.horizon, "p_min": config.p_min,
           "reward_scale": REWARD_SCALES[env], "experts": (
               json.loads(experts_sidecar.read_text())["sha256"]
               if release_scale == "paper" else config.experts_scale)}
    path = CACHE_DIR / (f"sharma2025-{env.lower()}-{release_scale}-m{m}"
                        + ("-converged" if converged else "") + ".npz")
    return cached_training_data(path, key, lambda: record_training_data(
        experts, chosen, config.per_expert, recorder, REWARD_SCALES[env]))


def run_budget(env: str, run: Run, release_scale: str = "paper", converged: bool = False
               ) -> tuple[float, float, int | None]:
    """``(eps2, delta2, release cell)`` of a private run: the baseline spends all of
    ``(eps, 1/m)``; ours App. B.3's split (or the ablation's 3/4), with the index of the
    release cell its ``D_stable`` comes from (None: no release, eps1 = 0 or not used)."""
    delta = 1 / run.m
    if run.method == "dpsgd":
        return run.eps, delta, None
    if run.split == "three_quarters":
        return run.eps / 4, delta / 10, None
    split = appendix_b3_split(env, run.eps, run.m, run.split)
    if split.n_queries is None:
        return split.eps2, split.delta2, None
    cells = [tuple(cell) for cell in get(release_id(env, converged)).config(release_scale).cells]
    return split.eps2, split.delta2, cells.index((run.eps, run.m, run.split))


@lru_cache(maxsize=2)
def _release_arrays(env: str, release_scale: str, converged: bool) -> dict[str, np.ndarray]:
    """The releases of ``sharma2025-<env>-release`` (``converged``: ``-release-converged``;
    :func:`~dprl.experiments.sharma2025.experts.result_arrays`: committed at paper scale, computed at
    smoke scale)."""
    return result_arrays(get(release_id(env, converged)), release_scale)


def _datasets(env: str, run: Run, data: TrainingData, cell: int | None,
              release_scale: str, converged: bool) -> tuple[Transitions, ExpertTransitions]:
    """``(D_stable, D_unst)`` of the run (non-private: everything is stable)."""
    from dprl.sharma2025.training_data import split_by_release

    if run.method == "nonprivate":
        return data.pool.transitions, data.pool
    if cell is None:
        return data.pool.transitions.take(np.zeros(0, dtype=np.int64)), data.pool
    release = _release_arrays(env, release_scale, converged)
    rows = release["queried_expert"][run.seed, cell] >= 0
    return split_by_release(data, *(release[name][run.seed, cell][rows] for name in
                                    ("queried_expert", "queried_trajectory", "prefix_length")))


def run_steps(run: Run, config: TrainingConfig, eps2: float, delta2: float, p: float) -> int:
    """The run's ``N``: its own ``steps`` or the config's cap; with Table 3's noise
    multiplier, the steps that spend ``(eps2, delta2)`` at the paper's rate ``q = p b / m``
    (:func:`~dprl.sharma2025.accounting.steps_for_budget`, the config's accountant), rounded
    down to a multiple of the checkpoints where they span the whole run."""
    if run.noise_multiplier is None:
        return config.steps if run.steps is None else run.steps
    from dprl.sharma2025.accounting import steps_for_budget

    steps = steps_for_budget(eps2, delta2, run.noise_multiplier, p * run.batch_size / run.m,
                             config.accountant)
    return steps if config.eval_window else steps - steps % config.checkpoints


def training_trials(config: TrainingConfig,
                    rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Each trial's run (module docstring): the greedy policy's returns at every checkpoint,
    the random policy's on the same episodes, the noise multiplier used, the step counts,
    the sizes of ``D_stable`` and ``D_unst``, and the eps2 the run really spends with the
    coins visible."""
    from dprl.determinism import deterministic_torch
    from dprl.sharma2025.dp_sgd import DPSGDConfig
    from dprl.sharma2025.training import (calibrated_noise, draw_coins, make_learner,
                                          random_policy_returns, run_streams, train)

    deterministic_torch(1)
    out: dict[str, list] = {name: [] for name in (
        "returns", "random_returns", "noise_multiplier", "dp_steps", "stable_steps",
        "skipped_steps", "n_stable", "n_unstable", "eps2", "eps2_visible")}
    for rng in rngs:
        run = config.runs[trial_index(rng)]
        data = training_data(config.env, config.release_scale,
                             max(r.m for r in config.runs), config.converged).first(run.m)
        generator, coin_rng, eval_rng, action_rng = run_streams(rng)
        if run.method == "nonprivate":
            eps2, delta2, cell, p = np.nan, np.nan, None, 0.0
        else:
            eps2, delta2, cell = run_budget(config.env, run, config.release_scale,
                                            config.converged)
            p = run.p if run.method == "ours" else 1.0
        stable, unstable = _datasets(config.env, run, data, cell, config.release_scale,
                                     config.converged)
        steps = run_steps(run, config, eps2, delta2, p)
        coins = draw_coins(steps, p, coin_rng)
        dp_steps = int(coins.sum())
        s = ((calibrated_noise(eps2, delta2, run.batch_size, run.m, p, steps, dp_steps,
                               run.reading, config.accountant)
              if run.noise_multiplier is None else run.noise_multiplier)
             if dp_steps else np.nan)
        learner = make_learner(config.env, run.algorithm, generator, config.kernels)
        dp_config = DPSGDConfig(run.batch_size, 0.0 if np.isnan(s) else s)
        outcome = train(learner, stable, unstable, coins, dp_config, run.learning_rate,
                        config.schedule(steps), config.env, generator, eval_rng, run.optimizer)
        visible = (selective_epsilon(s, run.batch_size, run.m, p, steps, delta2,
                                     "visible_coins", dp_steps, config.accountant) if dp_steps else 0.0)
        values = (outcome.returns, random_policy_returns(config.env, config.eval_episodes,
                                                          eval_rng, action_rng),
                  s, outcome.dp_steps, outcome.stable_steps, outcome.skipped_steps,
                  len(stable), len(unstable.transitions), eps2, visible)
        for name, value in zip(out, values):
            out[name].append(value)
    return {name: np.asarray(values) for name, values in out.items()}
