"""Scoring and judging DP-LSL's ridge schedules (Balle et al. 2016, Sec. 6)."""

import numpy as np
import pytest

from dprl.balle2016.schedules import judge_schedules, schedule_scores

SCALES, POWERS = np.array([1.0, 10.0, 100.0]), np.array([0.3, 0.5, 0.7])


def test_scores_are_mean_log10_of_mean_rmse_over_the_range():
    sizes = np.array([10, 100, 1000])
    rmse = np.array([[[1.0, 0.1, 0.01]], [[3.0, 0.3, 0.03]]])  # (runs, schedules, sizes)
    np.testing.assert_allclose(schedule_scores(rmse, sizes, 1e9), [np.log10(2) - 1])
    np.testing.assert_allclose(schedule_scores(rmse, sizes, 100), [np.log10(2) - 0.5])
    rmse[0, 0, 0] = np.nan
    assert np.isnan(schedule_scores(rmse, sizes, 1e9)[0])
    with pytest.raises(ValueError, match="upto"):
        schedule_scores(rmse, sizes, 1)


@pytest.mark.parametrize("target_score, outcome", [(-1.5, "best"), (-0.9, "beaten"),
                                                   (-0.99, "inconclusive")])
def test_outcome_follows_the_tolerance(target_score, outcome):
    scores = np.full((3, 3), 0.0)
    scores[1, 0], scores[2, 2] = -1.0, -0.995  # best of the other powers: -1.0
    scores[0, 1] = target_score
    judged = judge_schedules(scores, SCALES, POWERS, target=0.5, tolerance=0.02)
    assert judged.outcome == outcome
    assert judged.gap == pytest.approx(max(target_score + 1.0, 0.0))
    assert judged.margin == pytest.approx(-1.0 - target_score)


def test_best_schedule_and_edge_flag_ignore_refused_schedules():
    scores = np.array([[np.nan, -2.0, 0.0], [0.0, -1.0, -3.0], [0.0, 0.0, 0.0]])
    judged = judge_schedules(scores, SCALES, POWERS)
    assert (judged.best_power, judged.best_scale) == (0.7, 10.0)
    assert not judged.best_scale_at_edge
    judged = judge_schedules(scores.T, SCALES, POWERS)
    assert judged.best_scale_at_edge and judged.best_scale == 100.0


def test_bad_input():
    with pytest.raises(ValueError, match="target"):
        judge_schedules(np.zeros((3, 3)), SCALES, POWERS, target=0.4)
    with pytest.raises(ValueError, match="scores"):
        judge_schedules(np.zeros((2, 3)), SCALES, POWERS)


def test_a_reference_score_caps_the_scores():
    """With theta = 0's score as the reference, a power wins or loses only by beating
    theta = 0 too: two powers that both do worse than it compare as equal."""
    scores = np.full((3, 3), 0.0)
    scores[1, 0] = -1.0  # the best other power
    scores[0, 1] = -1.5  # the target, better than it
    assert judge_schedules(scores, SCALES, POWERS).outcome == "best"
    # theta = 0 scores -1.2: the other power is worse than it, the target still beats both
    assert judge_schedules(scores, SCALES, POWERS, reference=-1.2).outcome == "best"
    # theta = 0 scores -2: neither beats it, so neither wins
    judged = judge_schedules(scores, SCALES, POWERS, reference=-2.0)
    assert judged.outcome == "inconclusive" and judged.gap == judged.margin == 0
    # a target worse than the other power is beaten only if that power also beats theta = 0
    scores[0, 1] = -0.5
    assert judge_schedules(scores, SCALES, POWERS, reference=-0.6).outcome == "beaten"
    assert judge_schedules(scores, SCALES, POWERS, reference=-1.1).outcome == "inconclusive"
    with pytest.raises(ValueError, match="reference"):
        judge_schedules(scores, SCALES, POWERS, reference=np.nan)
