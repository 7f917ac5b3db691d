"""The non-private baselines of Xie, Thomas & Miklau (2019, Sec. 7): LSTD (Bradtke & Barto
1996) on-policy and WIS-LSTD (Mahmood, van Hasselt & Sutton 2014) off-policy, for any feature
table, and the sample statistics ``(A, b, C)`` (Eq. 2.2) they and the MSPBE are built from.

Data are as in :mod:`dprl.xie2019.gpope`: :class:`~dprl.envs.Trajectories` whose states index
the rows of a feature table (a discrete MDP's features, or the features of every visited
continuous state), with optional importance ratios ``rho_t = pi(a_t|s_t) / pi_b(a_t|s_t)``.

WIS-LSTD with ``lambda = 0``. Weighted importance sampling puts the ratio on both sides of the
least-squares normal equations (Mahmood et al. 2014, Sec. 3): the one-step target
``r_t + gamma theta^T phi_{t+1}`` of the regression on ``phi_t`` is weighted by ``rho_t``, so
the fixed point solves ``sum_t rho_t phi_t (phi_t - gamma phi_{t+1})^T theta =
sum_t rho_t r_t phi_t``, i.e. ``A theta = b`` with Xie et al.'s ``A, b`` (Eq. 2.2) -- the
point GPOPE converges to. Ordinary importance sampling (the off-policy LSTD(0) of Yu 2010)
instead solves ``sum_t phi_t (phi_t - gamma rho_t phi_{t+1})^T theta = sum_t rho_t r_t phi_t``;
both have the same expectation (``E_b[rho_t | s_t] = 1``), not the same variance. Xie et al.
do not state lambda; the book uses 0, where WIS-LSTD and the GPOPE objective coincide.
"""

from __future__ import annotations

import numpy as np

from dprl.envs import Trajectories
from dprl.validation import require_array, require_choice, require_nonnegative, require_probability
from dprl.xie2019.prepared import Prepared, _Episodes

NORMALISATIONS = ("trajectories", "transitions")
IMPORTANCE = ("weighted", "ordinary")
_CHUNK = 4096  # trajectories whose feature rows are gathered at once


def _dataset_sums(episodes: _Episodes, d: int, per_trajectory: bool) -> tuple:
    """Over the trajectories of data set ``d``, with ``w = 1/tau_i`` or 1: the sums of
    ``w rho phi phi^T``, ``w rho phi phi'^T``, ``w rho r phi``, ``w phi phi^T`` and ``w``."""
    n = episodes.n_features
    sums = [np.zeros((n, n)), np.zeros((n, n)), np.zeros(n), np.zeros((n, n)), 0.0]
    for start in range(0, episodes.m, _CHUNK):
        part = slice(start, start + _CHUNK)
        sources = episodes.sources[d, part].ravel()
        phi = episodes.table[sources]
        weight = (episodes.inverse_lengths[d, part].ravel() if per_trajectory
                  else (sources < episodes.table.shape[0] - 1).astype(float))
        rho_phi = phi * (weight * episodes.ratios[d, part].ravel())[:, None]
        terms = (rho_phi.T @ phi, rho_phi.T @ episodes.table[episodes.nexts[d, part].ravel()],
                 episodes.rewards[d, part].ravel() @ rho_phi, (phi * weight[:, None]).T @ phi,
                 weight.sum())
        sums = [total + term for total, term in zip(sums, terms)]
    return sums


def episode_statistics(trajectories: Trajectories, features, gamma: float, ratios=None,
                       normalisation: str = "trajectories", importance: str = "weighted"
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample ``(A, b, C)`` of each data set (Xie et al. 2019, Eq. 2.2):
    ``A = E[rho phi (phi - gamma phi')^T]``, ``b = E[rho r phi]``, ``C = E[phi phi^T]``, the
    expectation over trajectories of per-trajectory averages (``"trajectories"``, Eq. 2.2) or
    over all transitions (``"transitions"``, classical LSTD). ``importance="ordinary"`` gives
    Yu (2010)'s ``A = E[phi (phi - gamma rho phi')^T]`` instead (module docstring). Any feature
    table; for a discrete MDP the values of :func:`dprl.policy_evaluation.td_statistics`.
    Shapes ``(*datasets, n, n)``, ``(*datasets, n)``, ``(*datasets, n, n)``."""
    episodes = _Episodes.of(trajectories, features, ratios)
    gamma = require_probability("gamma", gamma, open_high=True)
    per_trajectory = require_choice("normalisation", normalisation, NORMALISATIONS) == "trajectories"
    weighted = require_choice("importance", importance, IMPORTANCE) == "weighted"
    results = []
    for d in range(episodes.sources.shape[0]):
        rho_phi_phi, rho_phi_next, b, C, total = _dataset_sums(episodes, d, per_trajectory)
        A = (rho_phi_phi if weighted else C) - gamma * rho_phi_next
        results.append((A / total, b / total, C / total))
    n, datasets = episodes.n_features, episodes.datasets
    return tuple(np.stack([r[k] for r in results]).reshape(*datasets, *shape)
                 for k, shape in enumerate(((n, n), (n,), (n, n))))


def prepared_statistics(prepared: Prepared) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`episode_statistics` (``normalisation="trajectories"``, weighted importance) of
    prepared data without a second pass over the transitions: ``A, b, C`` (Eq. 2.2) are the
    means over trajectories of the stored ``A_i, b_i, C_i`` (equal to rounding: another
    summation order; :meth:`Prepared.mean_statistics`); data prepared as transitions (above
    the memory budget) are summed as there. Shapes ``(datasets, n, n)``, ``(datasets, n)``,
    ``(datasets, n, n)``."""
    if not isinstance(prepared, Prepared):
        raise ValueError(f"prepared must come from prepare(), got {type(prepared).__name__}")
    if prepared.episodes is None:  # stored tabular entries or dense matrices
        return prepared.mean_statistics()
    episodes = prepared.episodes
    sums = [_dataset_sums(episodes, d, True) for d in range(episodes.sources.shape[0])]
    A = np.stack([(phi_phi - prepared.gamma * phi_next) / total
                  for phi_phi, phi_next, _, _, total in sums])
    return (A, np.stack([s[2] / s[4] for s in sums]), np.stack([s[3] / s[4] for s in sums]))


def prepared_least_squares(prepared: Prepared, ridge: float = 0.0,
                           min_norm: bool = False) -> np.ndarray:
    """LSTD on-policy, WIS-LSTD(0) off-policy (:func:`lstd`, :func:`wis_lstd` with
    ``normalisation="trajectories"``) from :func:`prepared_statistics`, ``(datasets, n)``;
    ``min_norm``: as in :func:`solve_statistics`."""
    A, b, _ = prepared_statistics(prepared)
    return solve_statistics(A, b, ridge, min_norm)


def solve_statistics(A: np.ndarray, b: np.ndarray, ridge: float = 0.0,
                     min_norm: bool = False) -> np.ndarray:
    """LSTD's ``theta = (A + ridge I)^{-1} b`` (Bradtke & Barto 1996) from statistics ``A``
    ``(*datasets, n, n)`` and ``b`` ``(*datasets, n)`` (Eq. 2.1 estimated from data); with
    ``min_norm`` the minimum-norm least-squares solution ``(A + ridge I)^+ b``, defined also
    where a state is never visited (tabular features, few trajectories)."""
    ridge = require_nonnegative("ridge", ridge)
    A, b = require_array("A", A), require_array("b", b)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2] or b.shape != A.shape[:-1]:
        raise ValueError(f"A must be (..., n, n) and b (..., n), got {A.shape} and {b.shape}")
    return _solve(A, b, ridge, min_norm)


def _solve(A: np.ndarray, b: np.ndarray, ridge: float, min_norm: bool = False) -> np.ndarray:
    """:func:`solve_statistics` of checked arguments."""
    A = A + ridge * np.eye(A.shape[-1])
    if min_norm:
        return (np.linalg.pinv(A) @ b[..., None])[..., 0]
    try:
        return np.linalg.solve(A, b[..., None])[..., 0]
    except np.linalg.LinAlgError as error:
        raise ValueError("A + ridge I is singular (a feature never active in the data?); use "
                         "ridge > 0 or min_norm") from error


def lstd(trajectories: Trajectories, features, gamma: float, ridge: float = 0.0,
         normalisation: str = "transitions") -> np.ndarray:
    """On-policy LSTD (Bradtke & Barto 1996; Xie et al. 2019, Sec. 7):
    ``theta = (A + ridge I)^{-1} b`` with :func:`episode_statistics`, ``(*datasets, n)``."""
    ridge = require_nonnegative("ridge", ridge)
    A, b, _ = episode_statistics(trajectories, features, gamma, None, normalisation)
    return _solve(A, b, ridge)


def wis_lstd(trajectories: Trajectories, features, gamma: float, ratios, ridge: float = 0.0,
             normalisation: str = "transitions", importance: str = "weighted") -> np.ndarray:
    """WIS-LSTD(0) (Mahmood et al. 2014; the off-policy baseline of Xie et al. 2019, Sec. 7):
    ``theta`` solving ``(A_rho + ridge I) theta = b_rho``, the ratio-weighted normal equations
    of the module docstring, ``(*datasets, n)``; ``importance="ordinary"`` solves Yu's
    ordinary-importance-sampling LSTD(0) instead. ``ratios`` ``(*datasets, m, H)`` >= 0."""
    if ratios is None:
        raise ValueError("wis_lstd needs the importance ratios pi / pi_b (use lstd on-policy)")
    ridge = require_nonnegative("ridge", ridge)
    A, b, _ = episode_statistics(trajectories, features, gamma, ratios, normalisation,
                                 importance)
    return _solve(A, b, ridge)
