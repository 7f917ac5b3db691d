"""Lemma 14's constants (Balle et al. 2016, App. A) against Lemma 1's."""

import numpy as np
import pytest

from dprl import balle2016 as b
from dprl.balle2016.elementary import lemma14_constants


def test_lemma14_constants_by_hand():
    # eps = 1, delta = 0.1, d = 4: sqrt(2 ln 40) = 2.7162; alpha = 40.74; beta = 1.3863 / 111.2
    alpha, beta = lemma14_constants(1.0, 0.1, 4)
    root = np.sqrt(2 * np.log(40))
    assert alpha == pytest.approx(15 * root)
    assert beta == pytest.approx(2 * np.log(2) / (5 * (2 + root) ** 2))
    assert alpha == pytest.approx(40.743, rel=1e-4)
    assert beta == pytest.approx(0.012465, rel=1e-4)


@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 5.0])
@pytest.mark.parametrize("delta", [1e-6, 0.1, 0.5])
@pytest.mark.parametrize("d", [1, 20, 40, 1000])
def test_lemma14_is_more_conservative_than_lemma1(eps, delta, d):
    alpha14, beta14 = lemma14_constants(eps, delta, d)
    alpha1, beta1 = b.smoothing_constants(eps, delta, d)
    assert alpha14 > 3 * alpha1  # 15 / 5 = 3, and ln(4/delta) > ln(2/delta)
    assert beta14 < beta1
    assert beta14 <= np.log(2)


def test_lemma14_scales_like_one_over_eps_and_eps():
    a1, b1 = lemma14_constants(0.5, 0.1, 10)
    a2, b2 = lemma14_constants(1.0, 0.1, 10)
    assert a1 == pytest.approx(2 * a2) and b2 == pytest.approx(2 * b1)


@pytest.mark.parametrize("args, match", [
    ((5.5, 0.1, 4), "eps must be <= 5"),
    ((0.0, 0.1, 4), "eps"),
    ((1.0, 1.0, 4), "delta"),
    ((1.0, 0.1, 0), "d must be >= 1"),
])
def test_lemma14_bad_inputs_raise(args, match):
    with pytest.raises(ValueError, match=match):
        lemma14_constants(*args)
