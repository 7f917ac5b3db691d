"""The largest canary inside the premises of the proof of Wang & Hegde (2019), Theorem 5
(dprl.wang2019.canary.admissible_norm_sup, sawtooth_canary, theorem5_canary_limit):
the RKHS norm's closed form, the supremum against random admissible functions, its
near-maximisers, the audit's shift and eps, and input validation."""

import math

import numpy as np
import pytest
from scipy import integrate

from dprl.experiments import get
from dprl.experiments.audits.common import exact_gdp_mu, pair_epsilon
from dprl.mechanisms import gaussian_epsilon
from dprl.wang2019.calibration import (Theorem5Calibration, lemma6_norm_bound,
                                       ou_rkhs_norm_squared, ou_whiten)
from dprl.wang2019.canary import admissible_norm_sup, sawtooth_canary, theorem5_canary_limit

FRESH = ["audit-wang2019-proof-one-update", "audit-wang2019-statement-one-update",
         "audit-wang2019-proof", "audit-wang2019-statement", "audit-wang2019-proof-updates",
         "audit-wang2019-statement-updates"]
#: (sup_norm m, Lipschitz L, beta, length): the proof's choice (m = v L, beta = 1/v) at the
#: audits' v, and settings off it
SETTINGS = [(0.001243414872714812, 1.0, 1 / 0.001243414872714812, 1.0),
            (0.04368669442853031, 1.0, 1 / 0.04368669442853031, 1.0),
            (0.3, 2.0, 5.0, 0.7), (1.0, 0.5, 0.2, 3.0), (0.05, 10.0, 40.0, 0.25)]


def _norm(x, f, beta):
    return math.sqrt(ou_rkhs_norm_squared(x, f, beta))


def test_rkhs_norm_closed_form_matches_the_whitened_grid_norm():
    """The closed form (1/(2 beta)) int (f'^2 + beta^2 f^2) + (f(a)^2 + f(b)^2)/2, by
    quadrature for a smooth f, against the piecewise-linear interpolant's norm
    (ou_rkhs_norm_squared) and the whitened grid norm (a^T K^{-1} a) on a fine grid."""
    beta, a, b = 7.0, 0.2, 1.3
    f = lambda x: np.sin(5 * x) + x ** 2  # noqa: E731
    df = lambda x: 5 * np.cos(5 * x) + 2 * x  # noqa: E731
    integral = integrate.quad(lambda x: df(x) ** 2 + beta ** 2 * f(x) ** 2, a, b,
                              epsabs=1e-13, epsrel=1e-13)[0]
    closed = integral / (2 * beta) + (f(a) ** 2 + f(b) ** 2) / 2
    x = np.linspace(a, b, 20001)
    assert ou_rkhs_norm_squared(x, f(x), beta) == pytest.approx(closed, rel=1e-7)
    assert np.sum(ou_whiten(x, f(x), beta) ** 2) == pytest.approx(closed, rel=1e-6)


@pytest.mark.parametrize("m, lipschitz, beta, length", SETTINGS)
def test_sawtooth_norm_has_the_closed_form_gap_and_tends_to_the_supremum(m, lipschitz, beta,
                                                                          length):
    """The sawtooth's exact norm (its kinks on the grid) falls short of the supremum by
    length beta (m L t - L^2 t^2 / 3) / 2, which vanishes with t; the sawtooth obeys both
    premises."""
    sup = admissible_norm_sup(m, lipschitz, beta, length)
    previous, fewest = 0.0, 2 * math.ceil(length * lipschitz / (4 * m))
    for teeth in fewest * 2 ** np.arange(0, 10, 3):  # teeth of width <= 2 m / L
        tooth = length / teeth
        x = np.linspace(0.0, length, 4 * teeth + 1)
        f = sawtooth_canary(x, m, lipschitz, tooth)
        assert np.all(np.abs(f) <= m * (1 + 1e-12))
        assert np.all(np.abs(np.diff(f) / np.diff(x)) <= lipschitz * (1 + 1e-9))
        gap = length * beta * (m * lipschitz * tooth - lipschitz ** 2 * tooth ** 2 / 3) / 2
        assert ou_rkhs_norm_squared(x, f, beta) == pytest.approx(sup ** 2 - gap, rel=1e-10)
        norm = _norm(x, f, beta)
        assert previous < norm < sup
        previous = norm
    assert previous > 0.99 * sup


@pytest.mark.parametrize("m, lipschitz, beta, length", SETTINGS)
def test_supremum_bounds_random_admissible_functions(m, lipschitz, beta, length):
    """Clipped random walks with |slope| <= L and |f| <= m (their piecewise-linear
    interpolants obey both premises): none exceeds the supremum, and a fine sawtooth beats
    them all."""
    rng = np.random.default_rng(20190)
    sup = admissible_norm_sup(m, lipschitz, beta, length)
    x = np.linspace(0.0, length, 801)
    h = x[1] - x[0]
    best = 0.0
    for i in range(300):
        if i % 3 == 0:  # bang-bang slopes +-L
            steps = lipschitz * h * rng.choice([-1.0, 1.0], size=x.size - 1)
        elif i % 3 == 1:  # any slope in [-L, L]
            steps = lipschitz * h * rng.uniform(-1.0, 1.0, size=x.size - 1)
        else:  # a walk held just under the limit, teeth of random width
            steps = lipschitz * h * np.repeat(rng.choice([-1.0, 1.0], size=x.size),
                                              rng.integers(1, 20))[:x.size - 1]
        start = rng.uniform(-m, m) if i % 3 < 2 else m
        f = np.clip(start + np.concatenate([[0.0], np.cumsum(steps)]), -m, m)
        assert np.all(np.abs(np.diff(f)) <= lipschitz * h * (1 + 1e-12))
        best = max(best, _norm(x, f, beta))
    assert best <= sup
    teeth = 2 * math.ceil(length * max(400, lipschitz / m))  # width < m / (2 L)
    fine = np.linspace(0.0, length, 2 * teeth + 1)
    sawtooth = _norm(fine, sawtooth_canary(fine, m, lipschitz, length / teeth), beta)
    assert best < sawtooth < sup


def test_rising_to_the_limit_and_staying_there_is_not_the_maximiser():
    """The ramp at slope L to m, then flat, at the proof's v: the sawtooth beats it, and on
    [0, 1] the supremum is Lemma 6's bound, C."""
    v, lipschitz = 0.0036538349208868415, 1.0
    m, beta = v * lipschitz, 1 / v
    x = np.linspace(0.0, 1.0, 40001)
    ramp = np.minimum(lipschitz * x, m)
    sawtooth = sawtooth_canary(x, m, lipschitz, 1 / 20000)
    assert _norm(x, ramp, beta) < 0.75 * _norm(x, sawtooth, beta)
    sup = admissible_norm_sup(m, lipschitz, beta)
    for length in (0.5, 1.0, 3.0):  # l (L^2 / (2 beta) + beta m^2 / 2) + m^2, expanded
        expected = length * (lipschitz ** 2 / (2 * beta) + beta * m ** 2 / 2) + m ** 2
        assert lemma6_norm_bound(m, lipschitz, beta, length) == pytest.approx(expected,
                                                                              rel=1e-14)
    assert sup ** 2 == pytest.approx((v ** 2 + v) * lipschitz ** 2, rel=1e-14)


@pytest.mark.parametrize("experiment_id", FRESH)
def test_canary_limit_is_sqrt_c_and_the_audits_pair(experiment_id):
    """On [0, 1], with the proof's beta = 1/v, the supremum is sqrt(C): the limit's mu and
    eps are the audited pair's (whose canary has norm sqrt(C)); on the audited span (2/beta)
    the supremum is sqrt(3) v L, far less."""
    config = get(experiment_id).config("paper")
    calibration = config.calibration
    limit = theorem5_canary_limit(calibration, config.n_updates, config.delta)
    assert limit.sup_norm == pytest.approx(1 / calibration.beta, rel=1e-14)
    assert limit.norm == pytest.approx(limit.sqrt_constant, rel=1e-12)
    assert limit.mu == pytest.approx(exact_gdp_mu(config), rel=1e-9)
    assert limit.eps == pytest.approx(pair_epsilon(config), rel=1e-9)
    assert limit.eps == pytest.approx(gaussian_epsilon(config.delta, limit.mu, 1.0))
    span = config.grid[-1]
    if span < 1:
        short = theorem5_canary_limit(calibration, config.n_updates, config.delta,
                                      length=float(span))
        assert short.norm == pytest.approx(math.sqrt(3) * limit.sup_norm, rel=1e-12)
        assert short.mu < limit.mu


def test_statement_reading_violates_inside_the_premises_and_the_proof_does_not():
    eps = {key: theorem5_canary_limit(get(key).config("paper").calibration,
                                      get(key).config("paper").n_updates, 5e-5).eps
           for key in FRESH}
    claim = get(FRESH[0]).config("paper").eps
    assert all(eps[key] < claim for key in FRESH if "proof" in key)
    assert eps["audit-wang2019-statement"] > 10 * claim
    assert eps["audit-wang2019-statement-one-update"] > 10 * claim


def test_length_and_lipschitz_shrink_the_limit():
    calibration = get("audit-wang2019-statement").config("paper").calibration
    full = theorem5_canary_limit(calibration, 39, 5e-5)
    half = theorem5_canary_limit(calibration, 39, 5e-5, length=0.5)
    smooth = theorem5_canary_limit(calibration, 39, 5e-5, lipschitz=0.5)
    assert half.norm < full.norm and half.eps < full.eps
    assert smooth.norm == pytest.approx(full.norm / 2, rel=1e-12)  # norm is linear in L


@pytest.mark.parametrize("kwargs, name", [
    (dict(sup_norm=0.0), "sup_norm"), (dict(sup_norm=-1.0), "sup_norm"),
    (dict(lipschitz=0.0), "lipschitz"), (dict(beta=-2.0), "beta"),
    (dict(length=0.0), "length"), (dict(length=math.nan), "length"),
    (dict(beta=math.inf), "beta")])
def test_admissible_norm_sup_validates(kwargs, name):
    args = dict(sup_norm=0.1, lipschitz=1.0, beta=10.0, length=1.0) | kwargs
    with pytest.raises(ValueError, match=name):
        admissible_norm_sup(**args)


@pytest.mark.parametrize("kwargs, name", [
    (dict(x=np.array([0.0, np.nan])), "x"), (dict(sup_norm=0.0), "sup_norm"),
    (dict(lipschitz=-1.0), "lipschitz"), (dict(tooth=0.0), "tooth"),
    (dict(tooth=0.3), "tooth")])
def test_sawtooth_canary_validates(kwargs, name):
    args = dict(x=np.linspace(0, 1, 5), sup_norm=0.1, lipschitz=1.0, tooth=0.1) | kwargs
    with pytest.raises(ValueError, match=name):
        sawtooth_canary(**args)


@pytest.mark.parametrize("kwargs, name", [
    (dict(calibration=(1.0, 2.0, 3.0, 4.0, 5.0)), "calibration"),
    (dict(n_updates=0), "n_updates"), (dict(n_updates=2.5), "n_updates"),
    (dict(delta=0.0), "delta"), (dict(delta=1.0), "delta"),
    (dict(lipschitz=0.0), "lipschitz"), (dict(length=1.5), "length"),
    (dict(length=0.0), "length")])
def test_theorem5_canary_limit_validates(kwargs, name):
    args = dict(calibration=Theorem5Calibration(3.0, 100.0, 0.0101, 0.1, 1e-4), n_updates=39,
                delta=5e-5) | kwargs
    with pytest.raises(ValueError, match=name):
        theorem5_canary_limit(**args)
