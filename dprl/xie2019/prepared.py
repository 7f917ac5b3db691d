"""GPOPE's data made ready once (Xie, Thomas & Miklau 2019, Eq. 2.2 and 4.1): the
per-trajectory ``A_i, b_i, C_i`` and the primal-dual gradient ``B_i`` they give, for
:mod:`dprl.xie2019.gpope`'s descent.

Data are :class:`~dprl.envs.Trajectories` of batch shape ``(*datasets, m)`` whose states index
the rows of a feature table ``Phi`` ``(S, n)`` (a discrete MDP's features, or the features of
every visited continuous state), and optional importance ratios ``rho_t = pi / pi_b``
``(*datasets, m, H)`` (1 on-policy). Trajectory ``i`` with ``tau_i`` transitions gives
(Eq. 2.2, normalised by the number of transitions)

    A_i = (1/tau_i) sum_t rho_t phi_t (phi_t - gamma phi_{t+1})^T,
    b_i = (1/tau_i) sum_t rho_t r_t phi_t,    C_i = (1/tau_i) sum_t phi_t phi_t^T,

with ``phi_{t+1} = 0`` after a terminating transition (a truncated last state is bootstrapped),
and the primal-dual gradient ``B_i(theta, w) = [-A_i^T w; A_i theta + C_i w - b_i]`` (Eq. 4.1),
computed from the matrices' non-zero entries under tabular features, from the stored dense
matrices when ``m n^2`` fits a memory budget, else from the trajectory's transitions
(:class:`Prepared`).
"""

from __future__ import annotations

import copy

import numpy as np

from dprl.envs import Trajectories
from dprl.validation import require_array, require_int, require_probability

#: per data set, the most entries ``m n^2`` of the per-trajectory matrices ``A_i``, ``C_i``
#: held in memory; above it the gradient is summed from the transitions at every iteration
_MATRIX_BUDGET = 2**25
_TRAJECTORY_CHUNK = 256  # trajectories whose matrices are formed at once


def _checked(trajectories: Trajectories, features, ratios
             ) -> tuple[np.ndarray, np.ndarray | None]:
    """The feature table ``(S, n)`` and the ratios (None on-policy), checked against the
    trajectories (states index the table's rows; ratios ``>= 0``, shaped like the rewards)."""
    if not isinstance(trajectories, Trajectories):
        raise ValueError(f"trajectories must be Trajectories, got {type(trajectories).__name__}")
    table = require_array("features", features, ndim=2)
    if trajectories.states.max() >= table.shape[0]:
        raise ValueError(f"states must index the {table.shape[0]} rows of features, got state "
                         f"{trajectories.states.max()}")
    if ratios is None:
        return table, None
    rho = require_array("ratios", ratios, shape=trajectories.rewards.shape)
    if rho.min() < 0:
        raise ValueError(f"ratios must be >= 0 (pi / pi_b), got min {rho.min()}")
    return table, rho


class _Episodes:
    """The transitions of every trajectory as rows of an extended feature table (row ``S`` is
    the zero vector: padding and the successor of a terminating transition)."""

    def __init__(self, trajectories: Trajectories, table: np.ndarray,
                 rho: np.ndarray | None) -> None:
        """``table`` and ``rho`` as :func:`_checked` returns them (use :meth:`of` otherwise)."""
        n_rows = table.shape[0]
        # the padded horizon, not the longest trajectory here: shapes (and so the rounding of
        # the products below) must not depend on the other data sets of the batch
        steps = trajectories.rewards.shape[-1]
        mask = trajectories.transition_mask[..., :steps]
        last = np.arange(steps) == trajectories.lengths[..., None] - 1
        terminal = last & trajectories.terminated[..., None]
        self.table = np.vstack([table, np.zeros(table.shape[1])])
        self.sources = np.where(mask, trajectories.states[..., :steps], n_rows)
        self.nexts = np.where(mask & ~terminal, trajectories.states[..., 1:steps + 1], n_rows)
        self.rewards = trajectories.rewards[..., :steps]
        self.inverse_lengths = np.where(mask, 1.0 / trajectories.lengths[..., None], 0.0)
        self.ratios = (np.ones(trajectories.rewards.shape) if rho is None else rho)[..., :steps]
        self.datasets = trajectories.batch_shape[:-1]
        self.m = trajectories.batch_shape[-1]
        self.lengths = trajectories.lengths.reshape(-1, self.m)
        for name in ("sources", "nexts", "rewards", "inverse_lengths", "ratios"):
            value = getattr(self, name)
            setattr(self, name, value.reshape(-1, self.m, steps))

    @classmethod
    def of(cls, trajectories: Trajectories, features, ratios) -> _Episodes:
        """The transitions of ``trajectories`` after checking the features and ratios."""
        return cls(trajectories, *_checked(trajectories, features, ratios))

    @property
    def n_features(self) -> int:
        return self.table.shape[1]

    def first(self, m: int) -> _Episodes:
        """The first ``m`` trajectories of every data set (the same feature table)."""
        part = copy.copy(self)
        part.m, part.lengths = m, self.lengths[:, :m]
        for name in ("sources", "nexts", "rewards", "inverse_lengths", "ratios"):
            setattr(part, name, getattr(self, name)[:, :m])
        return part

    def gradient(self, picked: np.ndarray, theta: np.ndarray, w: np.ndarray, gamma: float,
                 datasets: np.ndarray | None = None) -> np.ndarray:
        """``B_i(theta, w)`` (Eq. 4.1) of trajectory ``picked[k]`` of data set ``datasets[k]``
        (default ``k``) at ``(theta[k], w[k])``, ``(R, 2n)``, summed from its transitions over
        the padded horizon (so a run's rounding does not depend on the others):

            A_i theta + C_i w - b_i = sum_t phi_t (u_t (d_t . theta) + (phi_t . w) / tau_i
                                      - u_t r_t),   A_i^T w = sum_t d_t u_t (phi_t . w),

        with ``d_t = phi_t - gamma phi_{t+1}`` and ``u_t = rho_t / tau_i``: four matrix-vector
        products per run."""
        rows = np.arange(picked.size) if datasets is None else datasets
        phi = self.table[self.sources[rows, picked]]  # (R, steps, n)
        diff = phi - gamma * self.table[self.nexts[rows, picked]]
        per_step = self.inverse_lengths[rows, picked]
        weight = per_step * self.ratios[rows, picked]
        phi_w = (phi @ w[:, :, None])[..., 0]
        diff_theta = (diff @ theta[:, :, None])[..., 0]
        dual = weight * diff_theta + per_step * phi_w - weight * self.rewards[rows, picked]
        a_t_w = (np.swapaxes(diff, 1, 2) @ (weight * phi_w)[..., None])[..., 0]
        dual_sum = (np.swapaxes(phi, 1, 2) @ dual[..., None])[..., 0]
        return np.concatenate([-a_t_w, dual_sum], axis=-1)


def _trajectory_matrices(episodes: _Episodes, gamma: float
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``A_i, b_i, C_i`` (Eq. 2.2) of every trajectory, ``(D, m, n, n)``, ``(D, m, n)``,
    ``(D, m, n, n)``, or None above the memory budget. Trajectories are grouped by length into
    fixed buckets (``L <= 2^k``) and their products over time padded with zeros to the bucket's
    bound, so a trajectory's matrices never depend on the ones formed with it."""
    D, m, steps = episodes.sources.shape
    n = episodes.n_features
    if m * n * n > _MATRIX_BUDGET:
        return None
    lengths = episodes.lengths.ravel()
    bounds = np.minimum(2 ** np.ceil(np.log2(lengths)).astype(np.int64), steps)
    flat = {name: getattr(episodes, name).reshape(D * m, steps) for name in
            ("sources", "nexts", "rewards", "inverse_lengths", "ratios")}
    A, b, C = np.empty((D * m, n, n)), np.empty((D * m, n)), np.empty((D * m, n, n))
    for bound in np.unique(bounds):
        members = np.flatnonzero(bounds == bound)
        for start in range(0, members.size, _TRAJECTORY_CHUNK):
            rows = members[start:start + _TRAJECTORY_CHUNK]
            sources, nexts, rewards, per_step, rho = (flat[name][rows, :bound] for name in
                                                      ("sources", "nexts", "rewards",
                                                       "inverse_lengths", "ratios"))
            phi = episodes.table[sources]  # (c, bound, n)
            weighted = np.ascontiguousarray(np.swapaxes(phi * (per_step * rho)[..., None], 1, 2))
            A[rows] = weighted @ (phi - gamma * episodes.table[nexts])
            b[rows] = (weighted @ rewards[..., None])[..., 0]
            C[rows] = np.ascontiguousarray(np.swapaxes(phi * per_step[..., None], 1, 2)) @ phi
    return A.reshape(D, m, n, n), b.reshape(D, m, n), C.reshape(D, m, n, n)


def _matrix_gradient(matrices: tuple[np.ndarray, np.ndarray, np.ndarray], datasets: np.ndarray,
                     picked: np.ndarray, theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``B_i = [-A_i^T w; A_i theta + C_i w - b_i]`` (Eq. 4.1) from stored matrices, for
    trajectory ``picked[k]`` of data set ``datasets[k]``."""
    A, b, C = (M[datasets, picked] for M in matrices)
    dual = (np.einsum("dij,dj->di", A, theta) + np.einsum("dij,dj->di", C, w) - b)
    return np.concatenate([-np.einsum("dji,dj->di", A, w), dual], axis=-1)


def _one_hot_columns(table: np.ndarray) -> np.ndarray | None:
    """The column of every row's single 1 when each row of the feature table is a unit
    vector (tabular features), else None."""
    if table.shape[0] and np.count_nonzero(table[0]) != 1:  # dense: no pass over the table
        return None
    columns = table.argmax(axis=1)
    return columns if np.array_equal(table, np.eye(table.shape[1])[columns]) else None


class _Tabular:
    """``A_i, b_i, C_i`` (Eq. 2.2) of every trajectory under one-hot (tabular) features,
    stored by their non-zero entries: with ``phi(s) = e_s``,

        A_i = diag(a_i) - gamma sum_k diag_k(p_ik),   C_i = diag(c_i),

    where ``a_i[s] = (1/tau_i) sum_t rho_t [s_t = s]``, ``c_i[s] = (1/tau_i) sum_t [s_t = s]``,
    ``b_i[s] = (1/tau_i) sum_t rho_t r_t [s_t = s]`` and ``p_ik[s] = (1/tau_i) sum_t rho_t
    [s_t = s, s_{t+1} = s + k]`` over non-terminating transitions, for every offset ``k`` seen
    in the data (the chain has ``k = 0, 1``). ``(3 + K) n`` numbers per trajectory instead
    of ``2 n^2 + n``, summed from the real transitions only (no padding); each is summed over
    its own trajectory's steps in time order, so it does not depend on the other
    trajectories."""

    def __init__(self, trajectories: Trajectories, columns: np.ndarray, n: int, ratios,
                 gamma: float) -> None:
        m = trajectories.batch_shape[-1]
        steps = trajectories.rewards.shape[-1]
        mask = trajectories.transition_mask[..., :steps].reshape(-1, steps)
        owner, t = np.nonzero(mask)  # trajectory (flat) and time of every real transition
        states = trajectories.states.reshape(-1, steps + 1)
        terminal = trajectories.terminated.ravel()[owner] & (
            t == trajectories.lengths.ravel()[owner] - 1)
        sources = columns[states[owner, t]]
        nexts = np.where(terminal, n, np.append(columns, n)[states[owner, t + 1]])
        per_step = 1.0 / trajectories.lengths.ravel()[owner]
        rho = 1.0 if ratios is None else ratios.reshape(-1, steps)[owner, t]
        weight = per_step * rho
        count = mask.shape[0]
        first = owner * n

        def per_state(values: np.ndarray, where=None) -> np.ndarray:
            index = first + sources if where is None else (first + sources)[where]
            values = values if where is None else values[where]
            return np.bincount(index, values, count * n).reshape(-1, m, n)

        live = nexts < n
        self.offsets = np.unique(nexts[live] - sources[live])
        rewards = trajectories.rewards.reshape(-1, steps)[owner, t]
        #: (D, m, 3 + K, n): a, c, b, then p_k for every offset (one gather per iteration)
        self.entries = np.stack([per_state(weight), per_state(per_step),
                                 per_state(weight * rewards),
                                 *(per_state(weight, live & (nexts - sources == k))
                                   for k in self.offsets)], axis=2)
        self.gamma = gamma
        self.pad = int(np.abs(self.offsets).max(initial=0))

    def first(self, m: int) -> _Tabular:
        """The entries of the first ``m`` trajectories of every data set (the offsets seen in
        all of them: a band absent from these trajectories is zero in their entries)."""
        part = copy.copy(self)
        part.entries = self.entries[:, :m]
        return part

    def mean_statistics(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``A, b, C``: the means of ``A_i, b_i, C_i`` over each data set's trajectories
        (Eq. 2.2 normalised by trajectories), dense, ``(D, n, n)``, ``(D, n)``, ``(D, n, n)``."""
        means = self.entries.mean(axis=1)
        a, c, b, bands = means[:, 0], means[:, 1], means[:, 2], means[:, 3:]
        n = a.shape[-1]
        A = a[:, :, None] * np.eye(n)
        rows = np.arange(n)
        for k, offset in enumerate(self.offsets):
            inside = (rows + offset >= 0) & (rows + offset < n)
            A[:, rows[inside], rows[inside] + offset] -= self.gamma * bands[:, k, inside]
        return A, b, c[:, :, None] * np.eye(n)

    def gradient(self, datasets: np.ndarray, picked: np.ndarray, theta: np.ndarray,
                 w: np.ndarray) -> np.ndarray:
        """``B_i = [-A_i^T w; A_i theta + C_i w - b_i]`` (Eq. 4.1) of trajectory
        ``picked[k]`` of data set ``datasets[k]``: ``(A theta)[s] = a[s] theta[s] - gamma
        sum_k p_k[s] theta[s + k]``, ``(A^T w)[s] = a[s] w[s] - gamma sum_k p_k[s - k]
        w[s - k]``."""
        entries = self.entries[datasets, picked]  # (R, 3 + K, n)
        a, c, b = entries[:, 0], entries[:, 1], entries[:, 2]
        runs, n = theta.shape
        pad = self.pad
        ahead = np.zeros((runs, n + 2 * pad))  # theta[s + k] is ahead[:, s + k + pad]
        ahead[:, pad:pad + n] = theta
        behind = np.zeros((runs, n + 2 * pad))  # collects p_k[s] w[s] at s + k + pad
        a_theta = a * theta
        for k, offset in enumerate(self.offsets):
            band = entries[:, 3 + k]
            a_theta -= self.gamma * band * ahead[:, pad + offset:pad + offset + n]
            behind[:, pad + offset:pad + offset + n] += band * w
        a_t_w = a * w - self.gamma * behind[:, pad:pad + n]
        return np.concatenate([-a_t_w, a_theta + c * w - b], axis=-1)


class Prepared:
    """Data made ready for :func:`primal_dual_descent` / :func:`gpope` once: the
    per-trajectory ``A_i, b_i, C_i`` by their non-zero entries under tabular features, else
    densely when they fit the memory budget (the transitions are then let go), else the
    transitions, so that runs with several step sizes or privacy levels on
    the same data do not redo it: pass it as ``prepared=``. Made by :func:`prepare`."""

    def __init__(self, trajectories: Trajectories, features, gamma: float, ratios,
                 tabular: bool = True) -> None:
        self.gamma = require_probability("gamma", gamma)
        table, rho = _checked(trajectories, features, ratios)
        columns = _one_hot_columns(table) if tabular else None
        self.tabular = self.matrices = self.episodes = None
        if columns is not None:
            self.tabular = _Tabular(trajectories, columns, table.shape[1], rho, self.gamma)
        else:
            episodes = _Episodes(trajectories, table, rho)
            self.matrices = _trajectory_matrices(episodes, self.gamma)
            self.episodes = episodes if self.matrices is None else None
        self.datasets, self.m = trajectories.batch_shape[:-1], trajectories.batch_shape[-1]
        self.n_features = table.shape[1]
        self.n_datasets = int(np.prod(self.datasets, dtype=np.int64))
        self.off_policy = ratios is not None

    def mean_statistics(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The means of ``A_i, b_i, C_i`` (Eq. 2.2) over each data set's trajectories, each
        ``(*datasets, ...)``: LSTD's statistics normalised by trajectories, from what is stored
        (tabular entries or dense matrices; not available for the transitions)."""
        if self.tabular is not None:
            means = self.tabular.mean_statistics()
        elif self.matrices is not None:
            means = tuple(M.mean(axis=1) for M in self.matrices)
        else:
            raise ValueError("mean_statistics needs stored matrices: these data exceed the "
                             "memory budget (use baselines.episode_statistics)")
        return tuple(M.reshape(*self.datasets, *M.shape[1:]) for M in means)

    def first(self, m: int) -> Prepared:
        """The first ``m`` trajectories of every data set, as :func:`prepare` of them would
        give (each trajectory's ``A_i, b_i, C_i`` depend on it alone), so that nested data sets
        are prepared once, at the largest ``m``."""
        m = require_int("m", m, minimum=1)
        if m > self.m:
            raise ValueError(f"m must be <= the {self.m} trajectories held, got {m}")
        part = copy.copy(self)
        part.m = m
        if self.tabular is not None:
            part.tabular = self.tabular.first(m)
        elif self.matrices is not None:
            part.matrices = tuple(M[:, :m] for M in self.matrices)
        else:
            part.episodes = self.episodes.first(m)
        return part

    def gradient(self, datasets: np.ndarray, picked: np.ndarray, theta: np.ndarray,
                 w: np.ndarray) -> np.ndarray:
        """``B_i(theta, w)`` (Eq. 4.1) of trajectory ``picked[k]`` of data set
        ``datasets[k]`` at ``(theta[k], w[k])``: from the tabular entries, from the stored
        matrices (one ``(n, n)`` product per run), else from the transitions."""
        if self.tabular is not None:
            return self.tabular.gradient(datasets, picked, theta, w)
        if self.matrices is None:
            return self.episodes.gradient(picked, theta, w, self.gamma, datasets)
        return _matrix_gradient(self.matrices, datasets, picked, theta, w)


def prepare(trajectories: Trajectories, features, gamma: float, ratios=None,
            tabular: bool = True) -> Prepared:
    """:class:`Prepared` data for GTD2 / GPOPE (Xie et al. 2019, Eq. 2.2 per trajectory);
    ``tabular=False`` stores one-hot features' matrices densely too (the same ``B_i`` to
    rounding, more memory and time: for comparisons)."""
    return Prepared(trajectories, features, gamma, ratios, bool(tabular))


def _prepared(trajectories: Trajectories, features, gamma: float, ratios,
              prepared: Prepared | None) -> Prepared:
    """``prepared`` after checking it matches the arguments, or the data prepared now."""
    if prepared is None:
        return Prepared(trajectories, features, gamma, ratios)
    if not isinstance(prepared, Prepared):
        raise ValueError(f"prepared must come from prepare(), got {type(prepared).__name__}")
    m = trajectories.batch_shape[-1] if isinstance(trajectories, Trajectories) else None
    if (prepared.gamma != gamma or prepared.m != m
            or prepared.off_policy != (ratios is not None)):
        raise ValueError("prepared was made from other data, gamma or ratios than given")
    return prepared
