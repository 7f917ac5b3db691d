"""The HIV experiments of Xie et al. (2019, Sec. 7, Fig. 4) and the off-policy pieces they share
with Mountain Car: behaviour data and ratios, the public reference and its decorrelated
features, one run's bits wherever it is computed, and steps tuned on public data."""

import dataclasses
import math

import numpy as np
import pytest

from dprl.control.fitted_q import action_values
from dprl.envs.episodes import feature_table, importance_ratios
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.envs.hiv_features import q_features
from dprl.experiments import load, status
from dprl.experiments.xie2019.hiv import (HIV, LARGE, TUNING, HIVConfig, hiv_trials,
                                          mean_ratios, tuned, tuning_trials)
from dprl.experiments.xie2019.hiv_data import (REFERENCE, behaviour_data, hiv_mdp, reference,
                                               reward_range)
from dprl.experiments.xie2019.hiv_policy import (POLICY, behaviour_probabilities, policy_weights,
                                                 target_policy)
from dprl.experiments.xie2019.off_policy import RunTable, scored, step_key, tuned_steps
from dprl.seeding import trial_generators
from dprl.xie2019.baselines import episode_statistics


@pytest.fixture(scope="module")
def smoke():
    return HIV.config("smoke")


def test_step_keys_name_half_decades():
    assert [step_key(s) for s in (1.0, 10 ** -0.5, 1e-4, 10.0)] == [100, 99, 92, 102]
    with pytest.raises(ValueError, match="powers 10"):
        step_key(0.3)


def test_scored_is_the_mspbe_and_inf_for_diverged_runs():
    A, b, C = np.diag([1.0, 2.0]), np.array([1.0, 0.0]), np.diag([1.0, 4.0])
    theta = np.array([[0.0, 0.0], [1.0, 1.0], [np.nan, 0.0], [1e200, 1e200]])
    # residual b - A theta: (1, 0) -> 1; (0, -2) -> 4 / 4 = 1
    np.testing.assert_array_equal(scored(theta, (A, b, C)), [1.0, 1.0, np.inf, np.inf])


def test_tuned_steps_pick_the_least_mean_and_never_a_diverged_step():
    values = np.array([[[[3.0, 1.0, np.inf], [5.0, 4.0, 2.0]]],
                       [[[3.0, 2.0, 0.1], [5.0, 4.0, 2.0]]]])  # (trials 2, sizes 1, levels 2, 3)
    assert tuned_steps(values, (0.01, 0.1, 1.0)) == ((0.1, 1.0),)
    with pytest.raises(ValueError, match="steps"):
        tuned_steps(values, (0.01, 0.1))


def test_run_table_gives_each_run_one_column():
    table = RunTable()
    assert [table.add(0.1, 1.0), table.add(0.01, 1.0), table.add(0.1, 1.0)] == [0, 1, 0]
    assert list(table.runs) == [(0.1, 1.0), (0.01, 1.0)]


def test_run_table_names_gpope_calibrations_and_keeps_gtd2_one_run():
    """GPOPE runs differ by calibration; GTD2 (eps = inf, no noise) is one run whatever the
    calibration; the tuned and grid columns index those runs."""
    table = RunTable()
    tuned = table.tuned(((0.1, 1.0), (0.01, 1.0)), (1.0, np.inf), ("paper", "tightest"))
    assert tuned.tolist() == [[0, 1], [2, 1]]
    assert list(table.runs) == [(0.1, 1.0, "paper"), (1.0, np.inf), (0.01, 1.0, "tightest")]
    grid = table.grid((0.01, 0.1), (1.0, np.inf), ("paper", "tightest"))
    assert grid.shape == (2, 2, 2)
    assert grid[:, 1].tolist() == [[4, 5], [4, 5]]  # GTD2: the same runs under both
    assert grid[1, 0, 0] == tuned[1, 0] and grid[0, 0, 1] == tuned[0, 0]
    assert list(table.runs)[4:] == [(0.01, np.inf), (0.1, np.inf), (0.1, 1.0, "tightest")]


def test_reward_range_is_the_reward_at_the_corners_of_the_box():
    mdp = HIVTreatmentMDP()
    low, high = reward_range(mdp)
    assert low == pytest.approx(-0.1 * 10**6.5 - 2e4 * 0.49 - 2e3 * 0.09, rel=1e-15)
    assert high == pytest.approx(1e3 * 1e6, rel=1e-15)
    corners = np.array([[1e5, 1.0, 1.0, 1.0, 10**6.5, 1.0], [1e5, 1.0, 1.0, 1.0, 1e-2, 1e6]])
    assert mdp.rewards(corners[:1], np.array([3]))[0] == pytest.approx(low + 1e3, rel=1e-12)
    assert mdp.rewards(corners[1:], np.array([0]))[0] == pytest.approx(high - 1e-3, rel=1e-12)


def test_behaviour_data_record_the_softmax_and_the_ratios_of_the_greedy_target(smoke):
    data, rho = behaviour_data("smoke", smoke.temperature, 6, np.random.default_rng(4))
    horizon = POLICY.config("smoke").horizon
    assert data.batch_shape == (6,) and rho.shape == (6, horizon)
    assert np.all(data.lengths == horizon) and not data.terminated.any()
    weights = policy_weights("smoke")
    observations = data.observations[:, :-1].reshape(-1, 6)
    probs = behaviour_probabilities(weights, smoke.temperature, observations, degree=2)
    taken = data.actions.ravel()
    np.testing.assert_array_equal(data.behaviour_probabilities.ravel(),
                                  probs[np.arange(taken.size), taken])
    greedy = action_values(weights, q_features(2), observations).argmax(axis=1)
    expected = np.where(taken == greedy, 1 / probs[np.arange(taken.size), taken], 0.0)
    np.testing.assert_allclose(rho.ravel(), expected, rtol=1e-12)
    # logged while simulating: the ratios of a second pass with the greedy target
    np.testing.assert_array_equal(rho, importance_ratios(target_policy(weights, 2), data))
    positive = rho[rho > 0]
    assert positive.min() >= 1 - 1e-12 and positive.max() <= 4 + 1e-12  # greedy is most probable


def test_a_trial_is_the_same_bits_alone_and_in_a_batch(smoke):
    """Each group of a batched simulation is its own call's bits, and so is its mean ratio
    (the spot-checks recompute one trial alone), which is the mean of the ratios."""
    batched = behaviour_data("smoke", smoke.temperature, 4, trial_generators(9, 2))[1]
    for k in range(2):
        alone = behaviour_data("smoke", smoke.temperature, 4, [trial_generators(9, 2)[k]])[1]
        assert np.array_equal(alone[0], batched[k])
        assert mean_ratios(alone)[0] == mean_ratios(batched)[k]
    np.testing.assert_allclose(mean_ratios(batched), batched.mean(axis=(1, 2)), rtol=1e-14)
    layouts = np.random.default_rng(2).random((3, 50, 20))
    assert np.array_equal(mean_ratios(layouts), mean_ratios(np.asfortranarray(layouts)))


def test_reference_decorrelates_the_features_on_its_sample(smoke):
    ref = reference(smoke)
    A, b, C = ref.statistics
    np.testing.assert_allclose(C, np.eye(10), atol=1e-9)
    assert ref.base_condition > 100 * np.linalg.cond(C)
    data, rho = behaviour_data("smoke", smoke.temperature, smoke.reference_episodes,
                               np.random.default_rng([smoke.reference_seed]))
    direct = episode_statistics(*feature_table(data, ref.features),
                                hiv_mdp("smoke").gamma, rho)
    for mine, theirs in zip((A, b, C), direct):
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-9 * np.abs(theirs).max())


def test_a_run_is_the_same_bits_in_the_tuning_and_in_fig4(smoke):
    """Each (size, calibration, level) run of Fig. 4 is the tuning's run at the tuned step;
    GTD2 is one run under both calibrations."""
    tuning = tuning_trials(smoke, trial_generators(5, 1))["mspbe"]
    result = hiv_trials(smoke, trial_generators(5, 1))
    assert smoke.calibrations == ("paper", "tightest")
    assert np.array_equal(tuning[:, :, 0, -1], tuning[:, :, 1, -1])
    for i, size in enumerate(smoke.tuned_steps):
        for c, steps in enumerate(size):
            columns = [smoke.step_grid.index(step) for step in steps]
            expected = tuning[0, i, c, np.arange(len(steps)), columns]
            assert np.array_equal(result["gpope"][0, i, c], expected[:-1])
            assert result["gtd2"][0, i] == expected[-1]
    assert np.all(result["mspbe_zero"] > 0) and np.all(result["wis_lstd"] > 0)
    assert np.all(result["condition"] < result["base_condition"])


def test_the_calibrations_differ_and_the_n_panel_reruns_the_main_runs(smoke):
    """The paper's sigma (Lemma 1, sensitivity h) is below the tightest sound one, so the
    two GPOPE runs differ; the N panel has one GTD2 and one GPOPE run per calibration for
    every N and step, and longer runs are other runs."""
    config = dataclasses.replace(smoke, panel_epochs=(1.0, smoke.epochs))
    result = hiv_trials(config, trial_generators(5, 1))
    assert np.all(result["gpope"][:, :, 0] != result["gpope"][:, :, 1])
    assert result["panel_gtd2"].shape == (1, 2, len(config.step_grid))
    assert result["panel_gpope"].shape == (1, 2, 2, len(config.step_grid))
    assert np.all(np.isfinite(result["panel_gtd2"]))
    assert np.all(result["panel_gtd2"][:, 0] != result["panel_gtd2"][:, 1])


def test_configs_are_checked(smoke):
    with pytest.raises(ValueError, match="one step per batch size, calibration and level"):
        hiv_trials(dataclasses.replace(smoke, tuned_steps=((0.1,),)), trial_generators(0, 1))
    different_gtd2 = (((1e-1, 1e-1), (1e-1, 1e-2)),) * 2
    with pytest.raises(ValueError, match="the same GTD2 step"):
        hiv_trials(dataclasses.replace(smoke, tuned_steps=different_gtd2),
                   trial_generators(0, 1))
    with pytest.raises(ValueError, match="panel_m"):
        hiv_trials(dataclasses.replace(smoke, panel_m=7), trial_generators(0, 1))
    with pytest.raises(ValueError, match="calibrations"):
        tuning_trials(dataclasses.replace(smoke, calibrations=("lemma",)),
                      trial_generators(0, 1))
    with pytest.raises(ValueError, match="increasing"):
        tuning_trials(dataclasses.replace(smoke, batch_sizes=(10, 5)), trial_generators(0, 1))
    assert smoke.levels[-1] == math.inf


@pytest.mark.skipif(status(TUNING.id) != "current", reason="no committed tuning result")
def test_tuned_steps_are_the_argmins_of_the_public_tuning_run():
    tuning, paper = TUNING.config("paper"), HIV.config("paper")
    assert tuned(load(TUNING.id), tuning.step_grid) == paper.tuned_steps
    assert tuning.root_seed != paper.root_seed


def test_private_and_public_configs_differ_only_where_they_must():
    tuning, paper = TUNING.config("paper"), HIV.config("paper")
    different = {"n_trials", "root_seed", "batch_size", "tuned_steps", "panel_m"}
    for field in dataclasses.fields(HIVConfig):
        if field.name not in different:
            assert getattr(tuning, field.name) == getattr(paper, field.name), field.name


@pytest.mark.skipif(status(POLICY.id) != "current", reason="no committed policy result")
def test_paper_policy_weights_are_the_committed_ones():
    assert np.array_equal(policy_weights("paper"), load(POLICY.id)["weights"][0])


def test_the_paper_runs_measure_against_the_committed_reference():
    """Every paper-scale HIV experiment has the reference settings of
    ``xie2019-hiv-reference``, so it reads that result instead of simulating the sample."""
    settings = ("policy_scale", "temperature", "order", "reference_episodes", "reference_seed")
    paper = REFERENCE.config("paper")
    for experiment in (TUNING, HIV, LARGE):
        config = experiment.config("paper")
        assert all(getattr(config, name) == getattr(paper, name) for name in settings)
        assert REFERENCE.id in experiment.after
