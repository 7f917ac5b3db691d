"""The one-run audit (Steinke, Nasr & Jagielski 2023): the main theorem's bound against exact
binomial inversion, published values and simulated randomized response; the registered
audit at smoke scale, through the package's own expert-level DP-SGD."""

import math

import numpy as np
import pytest
from scipy.stats import beta as beta_distribution
from scipy.stats import binom

from dprl.experiments import get
from dprl.experiments.audits.one_run import SCORES, canary_transitions
from dprl.engine.batches import compute_trials
from dprl.one_run_audit import (correct_guess_probability, correct_guesses, epsilon_lower_bound,
                                guesses, p_value)
from dprl.sharma2025 import dp_sgd
from dprl.sharma2025.qnetworks import PAPER_HIDDEN

EXPERIMENT = "audit-sharma2025-one-run"


def _exact_pure_bound(r: int, v: int, confidence: float) -> float:
    """delta = 0: the eps whose Binomial(r, e^eps/(1+e^eps)) has P[W >= v] = 1 - confidence,
    by the Clopper-Pearson identity P[Bin(r, p) >= v] = I_p(v, r - v + 1)."""
    p = beta_distribution.ppf(1 - confidence, v, r - v + 1)
    return max(0.0, math.log(p / (1 - p)))


@pytest.mark.parametrize("r, v", [(100, 75), (200, 150), (1000, 600), (50, 50), (300, 160)])
def test_pure_dp_bound_is_the_exact_binomial_inversion(r, v):
    assert epsilon_lower_bound(2 * r, r, v, 0.0) == pytest.approx(
        _exact_pure_bound(r, v, 0.95), abs=1e-9)


def test_p_value_at_delta_zero_is_the_binomial_tail():
    q = correct_guess_probability(1.3)
    assert q == pytest.approx(math.exp(1.3) / (1 + math.exp(1.3)))
    assert p_value(500, 200, 140, 1.3, 0.0) == pytest.approx(binom.sf(139, 200, q), rel=1e-12)


def test_delta_term_is_theorem_31s_maximum_over_i():
    m, r, v, eps, delta = 300, 120, 90, 0.8, 1e-4
    q = correct_guess_probability(eps)
    worst = max(sum(binom.pmf(j, r, q) for j in range(v - i, v)) / i for i in range(1, v + 1))
    assert p_value(m, r, v, eps, delta) == pytest.approx(
        binom.sf(v - 1, r, q) + 2 * m * delta * worst, rel=1e-10)


def test_published_values_of_appendix_d_and_section_7():
    """Steinke et al. print 0.673 (App. D: m = 1000, r = 100, v = 75, delta = 1e-4) and
    2.675 (Sec. 7: m = 1e5, r = 1510, v = 1439, delta = 1e-5), at 95%."""
    assert epsilon_lower_bound(1000, 100, 75, 1e-4) == pytest.approx(0.673, abs=5e-4)
    assert 2.675 <= epsilon_lower_bound(100_000, 1510, 1439, 1e-5) < 2.676


def test_bound_grows_with_correct_guesses_and_shrinks_with_delta_and_confidence():
    assert epsilon_lower_bound(1000, 200, 100, 1e-5) == 0.0  # chance level certifies nothing
    bounds = [epsilon_lower_bound(1000, 200, v, 1e-5) for v in range(120, 201, 10)]
    assert np.all(np.diff(bounds) > 0)
    assert epsilon_lower_bound(1000, 200, 170, 1e-3) < epsilon_lower_bound(1000, 200, 170, 1e-6)
    assert epsilon_lower_bound(1000, 200, 170, 1e-5, 0.99) < epsilon_lower_bound(
        1000, 200, 170, 1e-5, 0.9)


@pytest.mark.parametrize("eps, delta", [(1.0, 0.0), (2.0, 1e-5)])
def test_randomized_response_bound_stays_below_eps_with_95_percent_coverage(eps, delta):
    """r canaries guessed correctly each w.p. e^eps/(1+e^eps) (an eps-DP mechanism): the
    bound exceeds eps in at most 5% of repeats (plus sampling slack)."""
    rng = np.random.default_rng(29)
    r, repeats = 200, 400
    correct = rng.binomial(r, correct_guess_probability(eps), repeats)
    bounds = np.array([epsilon_lower_bound(r, r, int(v), delta) for v in correct])
    assert np.mean(bounds > eps) <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / repeats)
    assert np.median(bounds) > 0.5 * eps  # not vacuous


def test_randomized_response_bound_approaches_eps_as_r_grows():
    eps = 1.0
    rng = np.random.default_rng(30)
    gaps = []
    for r in (100, 1000, 10_000, 100_000):
        v = int(rng.binomial(r, correct_guess_probability(eps)))
        gaps.append(eps - epsilon_lower_bound(r, r, v, 1e-6 / r))
    assert gaps[-1] < 0.03 and gaps[-1] < gaps[0]


def test_guesses_take_the_extremes_and_count_correct_ones():
    scores = np.array([0.3, -2.0, 5.0, 1.0, -1.0, 0.0])
    guessed = guesses(scores, 2, 1)
    assert guessed.tolist() == [0, -1, 1, 1, 0, 0]
    included = np.array([True, False, True, False, False, True])
    assert correct_guesses(guessed, included) == 2


@pytest.mark.parametrize("call, name", [
    (lambda: p_value(10, 11, 3, 1.0, 0.0), "r"), (lambda: p_value(10, 5, 6, 1.0, 0.0), "v"),
    (lambda: p_value(10, 5, 3, -1.0, 0.0), "eps"), (lambda: p_value(10, 5, 3, 1.0, 1.0), "delta"),
    (lambda: epsilon_lower_bound(10, 5, 3, 0.0, 1.0), "confidence"),
    (lambda: guesses(np.zeros(3), 2, 2), "k_plus"),
    (lambda: correct_guesses(np.zeros(3, dtype=np.int8), np.zeros(2, dtype=bool)), "included"),
    (lambda: canary_transitions(3, -1.0, 1.0, np.random.default_rng(0)), "scale")])
def test_bad_input_is_refused_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_canaries_read_only_their_own_channel():
    s, a, r, s_next, done = canary_transitions(5, 100.0, 1e4, np.random.default_rng(1))
    assert s.shape == (5, 9) and np.count_nonzero(s) == 5
    assert np.array_equal(np.argmax(s, axis=1), 4 + np.arange(5)) and done.all()
    assert set(np.abs(r)) == {1e4} and np.array_equal(s, s_next)


@pytest.fixture(scope="module")
def smoke():
    experiment = get(EXPERIMENT)
    config = experiment.config("smoke")
    return config, compute_trials(experiment, config, [0])


def test_smoke_audit_is_consistent_and_its_bound_is_recomputable(smoke):
    config, arrays = smoke
    r = config.n_canaries
    assert arrays["scores"].shape == (1, len(SCORES), r)
    assert np.all((arrays["guesses"] != 0).sum(-1) == config.k_plus + config.k_minus)
    for k in range(len(SCORES)):
        v = correct_guesses(arrays["guesses"][0, k], arrays["included"][0])
        assert arrays["correct"][0, k] == v
        assert arrays["eps_lower_bound"][0, k] == epsilon_lower_bound(
            r, config.k_plus + config.k_minus, v, config.delta)
    assert 0 <= arrays["eps_lower_bound"].max() <= arrays["accountant_eps"][0]
    assert arrays["accountant_eps"][0] == pytest.approx(config.eps, rel=1e-3)


def test_own_channel_score_separates_included_canaries(smoke):
    """Included canaries' own-channel scores are higher on average: the auditor sees them."""
    _, arrays = smoke
    included, own = arrays["included"][0], arrays["scores"][0, SCORES.index("own channel")]
    assert own[included].mean() > own[~included].mean()


def test_audit_samples_through_expert_dp_sgd_step_once_per_step(monkeypatch):
    calls = []
    original = dp_sgd.expert_dp_sgd_step

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(dp_sgd, "expert_dp_sgd_step", counting)
    experiment = get(EXPERIMENT)
    config = experiment.config("smoke")
    compute_trials(experiment, config, [0])
    assert len(calls) == config.steps


def test_paper_scale_trains_the_papers_network_with_its_own_seed():
    paper, smoke_config = (get(EXPERIMENT).config(s) for s in ("paper", "smoke"))
    assert paper.hidden == PAPER_HIDDEN and paper.root_seed == smoke_config.root_seed == 1720
    assert paper.accountant == "pld" and paper.n_trials == 1


def test_too_many_correct_guesses_are_refused_before_any_allocation():
    from dprl.one_run_audit import MAX_CORRECT, p_value
    with pytest.raises(ValueError, match="MAX_CORRECT"):
        p_value(10**9, 10**9, MAX_CORRECT + 1, 1.0, 1e-5)


def test_the_bound_refuses_what_its_bisection_cannot_afford_only_where_delta_is_positive():
    """v = 6e6 took over a minute (some 50 p-values of v floats); at delta = 0 each p-value
    is one binomial tail, so 1e9 canaries all guessed right get their exact bound at once."""
    from dprl.one_run_audit import MAX_BOUND_CORRECT
    with pytest.raises(ValueError, match="^v must be <= MAX_BOUND_CORRECT"):
        epsilon_lower_bound(10**7, 10**7, MAX_BOUND_CORRECT + 1, 1e-5)
    assert p_value(10**9, 10**9, 10**9, 20.0, 0.0) == pytest.approx(
        binom.sf(10**9 - 1, 10**9, correct_guess_probability(20.0)), rel=1e-12)
    assert epsilon_lower_bound(10**9, 10**9, 10**9, 0.0) == pytest.approx(
        _exact_pure_bound(10**9, 10**9, 0.95), abs=1e-6)
