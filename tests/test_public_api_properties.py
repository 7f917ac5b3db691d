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
from dprl.wang2019.functional_noise import dense_conditional_moments

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


def test_the_checks_can_fail():
    """The helper rejects an infinite result and an error that names no argument."""
    with pytest.raises(AssertionError):
        _returns_finite_or_names(lambda: np.inf, ("eps",))
    with pytest.raises(AssertionError):
        _returns_finite_or_names(lambda: np.linalg.cholesky(-np.eye(2)), ("eps",))
