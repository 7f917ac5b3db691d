"""Property-based checks of the public API's input handling (hypothesis): whatever privacy
parameters, shapes and dtypes a caller passes, every call returns finite, well-shaped results
or raises ValueError/TypeError naming the offending argument; never inf, NaN, a silent
coercion, or an error from deep inside numpy or scipy."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dprl import mechanisms as M
from dprl.accounting import gaussian_rdp
from dprl.envs import ChainMDP
from dprl.sharma2025.accounting import dp_sgd_epsilon, noise_for_budget, steps_for_budget
from dprl.wang2019.functional_noise import conditional_moments, dense_conditional_moments

PROPERTY = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

#: Numbers a caller may pass as a privacy parameter: ordinary ones, extremes of the float
#: range, the boundaries, non-finite values, and things that are not numbers at all.
ANY_NUMBER = st.one_of(
    st.floats(1e-3, 1e3), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, -1.0, 1e-300, 1e300, 5e-324, 1.7e308]),
    st.integers(-5, 10**6), st.sampled_from([True, None, "0.1", [0.1], np.float32(0.5)]))

#: Arrays of every shape up to 3-D and of numeric, boolean and text dtypes.
ANY_ARRAY = hnp.arrays(
    dtype=st.sampled_from([np.float64, np.float32, np.int64, np.int8, np.bool_, np.complex128,
                           np.dtype("U3")]),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))


def _returns_finite_or_names(call, names, shape=None):
    """``call()`` returns finite values (of ``shape`` when given), or raises ValueError or
    TypeError whose message names one of ``names``."""
    try:
        result = call()
    except (ValueError, TypeError) as error:
        assert any(name in str(error) for name in names), f"{error!r} names none of {names}"
        return None
    values = np.asarray(result)
    assert values.dtype.kind == "f" and np.all(np.isfinite(values)), result
    if shape is not None:
        assert values.shape == shape, (values.shape, shape)
    return result


@PROPERTY
@given(sensitivity=ANY_NUMBER, eps=ANY_NUMBER)
def test_laplace_scale(sensitivity, eps):
    scale = _returns_finite_or_names(lambda: M.laplace_scale(sensitivity, eps),
                                     ("sensitivity", "eps"), ())
    if scale is not None:
        assert scale > 0 and math.isclose(scale, float(sensitivity) / float(eps))


@PROPERTY
@given(sensitivity=ANY_NUMBER, eps=ANY_NUMBER, delta=ANY_NUMBER)
def test_gaussian_calibrations(sensitivity, eps, delta):
    for calibrate in (M.gaussian_sigma, M.analytic_gaussian_sigma):
        sigma = _returns_finite_or_names(lambda: calibrate(sensitivity, eps, delta),
                                         ("sensitivity", "eps", "delta"), ())
        assert sigma is None or sigma > 0


@PROPERTY
@given(value=ANY_ARRAY, eps=ANY_NUMBER, seed=st.integers(0, 2**32 - 1))
def test_mechanisms_keep_the_shape_of_the_value(value, eps, seed):
    rng = np.random.default_rng(seed)
    for release in (lambda: M.laplace_mechanism(value, 1.0, eps, rng),
                    lambda: M.gaussian_mechanism(value, 1.0, 0.5, 1e-5, rng)):
        _returns_finite_or_names(release, ("value", "eps"), value.shape)


@PROPERTY
@given(orders=st.one_of(ANY_ARRAY, ANY_NUMBER), sigma=ANY_NUMBER)
def test_gaussian_rdp_has_the_shape_of_its_orders(orders, sigma):
    _returns_finite_or_names(lambda: gaussian_rdp(orders, sigma),
                             ("orders", "noise_multiplier"), np.shape(orders))


@PROPERTY
@given(x_obs=hnp.arrays(np.float64, st.integers(0, 6), elements=st.sampled_from(
           [0.0, 0.25, 0.5, 1.0, -2.0, np.nan])),
       sigma=ANY_NUMBER, beta=ANY_NUMBER)
def test_dense_conditioning_with_repeated_or_bad_points(x_obs, sigma, beta):
    """Repeated points carry the same value here (a function of the point): always usable."""
    g_obs = np.cos(np.nan_to_num(x_obs))
    moments = lambda: dense_conditional_moments(x_obs, g_obs, [0.3, 0.7], sigma, beta)
    try:
        mean, cov = moments()
    except (ValueError, TypeError) as error:
        assert any(name in str(error) for name in ("x_obs", "sigma", "beta")), repr(error)
        return
    assert mean.shape == (2,) and cov.shape == (2, 2)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(cov))


@PROPERTY
@given(n_states=st.one_of(st.integers(-2, 3000), ANY_NUMBER), stay=ANY_NUMBER,
       gamma=ANY_NUMBER)
def test_chain_values(n_states, stay, gamma):
    def values():
        return ChainMDP(n_states=n_states, stay_prob=stay, gamma=gamma).value_function()

    V = _returns_finite_or_names(values, ("n_states", "stay_prob", "gamma"))
    if V is not None:
        assert V.shape == (n_states,) and V[-1] == 0 and np.all(V >= 0)


#: Every call of the tests below must finish within this many seconds (a generous guard:
#: the bounded calls take a few seconds at most on 2 busy cores).
CALL_SECONDS = 10

#: Extreme and ordinary arguments of the PLD accountant (issue 30: tiny noise multipliers,
#: 1e9 steps, NaN; each once exhausted memory or ran for minutes).
NOISE = st.one_of(st.floats(0.05, 100.0), st.sampled_from(
    [5e-324, 1e-300, 1e-3, 0.05, 0.2, 1e154, 1e300, 1.7e308, 0.0, -1.0, math.inf, math.nan]))
RATE = st.one_of(st.floats(1e-6, 1.0), st.sampled_from(
    [5e-324, 1e-300, 1e-6, 1.0, 0.0, 1.5, math.nan]))
STEPS = st.one_of(st.integers(-1, 50), st.sampled_from(
    [10**9, 10**30, 2.5, True, "10"]))
DELTA = st.one_of(st.floats(1e-12, 0.5), st.sampled_from(
    [5e-324, 1e-16, 1e-5, 0.0, 1.0, math.nan]))


def _timed(call):
    """``call()`` (its result or its exception), failing past :data:`CALL_SECONDS`."""
    import time

    started = time.perf_counter()
    try:
        return call()
    finally:
        assert time.perf_counter() - started < CALL_SECONDS, "the call took too long"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(noise=NOISE, rate=RATE, steps=STEPS, delta=DELTA)
def test_pld_epsilon_is_bounded(noise, rate, steps, delta):
    """The PLD accountant answers, or refuses by name, within seconds, whatever the sizes."""
    eps = _returns_finite_or_names(
        lambda: _timed(lambda: dp_sgd_epsilon(noise, rate, steps, delta)),
        ("noise_multiplier", "sampling_rate", "steps", "delta"), ())
    assert eps is None or eps >= 0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(eps=st.sampled_from([1e-3, 50.0]), delta=st.sampled_from([1e-16, 1e-5]),
       rate=st.sampled_from([0.01, 1.0]), steps=st.sampled_from([1, 10**9]),
       noise=st.sampled_from([0.05, 20.0]))
def test_pld_searches_are_bounded(eps, delta, rate, steps, noise):
    """noise_for_budget / steps_for_budget answer (meeting the budget) or refuse by name at
    extreme budgets: probes beyond the PLD's reach end the search rather than run it for
    minutes. (A search answered near the PLD's size limits takes ~15 evaluations of a few
    seconds: ordinary budgets are left to the accounting tests.)"""
    names = ("eps", "delta", "noise_multiplier", "steps", "sampling_rate")
    found = _returns_finite_or_names(
        lambda: _timed(lambda: noise_for_budget(eps, delta, rate, steps, rtol=1e-2)), names, ())
    if found is not None:
        assert dp_sgd_epsilon(found, rate, steps, delta) <= eps
    count = _returns_finite_or_names(
        lambda: _timed(lambda: float(steps_for_budget(eps, delta, noise, rate, rtol=0.05))),
        names, ())
    if count:
        assert dp_sgd_epsilon(noise, rate, int(count), delta) <= eps


@PROPERTY
@given(sigma=st.one_of(st.floats(5e-324, 1.7e308), st.sampled_from([1e-200, 1e-160, 1e200])),
       offset=st.one_of(st.just(0.0), st.floats(-1e3, 1e3)), vector=st.booleans())
def test_gaussian_privacy_loss_is_never_nan(sigma, offset, vector):
    """At the midpoint the loss is 0 for every sigma (it was NaN once sigma^2 underflowed);
    elsewhere it has the sign of <mean - mean', o - midpoint>, overflowing to +-inf."""
    output = 0.5 + offset
    offset = output - 0.5  # as represented
    if vector:
        loss = M.gaussian_privacy_loss([output, 0.5], [0.0, 0.0], [1.0, 1.0], sigma)
    else:
        loss = M.gaussian_privacy_loss(output, 0.0, 1.0, sigma)
    assert not math.isnan(loss)
    assert loss == 0 if offset == 0 else loss * offset <= 0
    if 1e-150 < sigma < 1e150 and offset != 0:
        assert loss == pytest.approx(-offset / sigma**2, rel=1e-12)


#: Positions and values of an OU path's neighbours, finite or not.
POINT = st.one_of(st.floats(-2.0, 2.0), st.sampled_from([-math.inf, math.inf, math.nan]))


@PROPERTY
@given(x=POINT, left_x=POINT, left_value=POINT, right_x=POINT, right_value=POINT)
def test_conditional_moments_are_finite_or_named(x, left_x, left_value, right_x, right_value):
    names = ("x", "left_x", "right_x", "left_value", "right_value", "neighbours")
    moments = _returns_finite_or_names(
        lambda: conditional_moments(x, left_x, left_value, right_x, right_value, 2.0), names)
    if moments is not None:
        assert 0 <= moments[1] <= 1


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_states=st.one_of(st.integers(2, 60), st.sampled_from([2000, 8000, 20_000])),
       horizon=st.sampled_from([1, 50, 200]), stay=st.floats(0.0, 1.0),
       method=st.sampled_from(["finite_horizon_values", "state_visit_probabilities",
                               "on_policy_distribution", "expected_visit_counts",
                               "length_distribution"]))
def test_chain_solutions_are_bounded(n_states, horizon, stay, method):
    """ChainMDP(20000) took minutes and gigabytes: its O(N H) solutions answer at once, the
    dense ones refuse sizes beyond their stated work by name."""
    mdp = ChainMDP(n_states=n_states, horizon=horizon, stay_prob=stay)
    result = _returns_finite_or_names(lambda: _timed(getattr(mdp, method)), ("n_states",))
    if result is not None:
        assert result.shape == ((horizon + 1,) if method == "length_distribution"
                                else (n_states,))
        assert np.all(result >= 0)


def test_the_checks_can_fail():
    """The helper rejects an infinite result and an error that names no argument."""
    with pytest.raises(AssertionError):
        _returns_finite_or_names(lambda: np.inf, ("eps",))
    with pytest.raises(AssertionError):
        _returns_finite_or_names(lambda: np.linalg.cholesky(-np.eye(2)), ("eps",))
