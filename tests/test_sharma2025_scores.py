"""Fig. 3's normalisation and the paired comparison of Sharma et al. (2025)'s runs."""

import numpy as np
import pytest

from dprl.sharma2025.scores import (nonprivate_returns, paired_gap, score_runs, scores_of,
                                    select, t_interval, window_return)


def _runs():
    runs = [dict(algorithm="CQL", method=method, m=3000, seed=seed, eps=10.0)
            for method in ("nonprivate", "dpsgd", "ours") for seed in (0, 1)]
    finals = {"nonprivate": (110.0, 130.0), "dpsgd": (30.0, 50.0), "ours": (70.0, 60.0)}
    returns = np.zeros((6, 2, 3))
    for i, run in enumerate(runs):
        returns[i, -1] = finals[run["method"]][run["seed"]]
        returns[i, 0] = -1.0
    random = np.full((6, 3), 20.0)
    random[0] = [10.0, 20.0, 30.0]
    return runs, {"returns": returns, "random_returns": random, "noise": np.arange(6.0)}


def test_scores_are_the_fraction_of_the_non_private_margin_over_the_random_policy():
    runs, arrays = _runs()
    scored = score_runs(runs, arrays)
    # R_0 = 20, R_np = 120: (R - 20) / 100
    assert np.allclose(scores_of(scored, method="ours"), [0.5, 0.4])
    assert np.allclose(scores_of(scored, method="dpsgd"), [0.1, 0.3])
    assert np.allclose(scores_of(scored, method="nonprivate"), [0.9, 1.1])
    assert select(scored, method="ours", seed=1)[0]["noise"] == 5.0
    assert np.array_equal(scored[0].curve, [-1.0, 110.0])


def test_the_optimal_return_cancels_from_the_double_normalisation():
    optimal, random, ours, nonprivate = 500.0, 20.0, 70.0, 120.0
    double = ((ours - random) / (optimal - random)) / ((nonprivate - random) / (optimal - random))
    runs, arrays = _runs()
    assert scores_of(score_runs(runs, arrays), method="ours")[0] == pytest.approx(double)


def test_paired_gap_pairs_by_seed():
    runs, arrays = _runs()
    scored = score_runs(runs, arrays)
    gap = paired_gap(select(scored, method="ours"), select(scored, method="dpsgd"))
    assert np.allclose(gap.differences, [0.4, 0.1])
    assert gap.mean == pytest.approx(0.25) and gap.se == pytest.approx(0.15)
    assert not gap.better(2.0) and gap.better(1.0)
    with pytest.raises(ValueError, match="seeds"):
        paired_gap(select(scored, method="ours"), select(scored, method="dpsgd", seed=0))


def test_bad_shapes_are_rejected():
    runs, arrays = _runs()
    with pytest.raises(ValueError, match="returns"):
        score_runs(runs[:3], arrays)


def test_raw_gaps_and_the_margin_over_the_random_policy():
    runs, arrays = _runs()
    scored = score_runs(runs, arrays)
    raw = paired_gap(select(scored, method="ours"), select(scored, method="dpsgd"), raw=True)
    assert np.allclose(raw.differences, [40.0, 10.0])
    from dprl.sharma2025.scores import above_random
    margin = above_random(select(scored, method="nonprivate"))
    assert np.allclose(margin.differences, [90.0, 110.0])
    with pytest.raises(ValueError, match="empty"):
        above_random([])


def _curve_runs(levels_by_algorithm, random=0.0, seeds=3, noise=0.01):
    from dprl.sharma2025.scores import Scored
    rng = np.random.default_rng(0)
    return [Scored({"algorithm": a, "seed": s}, float(levels[-1]),
                   np.asarray(levels, float) + noise * rng.standard_normal(len(levels)), 0.0,
                   {"random_returns": np.full(4, random)})
            for a, levels in levels_by_algorithm.items() for s in range(seeds)]


def test_the_step_cap_is_where_every_learner_has_reached_its_level():
    from dprl.sharma2025.scores import learning_curves, step_cap
    at = np.arange(1, 21) * 1000
    fast = np.minimum(at / 2000, 1.0)          # reaches its level by 2k steps
    slow = np.minimum(at / 12000, 1.0)         # by 12k
    curves = learning_curves(_curve_runs({"CQL": fast, "BCQ": slow}), at)
    reached = {c.algorithm: c.reached_at for c in curves}
    assert all(c.learns for c in curves)
    # 3-checkpoint windows: CQL (0.5, 1, 1) at 3k is 0.83 < 0.9, (1, 1, 1) at 4k;
    # BCQ (0.75, 0.83, 0.92) at 11k is 0.83, (0.83, 0.92, 1) at 12k is 0.92
    assert reached == {"CQL": 4000, "BCQ": 12000}
    assert step_cap(curves, (5000, 10000, 20000)) == 20000
    assert step_cap(curves[1:], (5000, 10000, 20000)) == 5000  # CQL alone


def test_no_learner_means_the_smallest_cap():
    from dprl.sharma2025.scores import learning_curves, step_cap
    at = np.arange(1, 21) * 1000
    flat = np.zeros(at.size)
    curves = learning_curves(_curve_runs({"CQL": flat}, noise=1.0), at)
    assert not curves[0].learns
    assert step_cap(curves, (5000, 20000)) == 5000
    with pytest.raises(ValueError, match="window"):
        learning_curves(_curve_runs({"CQL": flat}), at, window=0)


def test_a_result_without_non_private_runs_is_scored_against_another_results():
    runs, arrays = _runs()
    reference = nonprivate_returns(score_runs(runs, arrays))
    assert reference == {("CQL", 3000): 120.0}
    private = {name: value[2:] for name, value in arrays.items()}
    scored = score_runs(runs[2:], private, nonprivate=reference)
    # the random policy is this result's own: 20 on every run
    assert np.allclose(scores_of(scored, method="ours"), [0.5, 0.4])
    with pytest.raises(ValueError, match="nonprivate must give"):
        score_runs(runs[2:], private)


def test_window_return_averages_the_checkpoints_of_the_last_steps():
    curve, at = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([4000, 8000, 12000, 16000, 20000])
    assert window_return(curve, at) == 4.0           # 12 000, 16 000 and 20 000
    assert window_return(curve, at, window=20_000) == 3.0
    assert window_return(curve, at, window=1) == 5.0
    with pytest.raises(ValueError, match="window must be at most"):
        window_return(curve, at, window=30_000)
    with pytest.raises(ValueError, match="one entry per checkpoint"):
        window_return(curve[:2], at)


def test_t_interval_covers_the_mean_at_its_level():
    mean, half = t_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302653 * 1 / np.sqrt(3), rel=1e-6)
    rng = np.random.default_rng(5)
    samples = rng.normal(0.0, 1.0, size=(20_000, 3))
    covered = [abs(m) <= h for m, h in map(t_interval, samples)]
    assert abs(np.mean(covered) - 0.95) < 4 * np.sqrt(0.95 * 0.05 / 20_000)
    with pytest.raises(ValueError, match="values"):
        t_interval([1.0])
    with pytest.raises(ValueError, match="level"):
        t_interval([1.0, 2.0], level=1.0)


def test_t_interval_and_window_return_refuse_what_has_no_finite_answer():
    """A str level raised a TypeError; values whose variance or mean overflows answered inf or
    NaN, and a NaN checkpoint mean a NaN return."""
    with pytest.raises(ValueError, match="level must be a real number"):
        t_interval([1.0, 2.0], level="0.9")
    for huge in ([1e308, -1e308], [1e308, 1e308]):
        with pytest.raises(ValueError, match="values are too large"):
            t_interval(huge)
    with pytest.raises(ValueError, match="values must hold real numbers"):
        t_interval(["a", "b"])
    with pytest.raises(ValueError, match="curve must be finite"):
        window_return(np.array([1.0, np.nan]), np.array([10, 20]), window=5)
