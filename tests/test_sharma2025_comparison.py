"""Fig. 3's cells, Table 1's sweep and Table 2's split of Sharma et al. (2025, Sec. 6),
counted by :mod:`dprl.sharma2025.comparison` on synthetic scored runs with known answers."""

import numpy as np
import pytest

from dprl.sharma2025 import comparison as cmp
from dprl.sharma2025.accounting import table3_row
from dprl.sharma2025.protocol import ours_split
from dprl.sharma2025.scores import Scored

RANDOM, NONPRIVATE = 20.0, 120.0


def _run(final, seed=0, skipped=0, **spec):
    spec = dict(dict(m=3000, reading="paper", p=1.0, split="appendix_b3", eps=0.0), **spec,
                seed=seed)
    values = {"random_returns": np.full(3, RANDOM), "skipped_steps": skipped}
    return Scored(spec, final, np.array([final]), (final - RANDOM) / (NONPRIVATE - RANDOM),
                  values)


def _fig3(gaps):
    """CartPole's Fig. 3 runs, 3 seeds: DP-SGD at 50, ours at 50 + gaps[(alg, eps)] + noise."""
    runs = []
    for algorithm in ("CQL", "BCQ"):
        runs += [_run(NONPRIVATE + d, s, method="nonprivate", algorithm=algorithm)
                 for s, d in enumerate((-1.0, 0.0, 1.0))]
        for eps in cmp.EPSILONS:
            runs += [_run(50.0, s, method="dpsgd", algorithm=algorithm, eps=eps)
                     for s in range(3)]
            p = table3_row("CartPole", eps, algorithm).p
            if p == 1.0:
                continue
            runs += [_run(50.0 + gaps.get((algorithm, eps), 0.0) + d, s, method="ours",
                          algorithm=algorithm, eps=eps, p=p, split=ours_split("CartPole", p))
                     for s, d in enumerate((-1.0, 0.5, 0.5))]
    return runs


def test_fig3_counts_significant_wins_and_losses_in_decidable_cells():
    cells = cmp.fig3_cells(_fig3({("CQL", 7.5): 30.0, ("BCQ", 10.0): -30.0}), "CartPole")
    assert len(cells) == 6 and all(c["decidable"] for c in cells)
    count = cmp.fig3_count(cells)
    key = lambda c: (c["algorithm"], c["eps"])
    assert {key(c) for c in count.distinct} == {
        (a, e) for a in ("CQL", "BCQ") for e in cmp.EPSILONS
        if table3_row("CartPole", e, a).p != 1.0}
    assert [key(c) for c in count.better] == [("CQL", 7.5)]
    assert [key(c) for c in count.worse] == [("BCQ", 10.0)]
    assert count.better[0]["gap"].mean == pytest.approx(0.3)


def test_a_win_below_the_floor_is_no_win_and_an_undecidable_learner_counts_nothing():
    cells = cmp.fig3_cells(_fig3({("CQL", 7.5): 30.0}), "CartPole")   # ours scores 0.6
    assert len(cmp.fig3_count(cells, floor=0.5).better) == 1
    assert not cmp.fig3_count(cells, floor=0.7).better
    low = [_run(RANDOM + r["seed"] - 1.0, r["seed"],
                **{k: v for k, v in r.spec.items() if k != "seed"})
           if r["method"] == "nonprivate" else r for r in _fig3({("CQL", 7.5): 30.0})]
    cells = cmp.fig3_cells(low, "CartPole")
    assert not any(c["decidable"] for c in cells) and not cmp.fig3_count(cells).decided


def test_the_sweep_picks_the_best_trained_p_and_refuses_duplicates():
    runs = [_run(f, p=p, method="ours", algorithm="CQL", eps=10.0, skipped=s)
            for p, f, s in ((0.0, 90.0, 20_000), (0.5, 70.0, 0), (1.0, 80.0, 0))]
    sweep = cmp.p_sweep(runs, "CQL", 10.0, 20_000)
    assert sweep[0.0] is None and cmp.best_p(sweep) == 1.0
    with pytest.raises(ValueError, match="share a p"):
        cmp.p_sweep(runs + runs[:1], "CQL", 10.0, 20_000)
    with pytest.raises(ValueError, match="no run"):
        cmp.best_p({0.0: None})


def test_the_split_gap_is_the_baseline_minus_the_three_quarter_split():
    row = dict(algorithm="BCQ", eps=5.0, learning_rate=1e-3, batch_size=128)
    runs = ([_run(40.0 + s, s, method="ours", split="three_quarters", **row) for s in range(3)]
            + [_run(50.0 + 2 * s, s, method="dpsgd", **row) for s in range(3)])
    quarter, whole, gap = cmp.split_gap(runs, 5.0)
    assert len(quarter) == len(whole) == 3
    assert np.allclose(gap.differences, [10.0, 11.0, 12.0])
    with pytest.raises(ValueError, match="split-ablation"):
        cmp.split_gap(runs, 7.5)


def test_table1_counts_only_decidable_cells_with_a_release_and_their_chance_of_agreeing():
    nonprivate = [_run(NONPRIVATE + d, s, method="nonprivate", algorithm=a)
                  for a in ("CQL", "BCQ") for s, d in enumerate((-1.0, 0.0, 1.0))]
    sweeps = []
    for algorithm in ("CQL", "BCQ"):
        for eps in (7.5, 10.0):
            for p in cmp.P_GRID:
                final = {0.0: 30.0, 0.5: 90.0, 0.8: 60.0}.get(p, 40.0)
                skipped = 20_000 if (p == 0.0 and eps == 10.0) else 0   # p = 0: nothing stable
                sweeps.append(_run(final, p=p, method="ours", algorithm=algorithm, eps=eps,
                                   skipped=skipped))
    for run in sweeps:
        run.values["n_stable"] = 0 if run["algorithm"] == "BCQ" else 5
    paper = {("CartPole", "CQL"): (1.0, 0.5, 0.8), ("CartPole", "BCQ"): (1.0, 0.5, 0.5)}
    tally = cmp.table1_tally({"CartPole": nonprivate + sweeps}, {"CartPole": 20_000}, paper)
    assert [row[-2:] for row in tally.rows] == [(0.5, 0.5), (0.5, 0.8), (0.5, 0.5), (0.5, 0.5)]
    assert tally.counted == 2 and tally.agree == 1            # CQL counts, BCQ has no release
    assert tally.left_out == ["CartPole BCQ 7.5", "CartPole BCQ 10"]
    assert tally.chances == [1 / 5, 1 / 4]                     # eps = 10: p = 0 did not train
    assert tally.rows[1][3] == np.inf                          # shown as "trained on nothing"


def test_table1s_rule_passes_only_on_agreements_improbable_at_random():
    tally = cmp.Table1Tally([], agree=3, counted=4, chances=[0.25] * 4, left_out=[])
    # P(A >= 3) = 4 (1/4)^3 (3/4) + (1/4)^4 = 13/256
    assert tally.p_value == pytest.approx(13 / 256)
    assert not tally.partly(0.05) and tally.partly(0.06) and tally.holds(0.06)
    assert tally.needed(0.05) == 4 and tally.null_probability(0.05) == pytest.approx(1 / 256)
    assert cmp.Table1Tally([], 0, 1, [0.5], []).needed(0.05) is None


def _alone_runs(ours, dpsgd):
    runs = [_run(NONPRIVATE + d, s, method="nonprivate", algorithm="CQL")
            for s, d in enumerate((-1.0, 0.0, 1.0))]
    runs += [_run(f, s, method="dpsgd", algorithm="CQL", eps=10.0) for s, f in enumerate(dpsgd)]
    return runs + [_run(f, s, method="ours", algorithm="CQL", eps=10.0, p=0.0)
                   for s, f in enumerate(ours)]


def test_stable_alone_suffices_within_two_errors_of_the_better_other():
    alone = cmp.stable_alone(_alone_runs((118.0, 121.0, 119.0), (40.0, 50.0, 60.0)),
                             "Acrobot", "CQL")
    assert alone.best == "non-private" and alone.suffices()
    assert np.allclose(alone.gap.differences, [-1.0, 1.0, -2.0])
    short = cmp.stable_alone(_alone_runs((60.0, 62.0, 61.0), (40.0, 50.0, 60.0)),
                             "Acrobot", "CQL")
    assert short.gap.worse() and not short.suffices()
    with pytest.raises(ValueError, match="p = 0"):
        cmp.stable_alone(_alone_runs((1.0,) * 3, (1.0,) * 3), "CartPole", "CQL")


def test_fig4s_trend_is_a_one_sided_slope_test_over_every_seeds_gap():
    runs = []
    for m, gap in zip(cmp.FIG4_EXPERTS, (0.0, 10.0, 20.0)):
        for s, noise in enumerate((-1.0, 0.0, 1.0)):
            common = dict(algorithm="CQL", eps=10.0, m=m)
            runs += [_run(50.0, s, method="dpsgd", **common),
                     _run(50.0 + gap + noise, s, method="ours", p=0.0, **common)]
    trend = cmp.fig4_trend(runs)
    assert trend.slope == pytest.approx(0.01) and trend.rises and trend.growing
    assert trend.holds() and trend.partly
    assert trend.t_needed == pytest.approx(1.894579, rel=1e-6)       # t_{0.95, 7}
    flat = cmp.fig4_trend([r if r["method"] == "dpsgd" else _run(
        50.0 + (r.final - 50.0) % 2, r["seed"], **{k: v for k, v in r.spec.items()
                                                  if k != "seed"}) for r in runs])
    assert not flat.rises and not flat.partly
