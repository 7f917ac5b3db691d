"""Calibration of Wang & Hegde (2019): Prop. 4, Lemma 6's norm, Theorem 5 (both sigma
variants, exact accounting showing which is right), Lemma 8, the composition baselines."""

import math

import numpy as np
import pytest
from scipy import stats

from dprl.accounting import advanced_composition
from dprl.mechanisms import gaussian_sigma
from dprl.wang2019.baselines import dp_sgd_updates
from dprl.wang2019.calibration import (LEMMA8_CONSTANT, READINGS, advanced_composition_sigma,
                                       authors_calibration, calibrate_theorem5,
                                       dqn_calibration, exact_composition_delta, gp_mechanism,
                                       gp_mechanism_sigma, kov13_sigma, lemma6_norm_bound,
                                       lemma8_offset, lemma8_tail_bound, ou_rkhs_norm_squared,
                                       ou_whiten, sample_path_maxima, theorem5_beta,
                                       theorem5_composition_sigma, theorem5_constant,
                                       theorem5_delta, theorem5_premises, theorem5_sigma)
from dprl.wang2019.functional_noise import OUPath, ou_kernel
from dprl.wang2019.q_learning import ALGORITHM1, AUTHORS_DQN

#: A Theorem 5 setting: eps, delta, T, B, alpha, k, L.
SETTING = (0.9, 5e-5, 39 * 128, 128, 0.01, 138.8, 1.0)


def test_gp_mechanism_sigma_by_hand():
    assert gp_mechanism_sigma(2.0, 0.5, 1e-5) == pytest.approx(
        math.sqrt(2 * math.log(1.25e5)) * 4)
    assert gp_mechanism_sigma(2.0, 0.5, 1e-5, source="hall2013") == pytest.approx(
        math.sqrt(2 * math.log(2e5)) * 4)
    assert gp_mechanism_sigma(2.0, 0.5, 1e-5) == pytest.approx(gaussian_sigma(2.0, 0.5, 1e-5))


def test_gp_mechanism_releases_f_plus_one_consistent_path():
    released = gp_mechanism(np.sin, 0.5, 0.5, 1e-3, 3.0, np.random.default_rng(2))
    sigma = gp_mechanism_sigma(0.5, 0.5, 1e-3)
    noise = OUPath(sigma, 3.0, np.random.default_rng(2))
    x = np.array([0.1, 0.4, 0.1])
    np.testing.assert_allclose(released(x), np.sin(x) + noise(x))
    np.testing.assert_allclose(released(0.4), np.sin(0.4) + noise(0.4))


def test_rkhs_norm_of_kernel_sums_is_the_quadratic_form():
    """For f = sum c_i K(., y_i), ||f||_H^2 = c' K c (the reproducing property)."""
    beta, y, c = 3.0, np.array([0.2, 0.5, 0.9]), np.array([1.0, -2.0, 0.5])
    grid = np.union1d(np.linspace(0, 1, 200_001), y)
    f = ou_kernel(grid, y, 1.0, beta) @ c
    assert ou_rkhs_norm_squared(grid, f, beta) == pytest.approx(
        c @ ou_kernel(y, y, 1.0, beta) @ c, rel=1e-6)


def test_whitening_gives_the_inverse_kernel_quadratic_form():
    rng = np.random.default_rng(4)
    x = np.sort(rng.random(40)) * 3 - 1
    a, b = rng.standard_normal((2, 40))
    kernel = ou_kernel(x, x, 1.0, 2.5)
    assert ou_whiten(x, a, 2.5) @ ou_whiten(x, b, 2.5) == pytest.approx(
        a @ np.linalg.solve(kernel, b), rel=1e-9)


def test_whitened_paths_are_iid_gaussian():
    x = np.sort(np.random.default_rng(5).random(30))
    paths = OUPath(0.7, 4.0, np.random.default_rng(6), n_paths=5000)(x)
    innovations = ou_whiten(x, paths, 4.0) / 0.7
    empirical = innovations.T @ innovations / 5000
    assert np.abs(empirical - np.eye(30)).max() < 0.1  # entries have sd ~ 0.014-0.02
    statistic = np.sum(innovations ** 2)
    assert stats.chi2.sf(statistic, innovations.size) > 1e-4
    assert stats.chi2.cdf(statistic, innovations.size) > 1e-4


def test_finite_release_sensitivity_grows_to_the_rkhs_norm():
    """Sec. 2.2: the noise needed for f at finitely many points grows with the points, up
    to ||f||_H; the Mahalanobis norm of f on a grid never exceeds it."""
    beta, f = 3.0, lambda x: np.sin(5 * x) + x ** 2
    fine = np.linspace(0, 1, 400_001)
    norm = ou_rkhs_norm_squared(fine, f(fine), beta)
    previous = 0.0
    for n in (2, 5, 17, 65, 257, 1025):
        x = np.linspace(0, 1, n)
        squared = np.sum(ou_whiten(x, f(x), beta) ** 2)
        assert previous <= squared <= norm * (1 + 1e-9)
        previous = squared
    assert previous == pytest.approx(norm, rel=1e-4)


def test_lemma6_bound_holds_for_piecewise_linear_functions():
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = np.linspace(0, 1, 30)
        f = np.cumsum(rng.uniform(-1, 1, 30)) * rng.uniform(0.01, 1)
        beta = rng.uniform(0.1, 50)
        lipschitz = np.max(np.abs(np.diff(f) / np.diff(x)))
        assert ou_rkhs_norm_squared(x, f, beta) <= lemma6_norm_bound(
            np.max(np.abs(f)), lipschitz, beta) * (1 + 1e-12)


def test_theorem5_constant_by_hand_and_from_lemma6():
    v = 4 * 0.01 * 10 / 128
    assert theorem5_constant(0.01, 9, 2.0, 128) == pytest.approx((v ** 2 + v) * 4)
    assert theorem5_beta(0.01, 9, 128) == pytest.approx(1 / v)
    assert theorem5_constant(0.01, 9, 2.0, 128) == pytest.approx(
        lemma6_norm_bound(v * 2.0, 2.0, 1 / v))


def test_theorem5_sigma_variants_by_hand():
    eps, delta, T, B, alpha, k, L = SETTING
    C, log_term = theorem5_constant(alpha, k, L, B), math.log(math.e + eps / delta)
    assert theorem5_sigma(*SETTING) == pytest.approx(math.sqrt(2 * T / B * C * log_term) / eps)
    assert theorem5_sigma(*SETTING, variant="statement") == pytest.approx(
        math.sqrt(2 * T / B * log_term) * C / eps)


def test_only_the_proof_variant_scales_with_the_value_function():
    """Scaling Q by c scales L by c, so the noise must scale by c."""
    base = np.array(SETTING)
    scaled = base.copy()
    scaled[-1] *= 3
    proof = [theorem5_sigma(*s[:2], int(s[2]), int(s[3]), *s[4:]) for s in (base, scaled)]
    statement = [theorem5_sigma(*s[:2], int(s[2]), int(s[3]), *s[4:], variant="statement")
                 for s in (base, scaled)]
    assert proof[1] / proof[0] == pytest.approx(3)
    assert statement[1] / statement[0] == pytest.approx(9)


def test_exact_accounting_accepts_the_proof_and_rejects_the_statement():
    eps, delta, T, B, alpha, k, L = SETTING
    sensitivity = math.sqrt(theorem5_constant(alpha, k, L, B))
    proof = theorem5_sigma(*SETTING)
    statement = theorem5_sigma(*SETTING, variant="statement")
    assert exact_composition_delta(eps, proof, sensitivity, T // B) <= delta
    assert exact_composition_delta(eps, statement, sensitivity, T // B) > 1000 * delta


def test_the_proofs_composition_bound_holds_for_moderate_eps():
    for eps in np.geomspace(1e-3, 10, 12):
        for delta in np.geomspace(1e-12, 0.5, 12):
            for n in (1, 40):
                sigma = theorem5_composition_sigma(eps, delta, n, 1.0)
                assert exact_composition_delta(eps, sigma, 1.0, n) <= delta
    sigma = theorem5_composition_sigma(20.0, 1e-6, 1, 1.0)
    assert exact_composition_delta(20.0, sigma, 1.0, 1) > 1e-6  # it fails for large eps


@pytest.mark.parametrize("index, direction", [(0, -1), (1, -1), (2, 1), (3, -1), (4, 1),
                                              (5, 1), (6, 1)])
def test_theorem5_sigma_monotone(index, direction):
    for variant in ("proof", "statement"):
        values = []
        for factor in (1, 2):
            setting = list(SETTING)
            setting[index] = setting[index] * factor
            if index in (2, 3):
                setting[index] = int(setting[index])
            values.append(theorem5_sigma(*setting, variant=variant))
        assert np.sign(values[1] - values[0]) == direction


def test_theorem5_delta_by_hand():
    offset = LEMMA8_CONSTANT * math.sqrt(4.0) * 0.5
    assert theorem5_delta(1e-5, 10.0, 0.5, 4.0, 3) == pytest.approx(
        1e-5 + 3 * math.exp(-(20 - offset) ** 2 / 2))
    assert theorem5_delta(1e-5, 10.0, 0.5, 4.0, 3, tail="borell-tis") == pytest.approx(
        1e-5 + 6 * math.exp(-(10 - offset) ** 2 / (2 * 0.25)))
    with pytest.raises(ValueError, match="margin"):
        theorem5_delta(1e-5, 4.0, 0.5, 4.0, 3)


def test_lemma8_bound_by_hand_and_its_counterexample_for_large_sigma():
    np.testing.assert_allclose(lemma8_tail_bound([0.0, 2.0], 3.0), [1.0, math.exp(-2)])
    np.testing.assert_allclose(lemma8_tail_bound(2.0, 3.0, variant="borell-tis"),
                               math.exp(-4 / 18))
    sigma, beta, u = 3.0, 0.01, 4.0
    at_zero = stats.norm.sf((lemma8_offset(sigma, beta) + u) / sigma)  # <= P(max g > ...)
    assert at_zero > lemma8_tail_bound(u, sigma)
    assert at_zero <= lemma8_tail_bound(u, sigma, variant="borell-tis")


def test_path_maxima_respect_borell_tis_and_lemma8_mean_bound():
    sigma, beta = 1.5, 50.0
    maxima = sample_path_maxima(sigma, beta, 4000, np.random.default_rng(0))
    assert maxima.mean() <= lemma8_offset(sigma, beta)
    for u in (1.0, 2.0, 3.0):
        tail = np.mean(maxima > maxima.mean() + u)
        assert tail <= lemma8_tail_bound(u, sigma, variant="borell-tis") + 3 / np.sqrt(4000)


def test_calibration_meets_the_target_with_the_smallest_k():
    eps, delta, T, B, alpha, _, L = SETTING
    for variant in ("proof", "statement"):
        for tail in ("statement", "borell-tis"):
            cal = calibrate_theorem5(eps, delta, T, B, alpha, L, 39, 5e-5, variant=variant,
                                     tail=tail)
            assert cal.total_delta <= (delta + 5e-5) * (1 + 1e-9)
            assert cal.sigma == pytest.approx(theorem5_sigma(eps, delta, T, B, alpha, cal.k, L,
                                                             variant=variant))
            smaller = cal.k * (1 - 1e-6)
            sigma = theorem5_sigma(eps, delta, T, B, alpha, smaller, L, variant=variant)
            beta = theorem5_beta(alpha, smaller, B)
            try:
                assert theorem5_delta(delta, smaller, sigma, beta, 39, tail=tail) > delta + 5e-5
            except ValueError:  # the margin is not even positive
                pass


def test_authors_setting_values():
    """Assumed settings (App. E.3 is not public): see AUTHORS_SETTING."""
    proof = authors_calibration(0.9, 39, 39)
    statement = authors_calibration(0.9, 39, 39, variant="statement")
    assert proof.sigma == pytest.approx(6.559, rel=1e-3)
    assert statement.sigma == pytest.approx(0.1126, rel=1e-3)
    assert authors_calibration(0.45, 39, 39).sigma > proof.sigma
    with pytest.raises(ValueError, match="tail target"):
        authors_calibration(0.45, 5000, 100, tail="borell-tis")


def test_dqn_calibration_readings():
    updates, iterations, outside = (dqn_calibration(0.9, AUTHORS_DQN, r) for r in READINGS)
    n_updates, n_iterations = dp_sgd_updates(AUTHORS_DQN), 5000 // 128
    assert n_updates == 4873 and n_iterations == 39
    for cal, n, resets, variant in ((updates, n_updates, 100, "proof"),
                                    (iterations, n_iterations, n_iterations, "proof"),
                                    (outside, n_iterations, n_iterations, "statement")):
        assert cal.sigma == pytest.approx(theorem5_sigma(
            0.9, 5e-5, n * 128, 128, 0.01, cal.k, 1.0, variant=variant), rel=1e-12)
        assert cal.total_delta == pytest.approx(1e-4, rel=1e-6)  # J paths in the tail term:
        assert cal.total_delta == pytest.approx(theorem5_delta(5e-5, cal.k, cal.sigma, cal.beta,
                                                               resets), rel=1e-12)
    # exact accounting of the n Gaussian-process updates each reading counts
    for cal, n in ((updates, n_updates), (iterations, n_iterations)):
        assert exact_composition_delta(0.9, cal.sigma, math.sqrt(cal.constant), n) <= 5e-5
    assert exact_composition_delta(0.9, outside.sigma, math.sqrt(outside.constant),
                                   n_iterations) > 100 * 5e-5
    assert updates.sigma > iterations.sigma > outside.sigma
    assert dqn_calibration(0.45, AUTHORS_DQN, "iterations").sigma > iterations.sigma


def test_exact_composition_meets_the_target_and_agrees_with_dp_accounting():
    from dp_accounting import GaussianDpEvent, SelfComposedDpEvent
    from dp_accounting.pld import pld_privacy_accountant
    for reading, config in (("updates", AUTHORS_DQN), ("iterations", ALGORITHM1)):
        bound = dqn_calibration(0.9, config, reading)
        exact = dqn_calibration(0.9, config, reading, composition="exact")
        n = dp_sgd_updates(config)
        assert exact.sigma < bound.sigma and exact.total_delta == pytest.approx(1e-4, rel=1e-6)
        sensitivity = math.sqrt(exact.constant)
        assert exact_composition_delta(0.9, exact.sigma, sensitivity, n) == pytest.approx(
            5e-5, rel=1e-6)
        accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
        accountant.compose(SelfComposedDpEvent(GaussianDpEvent(exact.sigma / sensitivity), n))
        assert accountant.get_epsilon(5e-5) == pytest.approx(0.9, rel=2e-3)


def test_premises_of_the_proof_for_the_dqn_and_for_algorithm1():
    dqn = theorem5_premises(AUTHORS_DQN, dqn_calibration(0.9, AUTHORS_DQN), 3.0)
    assert dqn["updates_per_path"] == pytest.approx(4873 / 100)
    assert dqn["plain_sgd_squared"] == 0.0 and dqn["lipschitz_over_assumed"] == 3.0
    calibration = dqn_calibration(0.9, ALGORITHM1, "iterations")
    literal = theorem5_premises(ALGORITHM1, calibration, 0.5)
    assert literal["updates_per_path"] == 1.0 and literal["plain_sgd_squared"] == 1.0
    margin = (calibration.k - lemma8_offset(calibration.sigma, calibration.beta)) / calibration.sigma
    assert literal["tail_margin_in_sigma"] == pytest.approx(margin)
    assert literal["tail_margin_needed"] == pytest.approx(math.sqrt(2 * math.log(2 * 39 / 5e-5)))


def test_composition_baselines():
    eps, delta, n = 0.9, 5e-5, 39
    ours = theorem5_composition_sigma(eps, delta, n, 1.0)
    assert kov13_sigma(eps, delta, n, 1.0) == pytest.approx(ours * math.sqrt(math.log(1.25
                                                                                     / delta)))
    sigma = advanced_composition_sigma(eps, delta, n, 1.0)
    assert sigma > ours
    delta0 = delta / 2 / n
    eps0 = math.sqrt(2 * math.log(1.25 / delta0)) / sigma
    total, total_delta = advanced_composition(eps0, delta0, n, delta / 2)
    assert total == pytest.approx(eps, rel=1e-9) and total <= eps
    assert total_delta == pytest.approx(delta)


@pytest.mark.parametrize("call", [
    lambda: gp_mechanism_sigma(1.0, 1.0, 1e-5),
    lambda: gp_mechanism_sigma(1.0, 0.5, 1e-5, source="other"),
    lambda: gp_mechanism_sigma(0.0, 0.5, 1e-5),
    lambda: gp_mechanism_sigma(1.0, 0.5, 1.0),
    lambda: theorem5_sigma(*SETTING, variant="other"),
    lambda: theorem5_sigma(0.0, *SETTING[1:]),
    lambda: theorem5_sigma(*SETTING[:2], 10.5, *SETTING[3:]),
    lambda: theorem5_sigma(*SETTING[:3], 0, *SETTING[4:]),
    lambda: theorem5_sigma(*SETTING[:4], -0.1, *SETTING[5:]),
    lambda: theorem5_sigma(*SETTING[:6], np.nan),
    lambda: theorem5_delta(1e-5, 10.0, 0.5, 4.0, 0),
    lambda: theorem5_delta(1e-5, 10.0, 0.5, 4.0, 1, tail="other"),
    lambda: lemma8_tail_bound(-1.0, 1.0),
    lambda: lemma8_tail_bound(1.0, 1.0, variant="other"),
    lambda: ou_rkhs_norm_squared([0.0, 0.0], [1.0, 1.0], 1.0),
    lambda: ou_rkhs_norm_squared([0.0, 1.0], [1.0], 1.0),
    lambda: calibrate_theorem5(*SETTING[:5], 1.0, 1, 0.0),
    lambda: advanced_composition_sigma(0.9, 1e-5, 10, 1.0, delta_split=1.0),
    lambda: advanced_composition_sigma(50.0, 1e-5, 1, 1.0),
    lambda: exact_composition_delta(0.9, 1.0, 1.0, 1.5),
    lambda: sample_path_maxima(1.0, 1.0, 0, np.random.default_rng(0)),
    lambda: ou_whiten([0.0, 0.0], [1.0, 1.0], 1.0),
    lambda: ou_whiten([0.0, 1.0], [1.0, 1.0, 1.0], 1.0),
    lambda: ou_whiten([0.0, 1.0], [1.0, 1.0], 0.0),
    lambda: dqn_calibration(0.9, AUTHORS_DQN, "other"),
    lambda: dqn_calibration(0.9, AUTHORS_DQN, delta_total=1.0),
    lambda: dqn_calibration(0.9, AUTHORS_DQN, composition="rdp"),
    lambda: theorem5_premises(AUTHORS_DQN, None, 1.0),
    lambda: theorem5_premises(AUTHORS_DQN, dqn_calibration(0.9, AUTHORS_DQN), 0.0),
])
def test_bad_inputs_raise(call):
    with pytest.raises(ValueError):
        call()
