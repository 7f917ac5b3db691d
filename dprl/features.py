"""Linear features: tabular, state aggregation (Balle et al. 2016, Sec. 6), the Fourier
basis (Konidaris, Osentoski & Thomas 2011), the polynomial basis (Lagoudakis & Parr 2003) and
decorrelated (whitened) features.

Finite-state features are matrices ``Phi`` of shape ``(n_states, d)``, one row per state.
"""

from __future__ import annotations

import itertools

import numpy as np

from dprl.validation import require_array, require_in_bounds, require_int


def tabular_features(n_states: int) -> np.ndarray:
    """The identity ``(N, N)``: one indicator per state."""
    return np.eye(require_int("n_states", n_states))


def aggregation_features(n_states: int, group_size: int) -> np.ndarray:
    """``(N, N / k)`` indicators of the groups ``{jk, ..., jk + k - 1}`` of ``k`` adjacent states
    (Balle et al. 2016 aggregate pairs, ``k = 2``). ``k`` must divide ``N``, so every group has
    the same size."""
    n, k = require_int("n_states", n_states), require_int("group_size", group_size)
    if n % k:
        raise ValueError(f"group_size must divide n_states so that all groups have equal size, "
                         f"got n_states={n}, group_size={k}")
    return np.repeat(np.eye(n // k), k, axis=0)


def feature_box(low, high) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` as float vectors of equal shape with ``high > low`` everywhere: the box
    that scales the inputs of a feature map."""
    low = require_array("low", low, ndim=1)
    high = require_array("high", high, shape=low.shape)
    if np.any(high <= low):
        raise ValueError(f"high must exceed low in every dimension, got low={low}, high={high}")
    return low, high


def total_degree_vectors(k: int, degree: int) -> np.ndarray:
    """Every ``e`` in ``{0, .., degree}^k`` with ``sum(e) <= degree``, ``(C(k + degree,
    degree), k)`` integers, sorted by total degree then colexicographically (the first is 0):
    the exponents of a polynomial basis, or the frequencies of a total-order Fourier basis."""
    vectors = [e for e in itertools.product(range(degree + 1), repeat=k) if sum(e) <= degree]
    return np.array(sorted(vectors, key=lambda e: (sum(e), e[::-1])))


def cosine_features(scaled: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """``cos(pi c . z)`` for every row ``c`` of ``coefficients`` ``(d, k)`` and every input
    ``z`` of ``scaled`` ``(..., k)``, as ``(..., d)``: the Fourier basis of Konidaris et al.
    (2011) on inputs already scaled to ``[0, 1]``. ``c . z`` is summed term by term in order
    (the bits of a sum over a short last axis), not by a BLAS product: a row's bits must not
    depend on how many rows are computed with it (batch invariance,
    :mod:`dprl.engine.registry`)."""
    dot = scaled[..., 0, None] * coefficients[:, 0]
    for i in range(1, coefficients.shape[1]):
        dot += scaled[..., i, None] * coefficients[:, i]
    dot *= np.pi
    return np.cos(dot, out=dot)


class CosineBasis:
    """A Fourier basis given by its table of frequency vectors ``c`` (one row a feature):
    ``phi_c(z) = cos(pi c . z)`` on inputs ``z`` scaled into ``[0, 1]`` by the subclass."""

    def __init__(self, coefficients: np.ndarray) -> None:
        self._coefficients = np.asarray(coefficients, dtype=float)
        self._coefficients.setflags(write=False)

    @property
    def coefficients(self) -> np.ndarray:
        """``(d, k)``, the frequency vectors ``c``, one per feature."""
        return self._coefficients

    @property
    def n_features(self) -> int:
        """``d``, the number of frequency vectors."""
        return self._coefficients.shape[0]


class FourierBasis(CosineBasis):
    """Fourier basis of order ``n`` on the box ``[low, high]`` (Konidaris et al. 2011):
    ``phi_c(x) = cos(pi c . (x - low) / (high - low))`` for every ``c`` in ``{0, ..., n}^d``,
    so ``(n + 1)^d`` features (36 for order 5 in 2-D). Coefficients are in lexicographic
    order, the first being ``c = 0`` (the constant feature)."""

    def __init__(self, order: int, low, high) -> None:
        self.order = require_int("order", order, minimum=0)
        self.low, self.high = feature_box(low, high)
        super().__init__(list(itertools.product(range(self.order + 1), repeat=self.low.size)))

    def __call__(self, states) -> np.ndarray:
        """Features of ``states`` of shape ``(..., d)``, as ``(..., (n + 1)^d)``; every state
        must lie in ``[low, high]``."""
        states = require_array("states", states)
        d = self.low.size
        if states.ndim == 0 or states.shape[-1] != d:
            raise ValueError(f"states must have shape (..., {d}), got {states.shape}")
        for i in range(d):
            require_in_bounds(f"states[..., {i}]", states[..., i], self.low[i], self.high[i])
        return cosine_features((states - self.low) / (self.high - self.low),
                               self._coefficients)

    def step_size_scaling(self) -> np.ndarray:
        """Per-feature step-size factors ``1 / ||c||_2`` (1 for ``c = 0``), as in Konidaris
        et al. 2011."""
        norms = np.linalg.norm(self._coefficients, axis=1)
        norms[0] = 1.0
        return 1.0 / norms


class PolynomialBasis:
    """All monomials of total degree ``<= degree`` in the inputs scaled affinely so that the
    box ``[low, high]`` maps to ``[-1, 1]^k`` (the polynomial basis of Lagoudakis & Parr 2003,
    LSPI, Sec. 8): ``phi_e(x) = prod_j z_j^{e_j}`` with ``z = 2 (x - low) / (high - low) - 1``
    and ``sum_j e_j <= degree``, so ``C(k + degree, degree)`` features (210 for degree 4 in
    6-D), the first ``e = 0`` (the constant). Inputs outside the box are allowed (the box only
    sets the scale). Computed elementwise, so a row's bits do not depend on its batch."""

    def __init__(self, degree: int, low, high) -> None:
        self.degree = require_int("degree", degree, minimum=0)
        self.low, self.high = feature_box(low, high)
        self._exponents = total_degree_vectors(self.low.size, self.degree)
        self._exponents.setflags(write=False)

    @property
    def exponents(self) -> np.ndarray:
        """``(n_features, k)`` integer exponents ``e``, by total degree."""
        return self._exponents

    @property
    def n_features(self) -> int:
        """``C(k + degree, degree)``."""
        return self._exponents.shape[0]

    def __call__(self, observations) -> np.ndarray:
        """Features ``(n, n_features)`` of ``observations`` ``(n, k)`` (finite)."""
        k = self.low.size
        observations = require_array("observations", observations, shape=(None, k))
        z = 2.0 * (observations - self.low) / (self.high - self.low) - 1.0
        powers = z[:, :, None] ** np.arange(self.degree + 1)
        features = np.ones((observations.shape[0], self.n_features))
        for j in range(k):
            features *= powers[:, j, self._exponents[:, j]]
        return features


class DecorrelatedFeatures:
    """A feature map ``phi`` followed by a fixed linear map: ``phi'(x) = T phi(x)`` with
    ``T = L^{-1}``, ``L L^T = C`` the Cholesky factor of a second-moment matrix ``C`` of
    ``phi`` estimated on *public* data. Then ``E_public[phi' phi'^T] = I``: the features are
    decorrelated (whitened), which conditions the ``C`` of Xie et al. (2019, Eq. 2.1) and
    speeds up GTD2, whose dual iterate solves ``C w = b - A theta``. The span, and so every
    value function, LSTD solution and MSPBE, is that of ``phi``. If ``|phi_k| <= 1`` then
    ``||phi'||_2 <= ||T||_2 sqrt(d)`` everywhere (:meth:`norm_bound`). ``T phi`` is summed
    term by term (no BLAS product), so a row's bits do not depend on its batch."""

    def __init__(self, base, second_moment) -> None:
        C = require_array("second_moment", second_moment, ndim=2)
        if C.shape[0] != C.shape[1] or not np.allclose(C, C.T):
            raise ValueError(f"second_moment must be a symmetric square matrix, got {C.shape}")
        try:
            factor = np.linalg.cholesky(C)
        except np.linalg.LinAlgError as error:
            raise ValueError("second_moment must be positive definite (some features are "
                             "linearly dependent on the public data)") from error
        self.base = base
        self.transform = np.linalg.inv(factor)
        self.transform.setflags(write=False)

    @property
    def n_features(self) -> int:
        """``d``, as the base map."""
        return self.transform.shape[0]

    def norm_bound(self, base_bound: float = 1.0) -> float:
        """``||T||_2 sqrt(d) base_bound``: a bound on ``||phi'(x)||_2`` for every ``x`` when
        every base feature satisfies ``|phi_k(x)| <= base_bound``."""
        return float(np.linalg.norm(self.transform, 2) * np.sqrt(self.n_features) * base_bound)

    def __call__(self, observations) -> np.ndarray:
        """``T phi(x)`` for observations ``(..., k)``, as ``(..., d)``."""
        phi = np.asarray(self.base(observations), dtype=float)
        if phi.shape[-1:] != (self.n_features,):
            raise ValueError(f"the base map must give {self.n_features} features, got shape "
                             f"{phi.shape}")
        out = phi[..., 0, None] * self.transform[:, 0]
        for j in range(1, self.n_features):
            out = out + phi[..., j, None] * self.transform[:, j]
        return out
