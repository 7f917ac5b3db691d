"""The Q-network's Lipschitz constant (dprl.wang2019.lipschitz), Theorem 5's L of Wang & Hegde
(2019): the exact constant by hand, against a dense grid, bracketed by the grid's lower bound
and the spectral-norm upper bound, and finding a steep piece a coarse grid misses."""

import numpy as np
import pytest

from dprl.wang2019.lipschitz import (exact_lipschitz, finite_difference_lipschitz,
                                     spectral_lipschitz)
from dprl.wang2019.q_functions import MLPQ


def _runs(*params):
    """Stack one-run parameter tuples along a leading run axis."""
    return tuple(np.stack(arrays) for arrays in zip(*params))


def _hand_network(steep: float = 2.0):
    """Q_0 = relu(steep s - 1) + relu(1 - 3 s), Q_1 = relu(steep s - 1) - relu(1 - 3 s)."""
    return (np.array([[steep], [-3.0]]), np.array([-1.0, 1.0]), np.eye(2), np.zeros(2),
            np.array([[1.0, 1.0], [1.0, -1.0]]), np.zeros(2))


def test_exact_constant_by_hand():
    # steep 2: slopes -3, 0, 2 (Q_0) and 3, 0, 2 (Q_1) on [0, 1/3], [1/3, 1/2], [1/2, 1]
    np.testing.assert_allclose(exact_lipschitz(_runs(_hand_network())), [[3.0, 3.0]])
    # steep 5: slopes -3, 2, 5 (Q_0) and 3, 8, 5 (Q_1) on [0, 1/5], [1/5, 1/3], [1/3, 1]
    np.testing.assert_allclose(exact_lipschitz(_runs(_hand_network(5.0))), [[5.0, 8.0]])


def test_a_steep_narrow_piece_is_found_where_a_coarse_grid_misses_it():
    # Q_0 = relu(1000 s - 500.4) - relu(1000 s - 500.6): slope 1000 on (0.5004, 0.5006) only,
    # between the points of an 11-point grid (whose largest quotient is 0.2 / 0.1 = 2)
    net = (np.array([[1.0]]), np.array([0.0]), np.array([[1000.0], [1000.0]]),
           np.array([-500.4, -500.6]), np.array([[1.0, -1.0], [0.0, 0.0]]), np.zeros(2))
    exact = exact_lipschitz(_runs(net))
    assert exact[0, 0] == pytest.approx(1000.0)
    assert finite_difference_lipschitz(_runs(net), 11)[0, 0] == pytest.approx(2.0)


def test_exact_matches_a_dense_grid_and_lies_between_the_bounds():
    rngs = [np.random.default_rng(seed) for seed in range(4)]
    net = MLPQ()
    params = [net.init(rng) for rng in rngs]
    params = _runs(*[tuple(p * 4 for p in run) for run in params])  # kinks inside [0, 1]
    exact = exact_lipschitz(params)
    dense = finite_difference_lipschitz(params, 100_001)
    upper = spectral_lipschitz(params)
    assert np.all(dense <= exact * (1 + 1e-9))
    np.testing.assert_allclose(dense, exact, rtol=1e-3)
    assert np.all(exact <= upper * (1 + 1e-12))


def test_spectral_bound_by_hand():
    # ||W_0|| = sqrt(4 + 9), ||I|| = 1, output rows of norm sqrt(2)
    np.testing.assert_allclose(spectral_lipschitz(_runs(_hand_network())),
                               [[np.sqrt(13) * np.sqrt(2)] * 2])


@pytest.mark.parametrize("params", [
    (np.ones((1, 2, 1)), np.ones((1, 2))),
    (np.ones((1, 2, 3)), np.ones((1, 2)), np.ones((1, 2, 2)), np.ones((1, 2))),
    [np.ones((1, 2, 1)), np.ones((1, 2)), np.ones((1, 2, 2)), np.ones((1, 2))],
])
def test_bad_parameters_raise(params):
    with pytest.raises(ValueError):
        exact_lipschitz(params)
