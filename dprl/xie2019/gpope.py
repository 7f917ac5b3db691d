"""GPOPE (Xie, Thomas & Miklau 2019, Algorithm 1) and the per-trajectory GTD2 it perturbs
(Eq. 2.3), vectorised over independent data sets (trials).

Data are :class:`~dprl.envs.Trajectories` of batch shape ``(*datasets, m)`` whose states index
the rows of a feature table ``Phi`` ``(S, n)`` (a discrete MDP's features, or the features of
every visited continuous state), and optional importance ratios ``rho_t = pi / pi_b``
``(*datasets, m, H)`` (1 on-policy). Trajectory ``i`` with ``tau_i`` transitions gives
(Eq. 2.2, normalised by the number of transitions)

    A_i = (1/tau_i) sum_t rho_t phi_t (phi_t - gamma phi_{t+1})^T,
    b_i = (1/tau_i) sum_t rho_t r_t phi_t,    C_i = (1/tau_i) sum_t phi_t phi_t^T,

with ``phi_{t+1} = 0`` after a terminating transition (a truncated last state is bootstrapped),
and the primal-dual gradient ``B_i(theta, w) = [-A_i^T w; A_i theta + C_i w - b_i]`` (Eq. 4.1).
Each iteration samples one trajectory per data set, computes ``B_i`` (from the stored
``A_i, b_i, C_i`` when ``m n^2`` fits a memory budget, else from the trajectory's transitions),
clips, perturbs and steps. Every data set draws its trajectory indices
and noise from its own generator, in chunks of iterations, so a trial's result does not depend
on the trials computed with it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import numpy as np

from dprl.envs import Trajectories
from dprl.validation import (initial_vectors, require_array, require_int,
                             require_nonnegative, require_positive, require_probability)
from dprl.xie2019.privacy import calibrated_sigma

_CHUNK = 512  # iterations whose random draws are made at once, per data set
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


def _steps(step_size, n_iterations: int) -> np.ndarray:
    """A constant step (scalar) or a schedule ``beta_1 .. beta_N``, all > 0."""
    steps = require_array("step_size", step_size)
    if steps.ndim == 0:
        steps = np.full(n_iterations, float(steps))
    if steps.shape != (n_iterations,) or steps.min() <= 0:
        raise ValueError(f"step_size must be > 0, a scalar or {n_iterations} values, "
                         f"got shape {steps.shape}")
    return steps


def _generators(rngs, count: int, per: str = "data set") -> list[np.random.Generator]:
    rngs = list(rngs) if isinstance(rngs, Sequence) else []
    if len(rngs) != count or not all(isinstance(g, np.random.Generator) for g in rngs):
        raise ValueError(f"rngs must be a sequence of {count} numpy Generators, one per {per}")
    return rngs


def clip_gradients(grad: np.ndarray, clips) -> np.ndarray:
    """``clip_h(B)`` (Alg. 1, line 5): each row of ``grad`` ``(R, 2n)`` scaled to norm at most
    its clip ``h`` (a scalar, or one per row)."""
    norms = np.sqrt((grad**2).sum(axis=-1))
    return grad / np.maximum(1.0, norms / clips)[:, None]


def _descend(data: Prepared, datasets: np.ndarray, schedule: np.ndarray, steps: np.ndarray,
             clips: np.ndarray | None, noise_scales: np.ndarray,
             rngs: Sequence[np.random.Generator], xi: np.ndarray,
             iterates: bool = False) -> np.ndarray:
    """``N = len(schedule)`` iterations of ``xi_r -= schedule_j steps_r (clip_{h_r}(B_i) +
    h_r sigma_r zeta)`` for every run ``r`` on data set ``datasets[r]``, one uniformly sampled
    trajectory per iteration and run, drawn with the noise from ``rngs[r]`` in chunks (a run
    with ``sigma_r = 0`` draws no noise). Each run's bits depend only on its own arguments.
    Returns the last ``xi``, or with ``iterates`` every one, ``(runs, N + 1, 2n)`` (the start
    first; the same draws and bits)."""
    n = data.n_features
    path = [xi] if iterates else None
    noisy = noise_scales > 0
    amplitudes = np.zeros(noise_scales.shape)
    if noisy.any():  # callers give every noisy run a clipping bound
        amplitudes[noisy] = clips[noisy] * noise_scales[noisy]
    for start in range(0, schedule.size, _CHUNK):
        size = min(_CHUNK, schedule.size - start)
        picks = np.stack([g.integers(data.m, size=size) for g in rngs], axis=1)
        noise = (np.stack([g.standard_normal((size, 2 * n)) if on else np.zeros((size, 2 * n))
                           for g, on in zip(rngs, noisy)], axis=1) if noisy.any() else None)
        for j in range(size):
            grad = data.gradient(datasets, picks[j], xi[:, :n], xi[:, n:])
            if clips is not None:
                grad = clip_gradients(grad, clips)
            if noise is not None:
                grad = grad + amplitudes[:, None] * noise[j]
            xi = xi - (schedule[start + j] * steps)[:, None] * grad
            if iterates:
                path.append(xi)
    return np.stack(path, axis=1) if iterates else xi


def primal_dual_descent(trajectories: Trajectories, features, gamma: float, step_size,
                        n_iterations: int, rngs: Sequence[np.random.Generator], *,
                        clip: float | None = None, noise_scale: float = 0.0, ratios=None,
                        theta0=None, w0=None, prepared: Prepared | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``N`` iterations of ``(theta, w) -= beta_i (clip_h(B_i) + h zeta)``, one uniformly
    sampled trajectory per iteration and data set: GTD2 (Eq. 2.3, ``clip=None``,
    ``noise_scale=0``) or GPOPE's loop (Algorithm 1, lines 2-7; ``zeta ~ N(0, sigma^2 I)``,
    ``noise_scale = sigma``). Returns ``(theta, w)``, each ``(*datasets, n)``. ``prepared``:
    :func:`prepare` of the same data (checked against ``gamma``, ``m`` and ``ratios``)."""
    gamma = require_probability("gamma", gamma)
    data = _prepared(trajectories, features, gamma, ratios, prepared)
    n_iterations = require_int("n_iterations", n_iterations)
    schedule = _steps(step_size, n_iterations)
    h = None if clip is None else require_positive("clip", clip)
    sigma = require_nonnegative("noise_scale", noise_scale)
    if sigma > 0 and h is None:
        raise ValueError("noise needs a clipping bound h (the noise is h N(0, sigma^2 I))")
    n, datasets = data.n_features, data.n_datasets
    rngs = _generators(rngs, datasets)
    xi = np.concatenate([initial_vectors("theta0", theta0, data.datasets, n),
                         initial_vectors("w0", w0, data.datasets, n)], axis=1)
    xi = _descend(data, np.arange(datasets), schedule, np.ones(datasets),
                  None if h is None else np.full(datasets, h), np.full(datasets, sigma),
                  rngs, xi)
    shape = (*data.datasets, n)
    return xi[:, :n].reshape(shape), xi[:, n:].reshape(shape)


def gradient_norms(trajectories: Trajectories, features, gamma: float, theta, w,
                   ratios=None) -> np.ndarray:
    """``||B_i(theta, w)||_2`` (Eq. 4.1) of every trajectory ``i`` of every data set at the
    point ``(theta, w)`` (``(*datasets, n)`` each, or ``(n,)`` for all), ``(*datasets, m)``:
    the fraction above ``h`` is the fraction of GPOPE's updates there that clipping changes
    (Algorithm 1, line 5)."""
    gamma = require_probability("gamma", gamma)
    data = _prepared(trajectories, features, gamma, ratios, None)
    datasets, n = data.n_datasets, data.n_features
    theta = initial_vectors("theta", theta, data.datasets, n)
    w = initial_vectors("w", w, data.datasets, n)
    every = np.arange(datasets)
    norms = np.stack([np.sqrt((data.gradient(every, np.full(datasets, i), theta, w) ** 2)
                              .sum(axis=-1)) for i in range(data.m)], axis=-1)
    return norms.reshape(*data.datasets, data.m)


def gpope(trajectories: Trajectories, features, gamma: float, step_size, n_iterations: int,
          clip: float, eps: float, delta: float, rngs: Sequence[np.random.Generator], *,
          ratios=None, theta0=None, w0=None, sensitivity: float = 2.0,
          prepared: Prepared | None = None, calibration: str = "tightest"
          ) -> tuple[np.ndarray, np.ndarray]:
    """GPOPE (Xie et al. 2019, Algorithm 1): ``(eps, delta)``-DP for data sets of ``m``
    trajectories differing in one (replace-one), with ``sigma`` calibrated from ``(eps,
    delta, N, m)`` by the tightest sound accountant
    (:func:`~dprl.xie2019.privacy.tightest_sigma`: WBK Thm. 27, clipped gradients of
    neighbours differing by ``sensitivity * h``). Returns the released ``(theta, w)``, each
    ``(*datasets, n)``. ``prepared``: :func:`prepare` of the same data, to share the
    preprocessing between runs. ``calibration``: ``"tightest"``, ``"book"`` (WBK Thm. 9,
    :func:`~dprl.xie2019.privacy.gpope_sigma`) or ``"paper"`` (Lemma 1, sensitivity ``h``:
    not sound; :func:`~dprl.xie2019.privacy.calibrated_sigma`)."""
    if not isinstance(trajectories, Trajectories):  # m, the data-set size, comes from them
        raise ValueError(f"trajectories must be Trajectories (episodes of batch shape "
                         f"(*datasets, m), e.g. from ChainMDP.sample), got "
                         f"{type(trajectories).__name__}")
    sigma = calibrated_sigma(calibration, eps, delta,
                             require_int("n_iterations", n_iterations),
                             trajectories.batch_shape[-1], sensitivity)
    return primal_dual_descent(trajectories, features, gamma, step_size, n_iterations, rngs,
                               clip=clip, noise_scale=sigma, ratios=ratios, theta0=theta0,
                               w0=w0, prepared=prepared)


def gpope_runs(prepared: Prepared, datasets, step_sizes, n_iterations: int, clip: float,
               eps, delta: float, rngs: Sequence[np.random.Generator], *,
               sensitivity: float = 2.0, calibration: str | Sequence[str] = "tightest",
               iterates: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``R`` independent runs of GPOPE (Xie et al. 2019, Algorithm 1) on prepared data, in
    one loop: run ``r`` works on data set ``datasets[r]`` with the constant step
    ``step_sizes[r]``, ``N`` iterations, clipping bound ``clip`` and the noise calibrated for
    ``(eps[r], delta, N, m)`` by ``calibration`` (as in :func:`gpope`; one name for every run,
    or one per run), drawing from ``rngs[r]`` alone (so a run's bits do not depend on the
    other runs). ``eps[r] = inf`` is GTD2 (Eq. 2.3): neither clipped nor noised. Returns
    ``(theta, w)``, each ``(R, n)``; with ``iterates``, every iterate of the descent, each
    ``(R, N + 1, n)`` (the start ``0`` first, the release last; the same draws and bits), from
    which a white-box auditor recovers each released noisy gradient ``(xi_{j-1} - xi_j) /
    beta``."""
    if not isinstance(prepared, Prepared):
        raise ValueError(f"prepared must come from prepare(), got {type(prepared).__name__}")
    datasets = require_array("datasets", datasets, ndim=1)
    runs = datasets.size
    if runs == 0 or np.any(datasets != np.round(datasets)) or not (
            0 <= datasets.min() and datasets.max() < prepared.n_datasets):
        raise ValueError(f"datasets must be a non-empty list of data-set indices in "
                         f"[0, {prepared.n_datasets}), got {datasets}")
    steps = require_array("step_sizes", step_sizes, shape=(runs,))
    if steps.min() <= 0:
        raise ValueError(f"step_sizes must be > 0, got min {steps.min()}")
    levels = np.broadcast_to(np.asarray(eps, dtype=float), (runs,))
    if np.any(np.isnan(levels)) or levels.min() <= 0:
        raise ValueError(f"eps must be > 0 (inf for GTD2 without privacy), got {levels}")
    n_iterations, h = require_int("n_iterations", n_iterations), require_positive("clip", clip)
    names = [calibration] * runs if isinstance(calibration, str) else list(calibration)
    if len(names) != runs:
        raise ValueError(f"calibration must be one name or {runs} names, got {len(names)}")
    settings = list(zip(levels.tolist(), names))
    calibrated = {(e, name): 0.0 if math.isinf(e) else  # once per setting, not per run
                  calibrated_sigma(name, e, delta, n_iterations, prepared.m, sensitivity)
                  for e, name in dict.fromkeys(settings)}
    sigmas = np.array([calibrated[setting] for setting in settings])
    clips = np.where(np.isinf(levels), np.inf, h)
    n = prepared.n_features
    xi = _descend(prepared, datasets.astype(np.int64), np.ones(n_iterations), steps, clips,
                  sigmas, _generators(rngs, runs, "run"), np.zeros((runs, 2 * n)),
                  bool(iterates))
    return xi[..., :n], xi[..., n:]
