"""LSTD and WIS-LSTD for any feature table (Xie et al. 2019, Sec. 7 baselines)."""

import numpy as np
import pytest

from dprl.envs import ChainMDP, OffPolicyChain
from dprl.features import aggregation_features, tabular_features
from dprl.policy_evaluation import lstd as discrete_lstd
from dprl.policy_evaluation import td_statistics
from dprl.xie2019.baselines import episode_statistics, lstd, wis_lstd


@pytest.fixture(scope="module")
def off_policy_data():
    chain = OffPolicyChain(ChainMDP(n_states=8))
    trajectories, ratios = chain.sample((3, 400), np.random.default_rng(4))
    return chain, trajectories, ratios


@pytest.mark.parametrize("normalisation", ["trajectories", "transitions"])
def test_statistics_equal_the_discrete_ones(off_policy_data, normalisation):
    chain, trajectories, ratios = off_policy_data
    features = aggregation_features(8, 2)
    ours = episode_statistics(trajectories, features, chain.chain.gamma, ratios, normalisation)
    reference = td_statistics(trajectories, features, chain.chain.gamma, normalisation, ratios)
    for mine, theirs in zip(ours, reference):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-14)


def test_continuous_style_table_gives_the_same_statistics(off_policy_data):
    """One feature row per visited time step (how continuous states are fed) changes nothing."""
    chain, trajectories, ratios = off_policy_data
    features = tabular_features(8)
    steps = trajectories.states.shape[-1]
    rows = np.arange(trajectories.states.size).reshape(trajectories.states.shape)
    table = features[np.where(trajectories.states >= 0, trajectories.states, 0).ravel()]
    expanded = type(trajectories)(np.where(trajectories.states >= 0, rows, -1),
                                  trajectories.rewards, trajectories.lengths,
                                  trajectories.terminated, trajectories.reward_range)
    assert steps > 1
    mine = episode_statistics(expanded, table, chain.chain.gamma, ratios)
    reference = episode_statistics(trajectories, features, chain.chain.gamma, ratios)
    for a, b in zip(mine, reference):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_lstd_equals_the_discrete_lstd():
    mdp = ChainMDP(n_states=10)
    data = mdp.sample((2, 300), np.random.default_rng(1))
    features = tabular_features(10)
    np.testing.assert_allclose(lstd(data, features, mdp.gamma),
                               discrete_lstd(data, features, mdp.gamma), rtol=1e-10)


def test_wis_and_ordinary_lstd_converge_to_the_exact_fixed_point():
    """Both importance-sampling LSTDs estimate the same A = Phi^T D (I - gamma P_pi) Phi."""
    chain = OffPolicyChain(ChainMDP(n_states=6))
    features = aggregation_features(6, 2)
    A, b, _ = chain.exact_statistics(features)
    exact = np.linalg.solve(A, b)
    trajectories, ratios = chain.sample(200_000, np.random.default_rng(2))
    for importance in ("weighted", "ordinary"):
        theta = wis_lstd(trajectories, features, chain.chain.gamma, ratios,
                         importance=importance)
        np.testing.assert_allclose(theta, exact, rtol=0.02)


def test_wis_and_ordinary_differ_on_finite_data(off_policy_data):
    chain, trajectories, ratios = off_policy_data
    features = aggregation_features(8, 2)
    weighted = wis_lstd(trajectories, features, chain.chain.gamma, ratios)
    ordinary = wis_lstd(trajectories, features, chain.chain.gamma, ratios, importance="ordinary")
    assert np.abs(weighted - ordinary).max() > 1e-6


def test_on_policy_wis_lstd_is_lstd():
    mdp = ChainMDP(n_states=8)
    data = mdp.sample(500, np.random.default_rng(3))
    features = tabular_features(8)
    ones = np.where(data.transition_mask, 1.0, 0.0)
    np.testing.assert_allclose(wis_lstd(data, features, mdp.gamma, ones),
                               lstd(data, features, mdp.gamma), rtol=1e-12)


def test_bad_inputs(off_policy_data):
    chain, trajectories, ratios = off_policy_data
    features = tabular_features(8)
    with pytest.raises(ValueError, match="ratios"):
        wis_lstd(trajectories, features, 0.99, None)
    with pytest.raises(ValueError, match="normalisation"):
        episode_statistics(trajectories, features, 0.99, ratios, "episodes")
    with pytest.raises(ValueError, match="importance"):
        episode_statistics(trajectories, features, 0.99, ratios, importance="self")
    with pytest.raises(ValueError, match="ratios"):
        episode_statistics(trajectories, features, 0.99, -ratios)
    with pytest.raises(ValueError, match="gamma"):
        lstd(trajectories, features, 1.0)
    with pytest.raises(ValueError, match="ridge"):
        lstd(trajectories, features, 0.99, ridge=-1.0)
    with pytest.raises(ValueError, match="singular"):
        lstd(trajectories.first(1), tabular_features(8), 0.99)
