"""The offline RL learners of Sharma et al. (2025, Sec. 6): the DQN version of Conservative
Q-learning and discrete Batch-Constrained Q-learning, as per-example losses.

Both learners are ``nn.Module`` s holding only the trained networks; calling one on
``(observations, actions, targets)`` gives the per-example losses ``(B,)`` that DP-SGD clips
one by one (Alg. 4, line 6). The Bellman targets come first, from
:meth:`OfflineLearner.bellman_targets`, computed without gradients (through the target
network and, for BCQ, the current networks at ``s'``) and passed in as data, so no gradient
flows through them. A transition is terminal only when the episode ended in a terminal state;
a trajectory cut at the horizon bootstraps (as in Fujimoto et al.'s code).

- **CQL(H)** (Kumar, Zhou, Tucker & Levine 2020, Eq. 4 with the entropy regulariser, the
  DQN variant): ``alpha (logsumexp_a Q(s, a) - Q(s, a_data)) + 1/2 (Q(s, a_data) - y)^2`` with
  DQN's target ``y = r + gamma (1 - done) max_a' Q_target(s', a')`` (Mnih et al. 2015).
  The authors' Atari code adds the regulariser to QR-DQN's quantile loss; Sharma et al. use
  "the DQN version", so the squared TD error. ``alpha = 1`` by default, the value of the
  authors' Atari command (``minq_weight=1.0``, 1% data).
- **Discrete BCQ** (Fujimoto, Conti, Ghavamzadeh & Pineau 2019, "Benchmarking batch deep RL
  algorithms", Alg. 1): a Q-network and a behaviour-cloning network ``G(a | s)`` (softmax of
  its logits, trained by cross entropy); at ``s'`` only actions with
  ``G(a | s') / max_a G(a | s') > tau`` (``tau = 0.3``) are eligible,
  ``y = r + gamma (1 - done) Q_target(s', argmax_{a' eligible} Q(s', a'))``, and the TD error
  goes through the Huber loss ``l_1`` (their Eq. and code's ``smooth_l1_loss``). Their code
  also penalises the logits, ``1e-2 * mean(logits^2)``, kept here per example. The greedy
  policy is restricted to eligible actions in the same way.

Optimisers: Alg. 4 writes plain SGD on the noisy gradient (``phi <- phi - eta g``);
Sharma et al. do not name the optimiser of their learning rates, so :func:`make_optimizer`
offers ``"sgd"`` (Alg. 4 as written) and ``"adam"`` (both learners' original code).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dprl.envs.episodes import VectorEnv, simulate
from dprl.sharma2025.datasets import ExpertData
from dprl.sharma2025.protocol import OPTIMIZERS
from dprl.sharma2025.qnetworks import QNetwork
from dprl.validation import (require_array, require_choice, require_int, require_nonnegative,
                             require_positive, require_probability)


@dataclass(frozen=True)
class Transitions:
    """``n`` transitions ``(s, a, r, s', done)`` as torch tensors: ``observations`` and
    ``next_observations`` ``(n, d)`` float32, ``actions`` ``(n,)`` int64, ``rewards``
    ``(n,)`` float32, ``terminals`` ``(n,)`` float32 (1 where ``s'`` is terminal)."""

    observations: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_observations: torch.Tensor
    terminals: torch.Tensor

    def __post_init__(self) -> None:
        if self.actions.dtype != torch.int64 or self.actions.ndim != 1:
            raise ValueError(f"actions must be an int64 (n,) tensor, got {self.actions.dtype} "
                             f"{tuple(self.actions.shape)}")
        n = self.actions.shape[0]
        for name in ("observations", "next_observations", "rewards", "terminals"):
            value = getattr(self, name)
            shape = (n, self.observations.shape[-1]) if "observations" in name else (n,)
            if value.dtype != torch.float32 or tuple(value.shape) != shape:
                raise ValueError(f"{name} must be a float32 tensor of shape {shape}, got "
                                 f"{value.dtype} {tuple(value.shape)}")

    def __len__(self) -> int:
        return self.actions.shape[0]

    def take(self, index: torch.Tensor) -> Transitions:
        """The transitions ``index`` (an int64 tensor), in that order."""
        return Transitions(self.observations[index], self.actions[index], self.rewards[index],
                           self.next_observations[index], self.terminals[index])


@dataclass(frozen=True)
class ExpertTransitions:
    """The transitions of ``m`` experts, flat and grouped by expert: expert ``i`` owns
    ``transitions[offsets[i] : offsets[i] + counts[i]]`` (``counts[i]`` may be 0, e.g. an
    expert whose every transition is stable). ``n_experts`` is the ``m`` of the sampling
    rate ``b / m`` of Alg. 4."""

    transitions: Transitions
    counts: torch.Tensor

    def __post_init__(self) -> None:
        if self.counts.dtype != torch.int64 or self.counts.ndim != 1 or len(self.counts) == 0:
            raise ValueError("counts must be a non-empty int64 (m,) tensor")
        if bool((self.counts < 0).any()) or int(self.counts.sum()) != len(self.transitions):
            raise ValueError(f"counts must be >= 0 and sum to the {len(self.transitions)} "
                             f"transitions, got sum {int(self.counts.sum())}")

    @property
    def n_experts(self) -> int:
        """The number of experts ``m``."""
        return len(self.counts)

    @property
    def offsets(self) -> torch.Tensor:
        """Where each expert's transitions start, ``(m,)`` int64."""
        return torch.cumsum(self.counts, 0) - self.counts


def expert_transitions(data: ExpertData, keep: np.ndarray | None = None) -> ExpertTransitions:
    """The transitions of App. B.1's recorded data (:class:`~dprl.sharma2025.datasets.
    ExpertData`), grouped by expert: ``t < |tau|`` of every trajectory, restricted to
    ``keep`` ``(m, N, L)`` (bool) when given, e.g. the unstable tails of Alg. 2's release.
    ``done`` is 1 only on the last transition of a trajectory that terminated."""
    m, n, length = data.actions.shape
    t = np.arange(length)
    recorded = t < data.lengths[..., None]
    if keep is not None:
        keep = np.asarray(keep)
        if keep.dtype != np.bool_ or keep.shape != recorded.shape:
            raise ValueError(f"keep must be a bool array of shape {recorded.shape}, got "
                             f"{keep.dtype} {keep.shape}")
        recorded = recorded & keep
    done = (t == data.lengths[..., None] - 1) & data.terminated[..., None]

    def floats(values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.float32)

    flat = Transitions(floats(data.observations[:, :, :-1][recorded]),
                       torch.as_tensor(data.actions[recorded], dtype=torch.int64),
                       floats(data.rewards[recorded]),
                       floats(data.observations[:, :, 1:][recorded]), floats(done[recorded]))
    return ExpertTransitions(flat, torch.as_tensor(recorded.reshape(m, -1).sum(axis=1),
                                                   dtype=torch.int64))


class OfflineLearner(nn.Module, abc.ABC):
    """An offline RL learner whose trained networks are its parameters: ``q`` (the
    Q-network) and any others; ``self(observations, actions, targets)`` gives per-example
    losses ``(B,)``; ``gamma`` is the discount."""

    q: QNetwork
    gamma: float

    @abc.abstractmethod
    def forward(self, observations: torch.Tensor, actions: torch.Tensor,
                targets: torch.Tensor) -> torch.Tensor:
        """Per-example losses ``(B,)`` given the Bellman ``targets`` ``(B,)``."""

    @abc.abstractmethod
    def bellman_targets(self, batch: Transitions, target: QNetwork) -> torch.Tensor:
        """The Bellman targets ``y`` ``(B,)``, without gradients."""

    @abc.abstractmethod
    def greedy_actions(self, observations: torch.Tensor) -> torch.Tensor:
        """The learned greedy policy's actions ``(B,)`` int64."""

    def loss_inputs(self, batch: Transitions, target: QNetwork
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(observations, actions, targets)`` of ``batch``, the arguments of the loss:
        the Bellman targets come first, without gradients (module docstring)."""
        return batch.observations, batch.actions, self.bellman_targets(batch, target)

    def per_example_losses(self, batch: Transitions, target: QNetwork) -> torch.Tensor:
        """The losses ``(B,)`` of ``batch`` (:meth:`loss_inputs`, then the loss)."""
        return self(*self.loss_inputs(batch, target))


def _taken(values: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """``values[i, actions[i]]`` for every row ``i``."""
    return values.gather(1, actions[:, None])[:, 0]


class DiscreteCQL(OfflineLearner):
    """CQL(H), DQN variant (Kumar et al. 2020, Eq. 4; module docstring): per example
    ``alpha (logsumexp_a Q(s, a) - Q(s, a)) + 1/2 (Q(s, a) - y)^2``."""

    def __init__(self, q: QNetwork, alpha: float = 1.0, gamma: float = 0.99) -> None:
        super().__init__()
        self.q = q
        self.alpha = require_nonnegative("alpha", alpha)
        self.gamma = require_probability("gamma", gamma)

    def forward(self, observations: torch.Tensor, actions: torch.Tensor,
                targets: torch.Tensor) -> torch.Tensor:
        """``alpha (logsumexp Q(s) - Q(s, a)) + (Q(s, a) - y)^2 / 2`` per example."""
        values = self.q(observations)
        taken = _taken(values, actions)
        return self.alpha * (torch.logsumexp(values, dim=1) - taken) + 0.5 * (taken - targets) ** 2

    @torch.no_grad()
    def bellman_targets(self, batch: Transitions, target: QNetwork) -> torch.Tensor:
        """DQN's ``r + gamma (1 - done) max_a' Q_target(s', a')``."""
        best = target(batch.next_observations).max(dim=1).values
        return batch.rewards + self.gamma * (1 - batch.terminals) * best

    @torch.no_grad()
    def greedy_actions(self, observations: torch.Tensor) -> torch.Tensor:
        """``argmax_a Q(s, a)`` (lowest index on ties)."""
        return self.q(observations).argmax(dim=1)


class DiscreteBCQ(OfflineLearner):
    """Discrete BCQ (Fujimoto et al. 2019, "Benchmarking...", Alg. 1; module docstring):
    Q-network ``q`` and behaviour-cloning network ``g`` (logits), per example
    ``huber(Q(s, a) - y) - log G(a | s) + logit_penalty * mean_a logits(s)^2``."""

    def __init__(self, q: QNetwork, g: QNetwork, threshold: float = 0.3, gamma: float = 0.99,
                 logit_penalty: float = 1e-2) -> None:
        super().__init__()
        if q.n_outputs != g.n_outputs or q.in_dim != g.in_dim:
            raise ValueError("q and g must have the same inputs and number of actions")
        self.q, self.g = q, g
        self.threshold = require_probability("threshold", threshold)
        self.gamma = require_probability("gamma", gamma)
        self.logit_penalty = require_nonnegative("logit_penalty", logit_penalty)

    def forward(self, observations: torch.Tensor, actions: torch.Tensor,
                targets: torch.Tensor) -> torch.Tensor:
        """Huber TD error + cross entropy of ``G`` + the logit penalty, per example."""
        td = F.smooth_l1_loss(_taken(self.q(observations), actions), targets, reduction="none")
        logits = self.g(observations)
        cross_entropy = -_taken(torch.log_softmax(logits, dim=1), actions)
        return td + cross_entropy + self.logit_penalty * logits.square().mean(dim=1)

    @torch.no_grad()
    def eligible(self, observations: torch.Tensor) -> torch.Tensor:
        """``G(a | s) / max_a G(a | s) > threshold``, ``(B, |A|)`` bool (the most probable
        action is always eligible)."""
        logits = self.g(observations)
        return torch.exp(logits - logits.max(dim=1, keepdim=True).values) > self.threshold

    @torch.no_grad()
    def _restricted_argmax(self, observations: torch.Tensor) -> torch.Tensor:
        values = self.q(observations)
        return values.masked_fill(~self.eligible(observations), -torch.inf).argmax(dim=1)

    @torch.no_grad()
    def bellman_targets(self, batch: Transitions, target: QNetwork) -> torch.Tensor:
        """``r + gamma (1 - done) Q_target(s', argmax_{a' eligible} Q(s', a'))``."""
        chosen = self._restricted_argmax(batch.next_observations)
        value = _taken(target(batch.next_observations), chosen)
        return batch.rewards + self.gamma * (1 - batch.terminals) * value

    def greedy_actions(self, observations: torch.Tensor) -> torch.Tensor:
        """``argmax_{a eligible} Q(s, a)``."""
        return self._restricted_argmax(observations)


def make_optimizer(learner: OfflineLearner, name: str,
                   learning_rate: float) -> torch.optim.Optimizer:
    """``"sgd"``: plain SGD, ``phi <- phi - eta g`` (Alg. 4, line 9); ``"adam"``: Adam
    (Kingma & Ba 2015) with PyTorch's defaults otherwise."""
    learning_rate = require_positive("learning_rate", learning_rate)
    require_choice("name", name, OPTIMIZERS)
    optimizer = torch.optim.SGD if name == "sgd" else torch.optim.Adam
    return optimizer(learner.parameters(), lr=learning_rate)


def sample_uniform(transitions: Transitions, batch_size: int,
                   generator: torch.Generator) -> Transitions:
    """``batch_size`` transitions drawn uniformly with replacement (a replay batch; Alg. 3,
    line 6's batch from ``D_stable``)."""
    if len(transitions) == 0:
        raise ValueError("transitions must not be empty")
    index = torch.randint(len(transitions), (require_int("batch_size", batch_size),),
                          generator=generator)
    return transitions.take(index)


def sgd_step(learner: OfflineLearner, target: QNetwork, batch: Transitions,
             optimizer: torch.optim.Optimizer) -> float:
    """One non-private step on the mean loss of ``batch`` (Alg. 3, line 6); returns that mean."""
    optimizer.zero_grad()
    loss = learner.per_example_losses(batch, target).mean()
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def greedy_returns(learner: OfflineLearner, env: VectorEnv, n_episodes: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Undiscounted returns ``(n_episodes,)`` of the learner's greedy policy on ``env``
    (start states from ``rng``), all episodes stepped at once
    (:func:`dprl.envs.episodes.simulate`)."""

    def policy(observations: np.ndarray, _: np.random.Generator) -> np.ndarray:
        obs = torch.as_tensor(require_array("observations", observations, ndim=2),
                              dtype=torch.float32)
        return learner.greedy_actions(obs).numpy()

    episodes = simulate(env, policy, require_int("n_episodes", n_episodes), rng)
    return episodes.rewards.sum(axis=-1)
