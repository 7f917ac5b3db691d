"""The Wang & Hegde (2019) Fig. 2 experiment (dprl.experiments.wang2019): every method gets
the calibration it names and the trial's own generator (common random numbers)."""

import copy
import dataclasses

import numpy as np

from dprl.engine.batches import compute_trials
from dprl.experiments.wang2019 import FIGURE2, FIGURE2_METHODS, figure2_dqn
from dprl.seeding import trial_generator
from dprl.wang2019.baselines import input_perturbation_scale, train_perturbed_rewards
from dprl.wang2019.calibration import dqn_calibration
from dprl.wang2019.q_functions import MLPQ
from dprl.wang2019.q_learning import train


def test_figure2_methods_are_wired_to_their_calibrations():
    config = FIGURE2.config("smoke")
    arrays = compute_trials(FIGURE2, config, [1])
    returns = arrays["returns"][0]  # (eps levels, methods, episodes)
    assert returns.shape == (len(config.eps_levels), len(FIGURE2_METHODS), config.n_episodes)
    dqn = figure2_dqn(config)
    rng = trial_generator(config.root_seed, 1)
    plain = train(MLPQ(), dqn, [0.0], [copy.deepcopy(rng)])
    outside = FIGURE2_METHODS.index("ours-outside")
    for k, eps in enumerate(config.eps_levels):
        np.testing.assert_array_equal(returns[k, FIGURE2_METHODS.index("output")],
                                      plain.returns[0])
        calibration = dqn_calibration(eps, dqn, "outside", delta_total=config.delta)
        ours = train(MLPQ(), dataclasses.replace(dqn, beta=calibration.beta),
                     [calibration.sigma], [copy.deepcopy(rng)])
        np.testing.assert_array_equal(returns[k, outside], ours.returns[0])
        std = input_perturbation_scale(dqn, eps, config.delta)
        privacy = copy.deepcopy(rng).spawn(8)[7]
        perturbed = train_perturbed_rewards(dqn, [std], [copy.deepcopy(rng)], [privacy])
        np.testing.assert_array_equal(returns[k, FIGURE2_METHODS.index("input")],
                                      perturbed.returns[0])
    assert np.all(np.isfinite(arrays["greedy_returns"]))
