"""GPOPE and per-trajectory GTD2 (Xie et al. 2019, Algorithm 1 and Eq. 2.3)."""

import numpy as np
import pytest
from scipy import stats

from dprl.envs import ChainMDP, Trajectories, stack_trajectories
from dprl.features import aggregation_features, tabular_features
from dprl.policy_evaluation import td_statistics
from dprl.seeding import trial_generators
from dprl.xie2019 import gpope_sigma
from dprl.xie2019.gpope import gpope, primal_dual_descent
from dprl.xie2019.prepared import _Episodes

MDP = ChainMDP(n_states=6, horizon=30, gamma=0.9)
PHI = aggregation_features(6, 2)


def _data(n_trials=4, m=50, root=3):
    return stack_trajectories([MDP.sample(m, g) for g in trial_generators(root, n_trials)])


def _single(trajectories: Trajectories, i: int) -> Trajectories:
    return Trajectories(trajectories.states[:, i:i + 1], trajectories.rewards[:, i:i + 1],
                        trajectories.lengths[:, i:i + 1], trajectories.terminated[:, i:i + 1],
                        trajectories.reward_range)


def test_gradient_is_eq_4_1_with_the_per_trajectory_estimates_of_eq_2_2():
    data, rng = _data(), np.random.default_rng(1)
    theta, w = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    episodes = _Episodes.of(data, PHI, None)
    for i in (0, 7, 49):
        A, b, C = td_statistics(_single(data, i), PHI, MDP.gamma, normalisation="trajectories")
        expected = np.concatenate([-np.einsum("kij,ki->kj", A, w),
                                   np.einsum("kij,kj->ki", A, theta)
                                   + np.einsum("kij,kj->ki", C, w) - b], axis=1)
        got = episodes.gradient(np.full(4, i), theta, w, MDP.gamma)
        assert np.allclose(got, expected, rtol=1e-12, atol=1e-14)


def test_importance_ratios_weight_a_and_b_but_not_c():
    data = _data(n_trials=1, m=3)
    ratios = np.where(data.transition_mask, 2.5, 0.0)
    theta, w = np.ones((1, 3)), np.full((1, 3), 0.5)
    A, b, C = td_statistics(_single(data, 1), PHI, MDP.gamma, normalisation="trajectories")
    expected = np.concatenate([-2.5 * np.einsum("kij,ki->kj", A, w),
                               2.5 * np.einsum("kij,kj->ki", A, theta)
                               + np.einsum("kij,kj->ki", C, w) - 2.5 * b], axis=1)
    got = _Episodes.of(data, PHI, ratios).gradient(np.array([1]), theta, w, MDP.gamma)
    assert np.allclose(got, expected, rtol=1e-12, atol=1e-14)


def test_mean_gradient_vanishes_at_the_data_fixed_point():
    """sum_i B_i(theta_X, 0) / m = [0; A_X theta_X - b_X] = 0: the fixed point of GTD2."""
    data = _data()
    A, b, _ = td_statistics(data, PHI, MDP.gamma, normalisation="trajectories")
    theta_x = np.linalg.solve(A, b[..., None])[..., 0]
    episodes = _Episodes.of(data, PHI, None)
    mean = sum(episodes.gradient(np.full(4, i), theta_x, np.zeros((4, 3)), MDP.gamma)
               for i in range(50)) / 50
    assert np.abs(mean).max() < 1e-12


def test_gtd2_converges_to_the_fixed_point():
    data = _data()
    A, b, _ = td_statistics(data, PHI, MDP.gamma, normalisation="trajectories")
    theta_x = np.linalg.solve(A, b[..., None])[..., 0]
    betas = 1.0 / (1 + np.arange(20_000) / 100)
    theta, w = primal_dual_descent(data, PHI, MDP.gamma, betas, 20_000, trial_generators(3, 4))
    assert np.abs(theta - theta_x).max() < 0.02 and np.abs(w).max() < 0.02


def test_clipping_bounds_every_step():
    data, h, beta = _data(), 1e-3, 0.3
    theta0 = np.random.default_rng(2).normal(size=(4, 3)) * 10
    theta, w = primal_dual_descent(data, PHI, MDP.gamma, beta, 1, trial_generators(0, 4),
                                   clip=h, theta0=theta0)
    step = np.sqrt(((theta - theta0) ** 2).sum(-1) + (w**2).sum(-1))
    assert np.allclose(step, beta * h, rtol=1e-12)  # these gradients are all longer than h


def test_noise_has_the_scale_h_sigma():
    data, h, sigma, beta = _data(n_trials=40, m=5), 1e3, 0.7, 0.01
    kwargs = dict(clip=h, theta0=np.ones(3))
    quiet = primal_dual_descent(data, PHI, MDP.gamma, beta, 1, trial_generators(9, 40), **kwargs)
    noisy = primal_dual_descent(data, PHI, MDP.gamma, beta, 1, trial_generators(9, 40),
                                noise_scale=sigma, **kwargs)
    z = np.concatenate([noisy[0] - quiet[0], noisy[1] - quiet[1]], axis=1) / (beta * h * sigma)
    assert stats.kstest(z.ravel(), "norm").pvalue > 1e-3
    assert abs(z.std() - 1) < 0.15


def test_gpope_uses_the_accountants_sigma_and_is_batch_invariant():
    data = _data(n_trials=3, m=200)
    sigma = gpope_sigma(1.0, 1e-5, 300, 200)
    released = gpope(data, PHI, MDP.gamma, 0.1, 300, 1.0, 1.0, 1e-5, trial_generators(5, 3))
    direct = primal_dual_descent(data, PHI, MDP.gamma, 0.1, 300, trial_generators(5, 3),
                                 clip=1.0, noise_scale=sigma)
    assert np.array_equal(released[0], direct[0]) and np.array_equal(released[1], direct[1])
    alone = gpope(stack_trajectories([_single_trial(data, 1)]), PHI, MDP.gamma, 0.1, 300, 1.0,
                  1.0, 1e-5, trial_generators(5, [1]))
    assert np.array_equal(alone[0][0], released[0][1])


def _single_trial(data: Trajectories, k: int) -> Trajectories:
    return Trajectories(data.states[k], data.rewards[k], data.lengths[k], data.terminated[k],
                        data.reward_range)


def test_refuses_bad_inputs():
    data, rngs = _data(), trial_generators(0, 4)
    with pytest.raises(ValueError, match="ratios"):
        primal_dual_descent(data, PHI, 0.9, 0.1, 5, rngs, ratios=-np.ones(data.rewards.shape))
    with pytest.raises(ValueError, match="step_size"):
        primal_dual_descent(data, PHI, 0.9, np.ones(3), 5, rngs)
    with pytest.raises(ValueError, match="clipping"):
        primal_dual_descent(data, PHI, 0.9, 0.1, 5, rngs, noise_scale=1.0)
    with pytest.raises(ValueError, match="rngs"):
        primal_dual_descent(data, PHI, 0.9, 0.1, 5, rngs[:2])
    with pytest.raises(ValueError, match="rows of features"):
        primal_dual_descent(data, tabular_features(3), 0.9, 0.1, 5, rngs)


@pytest.mark.parametrize("trajectories", [np.zeros((4, 31)), None, [[0, 1]]])
def test_gpope_names_trajectories_that_are_not_trajectories(trajectories):
    """m (the data-set size the noise is calibrated for) comes from the trajectories: anything
    else is refused by name, not as "m must be >= 1, got 0"."""
    with pytest.raises(ValueError, match="trajectories must be Trajectories"):
        gpope(trajectories, PHI, 0.9, 0.1, 5, 1.0, 1.0, 1e-5, trial_generators(0, 4))


def test_gradient_norms_match_the_gradients():
    from dprl.xie2019 import gradient_norms

    data = _data(n_trials=2, m=6)
    theta, w = np.full((2, 3), 0.3), np.full((2, 3), -0.1)
    norms = gradient_norms(data, PHI, MDP.gamma, theta, w)
    episodes = _Episodes.of(data, PHI, None)
    assert norms.shape == (2, 6)
    assert np.allclose(norms[:, 4], np.linalg.norm(episodes.gradient(np.full(2, 4), theta, w,
                                                                      MDP.gamma), axis=-1))


@pytest.mark.parametrize("permuted", [False, True])
def test_tabular_matrix_and_transition_gradients_agree(monkeypatch, permuted):
    """The three ways of computing B_i (Eq. 4.1) agree up to rounding: the tabular entries
    (one-hot features), the dense per-trajectory matrices (when m n^2 fits the budget) and
    the sum over the picked trajectory's transitions. Permuted one-hot features put the
    transitions on many bands of A_i, below the diagonal too."""
    import importlib

    from dprl.envs import OffPolicyChain

    prepared_module = importlib.import_module("dprl.xie2019.prepared")

    data, ratios = OffPolicyChain().sample((3, 50), np.random.default_rng(11))
    order = np.random.default_rng(5).permutation(40) if permuted else np.arange(40)
    features = tabular_features(40)[order]
    tabular = prepared_module.prepare(data, features, 0.99, ratios)
    assert tabular.tabular is not None and tabular.matrices is None
    assert (tabular.tabular.offsets.size > 2) == permuted
    dense = prepared_module.prepare(data, features, 0.99, ratios, tabular=False)
    assert dense.tabular is None and dense.matrices is not None
    monkeypatch.setattr(prepared_module, "_MATRIX_BUDGET", 0)
    fallback = prepared_module.prepare(data, features, 0.99, ratios, tabular=False)
    assert fallback.matrices is None and fallback.tabular is None
    rng = np.random.default_rng(12)
    for _ in range(20):
        datasets, picked = rng.integers(3, size=5), rng.integers(50, size=5)
        theta, w = rng.standard_normal((5, 40)), rng.standard_normal((5, 40))
        expected = fallback.gradient(datasets, picked, theta, w)
        for way in (tabular, dense):
            np.testing.assert_allclose(way.gradient(datasets, picked, theta, w), expected,
                                       rtol=1e-12, atol=1e-14)


def test_features_that_are_not_one_hot_are_not_tabular():
    from dprl.xie2019.prepared import _one_hot_columns

    assert np.array_equal(_one_hot_columns(np.eye(3)[[2, 0, 1, 1]]), [2, 0, 1, 1])
    assert _one_hot_columns(2 * np.eye(3)) is None
    assert _one_hot_columns(np.array([[1.0, 1.0], [0.0, 1.0]])) is None
    assert _one_hot_columns(np.array([[1.0, 0.0], [0.0, 0.0]])) is None


def test_prepared_data_gives_the_same_run_and_is_checked():
    from dprl.xie2019.prepared import prepare

    data = ChainMDP(n_states=10).sample((2, 60), np.random.default_rng(13))
    features = tabular_features(10)
    args = (data, features, 0.9, 0.1, 100)
    plain = primal_dual_descent(*args, trial_generators(1, 2), clip=1.0, noise_scale=0.5)
    ready = prepare(data, features, 0.9)
    shared = primal_dual_descent(*args, trial_generators(1, 2), clip=1.0, noise_scale=0.5,
                                 prepared=ready)
    for a, b in zip(plain, shared):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="prepared was made"):
        primal_dual_descent(data, features, 0.99, 0.1, 10, trial_generators(1, 2),
                            prepared=ready)
    with pytest.raises(ValueError, match="prepared was made"):
        primal_dual_descent(data.first(30), features, 0.9, 0.1, 10, trial_generators(1, 2),
                            prepared=ready)


def _runs_setup():
    from dprl.xie2019.prepared import prepare

    data = ChainMDP(n_states=10).sample((3, 80), np.random.default_rng(21))
    features = tabular_features(10)
    return data, features, prepare(data, features, 0.9)


def test_runs_reproduce_gpope_and_gtd2_on_each_data_set():
    from dprl.xie2019 import gpope_runs

    data, features, ready = _runs_setup()
    theta, w = gpope_runs(ready, [0, 1, 2], [0.1] * 3, 200, 0.5, 1.0, 1e-5,
                          trial_generators(4, 3))
    expected = gpope(data, features, 0.9, 0.1, 200, 0.5, 1.0, 1e-5, trial_generators(4, 3))
    np.testing.assert_array_equal(theta, expected[0])
    np.testing.assert_array_equal(w, expected[1])
    theta, _ = gpope_runs(ready, [0, 1, 2], [0.1] * 3, 200, 0.5, np.inf, 1e-5,
                          trial_generators(4, 3))
    plain, _ = primal_dual_descent(data, features, 0.9, 0.1, 200, trial_generators(4, 3))
    np.testing.assert_array_equal(theta, plain)


def test_a_run_does_not_depend_on_the_runs_computed_with_it():
    from dprl.xie2019 import gpope_runs

    _, _, ready = _runs_setup()
    datasets, steps, eps = [2, 0, 2, 1], [0.1, 0.3, 0.03, 0.1], [1.0, np.inf, 10.0, 1.0]
    together, _ = gpope_runs(ready, datasets, steps, 300, 0.5, eps, 1e-5,
                             trial_generators(6, 4))
    for r in range(4):
        alone, _ = gpope_runs(ready, datasets[r:r + 1], steps[r:r + 1], 300, 0.5, eps[r],
                              1e-5, trial_generators(6, 4)[r:r + 1])
        np.testing.assert_array_equal(alone[0], together[r])
    assert not np.array_equal(together[0], together[3])  # own streams, own noise


def test_runs_reject_bad_arguments():
    from dprl.xie2019 import gpope_runs

    _, _, ready = _runs_setup()
    rngs = trial_generators(0, 2)
    with pytest.raises(ValueError, match="data-set indices"):
        gpope_runs(ready, [0, 3], [0.1, 0.1], 10, 1.0, 1.0, 1e-5, rngs)
    with pytest.raises(ValueError, match="step_sizes"):
        gpope_runs(ready, [0, 1], [0.1, 0.0], 10, 1.0, 1.0, 1e-5, rngs)
    with pytest.raises(ValueError, match="eps must be > 0"):
        gpope_runs(ready, [0, 1], [0.1, 0.1], 10, 1.0, [1.0, 0.0], 1e-5, rngs)
    with pytest.raises(ValueError, match="one per"):
        gpope_runs(ready, [0, 1], [0.1, 0.1], 10, 1.0, 1.0, 1e-5, rngs[:1])
    with pytest.raises(ValueError, match="prepared"):
        gpope_runs(object(), [0, 1], [0.1, 0.1], 10, 1.0, 1.0, 1e-5, rngs)


def test_a_data_set_does_not_depend_on_the_lengths_of_the_others():
    """Shapes, and so the rounding of the products, follow the padded horizon, not the
    longest trajectory of the batch: a data set of short trajectories computed alone and next
    to one of long trajectories gives the same bits (statistics, matrices, GPOPE runs)."""
    from dprl.envs import MountainCar, mountain_car_features
    from dprl.envs.episodes import feature_table, stack_episodes
    from dprl.xie2019 import gpope_runs, prepare
    from dprl.xie2019.baselines import episode_statistics

    def pump(observations, rng):  # reaches the goal in about 100 steps
        return np.where(observations[:, 1] >= 0, 2, 0)

    def coast(observations, rng):  # never reaches it: every episode is truncated
        return np.ones(observations.shape[0], dtype=np.int64)

    car, features = MountainCar(), mountain_car_features()
    short = car.simulate(40, pump, np.random.default_rng(1))
    long = car.simulate(40, coast, np.random.default_rng(2))
    assert short.lengths.max() < long.lengths.max() == car.horizon
    alone = feature_table(stack_episodes([short]), features)
    together = feature_table(stack_episodes([short, long]), features)
    for a, b in zip(episode_statistics(*alone, 0.99), episode_statistics(*together, 0.99)):
        np.testing.assert_array_equal(a[0], b[0])
    ready_alone, ready_together = prepare(*alone, 0.99), prepare(*together, 0.99)
    for a, b in zip(ready_alone.matrices, ready_together.matrices):
        np.testing.assert_array_equal(a[0], b[0])
    theta_alone, _ = gpope_runs(ready_alone, [0], [0.01], 200, 1.0, 1.0, 1e-5,
                                trial_generators(3, 1))
    theta_together, _ = gpope_runs(ready_together, [0, 1], [0.01, 0.01], 200, 1.0, 1.0, 1e-5,
                                   trial_generators(3, 2))
    np.testing.assert_array_equal(theta_alone[0], theta_together[0])


@pytest.mark.parametrize("gamma", [5.0, -0.1, 1.0 + 1e-9, np.nan])
def test_gamma_outside_the_unit_interval_is_refused(gamma):
    from dprl.xie2019 import prepare
    data = _data(n_trials=2, m=5)
    calls = [lambda: prepare(data, PHI, gamma),
             lambda: primal_dual_descent(data, PHI, gamma, 0.1, 2, trial_generators(0, 2)),
             lambda: gpope(data, PHI, gamma, 0.1, 2, 1.0, 1.0, 0.1, trial_generators(0, 2))]
    for call in calls:
        with pytest.raises(ValueError, match="gamma"):
            call()


@pytest.mark.parametrize("name", ["theta0", "w0"])
@pytest.mark.parametrize("shape", [(4,), (2, 4), (3, 3), (1, 2, 3)])
def test_a_starting_point_of_the_wrong_shape_is_refused_by_name(name, shape):
    data = _data(n_trials=2, m=5)  # 2 data sets, 3 features
    with pytest.raises(ValueError, match=rf"{name} must have shape \(3,\) or \(2, 3\)"):
        primal_dual_descent(data, PHI, MDP.gamma, 0.1, 2, trial_generators(0, 2),
                            **{name: np.zeros(shape)})


def test_a_starting_point_per_data_set_or_shared_is_accepted():
    data, start = _data(n_trials=2, m=5), np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    shared = primal_dual_descent(data, PHI, MDP.gamma, 0.1, 1, trial_generators(0, 2),
                                 theta0=start[0], w0=start[0])
    each = primal_dual_descent(data, PHI, MDP.gamma, 0.1, 1, trial_generators(0, 2),
                               theta0=start[[0, 0]], w0=start[[0, 0]])
    np.testing.assert_array_equal(shared[0], each[0])
    moved = primal_dual_descent(data, PHI, MDP.gamma, 1e-12, 1, trial_generators(0, 2),
                                theta0=start)[0]
    np.testing.assert_allclose(moved, start, atol=1e-9)


@pytest.mark.parametrize("permuted", [False, True])
def test_mean_statistics_are_lstds_statistics(monkeypatch, permuted):
    """The means of the stored A_i, b_i, C_i (tabular entries or dense matrices) are
    episode_statistics normalised by trajectories (Eq. 2.2), to rounding."""
    import importlib

    from dprl.envs import OffPolicyChain
    from dprl.xie2019.baselines import episode_statistics

    prepared_module = importlib.import_module("dprl.xie2019.prepared")
    data, ratios = OffPolicyChain().sample((3, 40), np.random.default_rng(21))
    order = np.random.default_rng(6).permutation(40) if permuted else np.arange(40)
    features = tabular_features(40)[order]
    expected = episode_statistics(data, features, 0.99, ratios, "trajectories")
    tabular = prepared_module.prepare(data, features, 0.99, ratios).mean_statistics()
    dense = prepared_module.prepare(data, features, 0.99, ratios, tabular=False).mean_statistics()
    for got in (tabular, dense):
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    monkeypatch.setattr(prepared_module, "_MATRIX_BUDGET", 0)
    with pytest.raises(ValueError, match="memory budget"):
        prepared_module.prepare(data, features, 0.99, ratios, tabular=False).mean_statistics()


def test_tabular_entries_of_a_data_set_do_not_depend_on_the_others():
    from dprl.xie2019.prepared import prepare

    data = ChainMDP(n_states=10).sample((3, 30), np.random.default_rng(23))
    features = tabular_features(10)
    alone = prepare(data.first(30).reshape(3, 30), features, 0.9).tabular
    first = prepare(Trajectories(data.states[:1], data.rewards[:1], data.lengths[:1],
                                 data.terminated[:1], data.reward_range), features, 0.9).tabular
    np.testing.assert_array_equal(alone.entries[0, :, :3], first.entries[0, :, :3])


def test_tabular_prepared_once_and_sliced_is_prepared_alone():
    """The chain's nested data sets are prepared once at the largest m: the first m of the
    tabular entries are the same bits as preparing the first m trajectories alone."""
    from dprl.xie2019.prepared import prepare

    data = ChainMDP(n_states=10).sample((2, 40), np.random.default_rng(29))
    features = tabular_features(10)
    whole = prepare(data, features, 0.9)
    part, alone = whole.first(15), prepare(data.first(15), features, 0.9)
    assert part.m == 15 and whole.m == 40 and part.tabular.entries.shape[1] == 15
    np.testing.assert_array_equal(part.tabular.offsets, alone.tabular.offsets)
    picked, theta = np.array([4, 14]), np.linspace(-1, 1, 20).reshape(2, 10)
    np.testing.assert_array_equal(part.gradient(np.arange(2), picked, theta, -theta),
                                  alone.gradient(np.arange(2), picked, theta, -theta))
    for mine, theirs in zip(part.mean_statistics(), alone.mean_statistics()):
        np.testing.assert_array_equal(mine, theirs)
    with pytest.raises(ValueError, match="m must be <="):
        whole.first(41)


def test_transition_gradient_of_a_run_does_not_depend_on_the_others():
    """The descent above the matrix budget sums B_i from the transitions by matrix-vector
    products: one run's bits must not depend on the runs computed with it (spot-checks
    recompute one trial alone)."""
    data = ChainMDP(n_states=12).sample((3, 40), np.random.default_rng(31))
    features = np.random.default_rng(32).standard_normal((12, 7))
    episodes = _Episodes.of(data, features, None)
    rng = np.random.default_rng(33)
    datasets, picked = rng.integers(3, size=9), rng.integers(40, size=9)
    theta, w = rng.standard_normal((9, 7)), rng.standard_normal((9, 7))
    every = episodes.gradient(picked, theta, w, 0.9, datasets)
    for rows in ([4], [0, 5, 8], [2, 3]):
        np.testing.assert_array_equal(
            episodes.gradient(picked[rows], theta[rows], w[rows], 0.9, datasets[rows]),
            every[rows])
