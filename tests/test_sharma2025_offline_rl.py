import numpy as np
import pytest
import torch
from torch import nn

from dprl.determinism import deterministic_torch, torch_generator
from dprl.envs.cartpole import CartPoleVariants
from dprl.envs.episodes import UniformPolicy, simulate
from dprl.experiments.sharma2025.experts import classic_experts
from dprl.sharma2025.datasets import record
from dprl.sharma2025.offline_rl import (DiscreteBCQ, DiscreteCQL, ExpertTransitions, Transitions,
                                        expert_transitions, greedy_returns, make_optimizer,
                                        sample_uniform, sgd_step)
from dprl.sharma2025.qnetworks import (HIV_HIDDEN, PAPER_HIDDEN, Linear, QNetwork, frozen_copy,
                                       update_target)


@pytest.fixture(autouse=True)
def _deterministic():
    deterministic_torch(threads=1)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _random_batch(n: int, seed: int, d: int = 4, n_actions: int = 2) -> Transitions:
    g = _generator(seed)
    return Transitions(torch.randn(n, d, generator=g), torch.randint(n_actions, (n,), generator=g),
                       torch.randn(n, generator=g), torch.randn(n, d, generator=g),
                       (torch.rand(n, generator=g) < 0.3).float())


def test_q_network_architecture_and_deterministic_init():
    state = torch.get_rng_state()
    first = QNetwork(4, 2, generator=_generator(0))
    assert torch.equal(torch.get_rng_state(), state)  # no global randomness used
    again, other = QNetwork(4, 2, generator=_generator(0)), QNetwork(4, 2, generator=_generator(1))
    for a, b, c in zip(first.parameters(), again.parameters(), other.parameters()):
        assert torch.equal(a, b) and not torch.equal(a, c)
    assert [type(m) for m in first.modules()][2:] == [Linear] * 3
    assert all(isinstance(m, nn.Linear) and m.kernels == "portable" for m in first.layers)
    assert [(l.in_features, l.out_features) for l in first.layers] == [(4, 256), (256, 256),
                                                                       (256, 2)]
    assert PAPER_HIDDEN == (256, 256)
    for layer in first.layers:  # U(-1/sqrt(fan_in), 1/sqrt(fan_in)), spread over that range
        bound = layer.in_features ** -0.5
        assert layer.weight.abs().max() <= bound and layer.weight.abs().max() > 0.9 * bound
    hiv = QNetwork(6, 4, HIV_HIDDEN, generator=_generator(0))
    assert [(l.in_features, l.out_features) for l in hiv.layers] == [(6, 512), (512, 4)]
    x = torch.randn(5, 6, generator=_generator(2))
    w1, b1, w2, b2 = (p.detach().numpy().astype(np.float64) for p in hiv.parameters())
    expected = np.maximum(x.numpy() @ w1.T + b1, 0) @ w2.T + b2
    np.testing.assert_allclose(hiv(x).detach().numpy(), expected, rtol=1e-5, atol=1e-5)


def test_target_updates():
    online, target = QNetwork(3, 2, (8,), generator=_generator(0)), None
    target = frozen_copy(QNetwork(3, 2, (8,), generator=_generator(1)))
    assert not any(p.requires_grad for p in target.parameters())
    before = [p.clone() for p in target.parameters()]
    update_target(target, online, tau=0.25)
    for kept, old, new in zip(target.parameters(), before, online.parameters()):
        torch.testing.assert_close(kept, 0.75 * old + 0.25 * new, rtol=1e-6, atol=1e-7)
    update_target(target, online)
    assert all(torch.equal(a, b) for a, b in zip(target.parameters(), online.parameters()))
    with pytest.raises(ValueError, match="tau"):
        update_target(target, online, tau=0.0)
    with pytest.raises(ValueError, match="differ in shape"):
        update_target(target, QNetwork(3, 2, (9,), generator=_generator(0)))


def test_bad_networks_and_batches_are_rejected():
    with pytest.raises(ValueError, match="generator"):
        QNetwork(4, 2, generator=None)
    with pytest.raises(ValueError, match="hidden"):
        QNetwork(4, 2, (0,), generator=_generator(0))
    batch = _random_batch(4, 0)
    with pytest.raises(ValueError, match="actions"):
        Transitions(batch.observations, batch.actions.int(), batch.rewards,
                    batch.next_observations, batch.terminals)
    with pytest.raises(ValueError, match="next_observations"):
        Transitions(batch.observations, batch.actions, batch.rewards,
                    batch.next_observations[:3], batch.terminals)
    with pytest.raises(ValueError, match="counts"):
        ExpertTransitions(batch, torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="name"):
        make_optimizer(DiscreteCQL(QNetwork(4, 2, (4,), generator=_generator(0))), "rmsprop", 0.1)
    with pytest.raises(ValueError, match="empty"):
        sample_uniform(batch.take(torch.arange(0)), 3, _generator(0))
    with pytest.raises(ValueError, match="same inputs"):
        DiscreteBCQ(QNetwork(4, 2, (4,), generator=_generator(0)),
                    QNetwork(4, 3, (4,), generator=_generator(0)))


def test_expert_transitions_match_a_loop_over_trajectories():
    experts = classic_experts("CartPole").select(np.array([300, 800, 200]))
    data = record(CartPoleVariants(horizon=30), experts, [300, 800, 200], 3, 0.02,
                  np.random.default_rng(4))
    keep = np.random.default_rng(5).random(data.actions.shape) < 0.7
    for mask in (None, keep):
        pool = expert_transitions(data, mask)
        rows = []
        for i in range(3):
            for n in range(3):
                for t in range(int(data.lengths[i, n])):
                    if mask is None or mask[i, n, t]:
                        done = t == data.lengths[i, n] - 1 and data.terminated[i, n]
                        rows.append((i, data.observations[i, n, t], data.actions[i, n, t],
                                     data.rewards[i, n, t], data.observations[i, n, t + 1], done))
        assert len(pool.transitions) == len(rows) and pool.n_experts == 3
        assert pool.counts.tolist() == [sum(r[0] == i for r in rows) for i in range(3)]
        assert pool.offsets.tolist() == [0, int(pool.counts[0]), int(pool.counts[:2].sum())]
        for k, (_, s, a, r, s2, done) in enumerate(rows):
            np.testing.assert_array_equal(pool.transitions.observations[k].numpy(),
                                          s.astype(np.float32))
            np.testing.assert_array_equal(pool.transitions.next_observations[k].numpy(),
                                          s2.astype(np.float32))
            assert (int(pool.transitions.actions[k]), float(pool.transitions.rewards[k]),
                    float(pool.transitions.terminals[k])) == (a, r, float(done))
    assert data.terminated.any() and not data.terminated.all()
    with pytest.raises(ValueError, match="keep"):
        expert_transitions(data, keep[:, :2])


def test_cql_loss_targets_and_gradient_against_formulas():
    q = QNetwork(4, 3, (16,), generator=_generator(0))
    learner, target = DiscreteCQL(q, alpha=0.7, gamma=0.9), frozen_copy(
        QNetwork(4, 3, (16,), generator=_generator(1)))
    batch = _random_batch(6, 2, n_actions=3)
    y = learner.bellman_targets(batch, target)
    assert not y.requires_grad and y.grad_fn is None
    next_values = target(batch.next_observations).detach().numpy().astype(np.float64)
    expected_y = batch.rewards.numpy() + 0.9 * (1 - batch.terminals.numpy()) * next_values.max(1)
    np.testing.assert_allclose(y.numpy(), expected_y, rtol=1e-6)
    losses = learner.per_example_losses(batch, target)
    values = q(batch.observations).detach().numpy().astype(np.float64)
    a = batch.actions.numpy()
    taken = values[np.arange(6), a]
    lse = np.log(np.exp(values).sum(1))
    np.testing.assert_allclose(losses.detach().numpy(),
                               0.7 * (lse - taken) + 0.5 * (taken - expected_y) ** 2, rtol=1e-5)
    # d loss_i / d (last bias) = alpha (softmax - e_a) + (Q(s, a) - y) e_a: no gradient via y
    for i in range(6):
        (grad,) = torch.autograd.grad(losses[i], q.layers[-1].bias, retain_graph=True)
        onehot = np.eye(3)[a[i]]
        softmax = np.exp(values[i] - lse[i])
        np.testing.assert_allclose(grad.numpy(), 0.7 * (softmax - onehot)
                                   + (taken[i] - expected_y[i]) * onehot, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(learner.greedy_actions(batch.observations).numpy(),
                                  values.argmax(1))


def test_bcq_eligibility_targets_loss_and_gradient_against_formulas():
    q, g = (QNetwork(4, 3, (16,), generator=_generator(k)) for k in (0, 1))
    with torch.no_grad():  # spread G's logits so that some actions are ineligible
        g.layers[-1].weight.mul_(8.0)
    learner = DiscreteBCQ(q, g, threshold=0.3, gamma=0.9, logit_penalty=0.05)
    target = frozen_copy(QNetwork(4, 3, (16,), generator=_generator(2)))
    batch = _random_batch(40, 3, n_actions=3)

    def eligible(obs: torch.Tensor) -> np.ndarray:
        logits = g(obs).detach().numpy().astype(np.float64)
        probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        return probs / probs.max(1, keepdims=True) > 0.3

    allowed = eligible(batch.next_observations)
    assert (~allowed).any() and allowed.any(1).all()
    np.testing.assert_array_equal(learner.eligible(batch.next_observations).numpy(), allowed)
    q_next = q(batch.next_observations).detach().numpy()
    target_next = target(batch.next_observations).detach().numpy().astype(np.float64)
    expected_y = np.empty(40)
    for i in range(40):
        best = max((k for k in range(3) if allowed[i, k]), key=lambda k: q_next[i, k])
        expected_y[i] = batch.rewards[i] + 0.9 * (1 - batch.terminals[i]) * target_next[i, best]
    y = learner.bellman_targets(batch, target)
    assert not y.requires_grad
    np.testing.assert_allclose(y.numpy(), expected_y, rtol=1e-6, atol=1e-6)
    here = eligible(batch.observations)
    q_here = q(batch.observations).detach().numpy()
    np.testing.assert_array_equal(learner.greedy_actions(batch.observations).numpy(),
                                  np.where(here, q_here, -np.inf).argmax(1))
    losses = learner.per_example_losses(batch, target)
    a = batch.actions.numpy()
    td = q_here.astype(np.float64)[np.arange(40), a] - expected_y
    huber = np.where(np.abs(td) < 1, 0.5 * td ** 2, np.abs(td) - 0.5)
    logits = g(batch.observations).detach().numpy().astype(np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    expected = huber - log_probs[np.arange(40), a] + 0.05 * (logits ** 2).mean(1)
    np.testing.assert_allclose(losses.detach().numpy(), expected, rtol=1e-5, atol=1e-5)
    for i in range(3):  # gradients of the two heads' last biases, per example
        gq, gg = torch.autograd.grad(losses[i], [q.layers[-1].bias, g.layers[-1].bias],
                                     retain_graph=True)
        onehot = np.eye(3)[a[i]]
        np.testing.assert_allclose(gq.numpy(), np.clip(td[i], -1, 1) * onehot, rtol=1e-4,
                                   atol=1e-6)
        np.testing.assert_allclose(gg.numpy(), np.exp(log_probs[i]) - onehot
                                   + 0.05 * 2 * logits[i] / 3, rtol=1e-4, atol=1e-6)


def test_sgd_step_is_plain_gradient_descent():
    learner = DiscreteCQL(QNetwork(4, 2, (8,), generator=_generator(0)))
    target = frozen_copy(learner.q)
    batch = _random_batch(16, 1)
    grads = torch.autograd.grad(learner.per_example_losses(batch, target).mean(),
                                list(learner.parameters()))
    before = [p.detach().clone() for p in learner.parameters()]
    loss = sgd_step(learner, target, batch, make_optimizer(learner, "sgd", 0.1))
    assert isinstance(loss, float)
    for p, old, grad in zip(learner.parameters(), before, grads):
        torch.testing.assert_close(p.detach(), old - 0.1 * grad)


def test_greedy_returns_match_stepping_the_env():
    learner = DiscreteCQL(QNetwork(4, 2, (8,), generator=_generator(3)))
    env = CartPoleVariants(horizon=100)
    returns = greedy_returns(learner, env, 4, np.random.default_rng(0))
    starts = env.reset(4, np.random.default_rng(0))
    for start, ret in zip(starts, returns):
        state, total, done = start[None, :], 0.0, False
        while not done and total < 100:
            action = learner.greedy_actions(torch.as_tensor(state, dtype=torch.float32)).numpy()
            state, reward, terminated = env.step(state, action)
            total, done = total + reward[0], bool(terminated[0])
        assert ret == total


@pytest.fixture(scope="module")
def cartpole_data():
    index = np.arange(0, 3000, 100)  # 30 of the committed experts, 20 trajectories each
    data = record(CartPoleVariants(), classic_experts("CartPole").select(index), index, 20,
                  0.02, np.random.default_rng(0))
    return expert_transitions(data).transitions


@pytest.mark.parametrize("algorithm", ["CQL", "BCQ"])
def test_nonprivate_learners_learn_cartpole_offline(cartpole_data, algorithm):
    generator = torch_generator(np.random.default_rng(1))
    q = QNetwork(4, 2, (64, 64), generator=generator)
    learner = (DiscreteCQL(q) if algorithm == "CQL"
               else DiscreteBCQ(q, QNetwork(4, 2, (64, 64), generator=generator)))
    target, optimizer = frozen_copy(q), make_optimizer(learner, "adam", 1e-3)
    for step in range(2000):
        sgd_step(learner, target, sample_uniform(cartpole_data, 64, generator), optimizer)
        if (step + 1) % 100 == 0:
            update_target(target, q)
    env = CartPoleVariants(horizon=500)
    learned = greedy_returns(learner, env, 20, np.random.default_rng(5)).mean()
    random = simulate(env, UniformPolicy(2), 200, np.random.default_rng(5)).rewards.sum(1).mean()
    print(f"{algorithm}: greedy return {learned:.4g} vs random {random:.4g}")
    assert 15 < random < 30 and learned > 4 * random
