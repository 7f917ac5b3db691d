"""Tabular, aggregation, Fourier and decorrelated features."""

import numpy as np
import pytest

from dprl.features import (DecorrelatedFeatures, FourierBasis, aggregation_features,
                           tabular_features)

SQRT_HALF = np.sqrt(0.5)


def test_tabular_features_are_the_identity():
    np.testing.assert_array_equal(tabular_features(5), np.eye(5))


@pytest.mark.parametrize("k", [1, 2, 4, 5, 8, 10, 20, 40])
def test_aggregation_groups_adjacent_states(k):
    Phi = aggregation_features(40, k)
    assert Phi.shape == (40, 40 // k)
    np.testing.assert_array_equal(Phi.sum(axis=1), 1)
    np.testing.assert_array_equal(Phi.sum(axis=0), k)
    np.testing.assert_array_equal(Phi.argmax(axis=1), np.arange(40) // k)


def test_pairs_give_the_papers_twenty_features():
    Phi = aggregation_features(40, 2)
    assert Phi.shape == (40, 20)
    np.testing.assert_array_equal(Phi[6], Phi[7])
    assert Phi[7, 3] == 1 and Phi[8, 4] == 1


@pytest.mark.parametrize("order, d, count", [(5, 2, 36), (3, 1, 4), (0, 3, 1), (2, 3, 27)])
def test_fourier_feature_counts(order, d, count):
    basis = FourierBasis(order, np.zeros(d), np.ones(d))
    assert basis.n_features == count and basis.coefficients.shape == (count, d)
    assert basis(np.full(d, 0.3)).shape == (count,)


def test_fourier_coefficients_span_zero_to_order():
    c = FourierBasis(5, [-1.2, -0.07], [0.6, 0.07]).coefficients
    assert c[0].tolist() == [0, 0] and c[-1].tolist() == [5, 5]
    assert {tuple(row) for row in c} == {(i, j) for i in range(6) for j in range(6)}
    assert c[2 * 6 + 1].tolist() == [2, 1]  # lexicographic order


def test_fourier_values_at_corners_centre_and_a_point():
    basis = FourierBasis(5, [-1.2, -0.07], [0.6, 0.07])  # Mountain Car's box
    c = basis.coefficients
    np.testing.assert_allclose(basis([-1.2, -0.07]), 1.0)
    np.testing.assert_allclose(basis([0.6, 0.07]), (-1.0) ** c.sum(axis=1), atol=1e-12)
    np.testing.assert_allclose(basis([-0.3, 0.0]), np.cos(np.pi * c.sum(axis=1) / 2), atol=1e-12)
    phi = basis([-0.75, 0.0])  # scaled to (1/4, 1/2)
    for (c1, c2), value in {(0, 0): 1, (1, 0): SQRT_HALF, (0, 1): 0, (2, 1): -1,
                            (1, 2): -SQRT_HALF, (4, 0): -1, (3, 3): SQRT_HALF}.items():
        assert phi[6 * c1 + c2] == pytest.approx(value, abs=1e-12)


def test_fourier_broadcasts_over_leading_axes():
    basis = FourierBasis(2, [0, 0], [1, 2])
    states = np.random.default_rng(0).uniform([0, 0], [1, 2], size=(4, 3, 2))
    phi = basis(states)
    assert phi.shape == (4, 3, 9)
    np.testing.assert_allclose(phi[2, 1], basis(states[2, 1]))


def test_fourier_step_size_scaling():
    basis = FourierBasis(4, [0, 0], [1, 1])
    scale = dict(zip(map(tuple, basis.coefficients.astype(int)), basis.step_size_scaling()))
    assert scale[(0, 0)] == 1 and scale[(1, 0)] == 1 and scale[(0, 2)] == 0.5
    assert scale[(1, 1)] == pytest.approx(SQRT_HALF) and scale[(3, 4)] == pytest.approx(0.2)


@pytest.mark.parametrize("call", [
    lambda: tabular_features(0), lambda: tabular_features(3.0),
    lambda: aggregation_features(40, 3), lambda: aggregation_features(40, 0),
    lambda: aggregation_features(40, 80), lambda: aggregation_features(40, 2.0),
    lambda: FourierBasis(-1, [0], [1]), lambda: FourierBasis(2.0, [0], [1]),
    lambda: FourierBasis(2, [0, 1], [1, 1]), lambda: FourierBasis(2, [0, 0], [1]),
    lambda: FourierBasis(2, [], []), lambda: FourierBasis(2, [0], [np.inf]),
])
def test_bad_feature_parameters(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("states", [[0.5], [0.5, 0.5, 0.5], 0.5, [1.0000001, 0.5], [-0.1, 0.5],
                                    [np.nan, 0.5], np.zeros((3, 0))])
def test_fourier_rejects_bad_states(states):
    with pytest.raises(ValueError):
        FourierBasis(3, [0, 0], [1, 1])(states)


def test_fourier_rows_do_not_depend_on_the_batch():
    """A state's features are the same bits whichever states are computed with it."""
    from dprl.features import FourierBasis

    basis = FourierBasis(5, [-1.2, -0.07], [0.6, 0.07])
    rng = np.random.default_rng(0)
    states = np.column_stack([rng.uniform(-1.2, 0.6, 3000), rng.uniform(-0.07, 0.07, 3000)])
    together = basis(states)
    pieces = np.concatenate([basis(states[:5]), basis(states[5:1001]), basis(states[1001:])])
    np.testing.assert_array_equal(together, pieces)
    for i in (0, 17, 2999):
        np.testing.assert_array_equal(basis(states[i]), together[i])


def _correlated_basis():
    """Bounded features in [-1, 1] of a 2-D input that are strongly correlated."""
    return FourierBasis(2, [0.0, 0.0], [1.0, 1.0])


def test_decorrelated_features_have_identity_second_moment_and_the_same_span():
    base = _correlated_basis()
    x = np.random.default_rng(0).beta(5, 5, size=(4000, 2))  # concentrated: C ill-conditioned
    phi = base(x)
    C = phi.T @ phi / len(x)
    features = DecorrelatedFeatures(base, C)
    psi = features(x)
    assert np.linalg.cond(C) > 500
    np.testing.assert_allclose(psi.T @ psi / len(x), np.eye(9), atol=1e-8)
    # the same span: least squares on either gives the same fitted values
    y = np.sin(3 * x[:, 0]) + x[:, 1] ** 3
    fit = [f @ np.linalg.lstsq(f, y, rcond=None)[0] for f in (phi, psi)]
    np.testing.assert_allclose(fit[0], fit[1], atol=1e-8)


def test_decorrelated_features_obey_their_norm_bound_and_rows_do_not_depend_on_the_batch():
    base = _correlated_basis()
    x = np.random.default_rng(1).beta(5, 5, size=(500, 2))
    features = DecorrelatedFeatures(base, base(x).T @ base(x) / len(x))
    anywhere = np.random.default_rng(2).random((2000, 2))
    norms = np.linalg.norm(features(anywhere), axis=1)
    assert norms.max() <= features.norm_bound() and norms.max() > 0.1 * features.norm_bound()
    assert np.array_equal(features(anywhere)[17], features(anywhere[17:18])[0])
    assert features(anywhere.reshape(40, 50, 2)).shape == (40, 50, 9)


@pytest.mark.parametrize("matrix, message", [
    (np.ones((9, 9)), "positive definite"),
    (np.triu(np.ones((9, 9))), "symmetric"),
    (np.eye(3), "give 3 features"),
])
def test_decorrelated_features_reject_bad_second_moments(matrix, message):
    with pytest.raises(ValueError, match=message):
        DecorrelatedFeatures(_correlated_basis(), matrix)(np.full((2, 2), 0.5))
