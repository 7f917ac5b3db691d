"""Sec. 6 / App. C of Xie et al. (2019) as computable quantities."""

import numpy as np
import pytest

from dprl.envs import ChainMDP, OffPolicyChain
from dprl.features import aggregation_features, tabular_features
from dprl.xie2019 import gradient_norms
from dprl.xie2019.baselines import episode_statistics
from dprl.xie2019.utility import (assumption1_c, contraction_norm, gradient_variances,
                                  lemma2_eigenvalues, noise_second_moment, printed_noise_term,
                                  saddle_matrix, saddle_point, theorem2_terms, theorem3_terms)


@pytest.fixture(scope="module")
def chain_statistics():
    mdp = ChainMDP(n_states=6, gamma=0.9)
    data = mdp.sample(300, np.random.default_rng(0))
    features = aggregation_features(6, 2)
    return mdp, data, features, episode_statistics(data, features, mdp.gamma)


def test_saddle_point_zeroes_the_gradient(chain_statistics):
    _, _, _, (A, b, C) = chain_statistics
    theta, w = saddle_point(A, b, C)
    gradient = saddle_matrix(A, C) @ np.concatenate([theta, w]) - np.concatenate(
        [np.zeros(3), b])
    np.testing.assert_allclose(gradient, 0, atol=1e-12)
    np.testing.assert_allclose(theta, np.linalg.solve(A, b), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(w, 0, atol=1e-12)  # so the dual optimum is 0


def test_lemma2_bound_on_the_chain_and_its_scalar_counterexample(chain_statistics):
    _, _, _, (A, _, C) = chain_statistics
    values = lemma2_eigenvalues(A, C)
    assert values["min_real"] >= values["bound"] > 0
    # n = 1: Q = [[0, -a], [a, c]] has real part c / 2 once 4 a^2 > c^2, below 8/9 a^2 / c
    # as soon as a > 3c/4
    for a, holds in ((0.7, True), (0.8, False), (2.0, False)):
        values = lemma2_eigenvalues([[a]], [[1.0]])
        assert (values["min_real"] >= values["bound"]) is holds
        if 4 * a**2 > 1:
            assert values["min_real"] == pytest.approx(0.5)


def test_contraction_norm_exceeds_one(chain_statistics):
    _, _, _, (A, _, C) = chain_statistics
    Q = saddle_matrix(A, C)
    for beta in (1e-3, 0.1, 1.0):
        norm = contraction_norm(A, C, beta)
        assert norm > 1
        theta = np.linalg.svd(A)[2][0]  # the top right singular vector of A
        xi = np.concatenate([theta, np.zeros(3)])
        grown = np.linalg.norm((np.eye(6) - beta * Q) @ xi) ** 2
        assert grown == pytest.approx(1 + beta**2 * np.linalg.norm(A @ theta) ** 2)
    assert np.abs(np.linalg.eigvals(np.eye(6) - 0.1 * Q)).max() < 1  # the radius is < 1


def test_noise_terms():
    rng = np.random.default_rng(1)
    n, h, sigma = 3, 0.5, 2.0
    samples = h * sigma * rng.standard_normal((200_000, 2 * n))
    empirical = (samples**2).sum(axis=1).mean()
    assert empirical == pytest.approx(noise_second_moment(n, h, sigma), rel=0.01)
    assert printed_noise_term(n, h, sigma) == pytest.approx(2 * n * h**4 * sigma**4)
    assert printed_noise_term(n, 1.0, 1.0) == noise_second_moment(n, 1.0, 1.0)
    assert assumption1_c(2.0, 10, 4) == 50.0


def test_theorem_terms_by_hand():
    term1, term2 = theorem2_terms(xi1=2.0, eta=0.5, k=0.5, n_iterations=100, lam=0.1,
                                  variance=3.0)
    beta = 0.05
    c0 = beta * 3.0 / (2 * 0.1 - beta * 0.01)
    assert term2 == pytest.approx(c0)
    assert term1 == pytest.approx((1 - beta * 0.1) ** 200 * (2.0 - c0))
    terms = theorem3_terms(xi1=1.0, eta=2.0, n_iterations=50, lam=0.5, g2=0.1, c=3.0, m=10)
    scale = 4 / (1 * 0.25)
    assert terms["bound"] == pytest.approx(max(1.0, scale * (0.1 + 3.0 * 50 / 100)) / 50)
    assert terms["term_III"] == pytest.approx(max(1.0, scale * 0.1) / 50)
    assert terms["term_IV_statement"] == pytest.approx(scale * 3.0 / 100)
    assert terms["term_IV_proof"] == pytest.approx(terms["term_IV_statement"] * 100)
    assert terms["bound"] <= terms["term_III"] + terms["term_IV_statement"] + 1e-15


def test_theorem_preconditions():
    with pytest.raises(ValueError, match="1 / lambda_min"):
        theorem2_terms(1.0, eta=20.0, k=0.5, n_iterations=100, lam=1.0, variance=1.0)
    with pytest.raises(ValueError, match="eta > 1"):
        theorem3_terms(1.0, eta=1.0, n_iterations=10, lam=1.0, g2=0.0, c=0.0, m=1)
    with pytest.raises(ValueError, match="k"):
        theorem2_terms(1.0, eta=0.1, k=1.0, n_iterations=100, lam=1.0, variance=1.0)
    with pytest.raises(ValueError, match="positive definite"):
        lemma2_eigenvalues(np.eye(2), -np.eye(2))
    with pytest.raises(ValueError, match="square"):
        saddle_matrix(np.ones((2, 3)), np.eye(2))


def test_gradient_variances_match_a_direct_computation():
    chain = OffPolicyChain(ChainMDP(n_states=5, gamma=0.9))
    data, ratios = chain.sample((2, 40), np.random.default_rng(2))
    features = tabular_features(5)
    rng = np.random.default_rng(3)
    theta, w = rng.standard_normal(5), rng.standard_normal(5)
    values = gradient_variances(data, features, 0.9, theta, w, ratios)
    for d in range(2):
        A, b, C = episode_statistics(data, features, 0.9, ratios)
        full = saddle_matrix(A[d], C[d]) @ np.concatenate([theta, w]) - np.concatenate(
            [np.zeros(5), b[d]])
        per_trajectory, per_transition = [], []
        for i in range(40):
            L = data.lengths[d, i]
            steps = []
            for t in range(L):
                s, nxt = data.states[d, i, t], data.states[d, i, t + 1]
                phi = features[s]
                phi_next = 0 * phi if (t == L - 1 and data.terminated[d, i]) else features[nxt]
                rho, r = ratios[d, i, t], data.rewards[d, i, t]
                a = rho * np.outer(phi, phi - 0.9 * phi_next)
                steps.append(np.concatenate([-a.T @ w, a @ theta + np.outer(phi, phi) @ w
                                             - rho * r * phi]))
            steps = np.array(steps)
            per_trajectory.append(steps.mean(axis=0))
            per_transition.append(((steps - full) ** 2).sum(axis=1).mean())
        per_trajectory = np.array(per_trajectory)
        np.testing.assert_allclose(per_trajectory.mean(axis=0), full, atol=1e-12)
        assert values["trajectory"][d] == pytest.approx(
            ((per_trajectory - full) ** 2).sum(axis=1).mean())
        assert values["transition"][d] == pytest.approx(np.mean(per_transition))
        assert values["mean_inverse_length"][d] == pytest.approx(np.mean(1 / data.lengths[d]))
    norms = gradient_norms(data, features, 0.9, theta, w, ratios)
    assert norms.shape == (2, 40)


def test_moment_recursion_matches_the_exact_recursion_and_its_closed_form(chain_statistics):
    from dprl.xie2019.utility import MomentRecursion, expected_squared_errors
    mdp, data, features, _ = chain_statistics
    data = data.first(60)
    recursion = MomentRecursion(data, features, mdp.gamma)
    steps = np.linspace(0.4, 0.05, 150)
    exact = expected_squared_errors(data, features, mdp.gamma, steps, 0.3)["error"]
    assert recursion.start_error == pytest.approx(exact[0], rel=1e-12)
    assert recursion.error_after(steps, 0.3) == pytest.approx(exact[-1], rel=1e-9)
    constant = expected_squared_errors(data, features, mdp.gamma, np.full(200, 0.1), 0.3)
    assert recursion.constant_step_error(0.1, 200, 0.3) == pytest.approx(
        constant["error"][-1], rel=1e-9)
    assert recursion.constant_step_error(1e3, 200, 0.3) == np.inf  # explodes
    with pytest.raises(ValueError, match="step"):
        recursion.error_after(np.array([0.1, -0.1]), 0.3)


def test_shifted_theorem3_steps():
    from dprl.xie2019.utility import shifted_theorem3_steps
    steps = shifted_theorem3_steps(0.5, 1000, 0.01, eta=2.0)
    assert steps[0] == 0.5
    i0 = 2.0 / (0.01 * 0.5)
    np.testing.assert_allclose(steps, 2.0 / (0.01 * (np.arange(1000) + i0)), rtol=1e-12)
    with pytest.raises(ValueError, match="eta"):
        shifted_theorem3_steps(0.5, 10, 0.01, eta=0.0)


def test_moment_recursion_runs_schedules_side_by_side(chain_statistics):
    from dprl.xie2019.utility import MomentRecursion
    mdp, data, features, _ = chain_statistics
    recursion = MomentRecursion(data.first(60), features, mdp.gamma)
    long, short = np.linspace(0.4, 0.05, 150), np.full(90, 0.2)
    padded = np.column_stack([long, np.append(short, np.zeros(60))])
    together = recursion.error_after(padded, np.array([0.3, 0.7]))
    assert together.shape == (2,)
    assert together[0] == pytest.approx(recursion.error_after(long, 0.3), rel=1e-12)
    assert together[1] == pytest.approx(recursion.error_after(short, 0.7), rel=1e-12)
    with pytest.raises(ValueError, match="step"):
        recursion.error_after(np.zeros((5, 2)), 0.3)
    with pytest.raises(ValueError, match="noise_std"):
        recursion.error_after(padded, np.array([0.3, -0.1]))


def test_schedule_experiment_calibrates_where_the_general_bound_certifies_nothing():
    """Many passes over the data (N = 100 m): WBK Thm. 9 certifies eps = 0.1 at no sigma, the
    tightest accountant (Thm. 27) does, and the experiment uses it."""
    from dprl.xie2019 import gpope_sigma, tightest_epsilon, tightest_sigma
    with pytest.raises(ValueError):
        gpope_sigma(0.1, 1e-5, 100_000, 1000)  # N times the WBK floor exceeds eps
    sigma = tightest_sigma(0.1, 1e-5, 100_000, 1000)
    assert 0.1 * (1 - 1e-6) < tightest_epsilon(sigma, 1e-5, 100_000, 1000) <= 0.1
