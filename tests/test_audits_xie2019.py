"""White-box audits of GPOPE (Xie et al. 2019, Alg. 1; dprl.experiments.audits.xie2019): they
run the package's GPOPE on neighbouring trajectory sets, recover every released noisy
gradient from its iterates and score it by the exact log-likelihood ratio."""

import dataclasses
import importlib

import numpy as np
import pytest
from scipy import stats

from dprl.envs import ChainMDP, Trajectories, stack_trajectories
from dprl.experiments import get
from dprl.experiments.audits.common import SAMPLED, accountant_epsilon, audit_row, pair_epsilon
from dprl.experiments.audits.xie2019 import (CHAIN, GPOPEAuditConfig, canary_log_likelihood_ratio,
                                             gpope_module, gpope_statistics, pair_sensitivity)
from dprl.engine.batches import compute_trials
from dprl.features import tabular_features
from dprl.policy_evaluation import td_statistics
from dprl.seeding import trial_generator, trial_generators
from dprl.xie2019 import gpope_runs, prepare
from dprl.xie2019.privacy import calibrated_sigma, pld_epsilon, tightest_epsilon

IDS = ("audit-xie2019-paper", "audit-xie2019-sound", "audit-xie2019-pld")


def _single(trajectories: Trajectories, index: tuple) -> Trajectories:
    """The trajectory at ``index`` of the batch, as a data set of one."""
    return Trajectories(*(a[index][None, None] for a in (trajectories.states, trajectories.rewards,
                                                   trajectories.lengths,
                                                   trajectories.terminated)),
                        trajectories.reward_range)


def _clipped_eq_4_1(one: Trajectories, features, gamma, xi: np.ndarray, h: float):
    """``clip_h([-A^T w; A theta + C w - b])`` from td_statistics (Eq. 2.2), independently of
    the package's GPOPE code, at points ``xi`` ``(..., 2n)``."""
    A, b, C = (M[0] for M in td_statistics(one, features, gamma, normalisation="trajectories"))
    n = b.size
    theta, w = xi[..., :n], xi[..., n:]
    grad = np.concatenate([-w @ A, theta @ A.T + w @ C.T - b], axis=-1)
    norms = np.linalg.norm(grad, axis=-1, keepdims=True)
    return grad / np.maximum(1.0, norms / h)


def test_gpope_runs_iterates_end_in_the_release_and_hold_every_noisy_gradient():
    """The iterates option: the same draws and bits as the release, the start 0 first, and
    (xi_{t-1} - xi_t) / beta is clip_h(B_i(xi_{t-1})) + h sigma zeta for the sampled i
    (the draws replayed: m indices, then the noise)."""
    mdp, m, n_iterations, h = ChainMDP(n_states=6, horizon=30, gamma=0.9), 20, 40, 0.5
    data = stack_trajectories([mdp.sample(m, g) for g in trial_generators(4, 2)])
    features = tabular_features(6)
    ready = prepare(data, features, mdp.gamma)
    datasets, steps = np.array([0, 1, 1]), np.array([0.05, 0.1, 0.3])
    args = (ready, datasets, steps, n_iterations, h, 1.0, 1e-5)
    released = gpope_runs(*args, trial_generators(8, 3))
    theta, w = gpope_runs(*args, trial_generators(8, 3), iterates=True)
    assert theta.shape == w.shape == (3, n_iterations + 1, 6)
    assert np.array_equal(theta[:, -1], released[0]) and np.array_equal(w[:, -1], released[1])
    assert not theta[:, 0].any() and not w[:, 0].any()
    sigma = calibrated_sigma("tightest", 1.0, 1e-5, n_iterations, m)
    xi = np.concatenate([theta, w], axis=-1)
    for r, g in enumerate(trial_generators(8, 3)):
        picks, noise = g.integers(m, size=n_iterations), g.standard_normal((n_iterations, 12))
        noisy = (xi[r, :-1] - xi[r, 1:]) / steps[r]
        clipped = np.stack([_clipped_eq_4_1(_single(data, (datasets[r], i)), features,
                                            mdp.gamma, xi[r, t], h)
                            for t, i in enumerate(picks)])
        assert np.allclose(noisy, clipped + h * sigma * noise, rtol=0, atol=1e-9)


def test_the_data_sets_are_replace_one_neighbours_of_real_chain_episodes():
    config = get("audit-xie2019-paper").config("smoke")
    data = config.datasets()
    assert data.batch_shape == (2, config.m)
    assert np.array_equal(data.states[0], data.states[1])
    differs = np.any(data.rewards[0] != data.rewards[1], axis=-1)
    assert np.flatnonzero(differs).tolist() == [0]  # one trajectory replaced: the canary
    assert np.array_equal(data.rewards[1, 0], -data.rewards[0, 0])
    episode = data.states[0, 0]  # 0 -> 1 (entering the goal: reward) -> 2 (absorbing)
    assert episode.tolist() == [0, 1, 2]
    assert data.rewards[0, 0].tolist() == [config.reward_scale, 0.0] and data.terminated.all()


def test_both_clipped_gradients_stay_opposite_at_the_clip_along_the_runs():
    """||g - g'|| = 2h at every iterate GPOPE visits, so the pair is the subsampled Gaussian
    of sensitivity 2 that pair_epsilon accounts."""
    config = get("audit-xie2019-paper").config("smoke")
    prepared = config.prepared()
    theta, w = gpope_runs(prepared, np.repeat([0, 1], 50), np.full(100, config.step_size),
                          config.n_iterations, config.clip, config.eps, config.delta,
                          trial_generators(11, 100), calibration="paper", iterates=True)
    xi = np.concatenate([theta, w], axis=-1).reshape(-1, 6)
    data = config.datasets()
    g, g_canary = (_clipped_eq_4_1(_single(data, (k, 0)), tabular_features(3), CHAIN.gamma,
                                   xi, config.clip) for k in (0, 1))
    assert np.allclose(np.linalg.norm(g, axis=-1), config.clip, rtol=1e-12)
    assert np.abs(np.linalg.norm(g - g_canary, axis=-1) / config.clip - 2).max() < 1e-9
    assert pair_sensitivity(config) == pytest.approx(2.0, rel=1e-12)


def test_statistic_is_the_exact_log_likelihood_ratio_of_the_released_gradients():
    """Against scipy's Gaussian densities of the noisy gradients, with the clipped gradients
    of tau and tau' from td_statistics, at arbitrary iterates."""
    config = dataclasses.replace(get("audit-xie2019-sound").config("smoke"), m=7, clip=2.0)
    iterates = np.random.default_rng(5).normal(scale=0.05, size=(4, 6, 6))
    got = canary_log_likelihood_ratio(config, config.prepared(), iterates)
    data, scale, q = config.datasets(), config.sigma * config.clip, 1 / 7
    expected = np.zeros(4)
    for r in range(4):
        for t in range(1, 6):
            y = (iterates[r, t - 1] - iterates[r, t]) / config.step_size
            g, g_canary = (_clipped_eq_4_1(_single(data, (k, 0)), tabular_features(3),
                                           CHAIN.gamma, iterates[r, t - 1], config.clip)
                           for k in (0, 1))
            null = stats.multivariate_normal(g, scale**2).pdf(y)
            alternative = stats.multivariate_normal(g_canary, scale**2).pdf(y)
            expected[r] += np.log((1 - q) * null + q * alternative) - np.log(null)
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_pair_eps_is_where_a_monte_carlo_hockey_stick_meets_delta():
    """At N = m = 10, delta = 1e-2: the hockey-stick divergence of GPOPE's runs on D' and D
    (both orders, from the statistic, the privacy loss) at pair_epsilon is delta."""
    config = dataclasses.replace(get("audit-xie2019-sound").config("smoke"), n_iterations=10,
                                 m=10, delta=1e-2, runs_per_trial=40_000)
    eps = pair_epsilon(config)
    null, alternative = gpope_statistics(config, trial_generator(21, 0))
    deltas = [np.mean(np.maximum(-np.expm1(eps - alternative), 0.0)),
              np.mean(np.maximum(-np.expm1(eps + null), 0.0))]
    assert max(deltas) == pytest.approx(config.delta, rel=0.1)
    assert eps < accountant_epsilon(config) == tightest_epsilon(config.sigma, 1e-2, 10, 10)


@pytest.mark.parametrize("experiment_id", IDS)
def test_audit_samples_through_gpope_runs(experiment_id, monkeypatch):
    assert SAMPLED[experiment_id] == ("dprl.xie2019.gpope.gpope_runs",)
    calls = []
    module = importlib.import_module("dprl.xie2019.gpope")
    original = module.gpope_runs

    def counting(*args, **kwargs):
        calls.append(kwargs["calibration"])
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "gpope_runs", counting)
    assert gpope_module is module
    experiment = get(experiment_id)
    compute_trials(experiment, experiment.config("smoke"), [0])
    assert calls == [experiment.config("smoke").calibration]


def test_paper_calibration_shows_a_violation_and_the_sound_one_does_not():
    """At smoke scale (seeded): Lemma 1's sigma, which assumes neighbours differ by h, is
    caught on the real GPOPE; the tightest sound sigma and the sound PLD's are not."""
    rows = {}
    for experiment_id in IDS:
        experiment = get(experiment_id)
        config = experiment.config("smoke")
        rows[experiment_id] = audit_row(experiment_id, config,
                                        compute_trials(experiment, config, range(4)))
    paper, sound = rows["audit-xie2019-paper"], rows["audit-xie2019-sound"]
    assert paper.violation and 1.0 < paper.bound.eps <= paper.pair_eps
    assert not sound.violation and sound.bound.eps <= sound.pair_eps
    assert sound.pair_eps <= sound.accountant_eps <= 1.0 + 1e-6
    pld = rows["audit-xie2019-pld"]
    assert not pld.violation and pld.bound.eps <= pld.pair_eps
    assert pld.pair_eps <= pld.accountant_eps <= 1.0 + 1e-6


def test_pld_audit_is_the_sound_one_at_the_pld_sigma():
    """audit-xie2019-pld is audit-xie2019-sound but for the calibration (and its seed and
    edges): less noise, certified by the PLD (its accountant), and a pair that nearly attains
    the claim, where the sound one's stays under half of it."""
    sound, pld = (get(f"audit-xie2019-{name}").config("paper") for name in ("sound", "pld"))
    assert dataclasses.replace(pld, calibration=sound.calibration, root_seed=sound.root_seed,
                               edge_low=sound.edge_low, edge_high=sound.edge_high,
                               n_edges=sound.n_edges) == sound
    assert pld.calibration == "pld" and pld.sigma < sound.sigma
    assert accountant_epsilon(pld) == pld_epsilon(pld.sigma, pld.delta, pld.n_iterations, pld.m)
    assert accountant_epsilon(pld) <= pld.eps
    assert 2 * pair_epsilon(sound) < pld.eps < 2 * pair_epsilon(pld) <= 2 * accountant_epsilon(pld)


def test_a_trial_does_not_depend_on_the_trials_computed_with_it():
    experiment = get("audit-xie2019-sound")
    config = dataclasses.replace(experiment.config("smoke"), runs_per_trial=300)
    together = compute_trials(experiment, config, [0, 2])
    alone = compute_trials(experiment, config, [2])
    for name, value in alone.items():
        assert np.array_equal(together[name][1], value[0])


def test_config_refuses_an_unknown_calibration_and_bad_settings():
    with pytest.raises(ValueError, match="calibration"):
        GPOPEAuditConfig(n_trials=2, root_seed=0, runs_per_trial=1, pilot_trials=1,
                         edge_low=0.0, edge_high=1.0, calibration="sound")
    with pytest.raises(ValueError, match="reward_scale"):
        GPOPEAuditConfig(n_trials=2, root_seed=0, runs_per_trial=1, pilot_trials=1,
                         edge_low=0.0, edge_high=1.0, reward_scale=0.0)
