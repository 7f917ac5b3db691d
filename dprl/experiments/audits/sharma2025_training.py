"""The torch half of the DP-SGD audits of :mod:`dprl.experiments.audits.sharma2025`: real
steps of Sharma et al. (2025)'s Alg. 4 (:func:`dprl.sharma2025.dp_sgd.expert_dp_sgd_step`) and
Alg. 3 (:func:`~dprl.sharma2025.dp_sgd.selective_dp_sgd_step`) with one canary expert per run,
read white-box (that module's docstring). Kept apart so that registering the audits does not
load torch."""

from __future__ import annotations

import numpy as np
import torch

from dprl.determinism import deterministic_torch, torch_generator
from dprl.experiments.audits.common import Statistics
from dprl.experiments.audits.sharma2025_dp_sgd import (DPSGDAuditConfig,
                                                       dp_step_log_likelihood_ratio)
from dprl.seeding import named_stream
from dprl.sharma2025 import dp_sgd as dp_sgd_module
from dprl.sharma2025.offline_rl import DiscreteCQL, ExpertTransitions, Transitions, make_optimizer
from dprl.sharma2025.qnetworks import QNetwork, frozen_copy


def canary_transitions(runs: int, reward: float) -> Transitions:
    """The canaries: transition ``r`` goes from state ``(1,)`` by action ``r`` to a terminal
    state with reward ``reward``."""
    ones = torch.ones(runs, 1)
    return Transitions(ones, torch.arange(runs), torch.full((runs,), float(reward)), ones,
                       torch.ones(runs))


def canary_directions(learner: DiscreteCQL, canaries: Transitions, target: QNetwork,
                      clip: float) -> np.ndarray:
    """The auditor's unit clipped-gradient direction of every canary at the current
    parameters, ``(R, 2)`` (weight and bias of Q-network row ``r``; canary ``r``'s gradient
    has no other non-zero entry when CQL's ``alpha = 0``); raises unless every gradient
    norm exceeds ``clip`` (so that the clipped gradient is exactly ``C u``)."""
    weight, bias = learner.q.layers[0].weight, learner.q.layers[0].bias
    losses = learner.per_example_losses(canaries, target)
    grad_weight, grad_bias = torch.autograd.grad(losses.sum(), [weight, bias])
    rows = np.arange(len(canaries))
    gradient = np.stack([grad_weight.numpy()[rows, 0], grad_bias.numpy()[rows]], axis=1)
    norms = np.linalg.norm(gradient.astype(np.float64), axis=1)
    if norms.min() <= clip:
        raise ValueError(f"reward must make every canary's gradient norm exceed the clip "
                         f"{clip}; the smallest is {norms.min()}")
    return gradient / norms[:, None]


def one_training_statistics(config: DPSGDAuditConfig, canaries_present: bool,
                         generator: torch.Generator) -> np.ndarray:
    """One training of ``n_steps`` real steps (module docstring) with every canary present or
    absent; per canary, the log-likelihood ratio summed over the DP steps."""
    runs = config.runs_per_trial
    learner = DiscreteCQL(QNetwork(1, runs, (), generator=generator), alpha=0.0)
    target = frozen_copy(learner.q)
    optimizer = make_optimizer(learner, "sgd", config.learning_rate)
    canaries = canary_transitions(runs, config.reward)
    counts = torch.zeros(config.n_experts, dtype=torch.int64)
    counts[:runs] = int(canaries_present)
    pool = ExpertTransitions(canaries.take(torch.nonzero(counts)[:, 0]), counts)
    stable = Transitions(torch.zeros(1, 1), torch.zeros(1, dtype=torch.int64), torch.zeros(1),
                         torch.zeros(1, 1), torch.ones(1))
    dp_config = dp_sgd_module.DPSGDConfig(config.expected_batch, config.noise_multiplier,
                                          config.clip)
    layer, s, q = learner.q.layers[0], config.noise_multiplier, config.sampling_rate
    total = np.zeros(runs)
    for _ in range(config.n_steps):
        directions = canary_directions(learner, canaries, target, config.clip)
        before = np.stack([layer.weight.detach().numpy()[:, 0], layer.bias.detach().numpy()],
                          axis=1).astype(np.float64)
        if config.p == 1:
            dp_sgd_module.expert_dp_sgd_step(learner, target, pool, dp_config, optimizer,
                                             generator)
            private = True
        else:
            private = dp_sgd_module.selective_dp_sgd_step(learner, target, stable, pool,
                                                          config.p, dp_config, optimizer,
                                                          generator)
        if private:
            after = np.stack([layer.weight.detach().numpy()[:, 0],
                              layer.bias.detach().numpy()], axis=1)
            noisy_sum = (before - after) * config.expected_batch / config.learning_rate
            x = (noisy_sum * directions).sum(axis=1) / config.clip
            total += dp_step_log_likelihood_ratio(x, s, q)
    return total


def training_statistics(config: DPSGDAuditConfig, rng: np.random.Generator) -> Statistics:
    """White-box audit (module docstring): one training without the canaries (``D``) and one
    with them (``D'``), each from its own torch stream of the trial; deterministic torch on
    one thread, as the book's training runs."""
    deterministic_torch(1)
    return tuple(one_training_statistics(config, present, torch_generator(named_stream(rng, i)))
                 for i, present in enumerate((False, True)))
