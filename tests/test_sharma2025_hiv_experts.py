"""HIV experts of Sharma et al. (2025, App. B.1) by batched fitted Q iteration: the settings'
noise and reward model, batched FQI against dprl.control.fitted_q, the selection rule, the
expert population and its trajectories, and determinism / batch invariance of training."""

import numpy as np
import pytest
from scipy import stats

from dprl.control.fitted_q import Transitions, action_values, fitted_q_iteration
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.envs.hiv_features import q_features
from dprl.features import PolynomialBasis
from dprl.sharma2025.experts import ExpertPopulation, pmin_levels
from dprl.control.batched_fitted_q import batched_fitted_q
from dprl.sharma2025.hiv_experts import (HIVExpertProtocol, default_returns, own_returns,
                                         record_trajectories, select_experts,
                                         train_candidates, train_hiv_experts)
from dprl.sharma2025.hiv_settings import (HIVSettings, _simulate, hiv_settings,
                                          noisy_efficacies, penalised_rewards)
from dprl.sharma2025.variants import variant_grid

SHORT = HIVTreatmentMDP.sharma2025(horizon=8)
TINY = HIVExpertProtocol(degree=1, n_rounds=2, patients_per_round=3, n_iterations=8,
                         ridge=1e-6, n_candidates=2, n_noisy_evaluations=2, n_second_best=1)
#: one noise-free and one noisy setting, and a second noise-free one
IDS = [0, 1, 1998]


# --- settings and model -------------------------------------------------------------------

def test_settings_follow_the_variant_grid():
    settings, grid = hiv_settings(), variant_grid("HIV")
    assert settings.n_settings == 2000
    np.testing.assert_array_equal(settings.drug_penalties[:, 0], grid["drug_1_penalty"])
    np.testing.assert_array_equal(settings.drug_penalties[:, 1], grid["drug_2_penalty"])
    np.testing.assert_array_equal(settings.efficacy_noise, grid["efficacy_noise"])
    assert set(np.unique(settings.efficacy_noise)) == {0.0, 0.01}
    assert hiv_settings([5, 7]).take(np.array([1, 1])).ids.tolist() == [7, 7]
    with pytest.raises(ValueError, match="ids"):
        hiv_settings([2000])


def test_noise_model_statistics():
    """clip(e + 0.01 z, 0, 1): Gaussian around an interior efficacy, independent across the
    two drugs; half the mass stays at 0 for e = 0; exact without noise."""
    rng = np.random.default_rng(1)
    n = 40_000
    normals = rng.standard_normal((n, 2))
    noisy = noisy_efficacies(np.tile([0.7, 0.0], (n, 1)), np.full(n, 0.01), normals)
    assert stats.kstest(noisy[:, 0], stats.norm(0.7, 0.01).cdf).pvalue > 1e-3
    assert abs(np.corrcoef(noisy[:, 0], noisy[:, 1])[0, 1]) < 0.03
    zero_share = np.mean(noisy[:, 1] == 0)
    assert abs(zero_share - 0.5) < 4 * np.sqrt(0.25 / n)
    half_normal_mean = 0.01 * np.sqrt(2 / np.pi)
    assert noisy[:, 1].mean() == pytest.approx(half_normal_mean / 2, rel=0.05)
    exact = noisy_efficacies(np.tile([0.7, 0.3], (3, 1)), np.zeros(3), normals[:3])
    np.testing.assert_array_equal(exact, np.tile([0.7, 0.3], (3, 1)))


def test_simulation_noise_is_per_patient_and_step():
    """Without noise, the batched simulator is HIVTreatmentMDP.simulate_actions bit for bit;
    with noise, patients with the same plan and the same normals agree and others differ."""
    plan = np.random.default_rng(2).integers(0, 4, (3, SHORT.horizon))
    def follow(t, observations):
        return plan[:, t]
    states, actions = _simulate(SHORT, follow, 3)
    reference = SHORT.simulate_actions(plan)
    np.testing.assert_array_equal(np.log10(states), reference.observations)
    np.testing.assert_array_equal(actions, plan)
    normals = np.random.default_rng(3).standard_normal((3, SHORT.horizon, 2))
    normals[1] = normals[0]
    same_plan = np.tile(plan[:1], (3, 1))
    noisy, _ = _simulate(SHORT, lambda t, obs: same_plan[:, t], 3, (np.full(3, 0.01), normals))
    np.testing.assert_array_equal(noisy[0], noisy[1])
    assert np.all(noisy[0, 1:] != noisy[2, 1:])
    assert 0 < np.max(np.abs(np.log(noisy[0, -1] / reference.states[0, -1]))) < 0.5


def test_penalised_rewards_match_the_mdp():
    rng = np.random.default_rng(4)
    states = 10 ** rng.uniform(0, 6, (2, 5, 6))
    actions = rng.integers(0, 4, (2, 5))
    default = penalised_rewards(SHORT, states, actions, np.array([2e4, 2e3]))
    np.testing.assert_array_equal(default.ravel(),
                                  SHORT.rewards(states.reshape(-1, 6), actions.ravel()))
    penalties = np.array([[18750.0, 1850.0], [21250.0, 2150.0]])
    per_row = penalised_rewards(SHORT, states, actions, penalties[:, None, :])
    for i, p in enumerate(penalties):
        np.testing.assert_array_equal(
            per_row[i], HIVTreatmentMDP.sharma2025(drug_penalties=p).rewards(states[i], actions[i]))


# --- batched fitted Q iteration -------------------------------------------------------------

def fqi_problem(seed: int, G: int = 2, K: int = 3, n: int = 60):
    rng = np.random.default_rng(seed)
    basis = PolynomialBasis(2, [-1, -1], [1, 1])
    obs, next_obs = rng.uniform(-1, 1, (G, n, 2)), rng.uniform(-1, 1, (G, n, 2))
    actions = rng.integers(0, 3, (G, n))
    rewards = rng.normal(1.0, 2.0, (G, n))
    weights = rng.poisson(1.0, (G, K, n)).astype(float)
    return basis, obs, next_obs, actions, rewards, weights


def batched(basis, obs, next_obs, actions, rewards, weights, iterations=30, ridge=1e-3):
    G, n, _ = obs.shape
    phi = basis(obs.reshape(-1, 2)).reshape(G, n, -1)
    phi_next = basis(next_obs.reshape(-1, 2)).reshape(G, n, -1)
    return batched_fitted_q(phi, actions, rewards, phi_next, weights, 3, 0.9, iterations, ridge)


def test_batched_fqi_equals_fitted_q_iteration_on_resampled_data():
    """Expert (g, k) is fitted_q_iteration on group g's transitions repeated by its counts."""
    basis, obs, next_obs, actions, rewards, weights = fqi_problem(5)
    fit = batched(basis, obs, next_obs, actions, rewards, weights)
    for g in range(2):
        for k in range(3):
            rows = np.repeat(np.arange(60), weights[g, k].astype(int))
            data = Transitions(obs[g, rows], actions[g, rows], rewards[g, rows],
                               next_obs[g, rows], np.zeros(rows.size, bool), 3)
            reference = fitted_q_iteration(data, basis, 0.9, 30, 1e-3)
            scale = np.abs(reference.weights).max()
            np.testing.assert_allclose(fit.weights[g, k], reference.weights, rtol=0,
                                       atol=1e-10 * scale)
            assert fit.last_change[g, k] == pytest.approx(reference.last_change, rel=1e-6,
                                                          abs=1e-10 * scale)


def test_batched_fqi_is_batch_invariant_and_checks_input():
    """An expert fitted alone has the bits it has in the batch; zero weight on an action or
    negative weights are refused."""
    basis, obs, next_obs, actions, rewards, weights = fqi_problem(6)
    fit = batched(basis, obs, next_obs, actions, rewards, weights)
    alone = batched(basis, obs[1:], next_obs[1:], actions[1:], rewards[1:], weights[1:, 2:])
    np.testing.assert_array_equal(alone.weights[0, 0], fit.weights[1, 2])
    np.testing.assert_array_equal(alone.last_change[0, 0], fit.last_change[1, 2])
    dropped = weights.copy()
    dropped[0, 1, actions[0] == 2] = 0
    with pytest.raises(ValueError, match="action 2 has zero weight for expert"):
        batched(basis, obs, next_obs, actions, rewards, dropped)
    with pytest.raises(ValueError, match="sample_weights"):
        batched(basis, obs, next_obs, actions, rewards, -weights)


# --- selection ------------------------------------------------------------------------------

def test_selection_rule():
    """Best of every setting (ties to the lower candidate), then the best second-best
    across settings (ties to the lower setting), both in setting order."""
    returns = np.array([[1.0, 5.0, 3.0],    # best 1, second 2 (3.0)
                        [4.0, 4.0, 0.0],    # tie: best 0, second 1 (4.0)
                        [2.0, 9.0, 3.0],    # best 1, second 2 (3.0): ties with setting 0
                        [7.0, 0.0, 6.0]])   # best 0, second 2 (6.0)
    setting, candidate, rank = select_experts(returns, 3)
    assert setting.tolist() == [0, 1, 2, 3, 0, 1, 3]
    assert candidate.tolist() == [1, 0, 1, 0, 2, 1, 2]
    assert rank.tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert select_experts(returns, 0)[0].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="n_second_best"):
        select_experts(returns, 5)
    with pytest.raises(ValueError, match="own_returns"):
        select_experts(returns[:, :1], 1)


# --- training, the population and its data --------------------------------------------------

@pytest.fixture(scope="module")
def trained():
    settings = hiv_settings(IDS)
    experts, candidates = train_hiv_experts(SHORT, settings, TINY, np.random.default_rng(7))
    return settings, experts, candidates


def test_training_is_deterministic_and_batch_invariant(trained):
    """The same generator gives the same candidates; a setting trained alone gets the bits
    it gets among others (its own named streams, batch-invariant computations)."""
    settings, _, candidates = trained
    alone = train_candidates(SHORT, hiv_settings(IDS[1:2]), TINY, np.random.default_rng(7))
    np.testing.assert_array_equal(alone.weights[0], candidates.weights[1])
    np.testing.assert_array_equal(alone.own_returns[0], candidates.own_returns[1])
    other = train_candidates(SHORT, hiv_settings(IDS[1:2]), TINY, np.random.default_rng(8))
    assert not np.array_equal(other.weights[0], candidates.weights[1])
    assert not np.array_equal(candidates.weights[:, 0], candidates.weights[:, 1])


def test_selected_experts_form_a_population(trained):
    settings, experts, candidates = trained
    assert isinstance(experts, ExpertPopulation)
    assert (experts.n_experts, experts.n_actions) == (4, 4)
    assert experts.ranks.tolist().count(1) == 1
    best = candidates.own_returns.max(axis=1)
    np.testing.assert_array_equal(experts.own_returns[:3], best)
    second = np.sort(candidates.own_returns, axis=1)[:, -2]
    assert experts.own_returns[3] == second.max()
    np.testing.assert_array_equal(experts.settings.drug_penalties[:3], settings.drug_penalties)
    picked = experts.select(np.array([3, 0]))
    np.testing.assert_array_equal(picked.weights, experts.weights[[3, 0]])
    np.testing.assert_array_equal(picked.settings.ids, experts.settings.ids[[3, 0]])
    with pytest.raises(ValueError, match="index"):
        experts.select(np.array([4]))


def test_own_returns_of_a_noise_free_setting_are_its_greedy_episode(trained):
    """A noise-free setting's return is its greedy episode with its penalties; a noisy
    setting's changes when its noise is switched off."""
    settings, experts, candidates = trained
    mdp = HIVTreatmentMDP.sharma2025(horizon=SHORT.horizon,
                                     drug_penalties=settings.drug_penalties[0])
    def expert_0(observations, rng):
        return experts.greedy_actions(np.broadcast_to(observations, (4, 1, 6)))[0]
    episode = mdp.simulate(expert_0, 1, np.random.default_rng(0))
    assert experts.own_returns[0] == pytest.approx(episode.rewards.sum(), rel=1e-12)
    fresh = own_returns(SHORT, settings, candidates.weights, 1, 2, np.random.default_rng(7))
    np.testing.assert_array_equal(fresh, candidates.own_returns)
    quiet = HIVSettings(settings.ids, settings.drug_penalties, np.zeros(3))
    without_noise = own_returns(SHORT, quiet, candidates.weights, 1, 2, np.random.default_rng(7))
    assert settings.efficacy_noise[1] > 0 and np.all(without_noise[1] != fresh[1])
    np.testing.assert_array_equal(without_noise[[0, 2]], fresh[[0, 2]])


def test_greedy_actions_are_the_argmax_of_each_expert(trained):
    _, experts, _ = trained
    observations = np.log10(SHORT.simulate_actions(np.full((5, SHORT.horizon), 3)).states)
    points = observations.reshape(1, -1, 6)
    shared = experts.greedy_actions(points)
    own = experts.greedy_actions(np.broadcast_to(points, (4,) + points.shape[1:]))
    assert shared.shape == own.shape == (4, points.shape[1]) and shared.dtype == np.int64
    np.testing.assert_array_equal(shared, own)
    for i in range(4):
        q = action_values(experts.weights[i], q_features(1), points[0])
        np.testing.assert_array_equal(shared[i], np.argmax(q, axis=1))
    with pytest.raises(ValueError, match="observations"):
        experts.greedy_actions(points[:, :, :5])
    with pytest.raises(ValueError, match="observations"):
        experts.greedy_actions(np.concatenate([points, points]))


def test_default_returns_and_trajectories(trained):
    """Fig. 2's returns are each expert's greedy episode on the default setting; the p_min
    trajectories have the paper's shapes, their recorded probabilities are App. B.1's levels
    of the greedy actions at the recorded states, and an expert's trajectories do not depend
    on the other experts."""
    _, experts, _ = trained
    returns = default_returns(experts, SHORT)
    single = experts.select(np.array([2]))
    episode = SHORT.simulate(lambda obs, rng: single.greedy_actions(obs[None])[0], 1,
                             np.random.default_rng(0))
    assert returns[2] == pytest.approx(episode.rewards.sum(), rel=1e-12)
    rngs = [np.random.default_rng(10 + i) for i in range(4)]
    data = record_trajectories(experts, SHORT, 3, rngs)
    H = SHORT.horizon
    assert data.observations.shape == (4, 3, H + 1, 6)
    assert data.actions.shape == data.rewards.shape == (4, 3, H)
    greedy = np.stack([experts.greedy_actions(data.observations[:, :, t]) for t in range(H)], -1)
    high, low = pmin_levels(4, 0.02)
    np.testing.assert_array_equal(data.behaviour_probabilities,
                                  np.where(data.actions == greedy, high, low))
    assert 0.8 < np.mean(data.actions == greedy) < 1.0
    alone = record_trajectories(single, SHORT, 3, [np.random.default_rng(12)])
    np.testing.assert_array_equal(alone.observations[0], data.observations[2])
    np.testing.assert_array_equal(alone.rewards[0], data.rewards[2])
    with pytest.raises(ValueError, match="rngs"):
        record_trajectories(experts, SHORT, 3, rngs[:3])
