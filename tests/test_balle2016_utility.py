"""Tests of dprl.balle2016.utility (Balle et al. 2016, Sec. 5, Appendices D-E)."""

import numpy as np
import pytest

from dprl import balle2016 as b
from dprl.balle2016 import utility as u
from dprl.envs import ChainMDP
from dprl.features import tabular_features

PHI = tabular_features(2)
W = np.array([0.5, 0.5])
P = np.array([0.5, 1.0])


def _c2(eps=1.0, delta=0.1, f_max=1.0):
    alpha, _ = b.smoothing_constants(eps, delta, 2)
    # ||(Gamma^{1/2} Phi)^+|| = 1/sqrt(0.5); ||Gamma^{1/2} Phi||_F^2 = 1
    return (alpha * f_max / np.sqrt(0.5)) ** 2


def test_theorem11_hand_value():
    _, beta = b.smoothing_constants(1.0, 0.1, 2)
    m = 10
    terms = [6 * (1 / (p**2 * m**2) + beta**2 * (1 - beta * p / 2) ** m) for p in P]
    want = _c2() * 0.5 * sum(terms)
    got = u.lsw_excess_risk_bound(PHI, W, P, m, 1.0, 0.1, 1.0)
    assert got == pytest.approx(want, rel=1e-12)


def test_unvisited_states_contribute_their_weight():
    p = np.array([0.0, 1.0])
    got = u.lsw_excess_risk_bound(PHI, W, p, 10**9, 1.0, 0.1, 1.0)
    assert got == pytest.approx(_c2() * 0.5, rel=1e-6)


@pytest.mark.parametrize("form", u.BOUND_FORMS)
def test_bounds_decrease_in_m(form):
    ms = np.array([1, 10, 100, 1000, 10**4, 10**5])
    values = u.lsw_excess_risk_bound(PHI, W, P, ms, 1.0, 0.1, 1.0, form=form)
    assert values.shape == ms.shape and np.all(np.diff(values) < 0)


def test_theorem26_below_theorem11_and_corrected_above_theorem26():
    ms = np.array([5, 50, 500])
    t11 = u.lsw_excess_risk_bound(PHI, W, P, ms, 1.0, 0.1, 1.0)
    t26 = u.lsw_excess_risk_bound(PHI, W, P, ms, 1.0, 0.1, 1.0, form="theorem26")
    fix = u.lsw_excess_risk_bound(PHI, W, P, ms, 1.0, 0.1, 1.0, form="corrected")
    assert np.all(t26 <= t11) and np.all(fix >= t26)


@pytest.mark.parametrize("kwargs", [dict(m=0), dict(m=2.5), dict(m=-3),
                                    dict(form="lemma23"), dict(eps=-1.0), dict(delta=2.0),
                                    dict(return_bound=0.0), dict(p=np.array([0.5, 1.5])),
                                    dict(p=np.array([0.5])), dict(eps=1e3)])
def test_bad_inputs(kwargs):
    args = dict(m=10, form="theorem11", eps=1.0, delta=0.1, return_bound=1.0, p=P)
    args.update(kwargs)
    with pytest.raises(ValueError):
        u.lsw_excess_risk_bound(PHI, W, args["p"], args["m"], args["eps"], args["delta"],
                                args["return_bound"], form=args["form"])


def test_corrected_bound_dominates_simulation():
    mdp = ChainMDP(n_states=6)
    phi, w = tabular_features(6), mdp.start_probabilities
    data = b.first_visit_data(mdp.sample((200, 40), np.random.default_rng(0)), mdp.gamma, 6,
                              1.0)
    sim = u.lsw_expected_excess_risk(data, phi, w, 1.0, 0.1).mean()
    bound = u.lsw_excess_risk_bound(phi, w, mdp.state_visit_probabilities(), 40, 1.0, 0.1,
                                    data.return_bound, form="corrected")
    assert bound >= sim


def test_expected_excess_matches_monte_carlo_over_noise():
    mdp = ChainMDP(n_states=6)
    phi, w = tabular_features(6), mdp.start_probabilities
    data = b.first_visit_data(mdp.sample(30, np.random.default_rng(1)), mdp.gamma, 6, 1.0)
    theta = b.lsw(data, phi, w)
    exact = u.lsw_expected_excess_risk(data, phi, w, 1.0, 0.1)
    sigma = b.dp_lsw_noise_scale(data, phi, w, 1.0, 0.1)
    eta = sigma * np.random.default_rng(2).standard_normal((20000, 6))
    excess = (w * (phi @ eta.T).T ** 2).sum(axis=1)  # eta^T Phi^T Gamma Phi eta
    j0 = b.weighted_objective(data, phi, w, theta)
    assert b.weighted_objective(data, phi, w, theta + eta[0]) - j0 == pytest.approx(excess[0])
    assert excess.mean() == pytest.approx(exact, rel=0.05)
    rho, lam = mdp.start_probabilities, 3.0
    theta = b.lsl(data, phi, rho, lam)
    exact = u.lsl_expected_excess_risk(data, phi, rho, lam, 1.0, 0.1)
    sigma = b.dp_lsl_noise_scale(data, phi, rho, lam, 1.0, 0.1)
    eta = sigma * np.random.default_rng(3).standard_normal((4000, 6))
    stack = b.first_visit_data(mdp.sample(30, np.random.default_rng(1)), mdp.gamma, 6, 1.0)
    j = np.array([b.ridge_objective(stack, phi, rho, lam, theta + e) for e in eta[:400]])
    j0 = b.ridge_objective(stack, phi, rho, lam, theta)
    assert (j - j0).mean() == pytest.approx(exact, rel=0.2)


def test_corollary13_rate():
    assert u.corollary13_rate(2.0, 4) == pytest.approx(1 / 8 + 1 / 4 + 4 / 8)
    assert np.all(np.diff(u.corollary13_rate(np.array([1.0, 10.0, 100.0]), 10)) < 0)
    for lam, m in [(0.0, 10), (1.0, 0), (-1.0, 5)]:
        with pytest.raises(ValueError):
            u.corollary13_rate(lam, m)


def test_excess_risk_of_a_release_is_the_objective_gap():
    """J^w(theta_hat) - J^w(theta^w) and J^lambda(theta_hat) - J^lambda(theta^lambda), by the
    quadratic form, equal the differences of the objectives evaluated directly."""
    from dprl.features import aggregation_features

    mdp = ChainMDP(n_states=8, horizon=30)
    data = b.first_visit_data(mdp.sample((3, 40), np.random.default_rng(7)), mdp.gamma, 8, 1.0)
    rho, Phi, lam = mdp.start_probabilities, aggregation_features(8, 2), 0.7
    theta_hat = np.random.default_rng(8).normal(size=(3, 4))
    gap = (b.weighted_objective(data, Phi, rho, theta_hat)
           - b.weighted_objective(data, Phi, rho, b.lsw(data, Phi, rho)))
    assert np.allclose(u.lsw_excess_risk(data, Phi, rho, theta_hat), gap, rtol=1e-10)
    gap = (b.ridge_objective(data, Phi, rho, lam, theta_hat)
           - b.ridge_objective(data, Phi, rho, lam, b.lsl(data, Phi, rho, lam)))
    assert np.allclose(u.lsl_excess_risk(data.summary, Phi, rho, lam, theta_hat), gap,
                       rtol=1e-10)
    with pytest.raises(ValueError, match="theta_hat"):
        u.lsw_excess_risk(data, Phi, rho, theta_hat[:, :3])


def _bracket_by_loops(phi, rho, p, joint, lam, m, beta):
    """Theorem 32's braces term by term, with plain loops (the reference)."""
    n, d = phi.shape
    big = np.linalg.norm(phi, 2) ** 2 * max(rho) ** 2
    rho2 = sum(r * r for r in rho)
    phi2 = [float(phi[s] @ phi[s]) for s in range(n)]
    total = sum(rho[s] * p[s] * (d * big / 2 + 2 * rho2 * phi2[s]) for s in range(n))
    total += lam * d * rho2 / m
    total += d * big / (4 * np.e * beta) * sum(rho[s] * (1 - p[s]) ** m for s in range(n)) / m
    total += m / lam * big * sum(rho[s] * rho[t] * p[s] * p[t] * phi2[s]
                                 for s in range(n) for t in range(n))
    inner = sum(rho[s] ** 2 * phi2[s] * (p[s] - p[s] ** 2) for s in range(n))
    inner += sum(rho[s] * rho[t] * phi2[s] * (joint[s, t] - p[s] * p[t] + (p[s] - joint[s, t])
                                              * (1 - p[t]) ** (m - 1) / (2 * np.e * beta))
                 for s in range(n) for t in range(n) if s != t)
    return total + big / lam * inner


def test_theorem32_bracket_matches_the_printed_formula_term_by_term():
    rng = np.random.default_rng(4)
    phi, rho = rng.random((5, 3)), rng.random(5)
    p = rng.uniform(0.2, 0.6, 5)
    joint = np.minimum.outer(p, p) * 0.5
    np.fill_diagonal(joint, p)
    lam = 2 * np.linalg.norm(phi, 2) ** 2 * rho.max()
    assert u.theorem32_bracket(phi, rho, p, joint, lam, 40, 0.05) == pytest.approx(
        _bracket_by_loops(phi, rho, p, joint, lam, 40, 0.05), rel=1e-12)
    with pytest.raises(ValueError, match="diagonal"):
        u.theorem32_bracket(phi, rho, p, joint * 0.5, lam, 40, 0.05)


def test_theorem32_fails_on_one_step_trajectories():
    """The counterexample of the errata: 10 states, one-step trajectories from a uniform
    start, Phi = I, rho = 1, lambda = 2, m = 500, eps = delta = 0.1."""
    n, m, lam = 10, 500, 2.0
    phi, rho, p = np.eye(n), np.ones(n), np.full(n, 0.1)
    _, beta = b.smoothing_constants(0.1, 0.1, n)
    bracket = u.theorem32_bracket(phi, rho, p, np.diag(p), lam, m, beta)
    counts = np.random.default_rng(0).multinomial(m, p, size=500)
    true = u.lsl_risk_over_c2(counts, phi, rho, lam, m, beta)
    assert bracket == pytest.approx(275.4, abs=0.05)
    assert true.min() > 2 * bracket


def test_lsl_risk_over_c2_is_the_expected_excess_risk_over_c_lambda_squared():
    mdp = ChainMDP(n_states=6)
    phi, rho, lam, eps, delta = tabular_features(6), mdp.start_probabilities, 3.0, 1.0, 0.1
    data = b.first_visit_data(mdp.sample((4, 30), np.random.default_rng(1)), mdp.gamma, 6, 1.0)
    alpha, beta = b.smoothing_constants(eps, delta, 6)
    c_lambda = 2 * alpha * data.return_bound * np.linalg.norm(phi, 2) / (
        lam - np.linalg.norm(phi, 2) ** 2 * rho.max())
    assert np.allclose(u.lsl_risk_over_c2(data.counts, phi, rho, lam, 30, beta) * c_lambda**2,
                       u.lsl_expected_excess_risk(data, phi, rho, lam, eps, delta), rtol=1e-12)
