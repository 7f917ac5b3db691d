"""Batched Ornstein-Uhlenbeck paths (dprl.wang2019.run_paths): the Gaussian-process law
(covariance against the kernel, conditional moments of one extension), consistency of
repeated points, independence from the batch, and input checks."""

import copy

import numpy as np
import pytest

from dprl.seeding import trial_generators
from dprl.wang2019.functional_noise import conditional_moments, ou_kernel
from dprl.wang2019.run_paths import RunPaths, _ar1_scan

BETA = 2.0


def test_ar1_scan_equals_the_sequential_recursion():
    rng = np.random.default_rng(0)
    for length in (0, 1, 2, 5, 17, 300):
        rho, noise = rng.random((3, length)), rng.standard_normal((3, length, 2))
        state, expected = np.zeros((3, 2)), np.empty_like(noise)
        for k in range(length):
            state = rho[:, k, None] * state + noise[:, k]
            expected[:, k] = state
        np.testing.assert_allclose(_ar1_scan(rho, noise), expected, rtol=0, atol=1e-13)


def test_covariance_matches_the_kernel():
    n_runs = 6000
    paths = RunPaths(np.full(n_runs, 0.7), BETA, trial_generators(5, n_runs), 2,
                     online_capacity=3)
    base = np.array([0.1, 0.5, 0.9, 0.2, 0.7])
    values = [paths.refresh(np.tile(base, (n_runs, 1)))]
    extra = np.array([0.3, 0.95, 0.0, 0.6, 0.65, 0.62])
    values += [paths.extend(np.full(n_runs, x))[:, None] for x in extra]
    values = np.concatenate(values, axis=1)
    points = np.concatenate([base, extra])
    kernel = ou_kernel(points, points, 0.7, BETA)
    for action in range(2):
        empirical = values[:, :, action].T @ values[:, :, action] / n_runs
        # entries have standard error <= sqrt(2) 0.49 / sqrt(6000) = 0.009
        assert np.abs(empirical - kernel).max() < 0.045
    cross = values[:, :, 0].T @ values[:, :, 1] / n_runs
    assert np.abs(cross).max() < 0.045  # one independent path per action


def test_extension_uses_the_two_nearest_points():
    rngs = trial_generators(9, 2)
    replay = copy.deepcopy(rngs)
    paths = RunPaths(np.array([1.0, 0.5]), BETA, rngs, 2, online_capacity=4)
    base = np.array([[0.1, 0.8, 0.4], [0.9, 0.0, 0.3]])
    unit = paths.refresh(base) / np.array([1.0, 0.5])[:, None, None]
    first = paths.extend(np.array([0.6, 1.0]))
    second = paths.extend(np.array([0.7, 0.95]))
    for run, rng in enumerate(replay):
        rng.standard_normal((3, 2))
        z1, z2 = rng.standard_normal(2), rng.standard_normal(2)
        scale = paths.sigmas[run]
        if run == 0:  # 0.6 between 0.4 and 0.8; then 0.7 between 0.6 and 0.8
            mean, var = conditional_moments(0.6, 0.4, unit[0, 2], 0.8, unit[0, 1], BETA)
            x1 = mean + np.sqrt(var) * z1
            mean, var = conditional_moments(0.7, 0.6, x1, 0.8, unit[0, 1], BETA)
        else:  # 1.0 beyond 0.9; then 0.95 between 0.9 and 1.0
            mean, var = conditional_moments(1.0, 0.9, unit[1, 0], np.inf, 0.0, BETA)
            x1 = mean + np.sqrt(var) * z1
            mean, var = conditional_moments(0.95, 0.9, unit[1, 0], 1.0, x1, BETA)
        np.testing.assert_allclose(first[run], scale * x1, rtol=1e-14)
        np.testing.assert_allclose(second[run], scale * (mean + np.sqrt(var) * z2), rtol=1e-14)


def test_repeated_points_return_stored_values():
    paths = RunPaths(np.ones(3), BETA, trial_generators(1, 3), 2, online_capacity=2)
    points = np.array([[0.2, 0.5, 0.2, 1.0], [0.0, 0.0, 0.3, 0.3], [0.7, 0.1, 0.9, 0.7]])
    values = paths.refresh(points)
    np.testing.assert_array_equal(values[0, 0], values[0, 2])  # 0.2 twice
    np.testing.assert_array_equal(values[1, 0], values[1, 1])  # 0.0 twice
    np.testing.assert_array_equal(values[1, 2], values[1, 3])  # 0.3 twice
    new = paths.extend(np.array([0.3, 0.5, 0.4]))
    for _ in range(3):  # through the online buffer, then after its merge into the base
        np.testing.assert_array_equal(paths.extend(points[:, 3]), values[:, 3])
        np.testing.assert_array_equal(paths.extend(np.array([0.3, 0.5, 0.4])), new)
    np.testing.assert_array_equal(paths(np.tile([[0.3]], (3, 2)))[0, 1], new[0])


def test_point_count_is_the_number_of_distinct_points():
    paths = RunPaths(np.ones(2), BETA, trial_generators(1, 2), 2, online_capacity=2)
    assert paths.n_points.tolist() == [0, 0]
    paths.refresh(np.array([[0.2, 0.5, 0.2, 1.0], [0.0, 0.0, 0.0, 0.0]]))
    assert paths.n_points.tolist() == [3, 1]
    seen = [{0.2, 0.5, 1.0}, {0.0}]
    for step in ([0.3, 0.0], [0.3, 0.1], [0.5, 0.7], [0.9, 0.1], [0.25, 0.0]):
        paths.extend(np.array(step))  # through the online buffer and its merges
        for run, x in enumerate(step):
            seen[run].add(x)
        assert paths.n_points.tolist() == [len(points) for points in seen]
    paths.refresh(np.empty((2, 0)))
    assert paths.n_points.tolist() == [0, 0]


def test_runs_do_not_depend_on_the_batch():
    points = np.random.default_rng(3).random((4, 50))
    alone = RunPaths(np.array([0.4]), BETA, trial_generators(7, [2]), 2, online_capacity=8)
    batch = RunPaths(np.array([1.0, 0.3, 0.4, 0.0]), BETA, trial_generators(7, [0, 1, 2, 3]),
                     2, online_capacity=8)
    np.testing.assert_array_equal(alone.refresh(points[2:3, :30]),
                                  batch.refresh(points[:, :30])[2:3])
    np.testing.assert_array_equal(alone(points[2:3, 30:]), batch(points[:, 30:])[2:3])
    assert np.all(batch(points)[3] == 0.0)


@pytest.mark.parametrize("call", [
    lambda: RunPaths(np.array([-1.0]), 1.0, trial_generators(0, 1), 2),
    lambda: RunPaths(np.array([1.0]), 0.0, trial_generators(0, 1), 2),
    lambda: RunPaths(np.array([1.0, 1.0]), 1.0, trial_generators(0, 1), 2),
    lambda: RunPaths(np.array([1.0]), 1.0, [np.random.RandomState(0)], 2),
    lambda: RunPaths(np.array([1.0]), 1.0, trial_generators(0, 1), 0),
    lambda: RunPaths(np.array([1.0]), 1.0, trial_generators(0, 1), 2).extend(np.ones(2)),
    lambda: RunPaths(np.array([1.0]), 1.0, trial_generators(0, 1), 2).refresh(np.ones(2)),
    lambda: RunPaths(np.array([1.0]), 1.0, trial_generators(0, 1), 2).extend([np.nan]),
])
def test_bad_inputs_raise(call):
    with pytest.raises(ValueError):
        call()
