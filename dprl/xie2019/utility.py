"""The utility analysis of Xie, Thomas & Miklau (2019, Sec. 6, App. C), as computable
quantities: the saddle point (Eq. 6.1), ``Q`` (Eq. 6.2) and Lemma 2's eigenvalue claim, the
variance terms of Assumption 1, and the bounds of Theorems 2 and 3 term by term.

``lambda_min(Q)``: ``Q`` is not symmetric and its eigenvalues are complex in general; the rate
at which ``I - beta Q`` contracts for small ``beta`` is the smallest *real part*, which is what
the functions here call ``lambda_min(Q)`` (the smallest modulus is reported alongside).
"""

from __future__ import annotations

import numpy as np

from dprl.envs import Trajectories
from dprl.validation import (require_array, require_int, require_nonnegative,
                             require_positive, require_probability)
from dprl.xie2019.baselines import episode_statistics
from dprl.xie2019.prepared import _Episodes


def _square(name: str, value, n: int | None = None) -> np.ndarray:
    matrix = require_array(name, value, ndim=2)
    if matrix.shape[0] != matrix.shape[1] or (n is not None and matrix.shape[0] != n):
        raise ValueError(f"{name} must be square{'' if n is None else f' ({n} x {n})'}, "
                         f"got {matrix.shape}")
    return matrix


def _positive_definite(name: str, matrix: np.ndarray) -> np.ndarray:
    if not np.allclose(matrix, matrix.T) or np.linalg.eigvalsh(matrix).min() <= 0:
        raise ValueError(f"{name} must be symmetric positive definite")
    return matrix


def saddle_matrix(A, C) -> np.ndarray:
    """``Q = [[0, -A^T], [A, C]]`` (Eq. 6.2), ``(2n, 2n)``: ``B(theta, w) = Q xi - [0; b]``."""
    A = _square("A", A)
    C = _square("C", C, A.shape[0])
    return np.block([[np.zeros_like(A), -A.T], [A, C]])


def saddle_point(A, b, C) -> tuple[np.ndarray, np.ndarray]:
    """``theta* = (A^T C^-1 A)^-1 A^T C^-1 b``, ``w* = C^-1 (b - A theta*)`` (Eq. 6.1; the
    paper prints ``A^T theta*`` in ``w*``, which the optimality condition ``A theta + C w = b``
    it states next corrects to ``A theta*``)."""
    A = _square("A", A)
    C = _positive_definite("C", _square("C", C, A.shape[0]))
    b = require_array("b", b, shape=(A.shape[0],))
    C_inv_A = np.linalg.solve(C, A)
    theta = np.linalg.solve(A.T @ C_inv_A, C_inv_A.T @ b)
    return theta, np.linalg.solve(C, b - A @ theta)


def lemma2_eigenvalues(A, C) -> dict[str, float]:
    """Lemma 2's claim ``lambda_min(Q) >= (8/9) lambda_min(A^T C^-1 A)``: the smallest real part
    and modulus of ``Q``'s eigenvalues, the largest modulus, and the claimed lower bound."""
    A = _square("A", A)
    C = _positive_definite("C", _square("C", C, A.shape[0]))
    eigenvalues = np.linalg.eigvals(saddle_matrix(A, C))
    M = A.T @ np.linalg.solve(C, A)
    return {"min_real": float(eigenvalues.real.min()),
            "min_modulus": float(np.abs(eigenvalues).min()),
            "max_modulus": float(np.abs(eigenvalues).max()),
            "bound": 8 / 9 * float(np.linalg.eigvalsh((M + M.T) / 2).min())}


def contraction_norm(A, C, beta: float) -> float:
    """``||I - beta Q||_2``, the spectral norm that App. C, Eq. (C.4) sets to
    ``1 - beta lambda_min(Q)``. It is > 1 for every ``beta > 0``: for ``xi = (theta, 0)``,
    ``||(I - beta Q) xi||^2 = ||theta||^2 + beta^2 ||A theta||^2``."""
    beta = require_positive("beta", beta)
    Q = saddle_matrix(A, C)
    return float(np.linalg.norm(np.eye(Q.shape[0]) - beta * Q, 2))


def noise_second_moment(n_features: int, clip: float, sigma: float) -> float:
    """``E||h zeta||^2 = 2n h^2 sigma^2`` for GPOPE's noise ``h N(0, sigma^2 I_2n)`` (Algorithm 1):
    the trace of its covariance, the quantity Assumption 1 must bound."""
    n = require_int("n_features", n_features)
    return 2 * n * require_positive("clip", clip) ** 2 * require_nonnegative("sigma", sigma) ** 2


def printed_noise_term(n_features: int, clip: float, sigma: float) -> float:
    """Remark 1's ``c N / m^2 = ||h^2 sigma^2 I||_F^2 = 2n h^4 sigma^4`` (Sec. 6): the squared
    Frobenius norm of the covariance, not its trace (:func:`noise_second_moment`)."""
    n = require_int("n_features", n_features)
    return 2 * n * require_positive("clip", clip) ** 4 * require_nonnegative("sigma", sigma) ** 4


def theorem2_terms(xi1: float, eta: float, k: float, n_iterations: int, lam: float,
                   variance: float) -> tuple[float, float]:
    """Theorem 2 (constant step ``beta = eta / N^k``): term I
    ``(1 - beta lam)^{2N} (E||xi_1||^2 - C_0)`` and term II ``C_0 =
    eta V / (2 N^k lam - eta lam^2)``, with ``V = G^2 + c N / m^2`` (Assumption 1's bound) and
    ``lam = lambda_min(Q)``; requires ``beta < 1 / lam``."""
    xi1, eta, lam = (require_nonnegative("xi1", xi1), require_positive("eta", eta),
                     require_positive("lam", lam))
    k = require_probability("k", k, open_low=True, open_high=True)
    N, variance = require_int("n_iterations", n_iterations), require_nonnegative("variance",
                                                                                variance)
    beta = eta / N**k
    if beta * lam >= 1:
        raise ValueError(f"Theorem 2 needs beta = eta / N^k < 1 / lambda_min(Q), got "
                         f"beta lambda_min = {beta * lam}")
    c0 = eta * variance / (2 * N**k * lam - eta * lam**2)
    return (1 - beta * lam) ** (2 * N) * (xi1 - c0), c0


def theorem3_terms(xi1: float, eta: float, n_iterations: int, lam: float, g2: float,
                   c: float, m: int) -> dict[str, float]:
    """Theorem 3 (``beta_i = eta / (lam i)``, ``eta > 1``): the first-line bound
    ``max{xi1, eta^2 (G^2 + c N / m^2) / ((eta - 1) lam^2)} / N``, term III
    ``max{xi1, eta^2 G^2 / ((eta - 1) lam^2)} / N``, term IV as stated,
    ``eta^2 c / (m^2 (eta - 1) lam^2)``, and as the proof's last line prints it,
    ``eta^2 c / ((eta - 1) lam^2)``."""
    xi1, lam, g2, c = (require_nonnegative("xi1", xi1), require_positive("lam", lam),
                       require_nonnegative("g2", g2), require_nonnegative("c", c))
    eta = require_positive("eta", eta)
    if eta <= 1:
        raise ValueError(f"Theorem 3 needs eta > 1, got {eta}")
    N, m = require_int("n_iterations", n_iterations), require_int("m", m)
    scale = eta**2 / ((eta - 1) * lam**2)
    return {"bound": max(xi1, scale * (g2 + c * N / m**2)) / N,
            "term_III": max(xi1, scale * g2) / N,
            "term_IV_statement": scale * c / m**2,
            "term_IV_proof": scale * c}


def assumption1_c(noise: float, m: int, n_iterations: int) -> float:
    """``c := m^2 (noise term) / N`` (Sec. 6), for either reading of the noise term."""
    return (require_nonnegative("noise", noise) * require_int("m", m) ** 2
            / require_int("n_iterations", n_iterations))


def _transition_gradients(episodes: _Episodes, d: int, theta: np.ndarray, w: np.ndarray,
                          gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """The one-transition gradients ``B_t(theta, w)`` of every transition of data set ``d``,
    ``(m, steps, 2n)`` (0 on padding), and the live mask ``(m, steps)``."""
    phi = episodes.table[episodes.sources[d]]
    diff = phi - gamma * episodes.table[episodes.nexts[d]]
    rho, r = episodes.ratios[d], episodes.rewards[d]
    a_theta = rho * (diff @ theta)
    phi_w = phi @ w
    primal = -(rho * phi_w)[..., None] * diff
    dual = (a_theta + phi_w - rho * r)[..., None] * phi
    return np.concatenate([primal, dual], axis=-1), episodes.inverse_lengths[d] > 0


def gradient_variances(trajectories: Trajectories, features, gamma: float, theta, w,
                       ratios=None) -> dict[str, np.ndarray]:
    """Sampling variance of the primal-dual gradient (Eq. 4.1) at ``(theta, w)``, per data
    set: ``trajectory``, ``E_i ||B_i - B||^2`` for GPOPE's one uniformly drawn trajectory with
    all its ``tau_i`` transitions averaged, and ``transition``, ``E ||B_t - B||^2`` for one
    uniformly drawn transition of a uniformly drawn trajectory (both unbiased for ``B``); and
    ``mean_inverse_length``, ``E[1/tau_i]``, the reduction Sec. 6 attributes to averaging."""
    episodes = _Episodes.of(trajectories, features, ratios)
    gamma = require_probability("gamma", gamma, open_high=True)
    n, D = episodes.n_features, episodes.sources.shape[0]
    theta = np.broadcast_to(require_array("theta", theta), (D, n))
    w = np.broadcast_to(require_array("w", w), (D, n))
    out = {"trajectory": [], "transition": [], "mean_inverse_length": []}
    for d in range(D):
        grads, live = _transition_gradients(episodes, d, theta[d], w[d], gamma)
        weights = episodes.inverse_lengths[d]
        per_trajectory = (weights[..., None] * grads).sum(axis=1)
        mean = per_trajectory.mean(axis=0)
        out["trajectory"].append(((per_trajectory - mean) ** 2).sum(axis=1).mean())
        squares = ((grads - mean) ** 2).sum(axis=-1)
        out["transition"].append(((weights * squares * live).sum(axis=1)).mean())
        out["mean_inverse_length"].append(weights.max(axis=1).mean())
    return {key: np.array(value).reshape(episodes.datasets)[()] for key, value in out.items()}


def _augmented_operators(trajectories: Trajectories, features, gamma: float, ratios
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per trajectory ``j``, ``K_j = [[Q_j, -q_j], [0, 0]]`` with ``Q_j`` from ``A_j, C_j``
    and ``q_j = [0; b_j]`` (Eq. 2.2, 4.1), so that ``B_j(xi) = K_j [xi; 1]`` (first ``2n``
    rows): returns ``E[K]``, ``E[K_ab K_cd]`` as a ``(D^2, D^2)`` matrix and ``E[K^T K]``."""
    m = trajectories.batch_shape[-1]
    singles = trajectories.reshape(m, 1)
    one_ratios = None if ratios is None else np.asarray(ratios).reshape(m, 1, -1)
    A, b, C = episode_statistics(singles, features, gamma, one_ratios)
    n = A.shape[-1]
    K = np.zeros((m, 2 * n + 1, 2 * n + 1))
    K[:, :n, n:2 * n] = -np.swapaxes(A, 1, 2)
    K[:, n:2 * n, :n] = A
    K[:, n:2 * n, n:2 * n] = C
    K[:, n:2 * n, -1] = -b
    D = 2 * n + 1
    second = np.einsum("jab,jcd->acbd", K, K).reshape(D * D, D * D) / m
    return K.mean(axis=0), second, np.einsum("jab,jac->bc", K, K) / m


def expected_squared_errors(trajectories: Trajectories, features, gamma: float, step_size,
                            noise_std: float, xi0=None, ratios=None) -> dict[str, np.ndarray]:
    """Exact ``E||xi_i||^2`` (Eq. 6.2, ``xi = (theta, w) - (theta*, w*)``) for ``i = 1..N+1``
    of the unclipped recursion (C.1) ``(theta, w) -= beta_i (B_j(theta, w) + zeta_i)``, ``j``
    uniform over the ``m`` trajectories of one data set, ``zeta_i ~ N(0, noise_std^2 I_2n)``
    (GPOPE's ``h sigma``, Algorithm 1, when nothing is clipped): second moments of
    ``x = [theta; w; 1]`` evolve linearly, ``S <- E[(I - beta K_j) S (I - beta K_j)^T] +
    beta^2 noise_std^2 I``. Also ``sampling_variance``, ``E||B_j(xi_i) - B(xi_i)||^2``, the
    quantity Assumption 1's ``G^2`` must bound at every iteration. Data: batch shape ``(m,)``."""
    if not isinstance(trajectories, Trajectories) or len(trajectories.batch_shape) != 1:
        raise ValueError("trajectories must be one data set (Trajectories of batch shape (m,))")
    gamma = require_probability("gamma", gamma, open_high=True)
    K_mean, K_second, KtK = _augmented_operators(trajectories, features, gamma, ratios)
    D, n2 = K_mean.shape[0], K_mean.shape[0] - 1
    steps = require_array("step_size", step_size, ndim=1)
    if steps.min() <= 0:
        raise ValueError("step sizes must be > 0")
    noise = require_nonnegative("noise_std", noise_std) ** 2
    n = n2 // 2
    optimum = np.concatenate(saddle_point(K_mean[n:n2, :n], -K_mean[n:n2, -1],
                                          K_mean[n:n2, n:n2]))
    x0 = np.zeros(n2) if xi0 is None else require_array("xi0", xi0, shape=(n2,))
    S = np.outer(np.append(x0, 1.0), np.append(x0, 1.0))
    variance_form = KtK - K_mean.T @ K_mean
    errors, variances = [], []
    for beta in np.append(steps, 0.0):
        errors.append(np.trace(S[:n2, :n2]) - 2 * optimum @ S[:n2, -1] + optimum @ optimum)
        variances.append(np.sum(variance_form * S))
        S = (S - beta * (K_mean @ S + S @ K_mean.T)
             + beta**2 * (K_second @ S.ravel()).reshape(D, D))
        S[np.arange(n2), np.arange(n2)] += beta**2 * noise
    return {"error": np.array(errors), "sampling_variance": np.array(variances[:-1])}


class MomentRecursion:
    """The second-moment recursion of :func:`expected_squared_errors` on ``vec(S)``
    (row-major), built once per data set, for long runs and many step sizes:
    ``vec(S) <- (I - beta L + beta^2 E[K (x) K]) vec(S) + beta^2 noise_std^2 vec(I_2n)``
    with ``L = K_mean (x) I + I (x) K_mean``; ``E||xi||^2`` is linear in ``vec(S)``."""

    def __init__(self, trajectories: Trajectories, features, gamma: float) -> None:
        if not isinstance(trajectories, Trajectories) or len(trajectories.batch_shape) != 1:
            raise ValueError("trajectories must be one data set (Trajectories of batch shape "
                             "(m,))")
        gamma = require_probability("gamma", gamma, open_high=True)
        K_mean, self._second, _ = _augmented_operators(trajectories, features, gamma, None)
        D = K_mean.shape[0]
        n2, n = D - 1, (D - 1) // 2
        eye = np.eye(D)
        self._first = np.kron(K_mean, eye) + np.kron(eye, K_mean)
        optimum = np.concatenate(saddle_point(K_mean[n:n2, :n], -K_mean[n:n2, -1],
                                              K_mean[n:n2, n:n2]))
        noise, readout = np.zeros((D, D)), np.zeros((D, D))
        noise[np.arange(n2), np.arange(n2)] = 1.0
        readout[:n2, :n2], readout[:n2, -1] = np.eye(n2), -2 * optimum
        self._noise, self._readout = noise.ravel(), readout.ravel()
        self._offset = float(optimum @ optimum)
        self._start = np.zeros((D, D))
        self._start[-1, -1] = 1.0  # x = [theta; w; 1] starts at [0; 0; 1]
        self._start = self._start.ravel()
        self.start_error = self._offset  # E||xi_1||^2 = ||(theta*, w*)||^2

    def _operator(self, beta: float) -> np.ndarray:
        return np.eye(self._first.shape[0]) - beta * self._first + beta**2 * self._second

    def error_after(self, step_size, noise_std) -> float | np.ndarray:
        """``E||xi_{N+1}||^2`` after the steps ``beta_1 .. beta_N`` from ``(theta, w) = 0``.
        ``step_size`` ``(N,)`` gives a float; ``(N, k)`` runs ``k`` schedules at once (noise
        ``noise_std`` a scalar or ``(k,)``) and gives ``(k,)``. A step of 0 leaves the moments
        unchanged, so zeros after its own ``N`` give a shorter schedule its own error."""
        steps = require_array("step_size", step_size)
        if steps.ndim not in (1, 2) or steps.shape[0] == 0:
            raise ValueError(f"step_size must be (N,) or (N, k), got shape {steps.shape}")
        if steps.min() < 0 or not steps.any(axis=0).all():
            raise ValueError("step sizes must be >= 0, with a positive step in every schedule")
        columns = steps.reshape(steps.shape[0], -1)
        std = np.broadcast_to(np.asarray(noise_std, dtype=float), columns.shape[1:])
        if std.min() < 0:
            raise ValueError(f"noise_std must be >= 0, got {noise_std!r}")
        # longest schedules first, so the live ones (a step still to come) are a prefix
        lengths = columns.shape[0] - np.argmax(columns[::-1] != 0, axis=0)
        order = np.argsort(-lengths, kind="stable")
        columns, lengths = columns[:, order], lengths[order]
        noise = np.outer(self._noise, std[order] ** 2)
        v = np.repeat(self._start[:, None], columns.shape[1], axis=1)
        stacked, size = np.vstack([self._first, self._second]), v.shape[0]
        for i, beta in enumerate(columns):
            live = int(np.searchsorted(-lengths, -i, side="left"))
            products = stacked @ v[:, :live]
            b = beta[:live]
            v[:, :live] += -b * products[:size] + b**2 * (products[size:] + noise[:, :live])
        errors = np.empty(columns.shape[1])
        errors[order] = self._readout @ v + self._offset
        return float(errors[0]) if steps.ndim == 1 else errors

    def constant_step_error(self, step: float, n_iterations: int, noise_std: float) -> float:
        """``E||xi_{N+1}||^2`` after ``N`` constant steps ``beta``, in closed form (the
        affine map to the power ``N``)."""
        beta, n = require_positive("step", step), require_int("n_iterations", n_iterations)
        size = self._first.shape[0]
        affine = np.eye(size + 1)
        affine[:size, :size] = self._operator(beta)
        affine[:size, -1] = beta**2 * require_nonnegative("noise_std", noise_std) ** 2 \
            * self._noise
        with np.errstate(over="ignore", invalid="ignore"):
            v = np.linalg.matrix_power(affine, n) @ np.append(self._start, 1.0)
            error = float(self._readout @ v[:size] + self._offset)
        return error if np.isfinite(error) else np.inf  # a step that explodes


def shifted_theorem3_steps(step0: float, n_iterations: int, lam: float,
                           eta: float = 2.0) -> np.ndarray:
    """``beta_i = eta / (lambda_min (i + i_0))``, ``i = 0 .. N-1``, with ``i_0 = eta /
    (lambda_min beta_0)``: Theorem 3's schedule (Xie et al. 2019) shifted to start at
    ``beta_0`` (so Lemma 2's ``beta_i <= 1/lambda_max(Q)`` holds when ``beta_0`` meets it);
    equivalently ``beta_0 / (1 + i / i_0)``."""
    step0, lam = require_positive("step0", step0), require_positive("lam", lam)
    eta = require_positive("eta", eta)
    i = np.arange(require_int("n_iterations", n_iterations), dtype=float)
    return step0 / (1 + i * step0 * lam / eta)
