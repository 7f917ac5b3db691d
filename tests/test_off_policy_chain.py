"""The two-action chain used for off-policy checks (Xie et al. 2019, Sec. 2)."""

import numpy as np
import pytest

from dprl.envs import ChainMDP, OffPolicyChain
from dprl.features import aggregation_features, tabular_features

CHAIN = ChainMDP(n_states=8, horizon=60, gamma=0.9)
OFF = OffPolicyChain(CHAIN, alternative_stay_prob=0.8, behaviour_prob=0.4)


def test_exact_statistics_give_the_target_value_function_with_tabular_features():
    A, b, _ = OFF.exact_statistics(tabular_features(8))
    assert np.allclose(np.linalg.solve(A, b), CHAIN.value_function(), atol=1e-12)


def _sample_statistics(features, n=60_000, seed=0):
    """Per-transition sums of rho phi (phi - gamma phi')^T, rho r phi, phi phi^T."""
    trajectories, ratios = OFF.sample(n, np.random.default_rng(seed))
    mask = trajectories.transition_mask
    last = np.arange(CHAIN.horizon) == trajectories.lengths[:, None] - 1
    table = np.vstack([features, np.zeros(features.shape[1])])
    src = np.where(mask, trajectories.states[:, :-1], 8)
    nxt = np.where(mask & ~(last & trajectories.terminated[:, None]), trajectories.states[:, 1:], 8)
    phi, phi_next = table[src], table[nxt]
    rho = ratios[..., None, None]
    A = (rho * phi[..., :, None] * (phi - CHAIN.gamma * phi_next)[..., None, :]).sum((0, 1))
    b = ((ratios * trajectories.rewards)[..., None] * phi).sum((0, 1))
    C = (phi[..., :, None] * phi[..., None, :]).sum((0, 1))
    total = mask.sum()
    return A / total, b / total, C / total, ratios[mask]


def test_sampled_statistics_converge_to_the_exact_ones():
    features = aggregation_features(8, 2)
    A, b, C, rho = _sample_statistics(features)
    exact = OFF.exact_statistics(features)
    for sampled, expected in zip((A, b, C), exact, strict=True):
        assert np.abs(sampled - expected).max() < 0.01
    assert abs(rho.mean() - 1) < 0.01  # E_b[pi / pi_b] = 1
    assert set(np.unique(rho)) == {0.0, 2.5}


def test_on_policy_behaviour_reproduces_the_chain_sampler_states():
    same = OffPolicyChain(CHAIN, alternative_stay_prob=CHAIN.stay_prob, behaviour_prob=0.3)
    trajectories, ratios = same.sample(20_000, np.random.default_rng(1))
    lengths = CHAIN.sample(20_000, np.random.default_rng(2)).lengths
    assert abs(trajectories.lengths.mean() - lengths.mean()) < 0.1
    assert ratios.shape == trajectories.rewards.shape


def test_refuses_bad_inputs():
    with pytest.raises(ValueError):
        OffPolicyChain(CHAIN, behaviour_prob=0.0)
    with pytest.raises(ValueError):
        OffPolicyChain("chain")
    with pytest.raises(ValueError):
        OFF.exact_statistics(tabular_features(5))


def test_td_statistics_with_ratios():
    """Off-policy td_statistics: 1-ratios change nothing; the per-trajectory version's fixed
    point zeroes GPOPE's mean gradient; the per-transition version matches the exact one."""
    from dprl.policy_evaluation import td_statistics
    from dprl.xie2019.prepared import _Episodes

    features = aggregation_features(8, 2)
    trajectories, ratios = OFF.sample((2, 30), np.random.default_rng(3))
    plain = td_statistics(trajectories, features, 0.9, "trajectories")
    ones = td_statistics(trajectories, features, 0.9, "trajectories",
                         ratios=np.where(trajectories.transition_mask, 1.0, 0.0))
    assert all(np.allclose(x, y, rtol=1e-12) for x, y in zip(plain, ones, strict=True))
    A, b, _ = td_statistics(trajectories, features, 0.9, "trajectories", ratios=ratios)
    theta = np.linalg.solve(A, b[..., None])[..., 0]
    episodes = _Episodes.of(trajectories, features, ratios)
    mean = sum(episodes.gradient(np.full(2, i), theta, np.zeros((2, 4)), 0.9)
               for i in range(30)) / 30
    assert np.abs(mean).max() < 1e-12
    big, big_ratios = OFF.sample(60_000, np.random.default_rng(4))
    sampled = td_statistics(big, features, 0.9, "transitions", ratios=big_ratios)
    for x, y in zip(sampled, OFF.exact_statistics(features), strict=True):
        assert np.abs(x - y).max() < 0.01
    with np.testing.assert_raises(ValueError):
        td_statistics(trajectories, features, 0.9, ratios=-np.ones(ratios.shape))
