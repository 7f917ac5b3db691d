"""The Sharma 2025 audits (dprl.experiments.audits.sharma2025): they sample the package's
DataRelease and DP-SGD steps, their statistics are the exact log-likelihood ratios, their
pair eps agree with independent computations, and under-noised variants show violations."""

import dataclasses
import math

import numpy as np
import torch
from scipy import stats

from dprl.accounting.pld import poisson_gaussian_or_idle_epsilon
from dprl.experiments import get
from dprl.experiments.audits.common import audited_bound, pair_epsilon
from dprl.engine.batches import compute_trials
from dprl.experiments.audits import sharma2025 as audits
from dprl.experiments.audits import sharma2025_dp_sgd as dp_sgd_audit
from dprl.experiments.audits import sharma2025_training as training
from dprl.sharma2025.accounting import dp_sgd_epsilon



def _bound(config, experiment_id):
    experiment = get(experiment_id)
    return audited_bound(config, compute_trials(experiment, config, range(config.n_trials)))


def test_release_outputs_follow_the_exact_one_round_distribution():
    config = dataclasses.replace(get("audit-sharma2025-release").config("smoke"), m=60,
                                 per_expert=2)
    rng = np.random.default_rng(3)
    for m, exact in zip((config.m - 1, config.m), audits.release_distributions(config)):
        outputs = np.concatenate([audits.release_outputs(config, m, rng) for _ in range(600)])
        frequencies = np.bincount(outputs, minlength=exact.size) / outputs.size
        error = np.sqrt(exact * (1 - exact) / outputs.size)
        assert np.all(np.abs(frequencies - exact) <= 5 * error + 1e-4)


def test_release_log_ratios_and_pair_epsilon_against_direct_computation():
    config = get("audit-sharma2025-release").config("smoke")
    null, alternative = audits.release_distributions(config)
    assert np.isclose(null.sum(), 1) and np.isclose(alternative.sum(), 1)
    assert np.allclose(np.exp(audits.release_log_ratios(config)) * null, alternative,
                       rtol=1e-9, atol=1e-300)
    # the T-fold product's exact hockey-stick at the PLD's eps stays at or below delta
    # (PLD is pessimistic) and exceeds it a little below: Monte Carlo of the product pair
    eps = pair_epsilon(config)
    rng = np.random.default_rng(8)
    losses = audits.release_log_ratios(config)
    draws = losses[rng.choice(len(alternative), size=(400_000, config.n_queries),
                              p=alternative)].sum(axis=1)
    delta_hat = np.mean(np.maximum(1 - np.exp(eps - draws), 0))
    assert delta_hat <= config.delta * 1.1
    assert np.mean(np.maximum(1 - np.exp(0.8 * eps - draws), 0)) > config.delta


def test_release_audit_shows_a_violation_only_when_under_noised():
    base = dataclasses.replace(get("audit-sharma2025-release").config("smoke"), eps=1.0,
                               n_queries=1, edge_low=-20.0, edge_high=20.0, per_expert=1,
                               runs_per_trial=500)
    calibrated = dataclasses.replace(base, m=math.ceil(base.params.threshold / 0.98))
    assert _bound(calibrated, "audit-sharma2025-release").eps < calibrated.eps
    under = dataclasses.replace(base, noise_factor=1e-3)
    under = dataclasses.replace(under, m=math.ceil(under.params.threshold / 0.98))
    assert _bound(under, "audit-sharma2025-release").eps > under.eps


def test_dp_step_statistic_is_the_log_likelihood_ratio():
    x, s, q = np.random.default_rng(5).normal(size=(4, 6)), 1.7, 0.08
    mixture = (1 - q) * stats.norm.pdf(x, 0, s) + q * stats.norm.pdf(x, 1, s)
    assert np.allclose(dp_sgd_audit.dp_step_log_likelihood_ratio(x, s, q),
                       np.log(mixture / stats.norm.pdf(x, 0, s)))


def test_canary_directions_are_the_per_example_clipped_gradients():
    from dprl.sharma2025.dp_sgd import vmap_clipped_gradient_sum
    from dprl.sharma2025.offline_rl import DiscreteCQL
    from dprl.sharma2025.qnetworks import QNetwork, frozen_copy
    generator = torch.Generator().manual_seed(2)
    learner = DiscreteCQL(QNetwork(1, 5, (), generator=generator), alpha=0.0)
    target = frozen_copy(learner.q)
    canaries = training.canary_transitions(5, 100.0)
    directions = training.canary_directions(learner, canaries, target, 1.0)
    for r in range(5):
        one = canaries.take(torch.tensor([r]))
        clipped = vmap_clipped_gradient_sum(learner, learner.loss_inputs(one, target), 1.0)
        weight, bias = (g.numpy() for g in clipped.grads)
        expected = np.zeros((5, 2))
        expected[:, 0], expected[:, 1] = weight[:, 0], bias
        assert np.allclose(expected[r], directions[r], atol=1e-6)   # C u, C = 1
        assert np.allclose(np.delete(expected, r, axis=0), 0.0)      # orthogonal to the others


def test_projections_are_gaussian_under_d_and_shifted_by_the_coin_under_d_prime():
    config = dataclasses.replace(get("audit-sharma2025-dp-sgd").config("smoke"), n_steps=1,
                                 runs_per_trial=2000, noise_factor=0.2)
    s, q = config.noise_multiplier, config.sampling_rate
    losses = [training.one_training_statistics(config, present, torch.Generator().manual_seed(4))
              for present in (False, True)]
    # invert the one-step statistic back to x (monotone in x)
    x = [s**2 * np.log1p(np.expm1(l) / q) + 0.5 for l in losses]
    assert stats.kstest(x[0] / s, "norm").pvalue > 1e-3
    shifted = x[1] > 0.5
    assert abs(shifted.mean() - q) < 5 * math.sqrt(q * (1 - q) / x[1].size) + 0.01
    assert stats.kstest((x[1] - (x[1] > 0.5)) / s, "norm").pvalue > 1e-3


def test_visible_coin_epsilon_mixes_over_the_number_of_dp_steps():
    from scipy.optimize import brentq
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting import NeighboringRelation
    s, q, n, p, delta = 2.0, 0.1, 6, 0.5, 1e-4
    assert math.isclose(poisson_gaussian_or_idle_epsilon(s, q, n, 1.0, delta),
                        dp_sgd_epsilon(s, q, n, delta, "pld"), rel_tol=1e-9)
    step = pld_lib.from_gaussian_mechanism(
        s, sampling_prob=q, value_discretization_interval=1e-4,
        neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE)
    composed = [pld_lib.identity(1e-4)] + [step.self_compose(k) for k in range(1, n + 1)]
    weights = stats.binom.pmf(np.arange(n + 1), n, p)

    def delta_at(eps):
        return sum(w * c.get_delta_for_epsilon(eps) for w, c in zip(weights, composed))

    expected = brentq(lambda e: delta_at(e) - delta, 0.0, 20.0)
    assert math.isclose(poisson_gaussian_or_idle_epsilon(s, q, n, p, delta), expected, abs_tol=2e-3)


def test_dp_sgd_audit_shows_a_violation_only_when_under_noised():
    config = get("audit-sharma2025-dp-sgd").config("smoke")
    assert _bound(config, "audit-sharma2025-dp-sgd").eps < config.eps
    under = dataclasses.replace(config, noise_factor=0.3)
    assert _bound(under, "audit-sharma2025-dp-sgd").eps > config.eps


def test_selective_pair_exceeds_the_paper_claim():
    config = get("audit-sharma2025-selective").config("smoke")   # RDP calibration
    rate = config.p * config.sampling_rate
    assert dp_sgd_epsilon(config.noise_multiplier, rate, config.n_steps, config.delta,
                          "rdp") <= config.eps
    assert pair_epsilon(config) > config.eps  # the coins, once seen, do not subsample
