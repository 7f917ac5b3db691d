"""The book's offline-RL losses and its clipped per-expert gradient sums against the libraries
readers trust, on the same weights and batch with the definitions aligned: CQL and BCQ against
d3rlpy 2.8.1's DiscreteCQL and DiscreteBCQ, the clipped sum of Sharma et al. (2025)'s
Algorithm 4 (lines 6-7) against Opacus 1.6.0's per-sample clipping.

The libraries are the optional cross-check packages (``make crosscheck``); without them the
tests skip with a message. Aligned here, and documented in the offline-RL chapter:

- the Bellman target: the book's DQN target ``max_a' Q_target(s', a')`` is handed to d3rlpy's
  loss as its ``q_tpn`` (d3rlpy computes a double-DQN target of its own);
- CQL's TD loss: the book's ``(Q - y)^2 / 2`` equals d3rlpy's Huber loss where every
  ``|Q - y| < 1`` (asserted on the batch);
- BCQ's logit penalty: d3rlpy penalises ``Categorical(logits=...).logits``, the normalised
  log-probabilities, the book the raw logits; compared with both penalties off, and the two
  penalties each against their formula;
- Opacus divides by ``|g_i| + 1e-6`` when clipping, the book by ``|g_i|``.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from dprl.determinism import deterministic_torch
from dprl.sharma2025.dp_sgd import clipped_gradient_sum
from dprl.sharma2025.offline_rl import DiscreteBCQ, DiscreteCQL, Transitions
from dprl.sharma2025.qnetworks import QNetwork, frozen_copy

HIDDEN, N_ACTIONS, BATCH = (32, 32), 3, 64


def _library(name: str):
    return pytest.importorskip(name, reason=f"{name} is a cross-check package: make crosscheck")


@pytest.fixture(autouse=True)
def _deterministic():
    deterministic_torch(threads=1)


def _network(seed: int) -> QNetwork:
    return QNetwork(4, N_ACTIONS, HIDDEN, generator=torch.Generator().manual_seed(seed))


def _batch(seed: int) -> Transitions:
    g = torch.Generator().manual_seed(seed)
    return Transitions(torch.randn(BATCH, 4, generator=g),
                       torch.randint(N_ACTIONS, (BATCH,), generator=g),
                       0.2 * torch.rand(BATCH, generator=g) - 0.1,
                       torch.randn(BATCH, 4, generator=g),
                       (torch.rand(BATCH, generator=g) < 0.2).float())


def _load(module: nn.Module, network: QNetwork) -> None:
    """Copy ``network``'s layers into a d3rlpy Q-function or policy (encoder + ``_fc``)."""
    theirs = [m for m in module._encoder.modules() if isinstance(m, nn.Linear)] + [module._fc]
    assert len(theirs) == len(network.layers)
    with torch.no_grad():
        for their, our in zip(theirs, network.layers, strict=True):
            their.weight.copy_(our.weight)
            their.bias.copy_(our.bias)


def _d3rlpy_batch(batch: Transitions):
    from d3rlpy.torch_utility import TorchMiniBatch

    column = lambda x: x[:, None].float()  # noqa: E731
    return TorchMiniBatch(observations=batch.observations, actions=batch.actions[:, None],
                          rewards=column(batch.rewards), next_observations=batch.next_observations,
                          next_actions=batch.actions[:, None], returns_to_go=column(batch.rewards),
                          terminals=column(batch.terminals), intervals=torch.ones(BATCH, 1),
                          device="cpu:0")


def _d3rlpy(config):
    from d3rlpy.models.encoders import VectorEncoderFactory

    algorithm = config(gamma=0.99, encoder_factory=VectorEncoderFactory(hidden_units=list(HIDDEN))
                       ).create(device="cpu:0")
    algorithm.create_impl((4,), N_ACTIONS)
    return algorithm.impl


def _next_values(learner, target: QNetwork, batch: Transitions) -> torch.Tensor:
    """The book's next-state value in its Bellman target (CQL: ``max_a' Q_target(s', a')``;
    BCQ: ``Q_target`` at the eligible argmax of ``Q``), as d3rlpy's ``q_tpn`` ``(B, 1)``:
    ``y = r + gamma (1 - done) q_tpn`` in both."""
    with torch.no_grad():
        if isinstance(learner, DiscreteBCQ):
            chosen = learner.greedy_actions(batch.next_observations)
            return target(batch.next_observations).gather(1, chosen[:, None])
        return target(batch.next_observations).max(dim=1).values[:, None]


def _gradients(loss: torch.Tensor, networks: list[nn.Module]) -> list[torch.Tensor]:
    return torch.autograd.grad(loss, [p for n in networks for p in n.parameters()])


def test_cql_loss_and_gradients_are_d3rlpy_s():
    _library("d3rlpy")
    from d3rlpy.algos import DiscreteCQLConfig

    ours, target, batch = DiscreteCQL(_network(0), alpha=1.0), frozen_copy(_network(1)), _batch(2)
    impl = _d3rlpy(lambda **kw: DiscreteCQLConfig(alpha=1.0, **kw))
    q_func = impl._modules.q_funcs[0]
    _load(q_func, ours.q)
    inputs = ours.loss_inputs(batch, target)
    with torch.no_grad():
        assert (ours.q(inputs[0]).gather(1, inputs[1][:, None])[:, 0] - inputs[2]).abs().max() < 1
    their = impl.compute_loss(_d3rlpy_batch(batch), _next_values(ours, target, batch))
    our_loss = ours(*inputs).mean()
    torch.testing.assert_close(their.loss, our_loss, rtol=1e-6, atol=1e-7)
    # d3rlpy's encoder lists its layers before the head, as the book's network does
    for a, b in zip(_gradients(their.loss, [q_func._encoder, q_func._fc]),
                    _gradients(our_loss, [ours.q]), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_bcq_loss_and_gradients_are_d3rlpy_s_without_the_logit_penalty():
    _library("d3rlpy")
    from d3rlpy.algos import DiscreteBCQConfig

    ours = DiscreteBCQ(_network(0), _network(3), logit_penalty=0.0)
    target, batch = frozen_copy(_network(1)), _batch(4)
    impl = _d3rlpy(lambda **kw: DiscreteBCQConfig(beta=0.0, share_encoder=False, **kw))
    q_func, imitator = impl._modules.q_funcs[0], impl._modules.imitator
    _load(q_func, ours.q)
    _load(imitator, ours.g)
    their = impl.compute_loss(_d3rlpy_batch(batch), _next_values(ours, target, batch))
    our_loss = ours(*ours.loss_inputs(batch, target)).mean()
    torch.testing.assert_close(their.loss, our_loss, rtol=1e-6, atol=1e-7)
    theirs = _gradients(their.loss, [q_func._encoder, q_func._fc, imitator._encoder, imitator._fc])
    for a, b in zip(theirs, _gradients(our_loss, [ours.q, ours.g]), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_the_bcq_logit_penalties_differ_as_documented():
    """d3rlpy's penalty is beta * mean(log_softmax(logits)^2), the book's on the raw logits."""
    _library("d3rlpy")
    from d3rlpy.algos import DiscreteBCQConfig
    from d3rlpy.models.torch.imitators import compute_discrete_imitation_loss

    ours, batch = DiscreteBCQ(_network(0), _network(3), logit_penalty=0.5), _batch(5)
    impl = _d3rlpy(lambda **kw: DiscreteBCQConfig(beta=0.5, share_encoder=False, **kw))
    _load(impl._modules.imitator, ours.g)
    their = compute_discrete_imitation_loss(impl._modules.imitator, batch.observations,
                                            batch.actions[:, None], beta=0.5)
    logits = ours.g(batch.observations)
    torch.testing.assert_close(their.regularization_loss,
                               0.5 * torch.log_softmax(logits, dim=1).square().mean())
    targets = torch.zeros(BATCH)  # the TD term is the same for both; only the penalty differs
    penalty = ours(batch.observations, batch.actions, targets) - DiscreteBCQ(
        ours.q, ours.g, logit_penalty=0.0)(batch.observations, batch.actions, targets)
    torch.testing.assert_close(penalty.mean(), 0.5 * logits.square().mean())
    assert not torch.isclose(penalty.mean(), their.regularization_loss)


def _plain_linear_copy(module: nn.Module) -> nn.Module:
    """A copy whose layers are ``nn.Linear`` itself (torch's own products), the type Opacus's
    per-sample gradient hooks know."""
    module = copy.deepcopy(module)
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            layer.__class__ = nn.Linear
    return module


@pytest.mark.parametrize("algorithm", ["CQL", "BCQ"])
def test_the_clipped_gradient_sum_is_opacus_s(algorithm):
    _library("opacus")
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    learner = (DiscreteCQL(_network(0)) if algorithm == "CQL"
               else DiscreteBCQ(_network(0), _network(3)))
    batch, target = _batch(6), frozen_copy(_network(1))
    inputs = learner.loss_inputs(batch, target)
    ours = clipped_gradient_sum(learner, inputs, clip=1.0)
    clip = float(np.median(ours.norms.numpy()))  # half of the examples clipped
    ours = clipped_gradient_sum(learner, inputs, clip=clip)
    sampled = GradSampleModule(_plain_linear_copy(learner), loss_reduction="sum")
    optimizer = DPOptimizer(torch.optim.SGD(sampled.parameters(), lr=0.0), noise_multiplier=0.0,
                            max_grad_norm=clip, expected_batch_size=BATCH)
    sampled(*inputs).sum().backward()
    optimizer.clip_and_accumulate()
    norms = torch.stack([p.grad_sample.flatten(1).norm(dim=1) for p in sampled.parameters()],
                        dim=1).norm(dim=1)
    torch.testing.assert_close(norms, ours.norms, rtol=1e-5, atol=1e-7)
    assert (ours.norms > clip).sum() >= BATCH // 2 - 1
    for theirs, mine in zip((p.summed_grad for p in sampled.parameters()), ours.grads,
                            strict=True):
        torch.testing.assert_close(theirs, mine, rtol=1e-5, atol=1e-6)
