"""Sharma et al. (2025, Sec. 6): the training runs behind Figs. 3-4 and Tables 1-2.

Trial ``i`` of ``sharma2025-<env>-training`` is the run ``config.runs[i]`` (:class:`Run`):
non-private CQL/BCQ on all of ``D^Pi``, the expert-level DP-SGD baseline at the whole
``(eps, delta = 1/m)``, or selective DP-SGD ("ours") at Table 3's ``p`` with App. B.3's
budget split, its ``D_stable`` being the stable prefixes of release trial ``seed`` of the
matching cell of ``sharma2025-<env>-release``. Every run draws from its trial's streams
only (:func:`dprl.sharma2025.training.run_streams`), so any run recomputes alone.

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

from dprl.experiments.registry import Experiment, TrialConfig, get, register
from dprl.experiments.runner import result_paths
from dprl.experiments.sharma2025 import (experts_id, require_population, result_arrays,
                                         result_id)
from dprl.experiments.sharma2025_release import members, population, release_id
from dprl.kernel_paths import require_kernels
from dprl.paths import REPO_ROOT
from dprl.seeding import trial_index
from dprl.sharma2025.accounting import ACCOUNTANTS, selective_epsilon, table3_row
from dprl.sharma2025.comparison import EPSILONS, P_GRID
from dprl.sharma2025.protocol import OPTIMIZERS, ours_split
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
    :func:`~dprl.experiments.sharma2025.result_arrays`: committed at paper scale, computed at
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


# --- the runs -----------------------------------------------------------------------------

SEEDS = (0, 1, 2)


def _same_as_baseline(env: str, eps: float, p: float) -> bool:
    """Ours is the baseline itself where eps1 = 0 and p = 1 (eps = 5 but for Acrobot)."""
    return p == 1 and appendix_b3_split(env, eps).n_queries is None


def figure3_runs(env: str, seeds: Sequence[int] = SEEDS) -> list[Run]:
    """Fig. 3 at m = 3000: per algorithm the non-private run (Table 3's eps = 10 learning
    rate and batch), and per eps the baseline, ours at Table 3's p (unless it is the
    baseline) and, where 0 < p < 1, ours calibrated with the coins visible."""
    runs = []
    for algorithm in ("CQL", "BCQ"):
        top = table3_row(env, 10.0, algorithm)
        runs += [Run(algorithm, "nonprivate", top.learning_rate, top.batch_size, seed=s)
                 for s in seeds]
        for eps in EPSILONS:
            row = table3_row(env, eps, algorithm)
            common = dict(learning_rate=row.learning_rate, batch_size=row.batch_size, eps=eps)
            runs += [Run(algorithm, "dpsgd", seed=s, **common) for s in seeds]
            if _same_as_baseline(env, eps, row.p):
                continue
            split = ours_split(env, row.p)
            runs += [Run(algorithm, "ours", split=split, p=row.p, seed=s, **common)
                     for s in seeds]
            if 0 < row.p < 1:
                runs += [Run(algorithm, "ours", split=split, p=row.p, reading="visible_coins",
                             seed=s, **common) for s in seeds]
    return runs


def p_sweep_runs(env: str, seeds: Sequence[int] = (0,)) -> list[Run]:
    """Table 1's sweep: ours at every p of :data:`P_GRID` other than Table 3's, where the
    split leaves budget for DP-SGD and a release (eps = 7.5, 10; not Acrobot, whose
    eps2 = 0), Table 3's learning rate and batch."""
    runs = []
    for algorithm in ("CQL", "BCQ"):
        for eps in (7.5, 10.0):
            row = table3_row(env, eps, algorithm)
            split = appendix_b3_split(env, eps)
            if split.eps2 == 0:
                continue
            runs += [Run(algorithm, "ours", row.learning_rate, row.batch_size, eps=eps, p=p,
                         seed=s) for p in P_GRID if p != row.p for s in seeds]
    return runs


def split_ablation_runs(env: str, epsilons: Sequence[float],
                        seeds: Sequence[int] = SEEDS) -> list[Run]:
    """Table 2's eps1 allocation with BCQ at Table 3's eps = 5 learning rate and batch:
    eps1 = 3 eps / 4 (p = 1) against eps1 = 0 (the baseline), where not already in Fig. 3."""
    row = table3_row(env, 5.0, "BCQ")
    runs = []
    for eps in epsilons:
        common = dict(learning_rate=row.learning_rate, batch_size=row.batch_size, eps=eps)
        runs += [Run("BCQ", "ours", split="three_quarters", p=1.0, seed=s, **common)
                 for s in seeds]
        if eps not in EPSILONS:
            runs += [Run("BCQ", "dpsgd", seed=s, **common) for s in seeds]
    return runs


def figure4_runs(seeds: Sequence[int] = SEEDS) -> list[Run]:
    """Fig. 4: Acrobot, CQL, eps = 10 at m = 1000 and 2000 (m = 3000 is Fig. 3's):
    non-private, the baseline and ours (Table 3's p = 0)."""
    row = table3_row("Acrobot", 10.0, "CQL")
    common = dict(learning_rate=row.learning_rate, batch_size=row.batch_size)
    runs = []
    for m in (1000, 2000):
        runs += [Run("CQL", "nonprivate", m=m, seed=s, **common) for s in seeds]
        runs += [Run("CQL", "dpsgd", eps=10.0, m=m, seed=s, **common) for s in seeds]
        runs += [Run("CQL", "ours", eps=10.0, p=row.p, m=m, seed=s, **common) for s in seeds]
    return runs


def smoke_runs(env: str) -> tuple[Run, ...]:
    """Every algorithm and method once, at the smoke release's first cell (eps 10, a few
    experts); ours with p = 0.5 (Acrobot: 0, its split leaving nothing for DP-SGD)."""
    eps, m, split = get(release_id(env)).configs["smoke"].cells[0]
    p = 0.0 if env == "Acrobot" else 0.5
    return tuple(Run(algorithm, method, 1e-3, 4, m=m,
                     **({} if method == "nonprivate" else dict(eps=eps)),
                     **(dict(p=p, split=split) if method == "ours" else {}))
                 for algorithm in ("CQL", "BCQ") for method in METHODS)


def _training(env: str, runs: Sequence[Run], root_seed: int, steps: int,
              kind: str = "training", checkpoints: int = 5,
              converged: bool = False) -> Experiment:
    runs = tuple(runs)
    experiment_id = result_id(env, kind, converged)
    smoke = smoke_runs(env) if kind == "training" else tuple(
        r for r in smoke_runs(env) if r.method == "nonprivate")
    return register(Experiment(
        id=experiment_id,
        title=(f"Sharma et al. (2025), Sec. 6: offline RL with and without expert-level DP, {env}"
               if kind == "training" else
               f"Sharma et al. (2025), Sec. 6: learning curves of non-private CQL and BCQ, {env}")
              + (", experts trained to convergence" if converged else ""),
        chapter="book/sharma2025/experiments.ipynb",
        configs={"smoke": TrainingConfig(n_trials=len(smoke), root_seed=root_seed,
                                         batch_size=1, env=env, runs=smoke, steps=100,
                                         release_scale="smoke", accountant="rdp",
                                         checkpoints=2, eval_episodes=2, converged=converged),
                 "paper": TrainingConfig(n_trials=len(runs), root_seed=root_seed,
                                         batch_size=1, env=env, runs=runs, steps=steps,
                                         checkpoints=checkpoints, converged=converged)},
        run_trials=training_trials,
        # the population (curves and training), the releases (ours) and the step cap the
        # curves choose (training)
        after=(experts_id(env, converged),) + (() if kind == "curves" else (
            release_id(env, converged), result_id(env, "curves", converged)))))


def nonprivate_runs(env: str, seeds: Sequence[int] = SEEDS) -> list[Run]:
    """Non-private CQL and BCQ with Table 3's eps = 10 learning rate and batch (Fig. 3's)."""
    return [run for run in figure3_runs(env, seeds) if run.method == "nonprivate"]


#: Steps of the learning curves that choose the cap, evaluated every 1000 steps.
CURVE_STEPS = 20_000
CARTPOLE_CURVES, ACROBOT_CURVES, LUNARLANDER_CURVES, HIV_CURVES = (
    _training(env, nonprivate_runs(env), seed, CURVE_STEPS, "curves", CURVE_STEPS // 1000)
    for env, seed in (("CartPole", 54), ("Acrobot", 64), ("LunarLander", 74), ("HIV", 84)))

#: The optimiser of the runs on the populations trained to convergence: Alg. 4's SGD where
#: both non-private learners beat the random policy with it (CartPole), Adam where one does
#: not (Acrobot's BCQ; experiments chapter).
OPTIMIZER_CONVERGED = {"CartPole": "sgd", "Acrobot": "adam"}


def _with_optimizer(env: str, runs: Sequence[Run]) -> list[Run]:
    return [dataclasses.replace(run, optimizer=OPTIMIZER_CONVERGED[env]) for run in runs]


#: The learning curves on the populations trained to convergence.
CARTPOLE_CURVES_CONVERGED = _training(
    "CartPole", _with_optimizer("CartPole", nonprivate_runs("CartPole")), 57, CURVE_STEPS,
    "curves", CURVE_STEPS // 1000, converged=True)
ACROBOT_CURVES_CONVERGED = _training(
    "Acrobot", _with_optimizer("Acrobot", nonprivate_runs("Acrobot")), 67, CURVE_STEPS,
    "curves", CURVE_STEPS // 1000, converged=True)

#: The caps the learning curves may choose between (:func:`dprl.sharma2025.scores.step_cap`).
CAP_CANDIDATES = (5000, 10_000, 20_000)
#: Steps per run in each environment: the cap the non-private learning curves choose
#: (chapter "experiments", which checks these against the committed curves).
STEPS = {"CartPole": 20_000, "Acrobot": 20_000, "LunarLander": 5000, "HIV": 10_000}
CARTPOLE_RUNS = (figure3_runs("CartPole") + p_sweep_runs("CartPole")
                 + split_ablation_runs("CartPole", (2.5, 5.0)))
CARTPOLE_TRAINING = _training("CartPole", CARTPOLE_RUNS, 53, STEPS["CartPole"])
ACROBOT_RUNS = (figure3_runs("Acrobot") + figure4_runs()
                + split_ablation_runs("Acrobot", (2.5,)))
ACROBOT_TRAINING = _training("Acrobot", ACROBOT_RUNS, 63, STEPS["Acrobot"])
LUNARLANDER_TRAINING = _training("LunarLander", figure3_runs("LunarLander")
                                 + p_sweep_runs("LunarLander"), 73, STEPS["LunarLander"])
HIV_TRAINING = _training("HIV", figure3_runs("HIV") + p_sweep_runs("HIV"), 83, STEPS["HIV"])


# --- against the paper's scale: Table 3's noise until the budget is spent, longer caps ----

#: Steps per run on the converged populations: the cap their own learning curves choose
#: (``sharma2025-<env>-curves-converged``; a test checks it against the committed curves).
STEPS_CONVERGED = {"CartPole": 20_000, "Acrobot": 5000}
#: Fig. 3's, Table 1's, Table 2's (and on Acrobot Fig. 4's) runs on the populations trained
#: to convergence, each with its optimiser.
CARTPOLE_TRAINING_CONVERGED = _training(
    "CartPole", _with_optimizer("CartPole", CARTPOLE_RUNS), 58, STEPS_CONVERGED["CartPole"],
    converged=True)
ACROBOT_TRAINING_CONVERGED = _training(
    "Acrobot", _with_optimizer("Acrobot", ACROBOT_RUNS), 68, STEPS_CONVERGED["Acrobot"],
    converged=True)


#: How many times each environment's cap the longer runs train (issue 28: 4-5x).
LONG_FACTORS = {"CartPole": 5, "Acrobot": 4, "LunarLander": 5, "HIV": 5}
#: App. B.3's evaluation: checkpoints spread over the last 10 000 steps of a run.
LAST_STEPS = 10_000


def paper_noise_runs(env: str, seeds: Sequence[int] = SEEDS,
                     max_steps: int = 100_000) -> list[Run]:
    """The baseline (= ours where ``p = 1`` and ``eps1 = 0``) at Table 3's noise multiplier,
    trained until eps2 is spent, in every ``eps = 5`` cell whose step count is at most
    ``max_steps``: CartPole CQL and BCQ, HIV CQL (99 608, 99 194 and 24 780 steps by PLD,
    :func:`~dprl.sharma2025.accounting.table3_budgets`). The cells are chosen by the RDP
    count (milliseconds, so listing experiments stays fast; a test checks that the PLD
    count chooses the same)."""
    from dprl.sharma2025.accounting import steps_for_budget

    runs = []
    for algorithm in ("CQL", "BCQ"):
        row = table3_row(env, 5.0, algorithm)
        if not _same_as_baseline(env, 5.0, row.p) or steps_for_budget(
                5.0, 1 / 3000, row.noise_multiplier, row.batch_size / 3000, "rdp") > max_steps:
            continue
        runs += [Run(algorithm, "dpsgd", row.learning_rate, row.batch_size, eps=5.0, seed=s,
                     noise_multiplier=row.noise_multiplier) for s in seeds]
    return runs


#: The cell of each environment trained at the longer cap (baseline and ours, calibrated to
#: spend the budget in the longer run): CQL at eps = 10 (Fig. 4's cell on Acrobot), HIV's
#: BCQ (its CQL eps = 10 row has p = 0, like Acrobot's).
LONG_CELLS = {"CartPole": None, "Acrobot": ("CQL", 10.0), "LunarLander": ("CQL", 10.0),
              "HIV": ("BCQ", 10.0)}


def long_cap_runs(env: str, seeds: Sequence[int] = SEEDS) -> list[Run]:
    """:data:`LONG_CELLS`' baseline and ours at Table 3's ``p`` and :data:`LONG_FACTORS` times
    the cap (CartPole: none; its :func:`paper_noise_runs` are already ~5x its cap)."""
    if LONG_CELLS[env] is None:
        return []
    algorithm, eps = LONG_CELLS[env]
    row = table3_row(env, eps, algorithm)
    common = dict(learning_rate=row.learning_rate, batch_size=row.batch_size, eps=eps,
                  steps=LONG_FACTORS[env] * STEPS[env])
    return ([Run(algorithm, "dpsgd", seed=s, **common) for s in seeds]
            + [Run(algorithm, "ours", split=ours_split(env, row.p), p=row.p, seed=s, **common)
               for s in seeds])


def _windowed(env: str, kind: str, title: str, runs: Sequence[Run], root_seed: int,
              window: int = LAST_STEPS) -> Experiment:
    """``sharma2025-<env>-<kind>``: ``runs``, each evaluated at 10 checkpoints over its last
    ``window`` steps (App. B.3's :data:`LAST_STEPS`)."""
    runs = tuple(runs)
    eps, m, split = get(release_id(env)).configs["smoke"].cells[0]
    smoke = (Run("CQL", "dpsgd", 1e-3, 4, eps=eps, m=m, noise_multiplier=2.0),
             Run("CQL", "ours", 1e-3, 4, eps=eps, m=m, split=split,
                 p=0.0 if env == "Acrobot" else 0.5, steps=200))
    if kind == "sgd":
        nonprivate = next(run for run in smoke_runs(env) if run.method == "nonprivate")
        smoke = tuple(dataclasses.replace(run, optimizer="sgd")
                      for run in (smoke[0], dataclasses.replace(nonprivate, steps=100)))
    return register(Experiment(
        id=f"sharma2025-{env.lower()}-{kind}", title=f"Sharma et al. (2025), {title}, {env}",
        chapter="book/sharma2025/experiments.ipynb",
        configs={"smoke": TrainingConfig(n_trials=len(smoke), root_seed=root_seed,
                                         batch_size=1, env=env, runs=smoke, steps=100,
                                         release_scale="smoke", accountant="rdp",
                                         checkpoints=2, eval_episodes=2, eval_window=50),
                 "paper": TrainingConfig(n_trials=len(runs), root_seed=root_seed,
                                         batch_size=1, env=env, runs=runs, steps=STEPS[env],
                                         checkpoints=10,
                                         eval_window=window)},
        run_trials=training_trials,
        after=(experts_id(env), release_id(env),
               f"sharma2025-{env.lower()}-curves")))


CARTPOLE_LONG, ACROBOT_LONG, LUNARLANDER_LONG, HIV_LONG = (
    _windowed(env, "long", "Sec. 6: longer training, Table 3's noise until the budget is spent",
              paper_noise_runs(env) + long_cap_runs(env), seed)
    for env, seed in (("CartPole", 55), ("Acrobot", 65), ("LunarLander", 75), ("HIV", 85)))


# --- Alg. 4's optimiser: plain SGD at Table 3's learning rate ------------------------------

#: The cells where the book trains at the paper's N with both optimisers (issue 40): Table
#: 3's noise until eps2 is spent (:func:`paper_noise_runs`), by environment.
ANCHORS = {"CartPole": "BCQ", "HIV": "CQL"}


def sgd_runs(env: str, seeds: Sequence[int] = SEEDS) -> list[Run]:
    """Alg. 4, line 9's SGD (``phi <- phi - eta g~``) where the book's other runs take Adam:
    non-private CQL and BCQ at Fig. 3's learning rate and batch (does the learner beat the
    random policy with the paper's optimiser?) and the :data:`ANCHORS` cell at the paper's
    ``N`` (:func:`paper_noise_runs`: Adam's twins are in ``sharma2025-<env>-long``)."""
    runs = nonprivate_runs(env, seeds) + [run for run in paper_noise_runs(env, seeds)
                                          if run.algorithm == ANCHORS.get(env)]
    return [dataclasses.replace(run, optimizer="sgd") for run in runs]


CARTPOLE_SGD, ACROBOT_SGD, LUNARLANDER_SGD, HIV_SGD = (
    _windowed(env, "sgd", "Alg. 4's optimiser: plain SGD at Table 3's learning rate",
              sgd_runs(env), seed, min(LAST_STEPS, STEPS[env]))
    for env, seed in (("CartPole", 56), ("Acrobot", 66), ("LunarLander", 76), ("HIV", 86)))
