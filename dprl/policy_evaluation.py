"""Policy evaluation from episodes: first-visit Monte Carlo (Balle et al. 2016, Sec. 2.2),
TD(0) (Sutton 1988), LSTD (Bradtke & Barto 1996), GTD2 (Sutton et al. 2009) and the MSPBE.

Conventions:

- Data are :class:`~dprl.envs.Trajectories` of batch shape ``(*datasets, n)``: the last axis
  holds the ``n`` trajectories of one data set, leading axes independent data sets; results
  have shape ``(*datasets, ...)`` (per-trajectory results keep the ``n`` axis).
- Features are matrices ``Phi`` of shape ``(N, d)`` indexed by state. The next state of a
  transition that terminates has features 0; the last state of a truncated episode is
  bootstrapped with its features.
- TD statistics (Xie et al. 2019, Eq. 2.1-2.2, on-policy so rho = 1):
  ``A = sum phi_t (phi_t - gamma phi_{t+1})^T``, ``b = sum phi_t r_t``, ``C = sum phi_t phi_t^T``
  over all transitions of a data set, divided by the number of transitions
  (``normalisation="transitions"``, classical LSTD), or averaged within each trajectory and then
  over trajectories (``normalisation="trajectories"``, Xie et al.'s ``E[(1/tau) sum_t ...]``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from scipy.signal import lfilter

from dprl.envs import ChainMDP, Trajectories
from dprl.validation import (initial_vectors, require_array, require_choice, require_int,
                             require_nonnegative, require_probability)

NORMALISATIONS = ("transitions", "trajectories")


def _gamma(gamma: float) -> float:
    return require_probability("gamma", gamma, open_high=True)


def _trajectories(trajectories: Trajectories, n_states: int) -> Trajectories:
    if not isinstance(trajectories, Trajectories):
        raise ValueError(f"trajectories must be a Trajectories, got {type(trajectories).__name__}")
    if trajectories.states.max() >= n_states:
        raise ValueError(f"states must lie in [0, {n_states - 1}] (n_states={n_states}), "
                         f"got state {trajectories.states.max()}")
    return trajectories


def _features(features) -> np.ndarray:
    return require_array("features", features, ndim=2)


def _normalisation(normalisation: str) -> str:
    return require_choice("normalisation", normalisation, NORMALISATIONS)


def first_visit_returns(trajectories: Trajectories, gamma: float,
                        n_states: int) -> tuple[np.ndarray, np.ndarray]:
    """``F[..., x, s]``, the discounted return from the first visit of ``s`` in trajectory ``x``
    (0 where ``s`` is not visited), and the visited mask, both ``(*batch, N)``
    (Balle et al. 2016, Sec. 2.2). ``s`` is visited if ``s_t = s`` for some ``t < L``.

    Trajectories are processed in groups of similar length, each padded only to its own longest
    trajectory; a row's result does not depend on its padding, so the bits do not either."""
    n_states = require_int("n_states", n_states)
    trajectories, gamma = _trajectories(trajectories, n_states), _gamma(gamma)
    H, batch = trajectories.horizon, trajectories.batch_shape
    states = trajectories.states.reshape(-1, H + 1)
    rewards = trajectories.rewards.reshape(-1, H)
    lengths = trajectories.lengths.reshape(-1)
    F = np.empty((lengths.size, n_states))
    visited = np.empty((lengths.size, n_states), dtype=bool)
    groups = np.ceil(np.log2(np.maximum(lengths, 1))).astype(np.int64)
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.unique(groups), side="right")
    for rows in np.split(order, bounds[:-1]):
        steps = int(lengths[rows].max())
        F[rows], visited[rows] = _first_visits(states[rows, :steps], rewards[rows, :steps],
                                               lengths[rows], gamma, n_states)
    return F.reshape(*batch, n_states), visited.reshape(*batch, n_states)


def _first_visits(states: np.ndarray, rewards: np.ndarray, lengths: np.ndarray, gamma: float,
                  n_states: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`first_visit_returns` of ``(n, steps)`` arrays with ``steps >= max(lengths)``."""
    n, steps = states.shape
    # returns-to-go G_t = r_t + gamma G_{t+1}: a first-order filter run backwards in time
    # (the same operations, in the same order, as the loop over t), then a 0 column for G_L
    returns = np.zeros((n, steps + 1))
    returns[:, :steps] = lfilter([1.0], [1.0, -gamma], rewards[:, ::-1], axis=-1)[:, ::-1]
    # first visit: the smallest t < L with s_t = s, per (trajectory, state); steps = never
    live = np.arange(steps) < lengths[:, None]
    keys = np.where(live, np.arange(n)[:, None] * n_states + states, n * n_states)
    first = np.full(n * n_states + 1, steps)
    np.minimum.at(first, keys.ravel(), np.broadcast_to(np.arange(steps), keys.shape).ravel())
    first = first[:-1].reshape(n, n_states)
    return returns[np.arange(n)[:, None], first], first < steps


def monte_carlo_values(trajectories: Trajectories, gamma: float,
                       n_states: int) -> tuple[np.ndarray, np.ndarray]:
    """First-visit Monte Carlo: per data set, the mean first-visit return of each state over
    the trajectories visiting it, ``(*datasets, N)``, NaN where no trajectory visits the state;
    and those visit counts ``|X_s|`` (int64, same shape)."""
    F, visited = first_visit_returns(trajectories, gamma, n_states)
    counts = visited.sum(axis=-2)
    values = np.full(counts.shape, np.nan)
    np.divide(F.sum(axis=-2), counts, out=values, where=counts > 0)
    return values, counts


def _transitions(trajectories: Trajectories, n_states: int):
    """Per data set, all transitions in trajectory order, shape ``(D, n H)``: sources, next
    states (``n_states`` where the transition terminates), rewards and ``1/L`` of their
    trajectory; padding entries (``t >= L``) have source and next ``n_states``, reward 0."""
    H = trajectories.horizon
    mask = trajectories.transition_mask
    ends = np.arange(H) == trajectories.lengths[..., None] - 1
    sources = np.where(mask, trajectories.states[..., :-1], n_states)
    nexts = np.where(mask & ~(ends & trajectories.terminated[..., None]),
                     trajectories.states[..., 1:], n_states)
    inverse_lengths = np.broadcast_to(1.0 / trajectories.lengths[..., None], mask.shape)
    n_datasets = int(np.prod(trajectories.batch_shape[:-1]))
    return tuple(a.reshape(n_datasets, -1)
                 for a in (sources, nexts, trajectories.rewards, inverse_lengths))


def _td_matrices(counts: np.ndarray, reward_sums: np.ndarray, features: np.ndarray,
                 gamma: float, visits: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A, b, C)`` from transition weights ``counts[..., s, s']`` (``s' = N`` terminal) and
    reward sums ``[..., s]``: ``A = Phi^T diag(n) Phi - gamma Phi^T K Phi_ext`` with
    ``n = sum_s' K``, ``C = Phi^T diag(visits) Phi`` (``visits`` defaults to ``n``; it differs
    when ``K`` carries importance ratios, which ``C`` does not)."""
    extended = np.vstack([features, np.zeros(features.shape[1])])
    C = np.einsum("sd,...s,se->...de", features, counts.sum(axis=-1), features)
    A = C - gamma * np.einsum("sd,...st,te->...de", features, counts, extended)
    b = np.einsum("sd,...s->...d", features, reward_sums)
    if visits is not None:
        C = np.einsum("sd,...s,se->...de", features, visits, features)
    return A, b, C


def td_statistics(trajectories: Trajectories, features, gamma: float,
                  normalisation: str = "transitions",
                  ratios=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample ``(A, b, C)`` of each data set (Xie et al. 2019, Eq. 2.2; normalisations in the
    module docstring), shapes ``(*datasets, d, d)``, ``(*datasets, d)``, ``(*datasets, d, d)``.
    ``ratios`` ``(*batch, H)``: importance ratios ``rho_t = pi / pi_b`` weighting the terms of
    ``A`` and ``b`` (off-policy); on-policy (None) they are 1."""
    features, gamma = _features(features), _gamma(gamma)
    per_trajectory = _normalisation(normalisation) == "trajectories"
    n = features.shape[0]
    trajectories = _trajectories(trajectories, n)
    sources, nexts, rewards, inverse_lengths = _transitions(trajectories, n)
    weights = np.where(sources < n, inverse_lengths if per_trajectory else 1.0, 0.0)
    n_datasets = sources.shape[0]
    rows = np.arange(n_datasets)[:, None] * (n + 1) + sources
    rho = 1.0
    if ratios is not None:
        rho = require_array("ratios", ratios, shape=trajectories.rewards.shape)
        if rho.min() < 0:
            raise ValueError(f"ratios must be >= 0 (pi / pi_b), got min {rho.min()}")
        rho = rho.reshape(n_datasets, -1)
    counts = np.bincount((rows * (n + 1) + nexts).ravel(), (weights * rho).ravel(),
                         minlength=n_datasets * (n + 1) ** 2).reshape(n_datasets, n + 1, n + 1)
    reward_sums = np.bincount(rows.ravel(), (weights * rho * rewards).ravel(),
                              minlength=n_datasets * (n + 1)).reshape(n_datasets, n + 1)
    visits = None if ratios is None else np.bincount(
        rows.ravel(), weights.ravel(), minlength=n_datasets * (n + 1)).reshape(n_datasets, n + 1)
    total, datasets = weights.sum(axis=1), trajectories.batch_shape[:-1]
    matrices = _td_matrices(counts[:, :n], reward_sums[:, :n], features, gamma,
                            None if visits is None else visits[:, :n])
    return tuple((M / total.reshape(-1, *[1] * (M.ndim - 1))).reshape(*datasets, *M.shape[1:])
                 for M in matrices)


def exact_td_statistics(mdp: ChainMDP, features, normalisation: str = "transitions"
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The expectations that :func:`td_statistics` of episodes sampled from ``mdp`` converge to.

    ``"transitions"``: states weighted by ``mdp.on_policy_distribution()`` (expected visit counts
    per episode, normalised); ``"trajectories"``: by ``E[(1/L) #visits]``.
    """
    if not isinstance(mdp, ChainMDP):
        raise ValueError(f"mdp must be a ChainMDP, got {type(mdp).__name__}")
    features = require_array("features", features, shape=(mdp.n_states, None))
    per_trajectory = _normalisation(normalisation) == "trajectories"
    K = mdp.expected_transition_counts(per_trajectory=per_trajectory)
    reward_sums = (K * mdp.reward_matrix()).sum(axis=1)
    counts = np.hstack([K, np.zeros((mdp.n_states, 1))])
    counts[:, [-2, -1]] = counts[:, [-1, -2]]  # entering (or leaving) the absorbing state ends
    A, b, C = _td_matrices(counts, reward_sums, features, mdp.gamma)
    total = K.sum()
    return A / total, b / total, C / total


def lstd(trajectories: Trajectories, features, gamma: float, ridge: float = 0.0,
         normalisation: str = "transitions") -> np.ndarray:
    """LSTD (Bradtke & Barto 1996): ``theta = (A + ridge I)^{-1} b`` with ``A, b`` from
    :func:`td_statistics` under ``normalisation`` (so ``ridge`` is relative to that scale);
    ``"trajectories"`` gives the fixed point of Xie et al. (2019)'s per-trajectory
    statistics. Returns ``(*datasets, d)``."""
    ridge = require_nonnegative("ridge", ridge)
    A, b, _ = td_statistics(trajectories, features, gamma, normalisation)
    try:
        return np.linalg.solve(A + ridge * np.eye(A.shape[-1]), b[..., None])[..., 0]
    except np.linalg.LinAlgError as error:
        raise ValueError("A + ridge I is singular (some feature is never active in the data?); "
                         "use ridge > 0") from error


def _step_size(name: str, value, d: int) -> np.ndarray:
    """A positive step size, scalar or per feature ``(d,)``."""
    value = require_array(name, value)
    if value.shape not in ((), (d,)) or value.min() <= 0:
        raise ValueError(f"{name} must be > 0, a scalar or of shape ({d},), got {value}")
    return value


def _sweeps(trajectories: Trajectories, features: np.ndarray,
            n_epochs: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(phi_t, r_t, phi_{t+1})`` of shapes ``(D, d), (D,), (D, d)``, transition by transition
    in trajectory order, all data sets in step; a data set that has run out of transitions gets
    zero features, which makes TD(0) and GTD2 updates no-ops."""
    n = features.shape[0]
    sources, nexts, rewards, _ = _transitions(trajectories, n)
    order = np.argsort(sources == n, axis=1, kind="stable")[:, :(sources < n).sum(axis=1).max()]
    sources, nexts, rewards = (np.take_along_axis(a, order, axis=1)
                               for a in (sources, nexts, rewards))
    extended = np.vstack([features, np.zeros(features.shape[1])])
    for _ in range(require_int("n_epochs", n_epochs)):
        for k in range(sources.shape[1]):
            yield extended[sources[:, k]], rewards[:, k], extended[nexts[:, k]]


def td0(trajectories: Trajectories, features, gamma: float, step_size, theta0=None,
        n_epochs: int = 1) -> np.ndarray:
    """Linear TD(0) (Sutton 1988), ``theta += alpha delta phi`` with
    ``delta = r + gamma phi'^T theta - phi^T theta``, sweeping each data set's transitions in
    trajectory order ``n_epochs`` times. ``step_size``: scalar or per feature.
    Returns ``(*datasets, d)``."""
    features, gamma = _features(features), _gamma(gamma)
    trajectories = _trajectories(trajectories, features.shape[0])
    d, datasets = features.shape[1], trajectories.batch_shape[:-1]
    alpha = _step_size("step_size", step_size, d)
    theta = initial_vectors("theta0", theta0, datasets, d)
    for phi, reward, phi_next in _sweeps(trajectories, features, n_epochs):
        delta = reward + gamma * np.einsum("ij,ij->i", phi_next, theta) \
            - np.einsum("ij,ij->i", phi, theta)
        theta += alpha * delta[:, None] * phi
    return theta.reshape(*datasets, d)


def gtd2(trajectories: Trajectories, features, gamma: float, step_theta, step_w,
         n_epochs: int = 1, theta0=None, w0=None) -> tuple[np.ndarray, np.ndarray]:
    """GTD2 (Sutton et al. 2009): ``w += beta (delta - phi^T w) phi`` and
    ``theta += alpha (phi - gamma phi') (phi^T w)``, both from the current ``(theta, w)``,
    sweeping transitions as :func:`td0`. Returns ``(theta, w)``, each ``(*datasets, d)``."""
    features, gamma = _features(features), _gamma(gamma)
    trajectories = _trajectories(trajectories, features.shape[0])
    d, datasets = features.shape[1], trajectories.batch_shape[:-1]
    alpha, beta = _step_size("step_theta", step_theta, d), _step_size("step_w", step_w, d)
    theta = initial_vectors("theta0", theta0, datasets, d)
    w = initial_vectors("w0", w0, datasets, d)
    for phi, reward, phi_next in _sweeps(trajectories, features, n_epochs):
        phi_w = np.einsum("ij,ij->i", phi, w)
        delta = reward + np.einsum("ij,ij->i", gamma * phi_next - phi, theta)
        theta += alpha * (phi - gamma * phi_next) * phi_w[:, None]
        w += beta * (delta - phi_w)[:, None] * phi
    return theta.reshape(*datasets, d), w.reshape(*datasets, d)


def mspbe(theta, A, b, C) -> np.ndarray | float:
    """MSPBE ``(b - A theta)^T C^{-1} (b - A theta)`` (Sutton et al. 2009; the objective of
    Xie et al. 2019, Eq. 2.1). Leading axes broadcast; ``C`` must be positive definite."""
    theta, A, b, C = (require_array(name, value) for name, value in
                      (("theta", theta), ("A", A), ("b", b), ("C", C)))
    d = theta.shape[-1] if theta.ndim else -1
    if b.shape[-1:] != (d,) or A.shape[-2:] != (d, d) or C.shape[-2:] != (d, d):
        raise ValueError(f"theta, b must end in (d,), A, C in (d, d); got {theta.shape}, "
                         f"{b.shape}, {A.shape}, {C.shape}")
    if not np.allclose(C, np.swapaxes(C, -1, -2)):
        raise ValueError("C must be symmetric")
    try:
        np.linalg.cholesky(C)
    except np.linalg.LinAlgError as error:
        raise ValueError("C must be positive definite") from error
    residual = b - np.einsum("...ij,...j->...i", A, theta)
    value = (residual * np.linalg.solve(C, residual[..., None])[..., 0]).sum(axis=-1)
    return value if value.ndim else float(value)


def weighted_rmse(v_hat, v, weights) -> np.ndarray | float:
    """``sqrt(sum_s w_s (v_hat_s - v_s)^2 / sum_s w_s)``, the rho-weighted l2 error of Balle et
    al.'s code when ``weights`` is the start distribution; leading axes of ``v_hat`` broadcast."""
    v_hat, v = require_array("v_hat", v_hat), require_array("v", v, ndim=1)
    weights = require_array("weights", weights, shape=v.shape)
    if v_hat.shape[-1:] != v.shape:
        raise ValueError(f"v_hat must end in {v.shape}, got {v_hat.shape}")
    if weights.min() < 0 or weights.sum() <= 0:
        raise ValueError("weights must be >= 0 with a positive sum")
    # an elementwise product summed along the last axis, not a BLAS matrix-vector product:
    # each row's rounding must not depend on how many rows (trials) are computed together
    value = np.sqrt(np.sum((v_hat - v) ** 2 * weights, axis=-1) / weights.sum())
    return value if value.ndim else float(value)


def rmse(v_hat, v) -> np.ndarray | float:
    """Plain root mean squared error over states (Balle et al. 2016, Sec. 6)."""
    return weighted_rmse(v_hat, v, np.ones(np.shape(v)))
