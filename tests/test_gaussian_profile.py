"""The vectorised privacy profile of a subsampled Gaussian step
(dprl.accounting.gaussian_profile) has dp-accounting's bits, and so do the PLDs built on it."""

import math
import re

import numpy as np
import pytest
from dp_accounting import NeighboringRelation
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld.privacy_loss_mechanism import AdjacencyType, GaussianPrivacyLoss

from dprl.accounting import pld
from dprl.accounting.gaussian_profile import hockey_stick

#: (noise multiplier, sampling rate): the book's regimes (Xie's 1/m, Sharma's p b / m) and
#: extremes of both
SETTINGS = [(1.0, 0.01), (0.6, 0.5), (3.7, 1e-5), (12.0, 0.9), (0.35, 0.002), (2.0, 1.0)]
ORDERS = (AdjacencyType.REMOVE, AdjacencyType.ADD)


def _bits(array) -> np.ndarray:
    return np.asarray(array, dtype=float).view(np.int64)


def _grid(loss: GaussianPrivacyLoss) -> np.ndarray:
    """dp-accounting's connect-the-dots grid of ``loss``, 2001 points across [-3, 3], the
    order's boundary
    ``log(1 - q)`` and points a few ulps and 1e-12 around it, and 0."""
    bounds = loss.connect_dots_bounds()
    grid = np.arange(math.floor(bounds.epsilon_lower / 1e-4),
                     math.ceil(bounds.epsilon_upper / 1e-4) + 1) * 1e-4
    q = loss.sampling_prob
    edges = [math.log(1 - q), math.log1p(-q)] if q < 1 else [0.0]
    edges = [e if loss.adjacency_type == AdjacencyType.REMOVE else -e for e in edges]
    near = [f(e) for e in edges for f in (
        lambda e: e, lambda e: np.nextafter(e, 1), lambda e: np.nextafter(e, -1),
        lambda e: e * (1 + 1e-12), lambda e: e * (1 - 1e-12), lambda e: e + 1e-7)]
    return np.sort(np.concatenate([grid, np.linspace(-3, 3, 2001), near, [0.0]]))


@pytest.mark.parametrize("noise, rate", SETTINGS)
@pytest.mark.parametrize("order", ORDERS, ids=lambda o: o.name)
def test_the_profile_has_dp_accounting_s_bits(noise, rate, order):
    loss = GaussianPrivacyLoss(noise, sampling_prob=rate, adjacency_type=order)
    grid = _grid(loss)
    assert grid.size > 2000
    np.testing.assert_array_equal(_bits(hockey_stick(loss, grid)),
                                  _bits(loss.get_delta_for_epsilon(grid)))


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: o.name)
def test_points_past_the_boundary_raise_as_dp_accounting_does(order):
    """Where ``log(1 - q)`` and ``log1p(-q)`` differ, an epsilon between them makes the
    library raise; the profile hands such grids to the library."""
    q = next(q for q in np.linspace(0.01, 0.99, 999) if math.log(1 - q) != math.log1p(-q))
    loss = GaussianPrivacyLoss(1.0, sampling_prob=q, adjacency_type=order)
    sign = 1 if order == AdjacencyType.REMOVE else -1
    between = sign * (math.log(1 - q) + math.log1p(-q)) / 2
    grid = np.array([between, sign * 0.5])
    try:
        expected = _bits(loss.get_delta_for_epsilon(grid))
    except ValueError as error:
        with pytest.raises(ValueError, match=re.escape(str(error))):
            hockey_stick(loss, grid)
    else:
        np.testing.assert_array_equal(_bits(hockey_stick(loss, grid)), expected)


@pytest.mark.parametrize("noise, rate", SETTINGS)
def test_one_step_s_pld_is_the_one_dp_accounting_builds(noise, rate):
    """``pld._step_pmfs`` against ``from_gaussian_mechanism`` (add-or-remove neighbours),
    PMF by PMF: grid, lowest loss, every probability and the mass at infinity, bit for
    bit."""
    reference = pld_lib.from_gaussian_mechanism(
        standard_deviation=noise, value_discretization_interval=1e-4, sampling_prob=rate,
        neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE)
    expected = ((reference._pmf_remove,) if reference._symmetric
                else (reference._pmf_remove, reference._pmf_add))
    ours = pld._step_pmfs.__wrapped__(noise, rate)
    assert len(ours) == len(expected)
    for mine, theirs in zip(ours, expected):
        _same_pmf(mine, theirs)


def test_only_a_gaussian_loss_and_a_1_d_grid_are_accepted():
    loss = GaussianPrivacyLoss(1.0, sampling_prob=0.1)
    with pytest.raises(ValueError, match="loss"):
        hockey_stick(object(), np.zeros(3))
    with pytest.raises(ValueError, match="epsilons"):
        hockey_stick(loss, np.zeros((2, 2)))


def _same_pmf(mine, theirs) -> None:
    """Type, grid, lowest loss, every probability and the mass at infinity, bit for bit."""
    assert type(mine) is type(theirs)
    mine, theirs = mine.to_dense_pmf(), theirs.to_dense_pmf()
    assert (mine._discretization, mine._lower_loss) == (theirs._discretization,
                                                      theirs._lower_loss)
    np.testing.assert_array_equal(_bits(mine._probs), _bits(theirs._probs))
    assert _bits(mine._infinity_mass) == _bits(theirs._infinity_mass)


@pytest.mark.parametrize("noise, rate, steps", [(1.0, 0.01, 1), (1.0, 0.01, 2), (1.0, 0.01, 5000),
                                               (0.6, 0.5, 50), (12.0, 0.9, 1000)])
def test_self_composition_with_bounds_computed_once_is_dp_accounting_s(noise, rate, steps):
    """``pld``'s self-composition, whose Chernoff truncation bounds serve the size check and
    the FFT alike (``_plan``), against dp-accounting's own ``self_compose``."""
    for pmf in pld._step_pmfs.__wrapped__(noise, rate):
        plan = pld._plan(pmf, steps)
        assert plan[1] is not None  # the dense path, where the bounds are reused
        _same_pmf(pld._self_compose(plan, steps), pmf.self_compose(steps, 1e-15))


@pytest.mark.parametrize("steps", [1, 2, 6, 7, 40])
def test_a_sparse_pmf_composes_as_dp_accounting_composes_it(steps):
    """A PLD of two 3-point PMFs is sparse: it stays sparse while ``3 ** steps <= 1000``
    (``steps`` <= 6) and goes dense, with the bounds reused, beyond."""
    a = {0: math.log(0.5), 1: math.log(0.3), 2: math.log(0.2)}
    b = {0: math.log(0.2), 1: math.log(0.3), 2: math.log(0.5)}
    pmf = pld_lib.from_two_probability_mass_functions(a, b)._pmf_remove
    plan = pld._plan(pmf, steps)
    assert (plan[1] is None) == (steps <= 6)
    _same_pmf(pld._self_compose(plan, steps), pmf.self_compose(steps, 1e-15))
