"""Sharma et al. (2025) Sec. 5 / App. A checked exactly: Lemma 5.1's count ratio, Lemma 5.2's
pass probability, Theorem 5.3 on an enumerable MDP, Theorem 5.5's composition."""

import itertools
import math

import numpy as np
import pytest
from dp_accounting.pld import common, privacy_loss_distribution
from scipy import integrate, stats

from dprl.sharma2025 import composition as comp
from dprl.sharma2025 import privacy as pv
from dprl.sharma2025 import release as r

# --- Lemma 5.1 ---------------------------------------------------------------------------


def _brute_ratio(count, m, lower, upper, n=20001):
    """Worst Pr(E|Pi)/Pr(E|Pi') over a grid of the changed expert's probability x."""
    x = np.linspace(lower, upper, n)
    add = count * (m + 1) / ((count + x) * m)
    feasible = (x <= count - (m - 1) * lower) & (count - x <= (m - 1) * upper)
    with np.errstate(divide="ignore"):
        remove = np.where(feasible & (count - x > 0), count * (m - 1) / ((count - x) * m), 0.0)
    remove = np.where(feasible & (count - x <= 0), np.inf, remove)
    return max(add.max(), remove.max())


@pytest.mark.parametrize(("count", "m", "lower", "upper"),
                         [(9.0, 3000, 0.0, 1.0), (1.3, 20, 0.0, 1.0), (12.5, 50, 0.02**2, 1.0),
                          (4.0, 10, 0.1, 0.9), (0.5, 5, 0.0, 1.0)])
def test_worst_count_ratio_is_the_brute_force_supremum(count, m, lower, upper):
    exact = float(pv.worst_count_ratio(count, m, lower, upper))
    assert exact == pytest.approx(_brute_ratio(count, m, lower, upper), rel=1e-9)


@pytest.mark.parametrize("eps_prime", [0.03, 0.12, 1.0])
def test_lemma51_holds_from_c_min_and_is_tight_for_large_m(eps_prime):
    c_min = 1 / -math.expm1(-eps_prime)
    counts = c_min * np.array([1.0, 1.01, 2.0, 10.0])
    for m in (int(np.ceil(counts[-1])) + 1, 3000, 10**7):
        worst = pv.worst_count_ratio(counts, m)
        assert np.all(worst <= pv.count_ratio_bound(counts))
        assert np.all(worst <= math.exp(eps_prime) * (1 + 1e-15))
    # at count = c_min the bound e^eps' is approached as m grows (removing a certain expert)
    assert float(pv.worst_count_ratio(c_min, 10**7)) == pytest.approx(math.exp(eps_prime),
                                                                      rel=1e-6)
    # below c_min the lemma's conclusion fails
    assert float(pv.worst_count_ratio(0.9 * c_min, 3000)) > math.exp(eps_prime)


def test_lemma51_input_validation():
    with pytest.raises(ValueError, match="count"):
        pv.count_ratio_bound(1.0)
    with pytest.raises(ValueError, match="m"):
        pv.worst_count_ratio(1.5, 1)
    with pytest.raises(ValueError, match="count must lie"):
        pv.worst_count_ratio(20.0, 10)
    with pytest.raises(ValueError, match="lower"):
        pv.worst_count_ratio(2.0, 10, lower=0.5, upper=0.4)


# --- Lemma 5.2 ---------------------------------------------------------------------------


def _quad_tail(y, bu, bv):
    """P(U - V > y) by integrating U's Laplace tail against V's density."""
    def integrand(v):
        z = y + v
        tail = 0.5 * math.exp(-z / bu) if z >= 0 else 1 - 0.5 * math.exp(z / bu)
        return tail * math.exp(-abs(v) / bv) / (2 * bv)
    return integrate.quad(integrand, -60 * bv, 60 * bv, points=[0.0, -y], limit=400,
                          epsabs=1e-16, epsrel=1e-12)[0]


@pytest.mark.parametrize(("bu", "bv"), [(4.0, 2.0), (33.4, 16.7), (1.0, 1.0), (1.0, 3.0)])
@pytest.mark.parametrize("y", [-7.0, -0.5, 0.0, 0.3, 5.0, 40.0])
def test_laplace_difference_tail_matches_quadrature(bu, bv, y):
    exact = float(pv.laplace_difference_tail(y, bu, bv))
    assert exact == pytest.approx(_quad_tail(y, bu, bv), rel=1e-9, abs=1e-15)


def test_laplace_difference_tail_matches_monte_carlo():
    rng = np.random.default_rng(0)
    n = 1_000_000
    diff = rng.laplace(0, 4.0, n) - rng.laplace(0, 2.0, n)
    for y in (-3.0, 1.0, 6.0):
        p = float(pv.laplace_difference_tail(y, 4.0, 2.0))
        assert stats.binomtest(int(np.sum(diff > y)), n, p).pvalue > 1e-3


@pytest.mark.parametrize(("env", "eps"), [("Acrobot", 10.0), ("LunarLander", 10.0),
                                          ("HIV", 7.5)])
def test_lemma52_exact_probability_is_two_thirds_of_delta_prime(env, eps):
    params = r.appendix_b3_parameters(env, eps)
    d = params.delta_prime
    exact = float(pv.lemma52_top_probability(params.eps_prime, d))
    assert exact == pytest.approx((4 * d - d**2) / 6, rel=1e-9)
    assert exact < d
    # count theta - x: decays as e^{-x eps'/4}
    below = np.array([0.0, 10.0, 100.0])
    e = params.eps_prime
    assert np.allclose(pv.lemma52_top_probability(e, d, below),
                       (4 * d * np.exp(-below * e / 4) - d**2 * np.exp(-below * e / 2)) / 6,
                       rtol=1e-9)
    # the same probability as PrefixQuery's with Alg. 2's noisy threshold at count = theta
    assert float(pv.top_probability(params.theta, params.threshold, e)) == pytest.approx(exact,
                                                                                       rel=1e-9)
    with pytest.raises(ValueError, match="below"):
        pv.lemma52_top_probability(e, d, -1.0)


def test_single_query_release_probability_is_the_closed_form():
    for count, threshold, eps_prime in [(5.0, 8.0, 1.0), (1100.0, 1017.0, 0.12)]:
        k_distribution = r.pass_probabilities(np.log([count]), eps_prime, threshold)
        assert k_distribution[1] == pytest.approx(
            float(pv.top_probability(count, threshold, eps_prime)), rel=1e-10)


# --- Theorem 5.3 -------------------------------------------------------------------------

INITIAL = np.array([0.6, 0.4])
TRANSITIONS = np.array([[[0.8, 0.2], [0.3, 0.7]], [[0.5, 0.5], [0.1, 0.9]]])


def _model(length, p_min):
    types = pv.binary_policy_types(2, 2, length, p_min)
    return types, pv.one_round_model(INITIAL, TRANSITIONS, types, length, p_min)


def test_enumeration_and_prefix_masses():
    trajectories = pv.enumerate_trajectories(2, 3, 2)
    assert trajectories.shape == (2 * 3 * 2 * 3 * 2, 5)
    assert len({tuple(t) for t in trajectories}) == len(trajectories)
    _, model = _model(3, 0.1)
    mult = np.arange(model.n_types) % 3
    mass = model.prefix_mass(mult)
    sizes = np.cumsum([0] + model.prefix_sizes())
    for k in range(3):          # App. A.4 eq. 49: each length's prefixes carry total mass 1
        assert mass[sizes[k]:sizes[k + 1]].sum() == pytest.approx(1.0, abs=1e-13)
    assert model.distribution(mult, 1.0, 30.0).sum() == pytest.approx(1.0, abs=1e-13)


def test_one_round_distribution_matches_simulation():
    """Simulate A = A1 o A2 directly (expert, trajectory, SVT) and compare the output
    histogram with the exact distribution (chi-square)."""
    length, p_min, eps_prime, threshold = 2, 0.25, 1.0, 9.0
    types, model = _model(length, p_min)
    mult = np.array([3, 0, 1, 0, 4, 0, 0, 2, 0, 0, 1, 0, 0, 0, 0, 3])
    exact = model.distribution(mult, eps_prime, threshold)
    rng = np.random.default_rng(1)
    n = 40_000
    expert = rng.choice(np.repeat(np.arange(len(mult)), mult), n)
    states = [rng.choice(2, n, p=INITIAL)]
    actions, log_prefix = [], np.zeros((len(mult), n))
    counts = []
    for j in range(length):
        s = states[-1]
        a = (rng.random(n) >= types[expert, j, s, 0]).astype(int)
        actions.append(a)
        log_prefix = log_prefix + np.log(types[:, j, s, a])
        counts.append(mult @ np.exp(log_prefix))
        states.append((rng.random(n) >= TRANSITIONS[s, a, 0]).astype(int))
    threshold_hat = threshold + rng.laplace(0, 2 / eps_prime, n)
    noisy = np.array(counts).T + rng.laplace(0, 4 / eps_prime, (n, length))
    passed = noisy > threshold_hat[:, None]
    k = np.where(passed.all(axis=1), length, np.argmin(passed, axis=1))
    offsets = np.cumsum([1] + model.prefix_sizes())
    output = np.zeros(n, dtype=int)
    for kk in range(1, length + 1):
        columns = [states[0]] + [c for j in range(kk) for c in (actions[j], states[j + 1])]
        index = np.ravel_multi_index(columns, (2,) + (2, 2) * kk)
        output = np.where(k == kk, offsets[kk - 1] + index, output)
    observed = np.bincount(output, minlength=len(exact))
    keep = exact * n >= 5
    assert keep.sum() >= 10
    expected = exact[keep] * n
    assert stats.chisquare(observed[keep], expected * observed[keep].sum() / expected.sum()
                           ).pvalue > 1e-3


def test_hockey_stick_and_profile_of_randomized_response():
    e = 0.7
    p = np.array([math.exp(e), 1.0]) / (1 + math.exp(e))
    q = p[::-1]
    assert float(pv.hockey_stick(p, q, e)) == pytest.approx(0.0, abs=1e-15)
    assert float(pv.hockey_stick(p, q, 0.0)) == pytest.approx(p[0] - q[0])
    assert pv.profile_epsilon(p, q, 0.0) == pytest.approx(e, rel=1e-10)
    assert pv.profile_epsilon(p, q, 1.0) == 0.0
    assert pv.profile_epsilon(np.array([0.5, 0.5]), np.array([1.0, 0.0]), 0.1) == math.inf


def test_theorem53_holds_for_adversarial_sets_and_fails_without_its_threshold():
    """Outlier experts on a deterministic-transition MDP: the theorem's (2 eps', L delta')
    holds under Alg. 2's threshold; with the threshold lowered to c_min (no /p_min, no
    offset) the same audit finds a violation."""
    length, p_min, eps_prime, delta_prime = 3, 0.1, 1.0, 1e-3
    types = pv.binary_policy_types(2, 2, length, p_min)
    deterministic = np.array([[[1.0, 0.0], [0.0, 1.0]]] * 2)
    model = pv.one_round_model(np.array([1.0, 0.0]), deterministic, types, length, p_min)
    threshold = pv.algorithm2_threshold(eps_prime, delta_prime, p_min)
    mult = np.zeros(model.n_types, dtype=int)
    mult[0], mult[-1] = int(threshold / (1 - p_min)), 1      # counts straddle the threshold
    audit = pv.audit_neighbours(model, mult, eps_prime, delta_prime)
    assert audit.holds and np.all(audit.eq4_excess <= 0)
    assert audit.bound == pytest.approx(3e-3)
    assert 0 < audit.eps_at_bound.max() < 2 * eps_prime
    assert np.all(audit.delta_at_2eps < 1e-9)
    small = np.zeros(model.n_types, dtype=int)
    small[0], small[-1] = 3, 1
    c_min = 1 / -math.expm1(-eps_prime)
    broken = pv.audit_neighbours(model, small, eps_prime, delta_prime, threshold=c_min)
    assert not broken.holds
    assert broken.delta_at_2eps.max() > 10 * broken.bound


def test_search_never_lowers_the_objective():
    _, model = _model(2, 0.25)
    eps_prime, delta_prime = 1.0, 1e-2
    m = int(pv.algorithm2_threshold(eps_prime, delta_prime, 0.25) / 0.75) + 1
    replay = np.random.default_rng(2)
    weights = replay.dirichlet(np.full(16, 0.1))
    start = replay.multinomial(m, weights)          # the search's documented start
    first = pv.audit_neighbours(model, start, eps_prime, delta_prime).eps_at_bound.max()
    best, audit = pv.search_worst_expert_set(model, m, eps_prime, delta_prime,
                                             np.random.default_rng(2), 4)
    assert best.sum() == m
    assert audit.eps_at_bound.max() >= first
    assert audit.holds


def test_one_round_model_validation():
    types = pv.binary_policy_types(2, 2, 2, 0.1)
    with pytest.raises(ValueError, match="p_min"):
        pv.one_round_model(INITIAL, TRANSITIONS, types, 2, 0.2)
    with pytest.raises(ValueError, match="transitions"):
        pv.one_round_model(INITIAL, TRANSITIONS[:, :, :1], types, 2, 0.1)
    with pytest.raises(ValueError, match="policies"):
        pv.one_round_model(INITIAL, TRANSITIONS, types, 3, 0.1)
    model = pv.one_round_model(INITIAL, TRANSITIONS, types, 2, 0.1)
    with pytest.raises(ValueError, match="multiplicities"):
        model.counts(np.zeros(model.n_types))


# --- Theorem 5.5: composition -------------------------------------------------------------


def _brute_composition_delta(eps_total, eps0, delta0, k):
    """Hockey-stick of the k-fold product of KOV's dominating pair, enumerated."""
    e = math.exp(eps0)
    p = np.array([delta0, (1 - delta0) * e / (1 + e), (1 - delta0) / (1 + e), 0.0])
    q = p[::-1]
    total = 0.0
    for outcome in itertools.product(range(4), repeat=k):
        pp, qq = np.prod(p[list(outcome)]), np.prod(q[list(outcome)])
        total += max(pp - math.exp(eps_total) * qq, 0.0)
    return total


@pytest.mark.parametrize(("eps0", "delta0", "k"), [(0.5, 0.0, 3), (0.3, 1e-3, 5), (1.2, 0.05, 4)])
def test_kov_delta_matches_brute_force(eps0, delta0, k):
    for eps_total in (0.0, 0.1, eps0, 1.7 * eps0, (k - 2) * eps0, k * eps0 + 0.1):
        assert float(comp.kov_delta(eps_total, eps0, delta0, k)) == pytest.approx(
            _brute_composition_delta(eps_total, eps0, delta0, k), rel=1e-10, abs=1e-15)


def test_kov_delta_equals_kov_theorem33_at_its_grid():
    eps0, delta0, k = 0.2, 1e-5, 30
    e = math.exp(eps0)
    for i in range(0, k // 2 + 1, 3):
        delta_i = sum(math.comb(k, l) * (e ** (k - l) - e ** (k - 2 * i + l))
                      for l in range(i)) / (1 + e) ** k
        theorem = 1 - (1 - delta0) ** k * (1 - delta_i)
        assert float(comp.kov_delta((k - 2 * i) * eps0, eps0, delta0, k)) == pytest.approx(
            theorem, rel=1e-10, abs=1e-16)


def test_kov_agrees_with_dp_accounting_pld():
    eps0, delta0, k = 0.24, 6.7e-6, 25
    pld = privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps0, delta0), value_discretization_interval=1e-5)
    composed = pld.self_compose(k)
    for eps_total in (2.0, 4.0):
        exact = float(comp.kov_delta(eps_total, eps0, delta0, k))
        pessimistic = composed.get_delta_for_epsilon(eps_total)
        assert exact <= pessimistic * (1 + 1e-9)
        assert pessimistic == pytest.approx(exact, rel=2e-3)


def test_theorem320_and_corollary321_as_the_paper_applies_them():
    eps1, delta1, n = 10.0, 1 / 3000, 25
    eps0, delta0 = comp.per_round_guarantee(eps1, delta1, n)
    # Theorem 5.5's proof: eps1 / sqrt(8 T log(2/delta1)) = Cor. 3.21's eps / (2 sqrt(2 k
    # ln(1/delta_hat))) with delta_hat = delta1 / 2
    assert eps0 == pytest.approx(eps1 / math.sqrt(8 * n * math.log(2 / delta1)), rel=1e-14)
    assert eps0 == pytest.approx(eps1 / (2 * math.sqrt(2 * n * math.log(1 / (delta1 / 2)))))
    assert delta0 == pytest.approx(delta1 / (2 * n))
    totals = comp.composition_totals(eps1, delta1, n)
    by_hand = math.sqrt(2 * n * math.log(2 / delta1)) * eps0 + n * eps0 * math.expm1(eps0)
    assert totals.theorem320 == pytest.approx(by_hand, rel=1e-13)
    assert not totals.corollary_applies                      # Cor. 3.21 needs eps1 < 1
    assert totals.kov < totals.theorem320 < eps1
    assert float(comp.kov_delta(totals.kov, eps0, delta0, n)) == pytest.approx(delta1, rel=1e-8)


def test_kov_never_exceeds_theorem320_on_appendix_b3_rows():
    rows = comp.appendix_b3_table()
    assert len(rows) == 9
    for row in rows:
        c = row["composition"]
        assert c.kov <= c.theorem320 <= c.eps1
        assert c.achieved == {"corollary321": False, "theorem320": True, "kov": True}
    acrobot = rows[0]
    assert (acrobot["env"], acrobot["eps"], acrobot["longest"]) == ("Acrobot", 10.0, 26)


def test_kov_round_epsilon_inverts_kov_epsilon():
    eps0 = comp.kov_round_epsilon(10.0, 1 / 3000, 1 / 3000 / 50, 25)
    assert comp.kov_epsilon(1 / 3000, eps0, 1 / 3000 / 50, 25) == pytest.approx(10.0, rel=1e-9)
    assert eps0 > comp.per_round_guarantee(10.0, 1 / 3000, 25)[0]


def test_composition_input_validation():
    with pytest.raises(ValueError, match="eps_total"):
        comp.kov_delta(-1.0, 0.1, 0.0, 3)
    with pytest.raises(ValueError, match="delta0"):
        comp.kov_delta(1.0, 0.1, 1.0, 3)
    assert comp.kov_epsilon(1e-3, 0.1, 1e-3, 3) == math.inf      # k delta0 exceeds the target
    with pytest.raises(ValueError, match="eps1"):
        comp.composition_totals(0.0, 1e-3, 5)
