"""A one-run audit (Steinke, Nasr & Jagielski 2023) of the book's expert-level DP-SGD
(Sharma et al. 2025, Alg. 4; issue 29): ``audit-sharma2025-one-run``, chapter
book/appendix/one-run-audit.

**The run.** One capped run of :func:`dprl.sharma2025.dp_sgd.expert_dp_sgd_step` (plain SGD,
Alg. 4 line 9) trains discrete CQL (:class:`~dprl.sharma2025.offline_rl.DiscreteCQL`, a
:class:`~dprl.sharma2025.qnetworks.QNetwork` with the portable kernels) on ``m = m0 + r``
experts: ``m0`` non-canary experts with CartPole transitions (:func:`cartpole_transitions`)
and ``r`` canary experts, each holding its one transition with probability 1/2 and nothing
otherwise, so that the sampling rate ``b / m`` does not depend on the inclusion bits (an
expert without transitions contributes nothing, add/remove-one neighbours). The noise
multiplier is Sec. 6's PLD calibration of ``(eps, delta = 1/m)`` over the run's steps
(:func:`~dprl.sharma2025.accounting.noise_for_budget`).

**The canaries** (:func:`canary_transitions`). The score of a canary sums its own clipped
gradient direction against the released gradients, so every other record's projection on
that direction is noise that does not depend on the canary's bit; it is small only if the
canaries' gradients are nearly orthogonal to each other and to the rest. Out-of-distribution
points of the 4 CartPole features are not: the gradients of a ReLU network at two inputs have
cosines around 0.3 (measured for 4 inputs), and the other canaries' ``~ sqrt(r)`` such terms
swamp a canary's own. So the observation has, beside the 4 CartPole features, one channel per
canary that the non-canary data leave at 0 (a sensor that reads 0 in normal operation); canary
``i`` reads ``canary_scale`` on channel ``i`` and 0 elsewhere, a random action, and a terminal
transition with reward ``+-canary_reward`` (random sign). The first layer's weights on
channel ``i`` then carry most of canary ``i``'s gradient and nobody else's: the data-space
analogue of Steinke et al.'s Dirac canaries (one gradient coordinate each). The large
reward makes the gradient far longer than the clipping norm (clipped to exactly ``C``) and
its random sign makes the cross terms that remain cancel on average. They remain large enough
to matter: the non-canary experts' clipped gradients, summed over a batch, project on the
shared layers of a canary's direction by many times the canary's own contribution.

**The auditor** is white-box: it reads the noisy gradient that each step hands the optimiser
(a ``torch.optim.Optimizer.register_step_pre_hook``, which sees ``parameter.grad`` as Alg. 4
line 8 sets it, exactly), and, at the same parameters, each canary's gradient direction
``g_i / |g_i|`` by the per-layer identity of :mod:`dprl.sharma2025.dp_sgd` (inner products
``delta_i^T G x_i + delta_i . G_b`` per layer, no per-example gradient held). Two scores
(:data:`SCORES`), each summed over the steps: ``"full direction"``, the inner product of the
released gradient with the whole direction; ``"own channel"``, with its part on the
first-layer weights of the canary's own channel, which no other record's gradient touches,
so only the canary itself and the noise reach it. Per score, the ``k_plus`` highest are
guessed included, the ``k_minus`` lowest excluded (fixed in the config before the run, from
a pilot run on another seed), and their main theorem turns the correct guesses into a lower bound on
eps at ``delta`` (:mod:`dprl.one_run_audit`); each bound holds at ``confidence`` alone (both
at once: at ``2 confidence - 1``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.one_run_audit import correct_guesses, epsilon_lower_bound, guesses
from dprl.seeding import named_stream
from dprl.sharma2025.accounting import ACCOUNTANTS, dp_sgd_epsilon, noise_for_budget
from dprl.validation import require_choice, require_int, require_positive, require_probability

if TYPE_CHECKING:  # torch loads only where a run computes
    from dprl.sharma2025.offline_rl import OfflineLearner, Transitions
    from dprl.sharma2025.qnetworks import QNetwork

#: CartPole's observation size and number of actions (Gymnasium's CartPole-v1).
CARTPOLE_FEATURES, CARTPOLE_ACTIONS = 4, 2
#: Scales of the CartPole states of the non-canary data: ``x, x_dot, theta, theta_dot``
#: drawn uniformly within +-these (inside the termination box, +-2.4 and +-0.21 rad).
STATE_SCALES = (2.0, 1.5, 0.18, 1.5)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OneRunAuditConfig(TrialConfig):
    """One audited run per trial: ``n_canaries`` (``r``) canaries and ``n_experts``
    (``m0``) non-canary experts of ``transitions_per_expert`` CartPole transitions; Alg. 4
    with expected batch ``expected_batch`` (``b``), ``steps`` steps of plain SGD at
    ``learning_rate``, clipping norm ``clip``, CQL's Q-network with ``hidden`` layers and a
    target copied every ``target_every`` steps; noise for ``(eps, 1/m)`` by ``accountant``;
    canaries as in the module docstring; guesses ``k_plus``/``k_minus``; the bound at
    ``confidence``."""

    n_canaries: int
    n_experts: int
    transitions_per_expert: int = 10
    expected_batch: int
    steps: int
    eps: float = 10.0
    learning_rate: float = 0.01
    clip: float = 1.0
    hidden: tuple[int, ...] = (256, 256)   # Sec. 6's networks (qnetworks.PAPER_HIDDEN)
    target_every: int = 100
    canary_scale: float = 1000.0
    canary_reward: float = 1e5
    k_plus: int
    k_minus: int
    confidence: float = 0.95
    accountant: str = "pld"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("n_canaries", "n_experts", "transitions_per_expert", "expected_batch",
                     "steps", "target_every"):
            require_int(name, getattr(self, name))
        for name in ("eps", "learning_rate", "clip", "canary_scale", "canary_reward"):
            require_positive(name, getattr(self, name))
        require_int("k_plus", self.k_plus, 0), require_int("k_minus", self.k_minus, 0)
        if self.k_plus + self.k_minus > self.n_canaries:
            raise ValueError("k_plus + k_minus must be <= n_canaries")
        if self.expected_batch > self.m:
            raise ValueError(f"expected_batch must be <= the {self.m} experts")
        require_probability("confidence", self.confidence, open_low=True, open_high=True)
        require_choice("accountant", self.accountant, ACCOUNTANTS)

    @property
    def m(self) -> int:
        """All experts, canaries included (excluded canaries hold no transitions)."""
        return self.n_experts + self.n_canaries

    @property
    def delta(self) -> float:
        """``1 / m``, the book's expert-level delta."""
        return 1 / self.m

    @property
    def sampling_rate(self) -> float:
        """Alg. 4's ``q = b / m``."""
        return self.expected_batch / self.m

    @property
    def noise_multiplier(self) -> float:
        """Sec. 6's calibration of ``(eps, 1/m)`` over ``steps`` steps at ``b / m``."""
        return _noise_for_budget(self.eps, self.delta, self.sampling_rate, self.steps,
                                 self.accountant)

    @property
    def accountant_epsilon(self) -> float:
        """eps at ``1/m`` of the run by the accountant, at the calibrated noise multiplier."""
        return dp_sgd_epsilon(self.noise_multiplier, self.sampling_rate, self.steps,
                              self.delta, self.accountant)


#: The auditor's scores, rows of the ``scores`` array (module docstring).
SCORES = ("full direction", "own channel")

_noise_for_budget = lru_cache(maxsize=8)(noise_for_budget)


def cartpole_transitions(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """``n`` CartPole-v1 transitions ``(s, a, r, s', done)``: states uniform within
    :data:`STATE_SCALES`, the action that pushes the cart under the pole (the sign of
    ``theta + theta_dot / 2``) with probability 0.9, else the other, and one Euler step of
    Gymnasium's dynamics (:class:`dprl.envs.cartpole.CartPoleVariants`)."""
    from dprl.envs.cartpole import CartPoleVariants

    n = require_int("n", n)
    states = rng.uniform(-1, 1, (n, CARTPOLE_FEATURES)) * np.array(STATE_SCALES)
    pushes = (states[:, 2] + states[:, 3] / 2 > 0).astype(np.int64)
    actions = np.where(rng.random(n) < 0.9, pushes, 1 - pushes)
    next_states, rewards, terminated = CartPoleVariants().step(states, actions)
    return states, actions, rewards, next_states, terminated


def canary_transitions(n_canaries: int, scale: float, reward: float,
                       rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """The canaries' transitions (module docstring): canary ``i`` reads ``scale`` on its own
    channel ``CARTPOLE_FEATURES + i`` and 0 elsewhere, takes a uniform action and ends the
    episode with reward ``+-reward`` (a fair random sign)."""
    r = require_int("n_canaries", n_canaries)
    observations = np.zeros((r, CARTPOLE_FEATURES + r))
    observations[np.arange(r), CARTPOLE_FEATURES + np.arange(r)] = require_positive("scale",
                                                                                   scale)
    actions = rng.integers(0, CARTPOLE_ACTIONS, r)
    rewards = np.where(rng.random(r) < 0.5, -1.0, 1.0) * require_positive("reward", reward)
    return observations, actions, rewards, observations, np.ones(r, dtype=bool)


def _transitions(parts: Sequence[np.ndarray]):
    """:class:`~dprl.sharma2025.offline_rl.Transitions` from numpy ``(s, a, r, s', done)``."""
    import torch

    from dprl.sharma2025.offline_rl import Transitions

    def floats(values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, dtype=torch.float32)

    s, a, r, s_next, done = parts
    return Transitions(floats(s), torch.as_tensor(a, dtype=torch.int64), floats(r),
                       floats(s_next), floats(done))


def audit_pool(config: OneRunAuditConfig, included: np.ndarray, rng: np.random.Generator):
    """``(pool, canaries)``: the ``m`` experts of the run (the ``m0`` non-canary experts'
    transitions, their observations padded with the canary channels at 0, then one expert
    per canary, holding its transition where ``included``) and every canary's transition."""
    import torch

    from dprl.sharma2025.offline_rl import ExpertTransitions

    r, per = config.n_canaries, config.transitions_per_expert
    regular = list(cartpole_transitions(config.n_experts * per, named_stream(rng, 0)))
    for index in (0, 3):
        regular[index] = np.pad(regular[index], ((0, 0), (0, r)))
    canaries = canary_transitions(r, config.canary_scale, config.canary_reward,
                                  named_stream(rng, 1))
    flat = [np.concatenate([mine, theirs[included]]) for mine, theirs in zip(regular, canaries)]
    counts = np.concatenate([np.full(config.n_experts, per), included.astype(np.int64)])
    return (ExpertTransitions(_transitions(flat), torch.as_tensor(counts)),
            _transitions(canaries))


def canary_directions(learner: OfflineLearner, target: QNetwork,
                      canaries: Transitions) -> list[tuple]:
    """Per linear layer of ``learner``, ``(layer, x, delta / |g|)``: the layer's inputs ``x``
    for every canary and the gradients ``delta`` of the canary's loss at the layer's outputs,
    scaled by ``1 / |g_i|`` (``|g_i|^2 = sum_layers |delta_i|^2 (|x_i|^2 + 1)``), so that
    canary ``i``'s gradient direction is ``(delta_i x_i^T, delta_i) / |g_i|`` per layer (the
    identity of :mod:`dprl.sharma2025.dp_sgd`)."""
    from dprl.sharma2025.dp_sgd import gradient_norms, layer_deltas

    losses, terms = layer_deltas(learner, learner.loss_inputs(canaries, target))
    norms = gradient_norms(terms, len(losses))[:, None]
    return [(layer, x, delta / norms) for layer, x, delta in terms]


def direction_scores(directions, gradients: dict) -> tuple[np.ndarray, np.ndarray]:
    """``<G, g_i / |g_i|>`` ``(r,)`` float64 for the released gradient ``G`` (``gradients``:
    parameter -> tensor) and the canaries' :func:`canary_directions` (per layer
    ``sum_o delta_io (x_i G_W^T)_o + delta_i . G_b``, the products by the portable kernels),
    and the same restricted to canary ``i``'s own channel of the first layer (module
    docstring): ``x_ic sum_o delta_io G_W[o, c]``, ``c`` the channel."""
    from dprl.kernels import matmul

    total = 0.0
    for layer, x, scaled in directions:
        weight, bias = gradients[layer.weight], gradients[layer.bias]
        total = total + (scaled * (matmul(x, weight.t().contiguous()) + bias)).sum(1)
    layer, x, scaled = directions[0]
    channels = CARTPOLE_FEATURES + np.arange(len(x))
    own = (scaled * gradients[layer.weight][:, channels].t()).sum(1) * x[np.arange(len(x)),
                                                                        channels]
    return total.double().numpy(), own.double().numpy()


def audited_run(config: OneRunAuditConfig, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray]:
    """The inclusion bits ``(r,)`` and the canaries' scores ``(2, r)`` (:data:`SCORES`) of
    one audited run
    (module docstring); every step goes through
    :func:`dprl.sharma2025.dp_sgd.expert_dp_sgd_step`."""
    from dprl.determinism import torch_generator
    from dprl.sharma2025 import dp_sgd
    from dprl.sharma2025.offline_rl import DiscreteCQL, make_optimizer
    from dprl.sharma2025.qnetworks import QNetwork, frozen_copy, update_target

    included = named_stream(rng, 2).random(config.n_canaries) < 0.5
    pool, canaries = audit_pool(config, included, rng)
    generator = torch_generator(named_stream(rng, 3))
    learner = DiscreteCQL(QNetwork(CARTPOLE_FEATURES + config.n_canaries, CARTPOLE_ACTIONS,
                                   config.hidden, generator=generator, kernels="portable"))
    optimizer = make_optimizer(learner, "sgd", config.learning_rate)
    released: dict = {}
    hook = optimizer.register_step_pre_hook(lambda *_: released.update(
        {p: p.grad.detach().clone() for p in learner.parameters()}))
    target = frozen_copy(learner.q)
    dp_config = dp_sgd.DPSGDConfig(config.expected_batch, config.noise_multiplier, config.clip)
    scores = np.zeros((2, config.n_canaries))
    try:
        for step in range(1, config.steps + 1):
            directions = canary_directions(learner, target, canaries)
            dp_sgd.expert_dp_sgd_step(learner, target, pool, dp_config, optimizer, generator)
            scores += direction_scores(directions, released)
            if step % config.target_every == 0:
                update_target(target, learner.q)
    finally:
        hook.remove()
    return included, scores


def one_run_audit_trials(config: OneRunAuditConfig,
                         rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial (one audited run each): the inclusion bits ``(r,)``; per score of
    :data:`SCORES`, the canaries' scores and guesses ``(2, r)``, the correct guesses and
    The main theorem's lower bound at ``(confidence, 1/m)`` ``(2,)``; the accountant's eps and
    the noise multiplier."""
    from dprl.determinism import deterministic_torch

    deterministic_torch(1)
    out: dict[str, list] = {name: [] for name in (
        "included", "scores", "guesses", "correct", "eps_lower_bound", "accountant_eps",
        "noise_multiplier")}
    for rng in rngs:
        included, scores = audited_run(config, rng)
        guessed = np.stack([guesses(row, config.k_plus, config.k_minus) for row in scores])
        correct = [correct_guesses(row, included) for row in guessed]
        bounds = [epsilon_lower_bound(config.n_canaries, config.k_plus + config.k_minus, v,
                                      config.delta, config.confidence) for v in correct]
        for name, value in zip(out, (included, scores, guessed, correct, bounds,
                                     config.accountant_epsilon, config.noise_multiplier)):
            out[name].append(value)
    return {name: np.asarray(values) for name, values in out.items()}


#: The numbers of guesses ``k = k_plus = k_minus`` a pilot run chooses between.
PILOT_K_GRID = (25, 50, 100, 200, 300, 400, 500)


def pilot_bounds(scores: np.ndarray, included: np.ndarray, n_canaries: int, delta: float,
                 grid: Sequence[int] = PILOT_K_GRID, confidence: float = 0.95) -> np.ndarray:
    """The lower bounds ``(len(grid), n_scores)`` that guessing the ``k`` highest and ``k``
    lowest of each row of a pilot run's ``scores`` ``(n_scores, r)`` would certify (Steinke
    et al.'s main theorem at ``(confidence, delta)``): the pilot picks the ``k`` with the
    largest, before the audited run on another seed."""
    out = np.zeros((len(grid), len(scores)))
    for i, k in enumerate(grid):
        for j, row in enumerate(scores):
            right = correct_guesses(guesses(row, k, k), included)
            out[i, j] = epsilon_lower_bound(n_canaries, 2 * k, right, delta, confidence)
    return out


def _one_run(experiment_id: str, title: str, root_seed: int) -> Experiment:
    shared = dict(root_seed=root_seed, batch_size=1, n_trials=1)
    return register(Experiment(
        id=experiment_id, title=title, chapter="book/appendix/one-run-audit.ipynb",
        configs={"smoke": OneRunAuditConfig(n_canaries=40, n_experts=40, expected_batch=16,
                                            steps=20, hidden=(8, 8), k_plus=5, k_minus=5,
                                            accountant="rdp", **shared),
                 "paper": OneRunAuditConfig(n_canaries=1000, n_experts=1000,
                                            expected_batch=400, steps=300, k_plus=100,
                                            k_minus=100, **shared)},
        run_trials=one_run_audit_trials))


ONE_RUN = _one_run("audit-sharma2025-one-run",
                   "One-run audit (Steinke et al. 2023) of Sharma 2025's expert-level DP-SGD "
                   "(Alg. 4) training CQL with expert canaries (eps = 10, delta = 1/m)", 1720)
#: The pilot run that chooses the guesses: the same configuration on another root seed.
PILOT = _one_run("audit-sharma2025-one-run-pilot",
                 "Pilot of the one-run audit of Sharma 2025's expert-level DP-SGD: the same "
                 "run on another seed, to choose the number of guesses", 1721)
