"""Sharma et al. (2025, Sec. 6): which runs each registered training experiment holds.

Fig. 3's cells, Table 2's splits, Fig. 4's expert counts and the p sweep at each
environment's cap (``sharma2025-<env>-training``), the learning curves that choose the cap
(``-curves``), the populations trained to convergence (``-converged``), Table 3's noise until
the budget is spent and longer caps (``-long``) and Alg. 4's plain SGD (``-sgd``); every run a
:class:`~dprl.experiments.sharma2025.training.Run` computed by
:func:`~dprl.experiments.sharma2025.training.training_trials`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence


from dprl.engine.registry import Experiment, get, register
from dprl.experiments.sharma2025.experts import experts_id, result_id
from dprl.experiments.sharma2025.release import release_id
from dprl.experiments.sharma2025.training import METHODS, Run, TrainingConfig, training_trials
from dprl.sharma2025.accounting import table3_row
from dprl.sharma2025.comparison import EPSILONS, P_GRID
from dprl.sharma2025.protocol import ours_split
from dprl.sharma2025.release import appendix_b3_split


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
                                         checkpoints=2, eval_episodes=1, converged=converged),
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
                                         checkpoints=2, eval_episodes=1, eval_window=50),
                 "paper": TrainingConfig(n_trials=len(runs), root_seed=root_seed,
                                         batch_size=1, env=env, runs=runs, steps=STEPS[env],
                                         checkpoints=10,
                                         eval_window=window)},
        run_trials=training_trials,
        after=(experts_id(env), release_id(env),
               f"sharma2025-{env.lower()}-curves")))


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


#: The non-private learning curves that choose each environment's cap.
CARTPOLE_CURVES, ACROBOT_CURVES, LUNARLANDER_CURVES, HIV_CURVES = (
    _training(env, nonprivate_runs(env), seed, CURVE_STEPS, "curves", CURVE_STEPS // 1000)
    for env, seed in (("CartPole", 54), ("Acrobot", 64), ("LunarLander", 74), ("HIV", 84)))


# --- against the paper's scale: Table 3's noise until the budget is spent, longer caps ----


CARTPOLE_LONG, ACROBOT_LONG, LUNARLANDER_LONG, HIV_LONG = (
    _windowed(env, "long", "Sec. 6: longer training, Table 3's noise until the budget is spent",
              paper_noise_runs(env) + long_cap_runs(env), seed)
    for env, seed in (("CartPole", 55), ("Acrobot", 65), ("LunarLander", 75), ("HIV", 85)))


# --- Alg. 4's optimiser: plain SGD at Table 3's learning rate ------------------------------


CARTPOLE_SGD, ACROBOT_SGD, LUNARLANDER_SGD, HIV_SGD = (
    _windowed(env, "sgd", "Alg. 4's optimiser: plain SGD at Table 3's learning rate",
              sgd_runs(env), seed, min(LAST_STEPS, STEPS[env]))
    for env, seed in (("CartPole", 56), ("Acrobot", 66), ("LunarLander", 76), ("HIV", 86)))
