"""The smooth upper bounds psi of DP-LSW and DP-LSL (Balle et al. 2016, Lemmas 4, 5, 9),
checked exhaustively on every signature of N = 3 states and m <= 4 trajectories."""

import itertools

import numpy as np
import pytest

from dprl import balle2016 as b

N = 3
RHO = np.array([1.0, 0.5, 0.25])
W = np.array([0.2, 0.5, 0.3])
ROUNDING = 1e-12  # psi(v) = e^beta psi(v') can hold with equality; allow rounding only
SETTINGS = [(m, eps) for m in (1, 2, 4) for eps in (0.1, 1.0, 5.0)]  # beta from 4e-3 to 1


def _signatures(m: int) -> np.ndarray:
    """All signatures in {0..m}^N: a data set of m trajectories can have each of them."""
    return np.array(list(itertools.product(range(m + 1), repeat=N)))


def _neighbours(v: np.ndarray) -> np.ndarray:
    """Pairs (i, j) of signatures of replace-one neighbours: ||v_i - v_j||_inf <= 1."""
    return np.argwhere(np.abs(v[:, None] - v[None]).max(axis=-1) <= 1)


def _worst_ratio(psi: np.ndarray, pairs: np.ndarray, beta: float) -> float:
    """max over neighbours of psi(v) / (e^beta psi(v')): at most 1 for a beta-smooth psi."""
    return float((psi[pairs[:, 0]] / psi[pairs[:, 1]]).max() / np.exp(beta))


def _beta(eps: float) -> float:
    return b.smoothing_constants(eps, 0.1, N)[1]


def _brute_force_psi(v: np.ndarray, m: int, phi, beta: float) -> np.ndarray:
    """Lemma 4 from its definition on the domain {0..m}^N: sup_k e^{-k beta} times the
    largest phi(v') over ||v' - v||_inf <= k (k > m adds nothing: the ball is the domain)."""
    distance = np.abs(v[:, None] - v[None]).max(axis=-1)
    values = phi(v)
    return np.max([np.exp(-k * beta) * np.where(distance <= k, values[None], 0).max(axis=1)
                   for k in range(m + 1)], axis=0)


@pytest.mark.parametrize("m, eps", SETTINGS)
def test_lsw_bound_is_smooth_dominating_and_smallest(m, eps):
    v, beta = _signatures(m), _beta(eps)
    psi = b.lsw_smooth_bound(v, W, beta)
    assert np.all(psi >= b.lsw_local_bound(v, W))
    assert _worst_ratio(psi, _neighbours(v), beta) <= 1 + ROUNDING
    brute = _brute_force_psi(v, m, lambda u: b.lsw_local_bound(u, W), beta)
    np.testing.assert_allclose(psi, brute, rtol=1e-14)


@pytest.mark.parametrize("m, eps", SETTINGS)
@pytest.mark.parametrize("c_lambda", [0.1, 1.0, 10.0])
def test_lsl_bound_with_min_is_smooth_dominating_and_smallest(m, eps, c_lambda):
    v, beta = _signatures(m), _beta(eps)
    psi = b.lsl_smooth_bound(v, m, RHO, c_lambda, beta)
    assert np.all(psi >= b.lsl_local_bound(v, m, RHO, c_lambda))
    assert _worst_ratio(psi, _neighbours(v), beta) <= 1 + ROUNDING
    brute = _brute_force_psi(v, m, lambda u: b.lsl_local_bound(u, m, RHO, c_lambda), beta)
    np.testing.assert_allclose(psi, brute, rtol=1e-14)


def test_lemma9_as_printed_dominates_but_is_not_smooth():
    """With max{v_s + k, m}, phi_0 is the data-independent worst case (every |X_s| read as m),
    so domination is trivial; but phi_k keeps growing past k = m - v_s (signatures above m,
    which no data set of m trajectories has) and Algorithm 2 stops at k = m, so the maximiser
    sits at the cut and neighbours' bounds differ by far more than e^beta."""
    m, c_lambda = 4, 1.0
    v, beta = _signatures(m), _beta(0.1)
    psi = b.lsl_smooth_bound(v, m, RHO, c_lambda, beta, "max")
    worst_case = b.lsl_local_bound(np.full(N, m), m, RHO, c_lambda)
    np.testing.assert_allclose(b.lsl_local_bound(v, m, RHO, c_lambda, 0, "max"), worst_case)
    assert np.all(psi >= worst_case)  # dominates phi_0 of every signature, by constancy
    assert np.all(psi >= b.lsl_smooth_bound(v, m, RHO, c_lambda, beta))  # never less noise
    assert _worst_ratio(psi, _neighbours(v), beta) > 1.1  # beta-smoothness fails by > 10%
    # and it is not the maximum of phi over the ball within the domain (Lemma 9's claim)
    beyond = b.lsl_local_bound(np.full(N, m), m, RHO, c_lambda, 1, "max")
    assert beyond > worst_case


def test_truncation_of_the_min_variant_is_exact():
    """phi_k with min{v_s + k, m} is constant from k = m - min_s v_s on (Lemma 9, second
    part), so Algorithm 2's cut at k = m equals the supremum over all k >= 0."""
    m, v = 4, np.array([1, 3, 4])
    values = [b.lsl_local_bound(v, m, RHO, 1.0, k) for k in range(3, 9)]
    np.testing.assert_array_equal(values, values[0])
    expected = (np.sqrt(m * RHO.sum()) + np.sqrt((RHO**2).sum())) ** 2
    assert values[0] == pytest.approx(expected)


def test_lsw_local_bound_by_hand():
    # v = (3, 1, 0): k = 0: 0.2/9 + 0.5 + 0.3; k = 1: 0.2/4 + 0.5 + 0.3; k >= 2 (= K_X - 1): 1
    v = np.array([3, 1, 0])
    expected = [0.2 / 9 + 0.8, 0.2 / 4 + 0.8, 1.0, 1.0]
    np.testing.assert_allclose([b.lsw_local_bound(v, W, k) for k in range(4)], expected)
    beta = 0.05  # psi = max(0.8222, e^-0.05 0.85, e^-0.1, e^-0.15) = e^-0.1
    assert b.lsw_smooth_bound(v, W, beta) == pytest.approx(np.exp(-0.1))


def test_vectorised_over_runs_equals_one_at_a_time():
    rng = np.random.default_rng(5)
    v = rng.integers(0, 7, size=(4, 5, N))
    for bound, kwargs in ((b.lsw_smooth_bound, dict(weights=W, beta=0.01)),
                          (b.lsl_smooth_bound, dict(m=6, rho=RHO, c_lambda=2.0, beta=0.01))):
        together = bound(v, **kwargs)
        assert together.shape == (4, 5)
        looped = [[bound(v[i, j], **kwargs) for j in range(5)] for i in range(4)]
        np.testing.assert_array_equal(together, looped)


@pytest.mark.parametrize("call, match", [
    (lambda: b.smoothing_constants(0.0, 0.1, 2), "eps"),
    (lambda: b.smoothing_constants(1.0, 1.0, 2), "delta"),
    (lambda: b.smoothing_constants(1.0, 0.0, 2), "delta"),
    (lambda: b.smoothing_constants(1.0, 0.1, 0), "d must be >= 1"),
    (lambda: b.lsw_local_bound([1.5, 2, 0], W), "integers"),
    (lambda: b.lsw_local_bound([1, 2], W), r"shape \(\.\.\., 3\)"),
    (lambda: b.lsw_local_bound([-1, 2, 0], W), "counts must lie"),
    (lambda: b.lsw_local_bound([1, 2, 0], W, k=-1), "k must be >= 0"),
    (lambda: b.lsw_local_bound([1, 2, 0], [0.0, 0.0, 0.0]), "positive entry"),
    (lambda: b.lsw_smooth_bound([1, 2, 0], W, 0.0), "beta must be > 0"),
    (lambda: b.lsl_local_bound([1, 5, 0], 4, RHO, 1.0), r"counts must lie in \[0, 4\]"),
    (lambda: b.lsl_local_bound([1, 2, 0], 4, [1.5, 0, 0], 1.0), "rho must lie in"),
    (lambda: b.lsl_local_bound([1, 2, 0], 4, RHO, 0.0), "c_lambda must be > 0"),
    (lambda: b.lsl_smooth_bound([1, 2, 0], 4, RHO, 1.0, 0.1, "mid"), "lemma9_variant"),
])
def test_bad_inputs_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()
