"""The registered audits at smoke scale: calibrated mechanisms show no violation at 95%
confidence (seeded), the under-noised reading of Wang 2019's Theorem 5 does, and so do
deliberately under-noised versions of Sharma 2025's DataRelease and DP-SGD; the samplers and
accountant columns against independent computations."""

import dataclasses
import math

import numpy as np
import pytest

from dprl.audit import histogram as audit_histogram
from dprl.balle2016 import smoothing_constants
from dprl.balle2016.calibration import smooth_gaussian_delta
from dprl.experiments import all_experiments, get
from dprl.experiments.audits import accountant_epsilon, audited_bound
from dprl.experiments.runner import compute_trials
from dprl.wang2019.calibration import exact_composition_delta

AUDITS = [e.id for e in all_experiments() if e.id.startswith("audit-")]


def _smoke_bound(experiment_id: str):
    experiment = get(experiment_id)
    config = experiment.config("smoke")
    return config, audited_bound(config, compute_trials(experiment, config,
                                                        range(config.n_trials)))


@pytest.mark.parametrize("experiment_id", AUDITS)
def test_audits_show_a_violation_exactly_when_the_accountant_finds_one(experiment_id):
    config, bound = _smoke_bound(experiment_id)
    assert 0 <= bound.eps <= accountant_epsilon(config) + 1e-9  # a lower bound: never above
    if accountant_epsilon(config) <= config.eps * (1 + 1e-6):
        assert bound.eps < config.eps
    if experiment_id == "audit-wang2019-statement":  # claimed 0.9, accountant 18.04
        assert bound.eps > config.eps


def test_gpope_audit_calibrations_bracket_the_claim():
    paper = get("audit-xie2019-paper").config("paper")
    sound = get("audit-xie2019-sound").config("paper")
    assert paper.sigma < sound.sigma
    assert accountant_epsilon(paper) > 5 * paper.eps  # 6.010 at a claimed 1
    assert accountant_epsilon(sound) == pytest.approx(sound.eps, rel=1e-6)


def test_balle_and_wang_accountants_meet_delta_at_their_eps():
    balle = get("audit-balle2016-lsw").config("paper")
    alpha, beta = smoothing_constants(balle.eps, balle.delta, balle.n_states)
    eps = accountant_epsilon(balle)
    assert smooth_gaussian_delta(eps, alpha, beta, balle.n_states) <= balle.delta
    assert smooth_gaussian_delta(eps * 0.99, alpha, beta, balle.n_states) > balle.delta
    for variant in ("proof", "statement"):
        config = get(f"audit-wang2019-{variant}").config("paper")
        eps = accountant_epsilon(config)
        calibration = config.calibration
        assert exact_composition_delta(eps, calibration.sigma, math.sqrt(calibration.constant),
                                       config.n_updates) == pytest.approx(config.delta,
                                                                          rel=1e-6)


def test_balle_pair_is_replace_one_and_the_release_is_as_computed():
    config = get("audit-balle2016-lsl").config("smoke")
    x, neighbour = config.pair()
    assert np.abs(x.counts - neighbour.counts).max() == 1  # one trajectory replaced
    (mean, sigma), (mean_neighbour, sigma_neighbour) = config.releases()
    assert sigma != sigma_neighbour  # DP-LSL's noise scale depends on the data set
    assert np.all(mean > mean_neighbour)


def test_gaussian_audit_statistic_is_the_exact_privacy_loss_up_to_scale():
    from dprl.experiments.audits import gaussian_log_likelihood_ratio
    outputs = np.random.default_rng(0).normal(size=(7, 3))
    null, alternative = (np.zeros(3), 2.0), (np.ones(3), 2.0)
    expected = ((outputs - 0.5) * 1.0).sum(axis=-1) / 4.0
    assert np.allclose(gaussian_log_likelihood_ratio(outputs, null, alternative), expected)


def test_gpope_statistic_is_the_log_likelihood_ratio_of_its_pair():
    from scipy import stats

    from dprl.experiments.audits import gpope_log_likelihood_ratio
    x, sigma, q = np.random.default_rng(1).normal(size=(5, 7)), 1.3, 0.05
    mixture = (1 - q) * stats.norm.pdf(x, 1, sigma) + q * stats.norm.pdf(x, -1, sigma)
    expected = np.log(mixture / stats.norm.pdf(x, 1, sigma)).sum(axis=-1)
    assert np.allclose(gpope_log_likelihood_ratio(x, sigma, q), expected)


def test_estimated_delta_of_the_gaussian_audit_matches_the_exact_profile():
    from dprl.audit import privacy_loss_delta
    from dprl.mechanisms import gaussian_delta
    rng, sigma = np.random.default_rng(2), 1.5
    edges = np.linspace(-8, 9, 4001)
    counts = audit_histogram(1 / sigma + rng.standard_normal(400_000), edges)
    mu = 1 / sigma
    for eps in (0.2, 0.6):
        estimate, error = privacy_loss_delta(counts, mu * edges - mu**2 / 2, eps)
        assert abs(estimate - gaussian_delta(eps, 1.0, sigma)) < 4 * error + 2e-3


def _bound_of(config, experiment_id: str):
    experiment = get(experiment_id)
    return audited_bound(config, compute_trials(experiment, config, range(config.n_trials)))


def _one_round_release(noise_factor: float):
    """DataRelease at eps1 = 1, T = 1 with a canary of the majority's type and m experts
    whose 1-step count crosses Alg. 2's threshold only with the canary."""
    base = dataclasses.replace(get("audit-sharma2025-release").config("smoke"), eps=1.0,
                               n_queries=1, canary_type=0, noise_factor=noise_factor,
                               edge_low=-20.0, edge_high=20.0)
    m = math.ceil(base.params.threshold / (1 - base.p_min))
    return dataclasses.replace(base, m=m)


def test_release_audit_shows_a_violation_only_when_under_noised():
    calibrated, under_noised = _one_round_release(1.0), _one_round_release(1e-3)
    assert _bound_of(calibrated, "audit-sharma2025-release").eps < calibrated.eps
    assert _bound_of(under_noised, "audit-sharma2025-release").eps > under_noised.eps


def test_dp_sgd_audit_shows_a_violation_only_when_under_noised():
    config = get("audit-sharma2025-dp-sgd").config("smoke")
    assert _bound_of(config, "audit-sharma2025-dp-sgd").eps < config.eps
    under_noised = dataclasses.replace(config, noise_factor=0.3)
    assert _bound_of(under_noised, "audit-sharma2025-dp-sgd").eps > config.eps


def test_release_sampler_matches_the_exact_output_distribution():
    from dprl.experiments.audits_sharma2025 import _release_model, release_outputs
    config = get("audit-sharma2025-release").config("smoke")
    model, params = _release_model(config.length, config.p_min), config.params
    n = 400_000
    for multiplicities in config.multiplicities():
        exact = model.distribution(multiplicities, params.eps_prime, params.threshold)
        outputs = release_outputs(config, multiplicities, n, np.random.default_rng(4))
        frequencies = np.bincount(outputs, minlength=exact.size) / n
        assert frequencies.size == exact.size
        error = np.sqrt(exact * (1 - exact) / n)
        assert np.all(np.abs(frequencies - exact) <= 5 * error + 1e-5)


def test_dp_sgd_statistic_is_the_log_likelihood_ratio_and_the_noise_meets_the_budget():
    from scipy import stats

    from dprl.experiments.audits_sharma2025 import dp_step_log_likelihood_ratio
    from dprl.sharma2025.accounting import dp_sgd_epsilon
    x, s, q = np.random.default_rng(5).normal(size=(4, 6)), 1.7, 0.08
    mixture = (1 - q) * stats.norm.pdf(x, 0, s) + q * stats.norm.pdf(x, 1, s)
    assert np.allclose(dp_step_log_likelihood_ratio(x, s, q),
                       np.log(mixture / stats.norm.pdf(x, 0, s)))
    config = get("audit-sharma2025-selective").config("smoke")  # RDP calibration
    rate = config.p * config.sampling_rate
    assert dp_sgd_epsilon(config.noise_multiplier, rate, config.n_steps, config.delta,
                          "rdp") <= config.eps
    assert accountant_epsilon(config) > config.eps  # the coins, once seen, do not subsample
