"""Sharma et al. (2025), App. B.1 experts: the p_min modification (distribution tests), the
policy networks (against a plain matrix product), the cross-entropy method on the CartPole
twin (against Gymnasium, determinism, selection), the recorded data sets (per-expert streams),
and the accounting of expert- against trajectory-level DP-SGD."""

import math

import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from scipy.stats import chisquare

from dprl.accounting.epsilon import poisson_subsampled_gaussian_epsilon
from dprl.accounting.pld import poisson_gaussian_epsilon
from dprl.envs.cartpole import CartPoleVariants
from dprl.seeding import trial_generators
from dprl.sharma2025.cem import CEMSettings, episode_returns, train_experts
from dprl.sharma2025.datasets import record
from dprl.sharma2025.expert_level import aligned_group_epsilon, group_privacy
from dprl.sharma2025.experts import (ExpertPopulation, pmin_levels, pmin_log_probabilities,
                                     sample_pmin_actions)
from dprl.sharma2025.mlp_policies import TanhPolicies, n_parameters
from dprl.sharma2025.variants import DEFAULTS, variant_grid


@pytest.mark.parametrize("n_actions", [2, 3, 4])
def test_pmin_actions_follow_the_modified_expert_distribution(n_actions):
    rng = np.random.default_rng(n_actions)
    greedy = rng.integers(0, n_actions, 200_000)
    actions = sample_pmin_actions(greedy, n_actions, 0.02, rng)
    high, low = pmin_levels(n_actions, 0.02)
    for g in range(n_actions):
        counts = np.bincount(actions[greedy == g], minlength=n_actions)
        expected = np.full(n_actions, low) * counts.sum()
        expected[g] = high * counts.sum()
        assert chisquare(counts, expected).pvalue > 1e-3


def test_pmin_log_probabilities_and_levels():
    assert pmin_levels(4, 0.02) == pytest.approx((0.94, 0.02))
    logp = pmin_log_probabilities(np.array([[0, 1], [2, 2]]), np.array([0, 2]), 3, 0.02)
    np.testing.assert_allclose(np.exp(logp), [[0.96, 0.02], [0.02, 0.96]])
    for bad in (dict(n_actions=4, p_min=0.3), dict(n_actions=1, p_min=0.02),
                dict(n_actions=3, p_min=-0.1)):
        with pytest.raises(ValueError):
            pmin_levels(**bad)
    with pytest.raises(ValueError, match="greedy"):
        pmin_log_probabilities(np.array([3]), np.array([0]), 3, 0.02)


def test_policy_logits_equal_a_matrix_product():
    rng = np.random.default_rng(0)
    d, h, a, m = 6, 16, 3, 5
    params = rng.normal(size=(m, n_parameters(d, h, a)))
    nets = TanhPolicies(params, d, h, a)
    assert isinstance(nets, ExpertPopulation)
    obs = rng.normal(size=(m, 7, d))
    w1 = params[:, :d * h].reshape(m, d, h)
    b1 = params[:, d * h:d * h + h]
    w2 = params[:, d * h + h:d * h + h + h * a].reshape(m, h, a)
    b2 = params[:, -a:]
    expected = np.stack([np.tanh(obs[i] @ w1[i] + b1[i]) @ w2[i] + b2[i] for i in range(m)])
    np.testing.assert_allclose(nets.logits(obs), expected, rtol=1e-12, atol=1e-12)
    shared = nets.logits(obs[:1])
    np.testing.assert_allclose(shared[3], np.tanh(obs[0] @ w1[3] + b1[3]) @ w2[3] + b2[3],
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="observations"):
        nets.logits(obs[:2])
    with pytest.raises(ValueError, match="parameters"):
        TanhPolicies(params[:, 1:], d, h, a)


def test_episode_returns_match_gymnasium_for_an_always_right_policy():
    params = np.zeros((1, n_parameters(4, 2, 2)))
    params[0, -1] = 1.0                                     # logit of "push right"
    starts = np.random.default_rng(3).uniform(-0.05, 0.05, (1, 4, 4))
    returns = episode_returns(CartPoleVariants, {"gravity": np.array([9.8])},
                              TanhPolicies(params, 4, 2, 2), starts, 200)
    for episode, start in enumerate(starts[0]):
        env = CartPoleEnv()
        env.reset(seed=0)
        env.unwrapped.state = start.copy()
        steps, done = 0, False
        while not done and steps < 200:
            done = env.step(1)[2]
            steps += 1
        assert returns[0, episode] == steps


def test_cem_is_deterministic_keeps_the_best_and_learns():
    grid = variant_grid("CartPole")
    settings = {name: values[[0, 555]] for name, values in grid.items()}
    cem = CEMSettings(iterations=6, population=12, elite=3, episodes=2, runs=3, keep=2,
                      eval_episodes=3)
    first = train_experts(CartPoleVariants, 4, 2, settings, trial_generators(5, 2), cem,
                          DEFAULTS["CartPole"])
    again = train_experts(CartPoleVariants, 4, 2, settings, trial_generators(5, 2), cem,
                          DEFAULTS["CartPole"])
    for name in first:
        assert np.array_equal(first[name], again[name])
    assert first["parameters"].shape == (2, 2, n_parameters(4, 16, 2))
    assert np.all(np.diff(first["own_returns"], axis=1) <= 0)
    assert np.all((1 <= first["budgets"]) & (first["budgets"] <= 6))
    prior = TanhPolicies(np.random.default_rng(1).normal(size=(40, first["parameters"].shape[2])),
                         4, 16, 2)
    starts = np.random.default_rng(2).uniform(-0.05, 0.05, (40, 3, 4))
    random_mean = episode_returns(CartPoleVariants, {"gravity": np.full(40, 9.8)}, prior,
                                  starts, 200).mean()
    assert first["own_returns"][:, 0].min() > 2 * random_mean


def test_converged_runs_train_every_iteration_and_beat_the_weakened_ones():
    """budgets="full": every run trains all iterations (App. B.1's fully trained agents);
    on the same settings its kept experts return at least as much on their own variant as
    the same runs stopped at random budgets, whose budgets lie in 1 .. iterations."""
    grid = variant_grid("CartPole")
    settings = {name: values[[3, 707]] for name, values in grid.items()}
    common = dict(iterations=6, population=12, elite=3, runs=3, keep=2, eval_episodes=3)
    out = {budgets: train_experts(CartPoleVariants, 4, 2, settings, trial_generators(8, 2),
                                  CEMSettings(budgets=budgets, **common), DEFAULTS["CartPole"])
           for budgets in ("random", "full")}
    assert np.all(out["full"]["budgets"] == 6)
    assert out["random"]["budgets"].min() >= 1 and out["random"]["budgets"].max() <= 6
    assert out["full"]["own_returns"].mean() >= out["random"]["own_returns"].mean()
    assert np.array_equal(out["full"]["curves"], out["random"]["curves"])  # the same training
    with pytest.raises(ValueError, match="budgets"):
        CEMSettings(budgets="some")


def test_converged_populations_are_registered_beside_the_first_ones():
    from dprl.engine.registry import get
    from dprl.experiments.sharma2025.release import ReleaseConfig

    for env in ("cartpole", "acrobot"):
        experts = get(f"sharma2025-{env}-experts-converged").config("paper")
        assert (experts.cem.budgets, experts.cem.runs, experts.cem.keep) == ("full", 8, 3)
        first, converged = (get(f"sharma2025-{env}-release{end}").config("paper")
                            for end in ("", "-converged"))
        assert (first.converged, converged.converged) == (False, True)
        assert {f: getattr(first, f) for f in ("cells", "root_seed", "data_seed")} == {
            f: getattr(converged, f) for f in ("cells", "root_seed", "data_seed")}
    with pytest.raises(ValueError, match="converged"):
        ReleaseConfig(n_trials=1, root_seed=0, env="HIV", cells=(), data_seed=0,
                      converged=True)


def test_recorded_data_are_per_expert_streams_and_respect_termination():
    rng = np.random.default_rng(0)
    nets = TanhPolicies(rng.normal(size=(4, n_parameters(4, 16, 2))), 4, 16, 2)
    env = CartPoleVariants(horizon=60)
    data = record(env, nets, range(4), 5, 0.02, np.random.default_rng(9))
    alone = record(env, TanhPolicies(nets.parameters[2:3], 4, 16, 2), [2], 5, 0.02,
                   np.random.default_rng(9))
    assert np.array_equal(alone.observations[0], data.observations[2])
    assert np.array_equal(alone.actions[0], data.actions[2])
    steps = np.arange(60)
    alive = steps[None, None, :] < data.lengths[..., None]
    assert np.all(data.rewards[~alive] == 0) and np.all(data.rewards[alive] == 1)
    assert np.all(data.terminated == (data.lengths < 60))
    ends = data.observations[np.arange(4)[:, None], np.arange(5)[None, :], data.lengths]
    assert np.array_equal(ends, data.observations[:, :, -1])
    greedy = nets.greedy_actions(data.observations[:, :, :-1].reshape(4, -1, 4)).reshape(4, 5, 60)
    agree = (greedy == data.actions)[alive].mean()
    assert 0.95 < agree <= 1.0


def test_expert_level_accounting():
    assert group_privacy(0.5, 1e-6, 3) == pytest.approx((1.5, 3 * math.exp(1.0) * 1e-6))
    pld = poisson_gaussian_epsilon(1.0, 0.01, 1000, 1e-5)
    rdp = poisson_subsampled_gaussian_epsilon(1.0, 0.01, 1000, 1e-5)
    assert pld < rdp < 1.5 * pld        # PLD is tighter than the book's RDP accountant
    lower = aligned_group_epsilon(1.0, 0.01, 1, 1000, 1e-5)
    assert 0.9 * pld < lower <= pld     # k = 1 is the Poisson-Gaussian pair itself
    assert aligned_group_epsilon(1.0, 0.01, 3, 1000, 1e-5) > 2 * lower
    with pytest.raises(ValueError, match="delta"):
        group_privacy(1.0, 1.5, 2)
    with pytest.raises(ValueError, match="sampling_rate"):
        poisson_gaussian_epsilon(1.0, 0.0, 10, 1e-5)


def test_picked_trajectories_equal_their_place_among_all_of_an_experts():
    from dprl.envs.hiv import HIVTreatmentMDP
    from dprl.sharma2025.hiv_experts import HIVExperts
    from dprl.sharma2025.hiv_settings import hiv_settings
    from dprl.sharma2025.hiv_experts import record_trajectories as record_hiv
    from dprl.sharma2025.lander_experts import (HEURISTIC_PARAMETERS, LanderControllers,
                                                record_trajectories as record_lander)

    rng = np.random.default_rng(1)
    picks = np.array([3, 0])
    nets = TanhPolicies(rng.normal(size=(2, n_parameters(4, 16, 2))), 4, 16, 2)
    full = record(CartPoleVariants(horizon=40), nets, [5, 9], 4, 0.02, rng)
    one = record(CartPoleVariants(horizon=40), nets, [5, 9], 4, 0.02, rng, picks)
    lander = LanderControllers(np.stack([HEURISTIC_PARAMETERS, 0.5 * HEURISTIC_PARAMETERS]))
    lander_full = record_lander(lander, [5, 9], 4, 60, 0.02, rng)
    lander_one = record_lander(lander, [5, 9], 4, 60, 0.02, rng, picks)
    hiv = HIVExperts(rng.normal(size=(2, 4, 28)), 2, hiv_settings(np.array([0, 1])),
                     np.zeros(2, dtype=np.int64), np.zeros(2))
    mdp = HIVTreatmentMDP.sharma2025(horizon=5)
    streams = lambda: [np.random.default_rng(s) for s in (5, 9)]  # noqa: E731
    hiv_full = record_hiv(hiv, mdp, 4, streams())
    hiv_one = record_hiv(hiv, mdp, 4, streams(), picks=picks)
    for whole, picked in ((full, one), (lander_full, lander_one), (hiv_full, hiv_one)):
        for name in ("observations", "actions", "rewards", "lengths"):
            assert np.array_equal(getattr(whole, name)[[0, 1], picks],
                                  getattr(picked, name)[:, 0])
    with pytest.raises(ValueError, match="picks"):
        record(CartPoleVariants(horizon=40), nets, [5, 9], 4, 0.02, rng, np.array([4, 0]))
