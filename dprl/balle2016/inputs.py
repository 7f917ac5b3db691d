"""Input checks shared by the Balle et al. (2016) modules: features, weights, signatures.

Each check raises :class:`ValueError` naming the argument and the condition it violates.
"""

from __future__ import annotations

import numpy as np

from dprl.validation import require_array, require_int, require_positive


def features_matrix(features, n_states: int) -> np.ndarray:
    """``Phi``, ``(N, d)`` with one row per state of the data (Balle et al. 2016, Sec. 2.2)."""
    return require_array("features", features, shape=(n_states, None))


def state_weights(name: str, value, n_states: int | None = None,
                  upper: float = np.inf) -> np.ndarray:
    """Per-state weights ``(N,)`` in ``[0, upper]``, not all zero (any ``N`` when
    ``n_states`` is None)."""
    weights = require_array(name, value, shape=(n_states,))
    if weights.min() < 0 or weights.max() > upper or weights.max() == 0:
        raise ValueError(f"{name} must lie in [0, {upper}] with at least one positive entry, "
                         f"got values in [{weights.min()}, {weights.max()}]")
    return weights


def regression_weights(rho, n_states: int | None = None) -> np.ndarray:
    """The regression weights ``0 <= rho_s <= 1`` of Balle et al. (2016, Eq. 3), not all 0."""
    return state_weights("rho", rho, n_states, upper=1.0)


def weighted_design(features: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``Gamma^{1/2} Phi``, refusing it unless it has full column rank: the working assumption
    that ``Phi^T Gamma Phi`` is invertible (Balle et al. 2016, Sec. 3.1, before Eq. 8)."""
    design = np.sqrt(weights)[:, None] * features
    if np.linalg.matrix_rank(design) < features.shape[1]:
        raise ValueError("Phi^T Gamma Phi must be invertible (Gamma^{1/2} Phi of full column "
                         f"rank {features.shape[1]}); got rank {np.linalg.matrix_rank(design)}")
    return design


def ridge(lam: float) -> float:
    """A ridge parameter ``lambda > 0`` (Balle et al. 2016, Eq. 10)."""
    return require_positive("lam", lam)


def signatures(counts, n_states: int | None, m: int | None = None) -> np.ndarray:
    """Signatures ``<X>(s) = |X_s|`` (Balle et al. 2016, Sec. 4.1), integers of shape
    ``(..., N)`` (any ``N`` when ``n_states`` is None) in ``[0, m]`` (``[0, inf)`` when ``m``
    is None)."""
    raw = np.asarray(counts)
    if not np.issubdtype(raw.dtype, np.integer):
        raise ValueError(f"counts must hold integers, got dtype {raw.dtype}")
    if raw.ndim == 0 or raw.size == 0 or n_states not in (None, raw.shape[-1]):
        raise ValueError(f"counts must have shape (..., {n_states or 'N'}), got {raw.shape}")
    high = np.inf if m is None else require_int("m", m)
    if raw.min() < 0 or raw.max() > high:
        raise ValueError(f"counts must lie in [0, {high}] (no state is visited by more "
                         f"trajectories than the data set holds), got [{raw.min()}, {raw.max()}]")
    return raw.astype(np.int64)
