"""White-box audits of Wang & Hegde (2019), Algorithm 1 (dprl.experiments.audits.wang2019):
they sample the package's noise paths (RunPaths), the statistic is the exact log-likelihood
ratio of the grid releases (checked against dense Gaussian densities), the canary has the
proof's RKHS norm, the statement reading shows a violation and the proof's does not, and
the reuse audit follows the DQN run's path schedule."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

import dprl.experiments.audits.wang2019 as wa
import dprl.wang2019.q_learning as ql
from dprl.experiments import get
from dprl.experiments.audits.common import (SAMPLED, accountant_epsilon, audit_row, exact_gdp_mu,
                                            pair_epsilon, statistic_losses)
from dprl.engine.batches import compute_trials
from dprl.experiments.wang2019 import FIGURE2, figure2_dqn
from dprl.seeding import trial_generator
from dprl.wang2019 import run_paths
from dprl.wang2019.calibration import (dqn_calibration, exact_composition_delta,
                                       ou_rkhs_norm_squared)
from dprl.wang2019.q_functions import tabular_q
from dprl.wang2019.functional_noise import ou_kernel

FRESH = ["audit-wang2019-proof", "audit-wang2019-statement", "audit-wang2019-proof-updates",
         "audit-wang2019-statement-updates", "audit-wang2019-proof-one-update",
         "audit-wang2019-statement-one-update"]
ALL = FRESH + ["audit-wang2019-reuse"]


def _smoke(experiment_id: str, trials=None):
    experiment = get(experiment_id)
    config = experiment.config("smoke")
    trials = range(config.n_trials) if trials is None else trials
    return config, compute_trials(experiment, config, trials)


@pytest.mark.parametrize("experiment_id", ALL)
def test_audit_samples_through_run_paths(experiment_id, monkeypatch):
    calls = []
    original = run_paths.RunPaths

    def counting(*args, **kwargs):
        calls.append(len(args[2]))
        return original(*args, **kwargs)

    monkeypatch.setattr(run_paths, "RunPaths", counting)
    config, _ = _smoke(experiment_id, trials=[0])
    assert SAMPLED[experiment_id] == ("dprl.wang2019.run_paths.RunPaths",)
    assert sum(calls) == 2 * config.runs_per_trial  # every run of both worlds drew its paths


@pytest.mark.parametrize("experiment_id", ALL)
def test_canary_has_the_proofs_rkhs_norm(experiment_id):
    config = get(experiment_id).config("paper")
    constant, beta = config.calibration.constant, config.calibration.beta
    dense = config.canary @ np.linalg.solve(ou_kernel(config.grid, config.grid, 1.0, beta),
                                            config.canary)
    assert dense == pytest.approx(constant, rel=1e-9)
    piecewise_linear = ou_rkhs_norm_squared(config.grid, config.canary, beta)
    assert constant * (1 - 1e-12) <= piecewise_linear <= constant * 1.001
    assert 0 <= config.grid[0] < config.grid[-1] <= 1


@pytest.mark.parametrize("experiment_id", ["audit-wang2019-proof",
                                           "audit-wang2019-statement-one-update"])
def test_statistic_is_the_exact_log_likelihood_ratio(experiment_id):
    config = get(experiment_id).config("smoke")
    rng = np.random.default_rng(5)
    releases = rng.normal(0.0, config.calibration.sigma, (3, config.grid_size, config.n_updates))
    releases[1] += config.canaries  # a release from D'
    statistic = config.score(releases)
    covariance = ou_kernel(config.grid, config.grid, config.calibration.sigma,
                           config.calibration.beta)
    dense = [sum(stats.multivariate_normal.logpdf(r[:, t], config.canaries[:, t], covariance)
                 - stats.multivariate_normal.logpdf(r[:, t], np.zeros(config.grid_size),
                                                    covariance)
                 for t in range(config.n_updates)) for r in releases]
    mu = exact_gdp_mu(config)
    np.testing.assert_allclose(mu * statistic - mu ** 2 / 2, dense, rtol=1e-7, atol=1e-7)
    edges_loss = statistic_losses(config)
    np.testing.assert_allclose(edges_loss, mu * config.edges - mu ** 2 / 2)


@pytest.mark.parametrize("experiment_id, runs", [("audit-wang2019-statement", 3000),
                                                  ("audit-wang2019-proof-updates", 800)])
def test_sampled_statistic_is_standard_normal_and_shifted_by_mu(experiment_id, runs):
    config = dataclasses.replace(get(experiment_id).config("smoke"), runs_per_trial=runs)
    null, alternative = wa.wang_statistics(config, trial_generator(config.root_seed, 0))
    mu = exact_gdp_mu(config)
    assert mu == pytest.approx(math.sqrt(config.n_updates * config.calibration.constant)
                               / config.calibration.sigma, rel=1e-9)
    assert stats.kstest(null, "norm").pvalue > 1e-3
    assert stats.kstest(alternative - mu, "norm").pvalue > 1e-3


def test_statistics_do_not_depend_on_the_chunking(monkeypatch):
    config = dataclasses.replace(get("audit-wang2019-proof").config("smoke"), runs_per_trial=40)
    whole = wa.wang_statistics(config, trial_generator(config.root_seed, 2))
    monkeypatch.setattr(wa, "_CHUNK_VALUES", 7 * config.grid_size * config.n_updates)
    chunked = wa.wang_statistics(config, trial_generator(config.root_seed, 2))
    for a, b in zip(whole, chunked):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("experiment_id", FRESH)
def test_accountant_and_pair_eps_meet_delta(experiment_id):
    config = get(experiment_id).config("paper")
    calibration = config.calibration
    eps = accountant_epsilon(config)
    assert exact_composition_delta(eps, calibration.sigma, math.sqrt(calibration.constant),
                                   config.n_updates) == pytest.approx(config.delta, rel=1e-6)
    mu, pair = exact_gdp_mu(config), pair_epsilon(config)
    normal = stats.norm.cdf
    assert (normal(-pair / mu + mu / 2) - math.exp(pair) * normal(-pair / mu - mu / 2)
            == pytest.approx(config.delta, rel=1e-6))
    assert pair == pytest.approx(eps, rel=1e-6)  # the canary is the proof's worst case


@pytest.mark.parametrize("variant, violation", [("statement", True), ("proof", False)])
@pytest.mark.parametrize("suffix", ["", "-one-update"])
def test_statement_reading_violates_and_the_proofs_does_not(variant, violation, suffix):
    experiment_id = f"audit-wang2019-{variant}{suffix}"
    config, arrays = _smoke(experiment_id)
    row = audit_row(experiment_id, config, arrays)
    assert row.violation is violation
    assert row.bound.eps <= row.pair_eps
    if violation:
        assert row.bound.eps > 3 * config.eps


def test_reuse_follows_the_runs_path_schedule(monkeypatch):
    config = get("audit-wang2019-reuse").config("paper")
    assert config.dqn == figure2_dqn(FIGURE2.config("paper"))
    assert config.calibration == dqn_calibration(0.9, config.dqn, "updates",
                                                 delta_total=FIGURE2.config("paper").delta)
    assert config.delta == FIGURE2.config("paper").delta / 2
    sizes = np.bincount(config.update_paths)
    assert config.n_updates == 4873 and sizes.tolist() == [23] + [50] * 97
    # a short run of the training loop: which path (reset) every update used
    small = dataclasses.replace(config, n_episodes=4, reset_period=30, n_updates=73)
    used, original = [], ql._update

    def recording(learner, qconfig, state, batch):
        used.append(state.noise.n_resets - 1)
        return original(learner, qconfig, state, batch)

    monkeypatch.setattr(ql, "_update", recording)
    result = ql.train(tabular_q(4), small.dqn, np.ones(1), [trial_generator(3, 0)])
    assert result.n_updates == small.n_updates and result.n_resets == 7
    assert np.array_equal(np.unique(used, return_inverse=True)[1], small.update_paths)


def test_reuse_pair_is_separated_and_its_audit_violates_the_claim():
    config, arrays = _smoke("audit-wang2019-reuse")
    null, alternative = wa.wang_statistics(config, trial_generator(config.root_seed, 0))
    assert np.all(null == 0.0)
    np.testing.assert_allclose(alternative, 1.0, atol=1e-9)
    assert pair_epsilon(config) == math.inf and exact_gdp_mu(config) is None
    assert statistic_losses(config) is None
    assert accountant_epsilon(config) < config.eps  # the calibration covers fresh paths
    row = audit_row("audit-wang2019-reuse", config, arrays)
    assert row.outcome == "violation shown" and row.bound.fpr == row.bound.fnr == 0.0


def test_reuse_canary_alternates_within_each_update_bound():
    config = get("audit-wang2019-reuse").config("smoke")
    assert np.array_equal(config.canary_signs[:4], [1.0, -1.0, 1.0, -1.0])
    norms = [ou_rkhs_norm_squared(config.grid, config.canaries[:, t], config.calibration.beta)
             for t in range(3)]
    np.testing.assert_allclose(norms, norms[0])


def test_configs_reject_bad_input():
    with pytest.raises(ValueError, match="variant"):
        wa.WangAuditConfig(n_trials=2, root_seed=0, runs_per_trial=1, pilot_trials=1,
                           edge_low=0.0, edge_high=1.0, variant="both")
    with pytest.raises(ValueError, match="grid_size"):
        wa.WangAuditConfig(n_trials=2, root_seed=0, runs_per_trial=1, pilot_trials=1,
                           edge_low=0.0, edge_high=1.0, grid_size=1)
    reuse = get("audit-wang2019-reuse").config("smoke")
    with pytest.raises(ValueError, match="n_updates"):
        dataclasses.replace(reuse, n_updates=39)
    with pytest.raises(ValueError, match="variant"):
        dataclasses.replace(reuse, variant="statement")
