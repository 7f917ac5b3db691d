import numpy as np
import pytest
import torch
from torch import nn

from dprl.determinism import deterministic_torch
from dprl.sharma2025.dp_sgd import (DPSGDConfig, clipped_gradient_sum, expert_dp_sgd_step,
                                    linear_layers, noisy_gradient, poisson_expert_batch,
                                    selective_dp_sgd_step, vmap_clipped_gradient_sum)
from dprl.sharma2025.offline_rl import (DiscreteBCQ, DiscreteCQL, ExpertTransitions,
                                        Transitions, make_optimizer, sample_uniform, sgd_step)
from dprl.sharma2025.qnetworks import QNetwork, frozen_copy


@pytest.fixture(autouse=True)
def _deterministic():
    deterministic_torch(threads=1)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _transitions(n: int, seed: int, n_actions: int = 2) -> Transitions:
    g = _generator(seed)
    return Transitions(2 * torch.randn(n, 4, generator=g),
                       torch.randint(n_actions, (n,), generator=g), torch.randn(n, generator=g),
                       2 * torch.randn(n, 4, generator=g),
                       (torch.rand(n, generator=g) < 0.2).float())


def _learner(algorithm: str, seed: int = 0, hidden=(32, 32)):
    g = _generator(seed)
    q = QNetwork(4, 2, hidden, generator=g)
    learner = DiscreteCQL(q) if algorithm == "CQL" else DiscreteBCQ(q, QNetwork(4, 2, hidden,
                                                                                generator=g))
    return learner, frozen_copy(QNetwork(4, 2, hidden, generator=_generator(seed + 100)))


def _pool(m: int = 50, seed: int = 0) -> ExpertTransitions:
    counts = torch.randint(0, 6, (m,), generator=_generator(seed + 1))
    return ExpertTransitions(_transitions(int(counts.sum()), seed), counts)


def _loop_clipped(learner, inputs, clip):
    """Per-example gradients one example at a time with autograd (no torch.func)."""
    params = list(learner.parameters())
    norms, total = [], [torch.zeros_like(p) for p in params]
    for i in range(inputs[0].shape[0]):
        grads = torch.autograd.grad(learner(*(x[i:i + 1] for x in inputs))[0], params)
        norm = torch.sqrt(sum(g.double().square().sum() for g in grads))
        norms.append(float(norm))
        for acc, g in zip(total, grads):
            acc += g * float(min(1.0, clip / norm))
    return np.array(norms), total


@pytest.mark.parametrize("algorithm", ["CQL", "BCQ"])
def test_layer_identity_norms_and_clipped_sum_match_per_example_gradients(algorithm):
    learner, target = _learner(algorithm)
    batch = _transitions(24, 1)
    inputs = learner.loss_inputs(batch, target)
    clip = float(np.median(_loop_clipped(learner, inputs, 1.0)[0]))  # half of them clipped
    fast = clipped_gradient_sum(learner, inputs, clip)
    loop_norms, loop_sum = _loop_clipped(learner, inputs, clip)
    assert (loop_norms > clip).sum() == (loop_norms < clip).sum() == 12
    np.testing.assert_allclose(fast.norms.numpy(), loop_norms, rtol=2e-6)
    reference = vmap_clipped_gradient_sum(learner, inputs, clip)
    np.testing.assert_allclose(reference.norms.numpy(), loop_norms, rtol=2e-6)
    np.testing.assert_allclose(fast.losses.numpy(), learner(*inputs).detach().numpy(), rtol=1e-6)
    for a, b, c in zip(fast.grads, reference.grads, loop_sum):
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("algorithm", ["CQL", "BCQ"])
def test_layer_identity_takes_no_weight_gradient_products(algorithm, monkeypatch):
    """Per network of L layers: L forward products, L - 1 carrying delta back, L outer
    sums; the weight gradients of the backward (2 more per network) are not computed, and
    the parameters require gradients again afterwards."""
    import dprl.kernels

    learner, target = _learner(algorithm)
    batch = _transitions(16, 2)
    inputs = learner.loss_inputs(batch, target)
    shapes = []
    real = dprl.kernels.matmul
    monkeypatch.setattr(dprl.kernels, "matmul", lambda a, b: shapes.append(
        (tuple(a.shape), tuple(b.shape))) or real(a, b))
    clipped_gradient_sum(learner, inputs, 1.0)
    networks = 1 if algorithm == "CQL" else 2
    assert len(shapes) == networks * (3 + 2 + 3)
    # a weight-gradient product of the backward is (out, B) x (B, in); the outer sums are
    # the only such products, one per layer
    assert sum(a[1] == 16 for a, _ in shapes) == networks * 3
    assert all(p.requires_grad for p in learner.parameters())


def test_layer_identity_refuses_what_it_cannot_handle():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = QNetwork(4, 2, (8,), generator=_generator(0))

        def forward(self, x):
            return (self.q(x) + self.q(2 * x)).sum(1)

    x = torch.randn(5, 4, generator=_generator(1))
    with pytest.raises(ValueError, match="ran twice"):
        clipped_gradient_sum(Twice(), (x,), 1.0)
    # the hooks are gone after the failure
    assert not any(layer._forward_hooks for layer in Twice().q.layers)
    with pytest.raises(ValueError, match="nn.Linear"):
        linear_layers(nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3)))

    class Pooled(nn.Module):  # a layer whose rows are not the examples
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(4, 1)

        def forward(self, x):
            return self.layer(x.reshape(-1, 4)).reshape(x.shape[0], -1).sum(1)

    with pytest.raises(ValueError, match="one input row per example"):
        clipped_gradient_sum(Pooled(), (torch.randn(3, 8),), 1.0)


def test_poisson_expert_batch_takes_one_transition_per_sampled_expert():
    pool = _pool(m=400, seed=3)
    owner = torch.repeat_interleave(torch.arange(pool.n_experts), pool.counts)
    g = _generator(0)
    sizes = []
    for _ in range(300):
        state = g.get_state()
        batch = poisson_expert_batch(pool, 0.1, g)
        again = _generator(0)
        again.set_state(state)
        sampled = torch.rand(pool.n_experts, generator=again, dtype=torch.float64) < 0.1
        # rows are found by their (unique) observations
        rows = [int(torch.nonzero((pool.transitions.observations == o).all(1))[0, 0])
                for o in batch.observations]
        experts = owner[rows]
        assert experts.tolist() == torch.nonzero(sampled & (pool.counts > 0))[:, 0].tolist()
        sizes.append(len(batch))
    with_data = int((pool.counts > 0).sum())
    assert abs(np.mean(sizes) - 0.1 * with_data) < 5 * np.sqrt(0.1 * 0.9 * with_data / 300)
    single = ExpertTransitions(_transitions(4, 9), torch.tensor([4]))
    picks = [int(torch.nonzero(poisson_expert_batch(single, 1.0, g).rewards[0]
                               == single.transitions.rewards)[0, 0]) for _ in range(4000)]
    counts = np.bincount(picks, minlength=4)
    assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(4000 * 0.25 * 0.75))


def test_noisy_gradient_is_sum_plus_gaussian_over_b():
    g = _generator(0)
    clipped = [torch.randn(300, 100, generator=g), torch.randn(7, generator=g)]
    exact = noisy_gradient(clipped, 0.0, 1.0, 4.0, g)
    assert all(torch.equal(a, b / 4.0) for a, b in zip(exact, clipped))
    noisy = noisy_gradient(clipped, 2.0, 0.5, 4.0, g)
    noise = (noisy[0] * 4.0 - clipped[0]).double()
    assert abs(float(noise.mean())) < 5 * 1.0 / np.sqrt(30000)
    assert abs(float(noise.std()) - 1.0) < 0.02  # s C = 2 * 0.5


@pytest.mark.parametrize("noise", [0.0, 3.0])
def test_expert_dp_sgd_step_is_algorithm_4(noise):
    learner, target = _learner("CQL")
    pool, config = _pool(seed=5), DPSGDConfig(batch_size=10, noise_multiplier=noise, clip=0.5)
    before = [p.detach().clone() for p in learner.parameters()]
    g = _generator(7)
    state = g.get_state()
    size = expert_dp_sgd_step(learner, target, pool, config, make_optimizer(learner, "sgd", 0.1), g)
    replay = _generator(0)
    replay.set_state(state)  # the same draws, made by hand
    batch = poisson_expert_batch(pool, 10 / 50, replay)
    assert size == len(batch) > 0
    inputs = learner.loss_inputs(batch, target)
    learner_before, _ = _learner("CQL")
    _, clipped = _loop_clipped(learner_before, inputs, 0.5)
    for p, old, c in zip(learner.parameters(), before, clipped):
        noise_draw = torch.randn(c.shape, generator=replay)
        expected = old - 0.1 * (c + noise * 0.5 * noise_draw) / 10
        torch.testing.assert_close(p.detach(), expected, rtol=1e-5, atol=1e-6)


def test_vmap_and_layer_identity_steps_agree_and_empty_batches_work():
    results = []
    for clipping in ("layer_identity", "vmap"):
        learner, target = _learner("BCQ")
        optimizer = make_optimizer(learner, "adam", 1e-2)
        g = _generator(11)
        for _ in range(3):
            expert_dp_sgd_step(learner, target, _pool(), DPSGDConfig(8, 1.0), optimizer, g,
                               clipping)
        results.append([p.detach() for p in learner.parameters()])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    learner, target = _learner("CQL")
    empty = ExpertTransitions(_transitions(0, 0), torch.zeros(5, dtype=torch.int64))
    before = [p.detach().clone() for p in learner.parameters()]
    g = _generator(1)
    assert expert_dp_sgd_step(learner, target, empty, DPSGDConfig(2, 1.0),
                              make_optimizer(learner, "sgd", 1.0), g) == 0
    assert all(not torch.equal(a, b) for a, b in zip(before, learner.parameters()))  # noise only
    with pytest.raises(ValueError, match="clipping"):
        expert_dp_sgd_step(learner, target, empty, DPSGDConfig(2, 1.0),
                           make_optimizer(learner, "sgd", 1.0), g, "opacus")
    with pytest.raises(ValueError, match="batch_size must be <="):
        expert_dp_sgd_step(learner, target, empty, DPSGDConfig(6, 1.0),
                           make_optimizer(learner, "sgd", 1.0), g)
    with pytest.raises(ValueError, match="noise_multiplier"):
        DPSGDConfig(2, -1.0)
    with pytest.raises(ValueError, match="stable must not be empty"):
        selective_dp_sgd_step(learner, target, _transitions(0, 0), empty, 0.5,
                              DPSGDConfig(2, 1.0), make_optimizer(learner, "sgd", 1.0), g)


def test_selective_steps_follow_the_coin():
    learner, target = _learner("CQL")
    stable, unstable = _transitions(100, 20), _pool(seed=21)
    optimizer, config = make_optimizer(learner, "sgd", 0.05), DPSGDConfig(8, 1.0)
    g = _generator(3)
    branches = [selective_dp_sgd_step(learner, target, stable, unstable, 0.3, config, optimizer, g)
                for _ in range(400)]
    assert abs(np.mean(branches) - 0.3) < 5 * np.sqrt(0.21 / 400)
    for p in (0.0, 1.0):
        assert {selective_dp_sgd_step(learner, target, stable, unstable, p, config, optimizer, g)
                for _ in range(20)} == {bool(p)}
    # a stable step is the noiseless step on a uniform batch drawn after the coin
    state, before = g.get_state(), [p.detach().clone() for p in learner.parameters()]
    while selective_dp_sgd_step(learner, target, stable, unstable, 0.5, config, optimizer, g):
        state, before = g.get_state(), [p.detach().clone() for p in learner.parameters()]
    replay, twin = _generator(0), _learner("CQL")[0]
    replay.set_state(state)
    assert float(torch.rand((), generator=replay, dtype=torch.float64)) >= 0.5
    with torch.no_grad():
        for p, old in zip(twin.parameters(), before):
            p.copy_(old)
    sgd_step(twin, target, sample_uniform(stable, 8, replay), make_optimizer(twin, "sgd", 0.05))
    assert all(torch.equal(a, b) for a, b in zip(twin.parameters(), learner.parameters()))


def test_runs_are_deterministic_given_the_generators():
    def run(seed: int) -> list[torch.Tensor]:
        learner, target = _learner("BCQ")
        optimizer = make_optimizer(learner, "adam", 1e-3)
        g = _generator(seed)
        for _ in range(15):
            selective_dp_sgd_step(learner, target, _transitions(60, 2), _pool(), 0.6,
                                  DPSGDConfig(8, 2.0), optimizer, g)
        return [p.detach() for p in learner.parameters()]

    first, again, other = run(0), run(0), run(1)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not any(torch.equal(a, b) for a, b in zip(first, other))
