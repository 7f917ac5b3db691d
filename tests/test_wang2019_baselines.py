"""Baselines of Wang & Hegde (2019), Fig. 2 (dprl.wang2019.baselines, dprl.wang2019.dp_sgd):
calibration against hand formulas and dp-accounting, the privacy noise really added at the
calibrated scale, per-example clipping against explicit per-example gradients, each
baseline with its noise off equal to the plain DQN bit for bit, batch invariance, the
table evaluation, and input checks."""

import dataclasses
import logging
import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import stats

from dprl.accounting import DEFAULT_INTEGER_ORDERS, calibrate_subsampled_gaussian
from dprl.envs.line_mdp import LineMDP
from dprl.mechanisms import gaussian_delta
from dprl.seeding import trial_generator, trial_generators
from dprl.wang2019 import baselines as bl
from dprl.wang2019.dp_sgd import ClippedNoisyMLPQ, per_example_sq_norms
from dprl.wang2019.q_functions import MLPQ
from dprl.wang2019.q_learning import AUTHORS_DQN, QLearningConfig, train

logging.getLogger("absl").setLevel(logging.ERROR)

SHORT = LineMDP(horizon=10)
SMALL = QLearningConfig(n_episodes=8, batch_size=16, replay_capacity=40, epsilon_decay=20.0,
                        target_update_episodes=3, reset_period=15)
DELTA = 1e-4
FIELDS = ("returns", "states", "actions", "network_q", "released_q")


def gdp_delta(eps, mu):
    """delta(eps) of mu-GDP by hand (Dong, Roth & Su 2022, Cor. 2.13)."""
    return (stats.norm.cdf(-eps / mu + mu / 2)
            - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2))


def chi2_std_ok(samples, std, tail=1e-6):
    """Two-sided chi-square test of the sample variance (known mean 0) against std^2."""
    samples = np.ravel(samples)
    statistic = np.sum(samples ** 2) / std ** 2
    low, high = stats.chi2.ppf([tail, 1 - tail], samples.size)
    return low < statistic < high


@pytest.mark.parametrize("steps,eps", [(5000, 0.9), (4873, 0.45), (10, 2.0)])
def test_exact_composition_against_gdp_and_pld(steps, eps):
    z = bl.composed_gaussian_multiplier(steps, eps, DELTA)
    assert gdp_delta(eps, math.sqrt(steps) / z) == pytest.approx(DELTA, rel=1e-9)
    assert bl.composed_gaussian_epsilon(z, steps, DELTA) == pytest.approx(eps, rel=1e-9)
    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(dpa.GaussianDpEvent(z), steps)
    assert accountant.get_epsilon(DELTA) == pytest.approx(eps, rel=1e-5)


@pytest.mark.parametrize("steps,z", [(5000, 272.6), (4873, 60.0), (10, 3.0)])
def test_rdp_composition_against_dp_accounting(steps, z):
    accountant = rdp_privacy_accountant.RdpAccountant(list(DEFAULT_INTEGER_ORDERS))
    accountant.compose(dpa.GaussianDpEvent(z), steps)
    ours = bl.composed_gaussian_epsilon(z, steps, DELTA, accountant="rdp",
                                        orders=DEFAULT_INTEGER_ORDERS)
    assert ours == pytest.approx(accountant.get_epsilon(DELTA), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("eps", [0.9, 0.45])
def test_rdp_calibration_meets_target_and_is_looser_than_exact(eps):
    z = bl.composed_gaussian_multiplier(5000, eps, DELTA, accountant="rdp")
    assert bl.composed_gaussian_epsilon(z, 5000, DELTA, accountant="rdp") <= eps
    assert bl.composed_gaussian_epsilon(z * (1 - 1e-7), 5000, DELTA, accountant="rdp") > eps
    assert z > 1.05 * bl.composed_gaussian_multiplier(5000, eps, DELTA)


def test_input_perturbation_scale_for_figure_2():
    assert bl.n_rewards(AUTHORS_DQN) == 5000
    scales = [bl.input_perturbation_scale(AUTHORS_DQN, eps, DELTA) for eps in (0.9, 0.45)]
    for eps, scale in zip((0.9, 0.45), scales):  # sensitivity 1 per reward, 5000 rewards
        assert gdp_delta(eps, math.sqrt(5000) * 1.0 / scale) == pytest.approx(DELTA, rel=1e-9)
    np.testing.assert_allclose(scales, [247.27383, 457.70826], rtol=1e-6)


def test_dp_sgd_calibration_for_figure_2():
    assert bl.dp_sgd_updates(AUTHORS_DQN) == 5000 - 128 + 1
    assert bl.dp_sgd_sensitivity(128, 0.5) == 2 * 128 * 0.5
    z = bl.dp_sgd_noise_multiplier(AUTHORS_DQN, 0.9, DELTA)
    assert z == bl.composed_gaussian_multiplier(4873, 0.9, DELTA)
    assert z == pytest.approx(244.11326, rel=1e-6)
    naive = bl.subsampled_dp_sgd_multiplier(AUTHORS_DQN, 0.9, DELTA,
                                            orders=DEFAULT_INTEGER_ORDERS)
    assert naive == calibrate_subsampled_gaussian(0.9, DELTA, 128 / 5000, 4873,
                                                  DEFAULT_INTEGER_ORDERS)
    assert naive == pytest.approx(6.9496, rel=1e-4)
    # the noise std on the batch sum: z 2 B C against the naive z C
    assert z * bl.dp_sgd_sensitivity(128, 1.0) / naive > 8000


def test_dp_sgd_update_count_matches_training():
    result = bl.train_dp_sgd(SMALL, 1.0, DELTA, trial_generators(0, 1), mdp=SHORT)
    assert result.training.n_updates == bl.dp_sgd_updates(SMALL, SHORT) == 80 - 16 + 1


def test_output_perturbation_scale():
    assert bl.return_bound(AUTHORS_DQN) == pytest.approx((1 - 0.999 ** 50) / 0.001, rel=1e-12)
    bootstrap = dataclasses.replace(AUTHORS_DQN, bootstrap_truncation=True)
    assert bl.return_bound(bootstrap) == pytest.approx(1000.0, rel=1e-12)
    assert bl.return_bound(dataclasses.replace(AUTHORS_DQN, gamma=1.0)) == 50
    scale = bl.output_perturbation_scale(AUTHORS_DQN, 0.9, DELTA, 202)
    sensitivity = math.sqrt(202) * bl.return_bound(AUTHORS_DQN)
    assert gaussian_delta(0.9, sensitivity, scale) == pytest.approx(DELTA, rel=1e-9)


def test_reward_noise_is_added_at_the_calibrated_scale():
    config = dataclasses.replace(SMALL, n_episodes=60)
    eps = np.array([0.9, 0.45, 0.9, 0.45])
    result = bl.train_input_perturbation(config, eps, DELTA, trial_generators(2, 4), mdp=SHORT)
    expected = [bl.input_perturbation_scale(config, e, DELTA, SHORT) for e in eps]
    np.testing.assert_array_equal(result.noise_scales, expected)
    assert result.perturbations.shape == (4, 600)
    assert chi2_std_ok(result.perturbations / result.noise_scales[:, None], 1.0)
    assert abs(np.mean(result.perturbations / result.noise_scales[:, None])) < 5 / math.sqrt(2400)
    # what the learner saw (the log's rewards) minus the true rewards, summed per episode
    seen_minus_true = result.training.returns - result.returns
    per_episode = result.perturbations.reshape(4, 60, 10).sum(axis=2)
    np.testing.assert_allclose(seen_minus_true, per_episode, rtol=0, atol=1e-9)
    true = SHORT.reward(result.training.states[:, :, 1:]).sum(axis=2)
    np.testing.assert_array_equal(result.returns, true)


def test_output_noise_is_added_at_the_calibrated_scale():
    result = bl.train_output_perturbation(SMALL, [0.9, 0.45], DELTA, trial_generators(4, 2),
                                          mdp=SHORT)
    n_values = result.grid.size * 2
    expected = [bl.output_perturbation_scale(SMALL, e, DELTA, n_values, SHORT)
                for e in (0.9, 0.45)]
    np.testing.assert_array_equal(result.noise_scales, expected)
    np.testing.assert_array_equal(result.released_q,
                                  result.training.network_q + result.perturbations)
    assert chi2_std_ok(result.perturbations / result.noise_scales[:, None, None], 1.0)


def small_batch(n_runs=2, batch=16, seed=0):
    """Parameters, forward cache and upstream gradient dq of a Huber batch for n_runs."""
    rng = np.random.default_rng(seed)
    params = tuple(np.stack(p) for p in zip(*[MLPQ().init(g) for g in rng.spawn(n_runs)]))
    states = rng.random((n_runs, batch))
    q, cache = MLPQ().forward(params, states)
    actions = rng.integers(0, 2, (n_runs, batch))
    dq = np.zeros_like(q)
    np.put_along_axis(dq, actions[..., None], rng.uniform(-1, 1, (n_runs, batch, 1)) / batch,
                      axis=2)
    return params, states, cache, dq


def explicit_per_example_gradients(params, states, dq):
    """Loss gradient of each example alone (B times its share of the mean), by the plain
    batched backward on a batch of one."""
    batch = states.shape[1]
    grads = []
    for i in range(batch):
        _, cache = MLPQ().forward(params, states[:, i:i + 1])
        grads.append(MLPQ.backward(params, cache, batch * dq[:, i:i + 1]))
    return grads


def test_per_example_clipping_against_explicit_gradients():
    params, states, cache, dq = small_batch()
    per_example = explicit_per_example_gradients(params, states, dq)
    norms = np.sqrt([[sum(np.sum(g[r] ** 2) for g in grads) for r in range(2)]
                     for grads in per_example]).T
    np.testing.assert_allclose(16 * np.sqrt(per_example_sq_norms(params, cache, dq)), norms,
                               rtol=1e-12)
    clip = float(np.median(norms))
    factors = np.minimum(1.0, clip / norms)
    clipped_mean = [sum(factors[:, i].reshape(-1, *(1,) * (g.ndim - 1)) * g
                        for i, g in enumerate(arrays)) / 16 for arrays in zip(*per_example)]
    learner = ClippedNoisyMLPQ(clip_norm=clip, noise_stds=[0.0, 0.0],
                               noise_rngs=trial_generators(0, 2))
    assert 0 < np.sum(factors < 1) < factors.size
    for ours, reference in zip(learner.backward(params, cache, dq), clipped_mean):
        np.testing.assert_allclose(ours, reference, rtol=1e-12, atol=1e-15)


def test_gradient_noise_is_added_at_the_calibrated_scale():
    params, _, cache, dq = small_batch()
    clean = ClippedNoisyMLPQ(clip_norm=0.3, noise_stds=[0.0, 0.0],
                             noise_rngs=trial_generators(0, 2)).backward(params, cache, dq)
    noisy = ClippedNoisyMLPQ(clip_norm=0.3, noise_stds=[2.5, 0.0],
                             noise_rngs=trial_generators(1, 2))
    draws = [np.concatenate([(n - c).reshape(2, -1) for n, c in
                             zip(noisy.backward(params, cache, dq), clean)], axis=1)
             for _ in range(200)]
    sums = 16 * np.stack(draws)  # noise on the batch sum = 16 x noise on the mean
    assert sums.shape == (200, 2, 338)
    assert chi2_std_ok(sums[:, 0], 2.5)
    assert np.all(sums[:, 1] == 0)


@pytest.fixture(scope="module")
def plain():
    return train(MLPQ(), SMALL, np.zeros(2), trial_generators(3, 2), SHORT)


def assert_same_training(result, plain):
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(result.training, name), getattr(plain, name))
    np.testing.assert_array_equal(result.returns, plain.returns)


def test_input_perturbation_without_noise_is_the_plain_dqn(plain):
    result = bl.train_perturbed_rewards(SMALL, [0.0, 0.0], trial_generators(3, 2),
                                        trial_generators(9, 2), mdp=SHORT)
    assert_same_training(result, plain)
    np.testing.assert_array_equal(result.released_q, plain.network_q)
    noisy = bl.train_input_perturbation(SMALL, 0.9, DELTA, trial_generators(3, 2), mdp=SHORT)
    np.testing.assert_array_equal(noisy.training.states[:, 0, 0], plain.states[:, 0, 0])
    assert not np.array_equal(noisy.training.network_q, plain.network_q)


def test_output_perturbation_without_noise_is_the_plain_dqn(plain):
    noisy = bl.train_output_perturbation(SMALL, 0.9, DELTA, trial_generators(3, 2), mdp=SHORT)
    assert_same_training(noisy, plain)
    silent = bl.perturb_output(noisy.training, [0.0, 0.0], trial_generators(9, 2), SHORT)
    np.testing.assert_array_equal(silent.released_q, plain.network_q)


@pytest.mark.parametrize("clip_norm", [None, 1e300])
def test_dp_sgd_without_noise_is_the_plain_dqn(plain, clip_norm):
    result = bl.train_clipped_noisy_sgd(SMALL, clip_norm, [0.0, 0.0], trial_generators(3, 2),
                                        trial_generators(9, 2), mdp=SHORT)
    assert_same_training(result, plain)
    noisy = bl.train_dp_sgd(SMALL, 0.9, DELTA, trial_generators(3, 2), mdp=SHORT)
    assert not np.array_equal(noisy.training.network_q, plain.network_q)


@pytest.mark.parametrize("trainer", [bl.train_input_perturbation, bl.train_output_perturbation,
                                     bl.train_dp_sgd])
def test_runs_do_not_depend_on_the_batch(trainer):
    eps = [0.9, 0.45, 2.0]
    batch = trainer(SMALL, eps, DELTA, trial_generators(5, 3), mdp=SHORT)
    for run in (0, 2):
        alone = trainer(SMALL, eps[run], DELTA, [trial_generator(5, run)], mdp=SHORT)
        assert alone.noise_scales[0] == batch.noise_scales[run]
        np.testing.assert_array_equal(alone.returns[0], batch.returns[run])
        np.testing.assert_array_equal(alone.released_q[0], batch.released_q[run])
        if batch.perturbations is not None:
            np.testing.assert_array_equal(alone.perturbations[0], batch.perturbations[run])


def test_sweep_is_level_major_with_common_random_numbers():
    result = bl.baseline_sweep("input", SMALL, [0.9, 0.45], DELTA, [0, 3], 5, SHORT)
    scales = [bl.input_perturbation_scale(SMALL, e, DELTA, SHORT) for e in (0.9, 0.45)]
    np.testing.assert_array_equal(result.noise_scales, np.repeat(scales, 2))
    starts = result.training.states[:, 0, 0]
    assert starts[0] == starts[2] and starts[1] == starts[3] and starts[0] != starts[1]
    # same standard normals at both levels, scaled
    np.testing.assert_allclose(result.perturbations[0] / scales[0],
                               result.perturbations[2] / scales[1], rtol=1e-12)


def test_table_evaluation_of_the_optimal_policy():
    grid = np.linspace(0, 1, 201)
    toward_centre = np.stack([grid < 0.5, grid > 0.5], axis=1).astype(float)
    table = np.stack([toward_centre, 1 - toward_centre])
    returns = bl.evaluate_table_greedy(grid, table, 400, trial_generators(2, 2))
    assert returns[0] == pytest.approx(20.70833, abs=0.15)
    assert returns[1] < 5  # always away from the centre


@pytest.mark.parametrize("call", [
    lambda: bl.composed_gaussian_multiplier(0, 0.9, DELTA),
    lambda: bl.composed_gaussian_multiplier(10, 0.0, DELTA),
    lambda: bl.composed_gaussian_multiplier(10, 0.9, 1.0),
    lambda: bl.composed_gaussian_multiplier(10, 0.9, DELTA, accountant="advanced"),
    lambda: bl.composed_gaussian_epsilon(-1.0, 10, DELTA),
    lambda: bl.input_perturbation_scale({}, 0.9, DELTA),
    lambda: bl.input_perturbation_scale(SMALL, 0.9, DELTA, mdp="line"),
    lambda: bl.return_bound(dataclasses.replace(SMALL, gamma=1.0, bootstrap_truncation=True)),
    lambda: bl.output_perturbation_scale(SMALL, 0.9, DELTA, 0),
    lambda: bl.dp_sgd_updates(dataclasses.replace(SMALL, n_episodes=1), SHORT),
    lambda: bl.dp_sgd_sensitivity(128, 0.0),
    lambda: bl.train_input_perturbation(SMALL, [0.9, 0.45], DELTA, trial_generators(0, 3)),
    lambda: bl.train_input_perturbation(SMALL, -0.9, DELTA, trial_generators(0, 1)),
    lambda: bl.train_output_perturbation(SMALL, 0.9, DELTA, [np.random.RandomState(0)]),
    lambda: bl.train_dp_sgd(SMALL, 0.9, DELTA, []),
    lambda: bl.train_dp_sgd(SMALL, 0.9, DELTA, trial_generators(0, 1), clip_norm=-1.0),
    lambda: bl.train_perturbed_rewards(SMALL, [-1.0], trial_generators(0, 1),
                                       trial_generators(1, 1)),
    lambda: bl.train_perturbed_rewards(SMALL, [1.0], trial_generators(0, 1),
                                       trial_generators(1, 2)),
    lambda: bl.train_clipped_noisy_sgd(SMALL, 1.0, [np.nan], trial_generators(0, 1),
                                       trial_generators(1, 1)),
    lambda: bl.perturb_output("result", [1.0], trial_generators(0, 1)),
    lambda: bl.baseline_sweep("laplace", SMALL, [0.9], DELTA, [0], 0),
    lambda: bl.baseline_sweep("input", SMALL, [0.9], DELTA, [], 0),
    lambda: bl.evaluate_table_greedy(np.linspace(0, 1, 5), np.zeros((1, 4, 2)), 3,
                                     trial_generators(0, 1)),
    lambda: bl.evaluate_table_greedy(np.linspace(0, 1, 5), np.zeros((1, 5, 2)), 0,
                                     trial_generators(0, 1)),
    lambda: ClippedNoisyMLPQ(clip_norm=1.0, noise_stds=[1.0], noise_rngs=trial_generators(0, 2)),
    lambda: ClippedNoisyMLPQ(clip_norm=1.0, noise_stds=[-1.0], noise_rngs=trial_generators(0, 1)),
    lambda: ClippedNoisyMLPQ(clip_norm=0.0, noise_stds=[1.0], noise_rngs=trial_generators(0, 1)),
])
def test_bad_inputs_raise(call):
    with pytest.raises(ValueError):
        call()
