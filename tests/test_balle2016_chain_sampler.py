"""The exact sampler of chain first-visit statistics against simulated trajectories."""

from collections import Counter

import numpy as np
import pytest
from scipy import stats

from dprl.balle2016 import first_visit_data
from dprl.balle2016.chain_sampler import sample_first_visit_summaries
from dprl.envs import ChainMDP

# a short horizon, so that truncation (trajectories missing the goal) happens often
CHAINS = {
    "truncated": ChainMDP(n_states=5, stay_prob=0.5, horizon=5, gamma=0.9),
    "goal-absorbing": ChainMDP(n_states=5, stay_prob=0.4, horizon=6, gamma=0.8, goal=4),
    "early-goal": ChainMDP(n_states=6, stay_prob=0.6, horizon=7, gamma=0.9, goal=2,
                           start_distribution=(0.3, 0.2, 0.1, 0.1, 0.2, 0.1)),
}


def _key(counts: np.ndarray, sums: np.ndarray) -> tuple:
    return tuple(counts) + tuple(np.round(sums, 9))


def _simulated(mdp: ChainMDP, m: int, n: int, seed: int) -> Counter:
    summary = first_visit_data(mdp.sample((n, m), np.random.default_rng(seed)), mdp.gamma,
                               mdp.n_states, 1.0).summary
    return Counter(_key(c, s) for c, s in zip(summary.counts, summary.return_sums, strict=True))


def _exact(mdp: ChainMDP, m: int, n: int, seed: int) -> Counter:
    rng = np.random.default_rng(seed)
    draws = [sample_first_visit_summaries(mdp, [m], rng)[0] for _ in range(n)]
    return Counter(_key(x.counts, x.return_sums) for x in draws)


def _two_sample_p_value(a: Counter, b: Counter) -> float:
    """Chi-square test of homogeneity; rare outcomes pooled into one cell."""
    outcomes = sorted(set(a) | set(b))
    table = np.array([[a[o] for o in outcomes], [b[o] for o in outcomes]], dtype=float)
    common = table.sum(axis=0) >= 10
    table = np.column_stack([table[:, common], table[:, ~common].sum(axis=1)])
    table = table[:, table.sum(axis=0) > 0]
    return stats.chi2_contingency(table)[1]


@pytest.mark.parametrize(("name", "m"), [(name, 1) for name in sorted(CHAINS)]
                         + [("truncated", 3)])
def test_joint_law_of_the_statistics_matches_simulation(name, m):
    """The whole vector (|X_s|, sum F) has the law of that of m simulated trajectories."""
    mdp = CHAINS[name]
    exact, simulated = _exact(mdp, m, 5000, 1), _simulated(mdp, m, 5000, 2)
    assert len(exact) > 5
    assert _two_sample_p_value(exact, simulated) > 1e-3


def test_the_test_detects_a_wrong_chain():
    mdp = CHAINS["truncated"]
    wrong = ChainMDP(n_states=5, stay_prob=0.55, horizon=5, gamma=0.9)
    assert _two_sample_p_value(_exact(mdp, 1, 5000, 1), _simulated(wrong, 1, 5000, 2)) < 1e-3


def test_large_batches_have_the_exact_visit_frequencies_and_mean_returns():
    mdp, m = ChainMDP(), 10**14
    summary = sample_first_visit_summaries(mdp, [m], np.random.default_rng(0))[0]
    p = mdp.state_visit_probabilities()
    sd = np.sqrt(m * p * (1 - p))
    assert np.all(np.abs(summary.counts - m * p) < 6 * sd)
    # the chain's V: F_X converges to it (horizon-200 truncation is ~1e-45 here)
    assert np.allclose(summary.mean_returns, mdp.value_function(), atol=1e-6)


def test_batches_are_nested_and_reproducible():
    mdp = ChainMDP()
    a = sample_first_visit_summaries(mdp, [10, 1000, 10**6], np.random.default_rng(5))
    b = sample_first_visit_summaries(mdp, [10, 1000, 10**6], np.random.default_rng(5))
    assert [x.n_trajectories for x in a] == [10, 1000, 10**6]
    assert all(np.all(x.counts >= y.counts) for x, y in zip(a[1:], a, strict=False))
    assert all(np.array_equal(x.return_sums, y.return_sums) for x, y in zip(a, b, strict=True))


def test_refuses_bad_inputs():
    mdp, rng = ChainMDP(), np.random.default_rng(0)
    for sizes in ([], [10, 10], [10, 5], [0], [2**53 + 1]):
        with pytest.raises(ValueError):
            sample_first_visit_summaries(mdp, sizes, rng)
    with pytest.raises(ValueError, match="f_max"):
        sample_first_visit_summaries(mdp, [10], rng, f_max=0.5)
    with pytest.raises(ValueError, match="Generator"):
        sample_first_visit_summaries(mdp, [10], 0)
    with pytest.raises(ValueError, match="ChainMDP"):
        sample_first_visit_summaries("chain", [10], rng)


def test_huge_counts_never_land_in_impossible_categories():
    """numpy's multinomial hands rounding leftovers to the last category; the sampler cuts
    trailing impossible categories so that those leftovers stay possible."""
    from dprl.balle2016.chain_sampler import _split

    probabilities = np.random.default_rng(0).random(7)
    probabilities[5:] = 0
    probabilities /= probabilities.sum()
    counts = np.full(200, 10**15)
    raw = np.random.default_rng(0).multinomial(counts, probabilities)
    assert raw[:, 5:].sum() > 0  # the numpy behaviour this guards against
    draws = _split(np.random.default_rng(0), counts, probabilities)
    assert draws.shape == (200, 7) and np.all(draws[:, 5:] == 0)
    assert np.all(draws.sum(axis=1) == 10**15)
