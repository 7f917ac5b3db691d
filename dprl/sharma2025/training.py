"""One training run of Sharma et al. (2025, Sec. 6): non-private offline RL, expert-level
DP-SGD (Alg. 4, the baseline) or selective DP-SGD (Alg. 3, "ours"), capped at ``N`` steps.

**Coins first.** Alg. 3 draws a Bernoulli(p) coin per step. The coins are independent of the
data, so a run draws all ``N`` of them before training (from its own stream); the noise
multiplier is then calibrated so that the run spends ``(eps2, delta2)`` exactly
(:func:`calibrated_noise`): under the paper's reading (``q = p b / m`` over all ``N`` steps)
or with the coins visible (the realised ``k`` DP steps at ``q = b / m``; conditioning on
public coins is sound). The baseline is the same with ``p = 1``; a non-private run is
``p = 0`` with every transition stable.

**A stable step on an empty ``D_stable``** (LunarLander's releases, whose stable sets are
empty) changes nothing: the step is skipped. It is the only way Table 2's LunarLander
``p = 0.8`` entry can exist beside its "inf" at ``p = 0``, and it makes such a run DP-SGD
with fewer steps, whose only gain is the accounting.

**The rest of Sec. 6, as the book runs it** (stated in the chapters): the optimiser at Table
3's learning rate, Adam or Alg. 4's plain SGD (line 9, ``phi <- phi - eta g~``); target
network copied every ``target_every`` steps; the greedy policy evaluated on
``eval_episodes`` episodes at each of ``checkpoints`` evenly spaced steps (the last is
Fig. 3's "10 evaluation runs at the end of training").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from dprl.determinism import torch_generator
from dprl.seeding import named_stream
from dprl.sharma2025.accounting import READINGS, noise_for_budget
from dprl.sharma2025.dp_sgd import DPSGDConfig, selective_step
from dprl.sharma2025.evaluation import SPACES, episode_returns, uniform_act
from dprl.sharma2025.offline_rl import (DiscreteBCQ, DiscreteCQL, ExpertTransitions,
                                        OfflineLearner, Transitions, make_optimizer)
from dprl.sharma2025.protocol import ALGORITHMS, GAMMAS
from dprl.sharma2025.qnetworks import HIV_HIDDEN, PAPER_HIDDEN, QNetwork, frozen_copy, update_target
from dprl.validation import require_choice, require_int, require_positive, require_probability

def make_learner(env: str, algorithm: str, generator: torch.Generator,
                 kernels: str = "portable") -> OfflineLearner:
    """CQL or BCQ (:mod:`dprl.sharma2025.offline_rl`) for ``env``'s spaces, with App. B.3's
    networks: two hidden layers of 256, HIV one of 512; their products take the ``kernels``
    path (:mod:`dprl.kernels`)."""
    require_choice("env", env, SPACES)
    require_choice("algorithm", algorithm, ALGORITHMS)
    obs_dim, n_actions = SPACES[env]
    hidden = HIV_HIDDEN if env == "HIV" else PAPER_HIDDEN

    def network() -> QNetwork:
        return QNetwork(obs_dim, n_actions, hidden, generator=generator, kernels=kernels)

    if algorithm == "CQL":
        return DiscreteCQL(network(), gamma=GAMMAS[env])
    return DiscreteBCQ(network(), network(), gamma=GAMMAS[env])


@dataclass(frozen=True)
class Schedule:
    """``steps`` (Alg. 3's ``N``), hard target copies every ``target_every`` steps,
    ``checkpoints`` evaluations of ``eval_episodes`` episodes each, evenly spaced over the
    whole run or, with ``eval_window``, over its last ``eval_window`` steps (App. B.3: "10
    evaluation runs spaced over the last 10000 steps of training")."""

    steps: int
    target_every: int = 100
    checkpoints: int = 5
    eval_episodes: int = 10
    eval_window: int | None = None

    def __post_init__(self) -> None:
        for name in ("steps", "target_every", "checkpoints", "eval_episodes"):
            require_int(name, getattr(self, name))
        window = self.steps if self.eval_window is None else require_int(
            "eval_window", self.eval_window)
        if window > self.steps:
            raise ValueError(f"eval_window must be <= steps = {self.steps}, got {window}")
        if window % self.checkpoints:
            raise ValueError(f"{'steps' if self.eval_window is None else 'eval_window'} must "
                             f"be a multiple of checkpoints = {self.checkpoints}")

    @property
    def evaluated_at(self) -> np.ndarray:
        """The steps after which the policy is evaluated, ``(checkpoints,)``: every
        ``window / checkpoints`` steps up to the last, ``window`` the run or its
        ``eval_window``."""
        window = self.steps if self.eval_window is None else self.eval_window
        every = window // self.checkpoints
        return np.arange(self.steps - window + every, self.steps + 1, every)


def draw_coins(steps: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """Alg. 3, line 4: ``steps`` Bernoulli(``p``) coins ``(N,)`` bool (1: a DP-SGD step)."""
    return rng.random(require_int("steps", steps)) < require_probability("p", p)


@lru_cache(maxsize=256)
def calibrated_noise(eps2: float, delta2: float, batch_size: int, n_experts: int, p: float,
                     steps: int, dp_steps: int, reading: str, accountant: str = "pld") -> float:
    """The noise multiplier ``s`` with which the run spends ``(eps2, delta2)`` by
    dp-accounting's PLD accountant or the book's RDP one (``accountant``;
    :func:`dprl.sharma2025.accounting.noise_for_budget`):
    ``"paper"``: ``steps`` steps at ``q = p b / m``; ``"visible_coins"``: the ``dp_steps``
    DP steps at ``q = b / m``. NaN when the run takes no DP step."""
    require_choice("reading", reading, READINGS)
    if dp_steps == 0:
        return float("nan")
    rate = batch_size / n_experts
    if reading == "paper":
        return noise_for_budget(eps2, delta2, p * rate, steps, accountant)
    return noise_for_budget(eps2, delta2, rate, dp_steps, accountant)


@dataclass(frozen=True)
class RunOutcome:
    """Returns ``(checkpoints, eval_episodes)`` of the greedy policy, and the number of DP,
    stable and skipped steps."""

    returns: np.ndarray
    dp_steps: int
    stable_steps: int
    skipped_steps: int


def train(learner: OfflineLearner, stable: Transitions, unstable: ExpertTransitions,
          coins: np.ndarray, config: DPSGDConfig, learning_rate: float, schedule: Schedule,
          env: str, generator: torch.Generator, eval_rng: np.random.Generator,
          optimizer: str = "adam") -> RunOutcome:
    """Alg. 3 with the pre-drawn ``coins`` (module docstring): a coin of 1 takes an
    expert-level DP-SGD step on ``unstable`` (Alg. 4), a coin of 0 a plain step on
    ``config.batch_size`` uniform transitions of ``stable`` (skipped if it is empty), each
    by ``optimizer`` (``"adam"`` or ``"sgd"``, :func:`~dprl.sharma2025.offline_rl.
    make_optimizer`). Each checkpoint evaluates the greedy policy on the same episodes (a
    copy of ``eval_rng``)."""
    if coins.shape != (schedule.steps,) or coins.dtype != np.bool_:
        raise ValueError(f"coins must be a bool array of shape ({schedule.steps},)")
    step_rule = make_optimizer(learner, optimizer, require_positive("learning_rate",
                                                                      learning_rate))
    target = frozen_copy(learner.q)
    checkpoints = set(schedule.evaluated_at.tolist())
    returns, skipped = [], 0

    def act(observations: np.ndarray) -> np.ndarray:
        return learner.greedy_actions(torch.as_tensor(observations)).numpy()

    for step, private in enumerate(coins.tolist(), start=1):
        if not selective_step(learner, target, stable, unstable, private, config, step_rule,
                              generator):
            skipped += 1
        if step % schedule.target_every == 0:
            update_target(target, learner.q)
        if step in checkpoints:
            returns.append(episode_returns(env, act, schedule.eval_episodes,
                                           copy.deepcopy(eval_rng)))
    dp = int(coins.sum())
    return RunOutcome(np.stack(returns), dp, schedule.steps - dp - skipped, skipped)


def random_policy_returns(env: str, n_episodes: int, eval_rng: np.random.Generator,
                          action_rng: np.random.Generator) -> np.ndarray:
    """The uniformly random policy on the evaluation episodes of ``eval_rng`` (Fig. 3's 0)."""
    return episode_returns(env, uniform_act(env, action_rng), n_episodes,
                           copy.deepcopy(eval_rng))


def run_streams(rng: np.random.Generator) -> tuple[torch.Generator, np.random.Generator,
                                                    np.random.Generator, np.random.Generator]:
    """A run's independent streams: torch (initialisation, batches, noise), the coins, the
    evaluation episodes and the random policy's actions."""
    return (torch_generator(named_stream(rng, 0)), named_stream(rng, 1), named_stream(rng, 2),
            named_stream(rng, 3))
