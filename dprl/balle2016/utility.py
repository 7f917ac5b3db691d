"""Utility of DP-LSW and DP-LSL (Balle et al. 2016, Sec. 5 and Appendices D-E): the excess
empirical risk of a release, its expectation ``E_eta[J_X(theta_hat_X) - J_X(theta_X) | X]``
in closed form (Lemmas 22 and 29), the upper bound of Theorem 11 (Corollary 27 in the appendix) with its
sharper form Theorem 26, and the rate of Corollary 13.

``C = alpha R_max ||(Gamma^{1/2} Phi)^+|| ||Gamma^{1/2} Phi||_F / (1 - gamma)`` uses the spectral
norm for ``||.||`` (as :func:`~dprl.balle2016.dp_lsw_noise_scale` does) and the public return
bound ``F_max`` in place of ``R_max / (1 - gamma)``.
"""

from __future__ import annotations

import numpy as np

from dprl.balle2016.estimators import lsl, lsw
from dprl.balle2016.inputs import features_matrix, regression_weights, ridge, state_weights
from dprl.balle2016.mechanisms import (_lsw_scale, dp_lsl_noise_scale, dp_lsw_noise_scale,
                                       ridge_constant)
from dprl.balle2016.smooth_sensitivity import lsl_smooth_bound, smoothing_constants
from dprl.balle2016.statistics import Statistics, require_summary, visit_weights
from dprl.validation import require_array, require_choice, require_positive

BOUND_FORMS = ("theorem11", "theorem26", "corrected")


def _sizes(m) -> np.ndarray:
    """Data-set sizes: integers >= 1 (a scalar or an array)."""
    sizes = require_array("m", m, nonempty=True)
    if np.any(sizes < 1) or np.any(sizes != np.round(sizes)):
        raise ValueError(f"m must be integers >= 1, got {m!r}")
    return sizes.astype(float)


def _weighted_frobenius2(features: np.ndarray, weights: np.ndarray) -> float:
    """``||Gamma^{1/2} Phi||_F^2 = sum_s w_s ||phi_s||^2``."""
    return float((weights[:, None] * features**2).sum())


def _quadratic(features: np.ndarray, weights: np.ndarray, step: np.ndarray) -> np.ndarray:
    """``step^T Phi^T diag(weights) Phi step``, ``(*datasets,)``, summed elementwise."""
    projected = (features * step[..., None, :]).sum(axis=-1)
    return (weights * projected**2).sum(axis=-1)


def lsw_excess_risk(data: Statistics, features, weights, theta_hat) -> np.ndarray:
    """``J_X^w(theta_hat) - J_X^w(theta_X^w)`` (Eq. 6 at a release against its minimiser, the
    excess empirical risk of Sec. 5): exactly ``Delta^T Phi^T Gamma Phi Delta`` with
    ``Delta = theta_hat - theta_X^w``, as ``J_X^w`` is quadratic; ``(*datasets,)``."""
    data = require_summary(data)
    features = features_matrix(features, data.n_states)
    weights = state_weights("weights", weights, data.n_states)
    theta_hat = require_array("theta_hat", theta_hat,
                              shape=(*data.datasets_shape, features.shape[1]))
    return _quadratic(features, weights, theta_hat - lsw(data, features, weights))


def lsl_excess_risk(data: Statistics, features, rho, lam: float, theta_hat) -> np.ndarray:
    """``J_X^lambda(theta_hat) - J_X^lambda(theta_X^lambda)`` (Eq. 10 against its minimiser,
    Sec. 5): ``Delta^T (Phi^T Gamma_X Phi + lambda/(2m) I) Delta`` with
    ``Delta = theta_hat - theta_X^lambda``; ``(*datasets,)``."""
    data = require_summary(data)
    features = features_matrix(features, data.n_states)
    theta_hat = require_array("theta_hat", theta_hat,
                              shape=(*data.datasets_shape, features.shape[1]))
    step = theta_hat - lsl(data, features, rho, lam)
    ridge_term = ridge(lam) / (2 * data.n_trajectories) * (step**2).sum(axis=-1)
    return _quadratic(features, visit_weights(data, rho), step) + ridge_term


def lsw_expected_excess_risk(data: Statistics, features, weights, eps: float,
                             delta: float) -> np.ndarray:
    """``E_eta[J_X^w(theta_hat_X^w) - J_X^w(theta_X^w) | X] = sigma_X^2 ||Gamma^{1/2} Phi||_F^2``
    (Balle et al. 2016, Lemma 22, Eq. 45): with ``theta_hat = theta + eta`` and
    ``grad J^w(theta) = 0`` the excess is exactly ``eta^T Phi^T Gamma Phi eta``; ``(*datasets,)``."""
    data = require_summary(data)
    features = features_matrix(features, data.n_states)
    weights = state_weights("weights", weights, data.n_states)
    sigma = dp_lsw_noise_scale(data, features, weights, eps, delta)
    return sigma**2 * _weighted_frobenius2(features, weights)


def lsl_expected_excess_risk(data: Statistics, features, rho, lam: float, eps: float,
                             delta: float) -> np.ndarray:
    """``E_eta[J_X^lambda(theta_hat) - J_X^lambda(theta) | X] = (lambda d / (2m) + (1/m)
    sum_s rho_s ||phi_s||^2 |X_s|) sigma_X^2`` (Balle et al. 2016, Lemma 29, Eq. 56): the
    trace of the Hessian/2 of ``J_X^lambda`` times ``sigma_X^2``; ``(*datasets,)``."""
    data = require_summary(data)
    features = features_matrix(features, data.n_states)
    rho = regression_weights(rho, data.n_states)
    sigma = dp_lsl_noise_scale(data, features, rho, lam, eps, delta)
    m, d = data.n_trajectories, features.shape[1]
    trace = lam * d / (2 * m) + (rho * (features**2).sum(axis=1) * data.counts).sum(axis=-1) / m
    return trace * sigma**2


def lsw_excess_risk_bound(features, weights, visit_probabilities, m, eps: float, delta: float,
                          return_bound: float, form: str = "theorem11") -> np.ndarray:
    """Upper bound on ``E_{X,eta}[J_X^w(theta_hat_X^w) - J_X^w(theta_X^w)]`` for ``m`` i.i.d.
    trajectories, each visiting ``s`` with probability ``p_s`` (Balle et al. 2016).

    ``form="theorem11"`` (Theorem 11 = Corollary 27, needs ``beta <= 1/2``)::

        C^2 (sum_{S_0} w_s + 6 sum_{S_+} w_s (1 / (p_s^2 m^2) + beta^2 (1 - beta p_s / 2)^m))

    ``form="theorem26"`` (Theorem 26, needs ``beta <= 2``)::

        C^2 (sum_{S_0} w_s + sum_{S_+} w_s (6 / (p_s^2 (m+1)(m+2))
                                          + e^2 beta^2 / 4 (1 - (1 - e^{-beta}) p_s)^m))

    ``form="corrected"`` (any ``beta > 0``; not in the paper)::

        C^2 (sum_{S_0} w_s + sum_{S_+} w_s (6 / (p_s^2 (m+1)(m+2))
                                          + e^beta (1 - (1 - e^{-beta}) p_s)^m))

    Lemma 23 takes the interior stationary point of ``e^{-bx} / (a - x)^2`` for a maximum,
    but it is a minimum (the logarithm is convex in ``x``): the true maximum over
    ``0 <= x <= a - 1`` is ``max(1/a^2, e^{-b(a-1)})``, reached at an end point. Bounding it
    by ``1/a^2 + e^{-b(a-1)}`` and using ``E[e^{-beta |X_s|}] = (1 - (1 - e^{-beta}) p_s)^m``
    (the binomial moment generating function, as in Lemma 25) gives the corrected form,
    whose second term lacks the factor ``e^2 beta^2 / 4`` of Theorem 26 (``1/|X_s| = 0``
    gives ``e^beta >= 1``, so no separate ``S_+`` term for ``|X_s| = 0`` is needed).

    Here ``S_0 = {s : p_s = 0}``, ``C = alpha F_max ||(Gamma^{1/2} Phi)^+||_2
    ||Gamma^{1/2} Phi||_F`` and ``alpha, beta`` of Lemma 1 for ``d`` features. ``m`` may be
    an array of sizes; returns an array of its shape. Raises ``ValueError`` where the
    theorem's hypothesis on ``beta`` fails.
    """
    features = require_array("features", features, ndim=2)
    n_states, d = features.shape
    weights = state_weights("weights", weights, n_states)
    p = require_array("visit_probabilities", visit_probabilities, shape=(n_states,))
    if p.min() < 0 or p.max() > 1:
        raise ValueError(f"visit_probabilities must lie in [0, 1], got [{p.min()}, {p.max()}]")
    require_choice("form", form, BOUND_FORMS)
    sizes = _sizes(m)
    scale = _lsw_scale(features, weights, require_positive("return_bound", return_bound),
                       eps, delta)
    frobenius2 = _weighted_frobenius2(features, weights)
    _, beta = smoothing_constants(eps, delta, d)
    limit = {"theorem11": 0.5, "theorem26": 2.0, "corrected": np.inf}[form]
    if beta > limit:
        raise ValueError(f"{form} needs beta <= {limit}, got beta = {beta} "
                         f"(eps = {eps}, delta = {delta}, d = {d})")
    plus = p > 0
    mm = sizes[..., None]
    ps, ws = p[plus], weights[plus]
    if form == "theorem11":
        terms = 6 * (1 / (ps**2 * mm**2) + beta**2 * (1 - beta * ps / 2) ** mm)
    else:
        factor = np.e**2 * beta**2 / 4 if form == "theorem26" else np.exp(beta)
        terms = (6 / (ps**2 * (mm + 1) * (mm + 2))
                 + factor * (1 - (1 - np.exp(-beta)) * ps) ** mm)
    total = weights[~plus].sum() + (ws * terms).sum(axis=-1)
    return scale**2 * frobenius2 * total


def theorem32_bracket(features, rho, visit_probabilities, joint_visit_probabilities,
                      lam: float, m: int, beta: float) -> float:
    """The braces of Theorem 32 (Balle et al. 2016, App. E), as printed: the bound on
    ``E_{X,eta}[J_X^lambda(theta_hat) - J_X^lambda(theta)] / C_lambda^2`` for ``m`` i.i.d.
    trajectories with ``p_s = P[s in x]`` and ``p_{s,s'} = P[s in x and s' in x]``
    (``joint_visit_probabilities``, its diagonal ``p_s``; ``pbar_{s,s'} = p_s - p_{s,s'}``)::

        sum_s rho_s p_s (d ||Phi||^2 ||rho||_inf^2 / 2 + 2 ||rho||_2^2 ||phi_s||^2)
        + (lambda / m) d ||rho||_2^2
        + (1/m) d ||Phi||^2 ||rho||_inf^2 / (4 e beta) sum_s rho_s (1 - p_s)^m
        + (m / lambda) ||Phi||^2 ||rho||_inf^2 sum_{s,s'} rho_s rho_s' p_s p_s' ||phi_s||^2
        + (1 / lambda) ||Phi||^2 ||rho||_inf^2 (sum_s rho_s^2 ||phi_s||^2 (p_s - p_s^2)
            + sum_{s != s'} rho_s rho_s' ||phi_s||^2 (p_{s,s'} - p_s p_s'
                                                     + pbar_{s,s'} (1 - p_s')^(m-1) / (2 e beta)))

    Norms of ``Phi`` are spectral, as everywhere in :mod:`dprl.balle2016`."""
    features = require_array("features", features, ndim=2)
    n_states, d = features.shape
    rho = regression_weights(rho, n_states)
    p = require_array("visit_probabilities", visit_probabilities, shape=(n_states,))
    joint = require_array("joint_visit_probabilities", joint_visit_probabilities,
                          shape=(n_states, n_states))
    if not np.allclose(np.diag(joint), p):
        raise ValueError("joint_visit_probabilities must have the visit probabilities on its "
                         "diagonal")
    lam, beta = require_positive("lam", lam), require_positive("beta", beta)
    m = int(_sizes(m))
    phi2 = (features**2).sum(axis=1)
    big = np.linalg.norm(features, 2) ** 2 * rho.max() ** 2
    rho2 = (rho**2).sum()
    off = ~np.eye(n_states, dtype=bool)
    pair = (joint - np.outer(p, p)
            + (p[:, None] - joint) * (1 - p[None, :]) ** (m - 1) / (2 * np.e * beta))
    return float((rho * p * (d * big / 2 + 2 * rho2 * phi2)).sum()
                 + lam * d * rho2 / m
                 + d * big / (4 * np.e * beta) * (rho * (1 - p) ** m).sum() / m
                 + m / lam * big * (rho * p * phi2).sum() * (rho * p).sum()
                 + big / lam * ((rho**2 * phi2 * (p - p**2)).sum()
                                + (np.outer(rho * phi2, rho) * pair)[off].sum()))


def lsl_risk_over_c2(counts, features, rho, lam: float, m: int, beta: float) -> np.ndarray:
    """What Theorem 32 bounds, data set by data set: ``E_eta[J_X^lambda(theta_hat) -
    J_X^lambda(theta) | X] / C_lambda^2 = (lambda d / (2m) + (1/m) sum_s rho_s ||phi_s||^2
    |X_s|) psi_X^lambda`` (Lemma 29 with ``sigma_X = C_lambda sqrt(psi_X^lambda)``, Algorithm 2's
    ``psi``), for visit ``counts`` ``(*datasets, N)`` of ``m`` trajectories."""
    features = require_array("features", features, ndim=2)
    rho = regression_weights(rho, features.shape[0])
    counts = np.asarray(counts)
    psi = lsl_smooth_bound(counts, m, rho, ridge_constant(features, rho, lam), beta)
    trace = lam * features.shape[1] / (2 * m) + (rho * (features**2).sum(axis=1) * counts).sum(
        axis=-1) / m
    return trace * psi


def corollary13_rate(lam, m) -> np.ndarray:
    """``1/(lambda m) + 1/lambda^2 + m/lambda^3``: the order of DP-LSL's expected excess
    empirical risk when ``lambda = omega(1)`` (Balle et al. 2016, Corollary 13 = Cor. 33),
    up to a constant; ``lambda > 0`` and ``m >= 1`` broadcast."""
    lam = require_array("lam", lam, nonempty=True)
    if np.any(lam <= 0):
        raise ValueError(f"lam must be > 0, got min {lam.min()}")
    sizes = _sizes(m)
    return 1 / (lam * sizes) + 1 / lam**2 + sizes / lam**3
