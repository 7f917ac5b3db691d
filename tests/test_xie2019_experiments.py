"""The chain experiments (Xie et al. 2019, Sec. 7): step sizes tuned on public data (never
typed in), both calibrations in every run set, and the shapes and checks of each experiment."""

import dataclasses

import numpy as np
import pytest

from dprl.experiments import load
from dprl.experiments.xie2019.chain import (CHAIN, ITERATIONS, TUNING, chain_trials, half_decades,
                                            iterations_trials, tuned, tuning_trials)
from dprl.seeding import trial_generators


def test_tuned_steps_are_the_argmins_of_the_public_tuning_run():
    tuning, paper = TUNING.config("paper"), CHAIN.config("paper")
    assert paper.batch_sizes == tuning.batch_sizes and paper.step_grid == tuning.step_grid
    assert tuned(load(TUNING.id), tuning.step_grid) == paper.tuned_steps
    assert tuning.root_seed != paper.root_seed  # public data, other seeds


def test_private_and_public_configs_differ_only_where_they_must():
    tuning, paper = TUNING.config("paper"), CHAIN.config("paper")
    different = {"n_trials", "root_seed", "batch_size", "tuned_steps"}
    for field in dataclasses.fields(paper):
        if field.name not in different:
            assert getattr(tuning, field.name) == getattr(paper, field.name), field.name


def test_the_paper_scale_covers_the_issue_range_under_both_calibrations():
    paper = CHAIN.config("paper")
    assert paper.batch_sizes == half_decades(4, 10) == (100, 316, 1000, 3162, 10000, 31623,
                                                         100000)
    assert paper.calibrations == ("paper", "tightest")
    assert ITERATIONS.config("paper").panel_m in paper.batch_sizes


def test_smoke_runs_have_one_column_per_calibration_and_gtd2():
    rngs = trial_generators(0, 2)
    tuning = TUNING.config("smoke")
    assert tuning_trials(tuning, rngs)["mspbe"].shape == (2, 2, 3, 2)
    out = chain_trials(CHAIN.config("smoke"), trial_generators(0, 2))
    assert out["gpope"].shape == (2, 2, 2, 3) and out["step_sweep"].shape == (2, 3, 2)
    for name in ("gtd2", "lstd", "dp_lsw", "dp_lsl"):
        assert out[name].shape == (2, 2) and np.all(out[name] > 0)
    panel = iterations_trials(ITERATIONS.config("smoke"), trial_generators(0, 2))
    assert panel["mspbe"].shape == (2, 2, 3, 2) and panel["lstd"].shape == (2,)


def test_lstd_is_the_most_accurate_estimate_on_the_same_data():
    """LSTD solves the sample fixed point: its exact MSPBE is below every iterative run's."""
    out = chain_trials(CHAIN.config("smoke"), trial_generators(1, 2))
    assert np.all(out["lstd"] < out["gtd2"]) and np.all(out["lstd"][..., None, None]
                                                        < out["gpope"])


def test_tuned_steps_must_give_one_step_per_calibration_and_gtd2():
    smoke = CHAIN.config("smoke")
    with pytest.raises(ValueError, match="tuned_steps"):
        chain_trials(dataclasses.replace(smoke, tuned_steps=((0.1, 0.1),) * 2),
                     trial_generators(0, 1))
    with pytest.raises(ValueError, match="m_fixed"):
        chain_trials(dataclasses.replace(smoke, m_fixed=300), trial_generators(0, 1))


def test_the_pld_calibrations_cover_every_setting_the_xie_chapters_run():
    """xie2019-theorem4-pld holds (eps, N, m) for every GPOPE setting of the chain, HIV and
    Mountain Car experiments (N = epochs m), so chapters look its PLD numbers up."""
    from dprl.engine.registry import get
    from dprl.experiments.xie2019.calibration import SETTINGS

    wanted = set()
    for eid in ("xie2019-chain", "xie2019-hiv", "xie2019-hiv-large", "xie2019-mountain-car",
                "xie2019-mountain-car-large"):
        config = get(eid).config("paper")
        levels = getattr(config, "eps_levels", None) or (config.eps,)
        if eid == "xie2019-chain":
            levels = (config.eps,)
        wanted |= {(float(eps), round(config.epochs * m), m) for eps in levels
                   for m in config.batch_sizes}
    panel = get("xie2019-mountain-car-n-panel").config("paper")
    wanted |= {(panel.eps, round(f * panel.m_fixed), panel.m_fixed) for f in panel.panel_epochs}
    assert wanted <= set(SETTINGS), sorted(wanted - set(SETTINGS))
