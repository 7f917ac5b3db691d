"""Tests of dprl.balle2016.signature_noise: the noise scales at a signature agree with the
data-set noise scales of Algorithms 1 and 2 (Balle et al. 2016)."""

import numpy as np
import pytest

from dprl import balle2016 as b
from dprl.balle2016.signature_noise import lsl_noise_scale_at, lsw_noise_scale_at
from dprl.envs import ChainMDP
from dprl.features import aggregation_features, tabular_features


@pytest.mark.parametrize("m", [1, 30, 5000])
@pytest.mark.parametrize("group", [1, 2])
def test_matches_data_set_noise_scales(m, group):
    mdp = ChainMDP()
    data = b.first_visit_data(mdp.sample(m, np.random.default_rng(m)), mdp.gamma,
                              mdp.n_states, 1.0)
    Phi = tabular_features(40) if group == 1 else aggregation_features(40, group)
    rho = mdp.start_probabilities
    lam = 3 * b.ridge_threshold(Phi, rho) + m ** 0.5
    expected_w = float(b.dp_lsw_noise_scale(data, Phi, rho, 0.1, 0.1))
    expected_l = float(b.dp_lsl_noise_scale(data, Phi, rho, lam, 0.1, 0.1))
    assert lsw_noise_scale_at(data.counts, Phi, rho, 100.0, 0.1, 0.1) == pytest.approx(
        expected_w, rel=1e-12)
    assert lsl_noise_scale_at(data.counts, m, Phi, rho, lam, 100.0, 0.1, 0.1) == pytest.approx(
        expected_l, rel=1e-12)


def test_random_signatures_match_smooth_bounds():
    rng = np.random.default_rng(0)
    Phi, w = tabular_features(5), rng.uniform(0.1, 1, 5)
    for _ in range(20):
        v = rng.integers(0, 50, 5)
        beta = 0.05
        scale = lsw_noise_scale_at(v, Phi, w, 1.0, 1.0, 0.1)
        alpha, beta = b.smoothing_constants(1.0, 0.1, 5)
        pinv = 1 / np.sqrt(w.min())
        assert scale == pytest.approx(alpha * pinv * np.sqrt(b.lsw_smooth_bound(v, w, beta)),
                                      rel=1e-12)


def test_refuses_bad_inputs():
    Phi, rho = tabular_features(3), np.full(3, 1 / 3)
    with pytest.raises(ValueError):
        lsw_noise_scale_at(np.array([1.0, 2.0, 3.0]), Phi, rho, 1.0, 0.1, 0.1)
    with pytest.raises(ValueError):
        lsl_noise_scale_at(np.array([1, 2, 9]), 5, Phi, rho, 10.0, 1.0, 0.1, 0.1)
    with pytest.raises(ValueError):
        lsl_noise_scale_at(np.array([1, 2, 3]), 5, Phi, rho, 0.01, 1.0, 0.1, 0.1)
    with pytest.raises(ValueError):
        lsw_noise_scale_at(np.array([[1, 2, 3, 4]]), Phi, rho, 1.0, 0.1, 0.1)


def test_batches_of_signatures_match_one_at_a_time():
    rng = np.random.default_rng(3)
    Phi, rho = tabular_features(4), np.full(4, 0.25)
    v = rng.integers(0, 5000, (3, 7, 4))
    batch = lsl_noise_scale_at(v, 5000, Phi, rho, 50.0, 1.0, 0.1, 0.1)
    assert batch.shape == (3, 7)
    assert batch[2, 5] == lsl_noise_scale_at(v[2, 5], 5000, Phi, rho, 50.0, 1.0, 0.1, 0.1)
    batch = lsw_noise_scale_at(v, Phi, rho, 1.0, 0.1, 0.1)
    assert batch[1, 3] == lsw_noise_scale_at(v[1, 3], Phi, rho, 1.0, 0.1, 0.1)


@pytest.mark.parametrize("variant", ["min", "max"])
def test_blocked_smooth_bounds_equal_the_plain_maximum_over_k(variant):
    """psi = max_k e^{-k beta} phi_k over every k (no blocks, no early stop), across block
    boundaries (k up to 3000 > the 1024-wide blocks)."""
    rng = np.random.default_rng(4)
    w, m, beta = rng.uniform(0.1, 1, 3), 3000, 2e-3
    for v in [*rng.integers(0, m + 1, (6, 3)), np.array([m, m, 0]), np.array([0, 0, 0])]:
        k = np.arange(v.max() + 1)
        plain = np.max(np.exp(-k * beta) * np.array([b.lsw_local_bound(v, w, j) for j in k]))
        assert b.lsw_smooth_bound(v, w, beta) == pytest.approx(plain, rel=1e-14)
        k = np.arange(m + 1)
        phi = [b.lsl_local_bound(v, m, w / w.max(), 0.3, j, variant) for j in k]
        plain = np.max(np.exp(-k * beta) * np.array(phi))
        assert b.lsl_smooth_bound(v, m, w / w.max(), 0.3, beta, variant) == pytest.approx(
            plain, rel=1e-14)
