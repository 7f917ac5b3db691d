"""The Mountain Car experiments of Xie et al. (2019, Sec. 7): data plumbing, DP-LSW's public
grid, importance ratios, and step sizes tuned on public data."""

import dataclasses
import importlib

import numpy as np
import pytest

from dprl.envs import MountainCar, mountain_car_features
from dprl.envs.episodes import (RecordingFeatures, UniformPolicy, feature_table, recorded_table,
                                stack_episodes)
from dprl.experiments import load, status
from dprl.experiments.xie2019.mountain_car import (LARGE, MOUNTAIN_CAR, N_PANEL, TUNING,
                                                   MountainCarConfig, cell_features, dp_lsw_theta,
                                                   mountain_car_trials, tuned)
from dprl.experiments.xie2019.mountain_car_reference import importance_ratios
from dprl.seeding import trial_generators
from dprl.xie2019 import prepare
from dprl.xie2019.baselines import (episode_statistics, lstd, prepared_least_squares,
                                    prepared_statistics, wis_lstd)

prepared_module = importlib.import_module("dprl.xie2019.prepared")


@pytest.fixture(scope="module")
def data_sets():
    return [MountainCar().simulate(30, UniformPolicy(3), g) for g in trial_generators(3, 2)]


@pytest.fixture(scope="module")
def episodes(data_sets):
    return stack_episodes(data_sets)


def test_feature_table_indexes_every_observation(episodes):
    features = mountain_car_features()
    trajectories, table = feature_table(episodes, features)
    assert trajectories.batch_shape == episodes.batch_shape == (2, 30)
    d, i = 1, 7
    L = episodes.lengths[d, i]
    rows = trajectories.states[d, i, :L + 1]
    np.testing.assert_array_equal(table[rows], features(episodes.observations[d, i, :L + 1]))
    assert np.all(trajectories.states[d, i, L + 1:] == -1)
    assert table.shape == ((episodes.lengths + 1).sum(), 36)
    with pytest.raises(ValueError, match="features must map"):
        feature_table(episodes, lambda points: features(points)[:-1])
    with pytest.raises(ValueError, match="features must map"):
        feature_table(episodes, lambda points: features(points).ravel())


@pytest.mark.parametrize("epsilon", [0.0, 0.5])
def test_feature_table_recorded_while_simulating_is_the_computed_one(epsilon):
    from dprl.control.linear_q import EpsilonGreedyPolicy
    features = mountain_car_features()
    recorder = RecordingFeatures(features)
    # push in the direction of the velocity (feature 1 is cos(pi z_v), > 0 iff v < 0)
    weights = np.zeros((3, 36))
    weights[0, 1], weights[1, 0], weights[2, 1] = 1.0, -1.0, -1.0
    data = MountainCar().simulate(40, EpsilonGreedyPolicy(weights, recorder, epsilon),
                                  np.random.default_rng(5))
    assert len(np.unique(data.lengths)) > 1  # episodes end at different steps
    table = recorded_table(data, recorder)
    trajectories, computed = feature_table(data, features)
    np.testing.assert_array_equal(table, computed)
    given, same = feature_table(data, None, table)
    np.testing.assert_array_equal(given.states, trajectories.states)
    with pytest.raises(ValueError, match="one row per observation"):
        feature_table(data, None, table[:-1])
    other = MountainCar().simulate(40, UniformPolicy(3), np.random.default_rng(6))
    with pytest.raises(ValueError, match="one call per step"):
        recorded_table(other, recorder)


def test_statistics_of_stacked_data_sets_are_those_of_each(episodes, data_sets):
    features = mountain_car_features()
    together = episode_statistics(*feature_table(episodes, features), 0.99)
    for d, alone in enumerate(data_sets):
        single = episode_statistics(*feature_table(alone, features), 0.99)
        for k in range(3):
            np.testing.assert_array_equal(together[k][d], single[k])


@pytest.mark.parametrize("budget", [prepared_module._MATRIX_BUDGET, 0])  # matrices, transitions
def test_prepared_once_and_sliced_is_prepared_alone(episodes, budget, monkeypatch):
    """The nested data sets are prepared once at the largest m: the first m of it are the
    same bits as preparing the first m episodes, and LSTD / WIS-LSTD from the prepared
    matrices equal the second pass over the transitions to rounding."""
    monkeypatch.setattr(prepared_module, "_MATRIX_BUDGET", budget)
    features = mountain_car_features()
    ratios = np.where(episodes.transition_mask, 0.5 + np.arange(episodes.horizon) % 3, 0.0)
    for rho in (None, ratios):
        whole = prepare(*feature_table(episodes, features), 0.99, rho)
        assert (whole.matrices is None) == (budget == 0)
        alone = prepare(*feature_table(episodes.first(12), features), 0.99,
                        None if rho is None else rho[:, :12])
        part = whole.first(12)
        assert part.m == 12 and whole.m == 30
        picked, theta = np.array([3, 11]), np.linspace(-1, 1, 72).reshape(2, 36)
        np.testing.assert_array_equal(part.gradient(np.arange(2), picked, theta, -theta),
                                      alone.gradient(np.arange(2), picked, theta, -theta))
        rho_alone = None if rho is None else rho[:, :12]
        data = feature_table(episodes.first(12), features)
        second_pass = episode_statistics(*data, 0.99, rho_alone, "trajectories")
        for mine, pass_ in zip(prepared_statistics(part), second_pass):
            np.testing.assert_allclose(mine, pass_, rtol=1e-11, atol=1e-14)
        # these data make A ill-conditioned: compare LSTD / WIS-LSTD by their residuals
        theta = prepared_least_squares(part)
        A, b, _ = second_pass
        np.testing.assert_allclose(np.einsum("dij,dj->di", A, theta), b, atol=1e-9)
        baseline = (lstd(*data, 0.99, normalisation="trajectories") if rho is None else
                    wis_lstd(*data, 0.99, rho_alone, normalisation="trajectories"))
        np.testing.assert_allclose(np.einsum("dij,dj->di", A, baseline), b, atol=1e-9)
    with pytest.raises(ValueError, match="m must be <="):
        whole.first(31)


def test_mountain_car_benchmarks_do_equivalent_work():
    from dprl.bench import BENCHMARKS
    recorded = BENCHMARKS["mountain-car-recorded-table"]
    np.testing.assert_array_equal(recorded.candidate(30), recorded.reference(30))
    transitions = BENCHMARKS["gpope-transitions"]
    for mine, previous in zip(transitions.candidate(30), transitions.reference(30)):
        np.testing.assert_allclose(mine, previous, rtol=1e-12, atol=1e-14)
    data = BENCHMARKS["mountain-car-data"]
    for once, per_size in zip(data.candidate(40), data.reference(40)):
        for mine, second_pass in zip(once, per_size):
            np.testing.assert_allclose(mine, second_pass, rtol=1e-11, atol=1e-14)


def test_stack_refuses_mixed_inputs(episodes):
    with pytest.raises(ValueError, match="non-empty"):
        stack_episodes([])
    with pytest.raises(ValueError, match="Episodes"):
        feature_table("episodes", mountain_car_features())


def test_importance_ratios_of_the_uniform_target():
    from dprl.control.linear_q import EpsilonGreedyPolicy
    features = mountain_car_features()
    weights = np.random.default_rng(0).standard_normal((3, 36))
    behaviour = EpsilonGreedyPolicy(weights, features, 0.5)
    data = MountainCar().simulate(20, behaviour, np.random.default_rng(1))
    rho = importance_ratios(data)
    mask = data.transition_mask
    # greedy action: 1 - eps + eps/3 = 2/3, others eps/3 = 1/6
    assert set(np.round(rho[mask], 12)) <= {0.5, 2.0}
    assert np.all(rho[~mask] == 0)
    with pytest.raises(ValueError, match="behaviour probabilities"):
        importance_ratios(MountainCar().simulate(2, _Deterministic(),
                                                 np.random.default_rng(2)))


class _Deterministic:
    def __call__(self, observations, rng):
        return np.zeros(observations.shape[0], dtype=np.int64)


def test_dp_lsw_grid(episodes):
    config = dataclasses.replace(MOUNTAIN_CAR.config("smoke"), grid_cells=4)
    features = mountain_car_features()
    centres = cell_features(config, features)
    assert centres.shape == (16, 36)
    np.testing.assert_allclose(centres[:, 0], 1.0)  # the constant feature
    cfg = dataclasses.replace(config, grid_cells=8)
    theta = dp_lsw_theta(cfg, episodes, features, trial_generators(5, 2))
    assert theta.shape == (2, 36) and np.all(np.isfinite(theta))


@pytest.mark.skipif(status(TUNING.id) != "current", reason="no committed tuning result")
def test_tuned_steps_are_the_argmins_of_the_public_tuning_run():
    tuning, paper = TUNING.config("paper"), MOUNTAIN_CAR.config("paper")
    assert tuned(load(TUNING.id), tuning.step_grid) == {
        "tuned_steps": paper.tuned_steps, "tuned_steps_off": paper.tuned_steps_off}
    assert tuning.root_seed != paper.root_seed


def test_a_run_is_the_same_bits_in_every_figure_it_appears_in():
    config = MOUNTAIN_CAR.config("smoke")
    result = mountain_car_trials(config, trial_generators(config.root_seed, 1))
    main = config.eps_levels.index(config.eps)
    for c in range(len(config.calibrations)):
        # Fig. 2(a)'s GPOPE at the tuned step is Fig. 3(a)'s run at eps, and the step sweep's
        sweep = config.step_grid.index(config.tuned_steps[0][c][main])
        assert result["gpope"][0, 0, c, config.step_multipliers.index(1.0)] == \
            result["gpope_eps"][0, 0, c, main] == result["step_sweep"][0, c, main, sweep]
        assert len(np.unique(result["gpope"][0, 0, c])) == 3
    # the calibrations are different runs; GTD2 (no noise) is one run for all of them
    assert np.all(result["gpope_eps"][0, :, 0] != result["gpope_eps"][0, :, 1])
    assert np.all(result["step_sweep"][0, 0, -1] == result["step_sweep"][0, 1, -1])
    # a batch size's runs are named by m and its data are the first m of the largest: the
    # same bits with or without the smaller sizes (as in xie2019-mountain-car-large)
    alone = dataclasses.replace(config, batch_sizes=config.batch_sizes[1:], m_fixed=None,
                                tuned_steps=config.tuned_steps[1:],
                                tuned_steps_off=config.tuned_steps_off[1:])
    single = mountain_car_trials(alone, trial_generators(config.root_seed, 1))
    for key, values in single.items():
        np.testing.assert_array_equal(values[:, -1], result[key][:, -1], err_msg=key)


def test_configs_are_checked():
    config = MOUNTAIN_CAR.config("smoke")
    rngs = trial_generators(0, 1)
    with pytest.raises(ValueError, match="one step per batch size, calibration and level"):
        mountain_car_trials(dataclasses.replace(config, tuned_steps=((0.01,),)), rngs)
    different_gtd2 = (((1e-2, 1e-2, 1e-2), (1e-2, 1e-2, 1e-3)),) * 2
    with pytest.raises(ValueError, match="the same GTD2 step"):
        mountain_car_trials(dataclasses.replace(config, tuned_steps=different_gtd2), rngs)
    with pytest.raises(ValueError, match="calibrations must be"):
        mountain_car_trials(dataclasses.replace(config, calibrations=("paper", "sound")), rngs)
    with pytest.raises(ValueError, match="eps must be one of"):
        mountain_car_trials(dataclasses.replace(config, eps=0.5), rngs)
    with pytest.raises(ValueError, match="powers 10"):
        mountain_car_trials(dataclasses.replace(config, step_multipliers=(0.3,)), rngs)
    with pytest.raises(ValueError, match="N panel"):
        N_PANEL.run_trials(dataclasses.replace(N_PANEL.config("smoke"), batch_sizes=(50, 100)),
                           rngs)


def test_every_gpope_result_runs_both_calibrations_and_the_large_one_the_steps_at_1e4():
    for experiment in (TUNING, MOUNTAIN_CAR, LARGE, N_PANEL):
        assert experiment.config("paper").calibrations == ("paper", "tightest")
    paper, large = MOUNTAIN_CAR.config("paper"), LARGE.config("paper")
    assert min(large.batch_sizes) > max(paper.batch_sizes)
    assert large.tuned_steps == paper.tuned_steps[-1:] * len(large.batch_sizes)
    assert large.off_policy
    assert large.tuned_steps_off == paper.tuned_steps_off[-1:] * len(large.batch_sizes)


def test_n_panel_runs_every_step_at_every_n():
    config = N_PANEL.config("smoke")
    result = N_PANEL.run_trials(config, trial_generators(config.root_seed, 2))
    epochs, calibrations, steps = (len(config.panel_epochs), len(config.calibrations),
                                   len(config.step_grid))
    assert result["gtd2"].shape == (2, epochs, steps)
    assert result["gpope"].shape == (2, epochs, calibrations, steps)
    assert result["lstd"].shape == (2,) and np.all(result["lstd"] >= 0)
    assert np.isfinite(result["gpope"]).all() and np.isfinite(result["gtd2"]).all()
    # every N is its own run (its own noise scale and stream)
    assert np.all(result["gpope"][:, 0] != result["gpope"][:, 1])


def test_private_and_public_configs_differ_only_where_they_must():
    tuning, paper = TUNING.config("paper"), MOUNTAIN_CAR.config("paper")
    different = {"n_trials", "root_seed", "batch_size", "tuned_steps", "tuned_steps_off"}
    for field in dataclasses.fields(MountainCarConfig):
        if field.name not in different:
            assert getattr(tuning, field.name) == getattr(paper, field.name), field.name


def test_a_diverging_run_has_infinite_mspbe():
    config = dataclasses.replace(TUNING.config("smoke"), step_grid=(1e-2, 1e4), eps_levels=(1.0,),
                                 eps=1.0)
    result = TUNING.run_trials(config, trial_generators(config.root_seed, 1))
    on = result["on_policy"][0]  # (sizes, calibrations, levels, steps); GTD2 at 1e4 overflows
    assert np.isinf(on[:, :, -1, 1]).all() and np.isfinite(on[..., 0]).all()
    assert tuned(result, config.step_grid)["tuned_steps"][0][0][-1] == 1e-2
