"""Feature maps of the HIV treatment domain (Ernst et al. 2006) on the observation
``y = log10 x`` of :class:`dprl.envs.hiv.HIVTreatmentMDP`, for Xie, Thomas & Miklau (2019,
Sec. 7): the action-value features of the evaluated policy (fitted Q iteration) and the
bounded value features of off-policy evaluation (GTD2 / GPOPE, LSTD, WIS-LSTD).

Both are scaled by a fixed, public box :data:`LOG10_BOX` of ``log10`` states, chosen from
the model (not from data): ``T1 <= lambda1 / d1 = 1e6`` and ``T2 <= lambda2 / d2 = 3198``
cap the target cells; the box covers the unhealthy and healthy steady states and the
transients of drug treatment (infected cells and virus down to ``1e-3``, ``1e-2``).
"""

from __future__ import annotations

import numpy as np

from dprl.features import (CosineBasis, PolynomialBasis, cosine_features, feature_box,
                           total_degree_vectors)
from dprl.validation import require_array, require_int

#: ``(low, high)`` of ``log10 (T1, T2, T1*, T2*, V, E)``: the scale of both feature maps.
LOG10_BOX = ((4.0, -1.0, -3.0, -3.0, -2.0, 0.0), (6.0, 3.5, 5.5, 3.0, 6.5, 6.0))


def q_features(degree: int = 4) -> PolynomialBasis:
    """The action-value features of the HIV policy: monomials of total degree ``<= degree``
    of the ``log10`` state scaled so that :data:`LOG10_BOX` is ``[-1, 1]^6`` (210 for degree
    4), for fitted Q iteration (Ernst et al. 2005) as in Xie et al. (2019, Sec. 7)."""
    return PolynomialBasis(degree, *LOG10_BOX)


class SquashedFourierBasis(CosineBasis):
    """A Fourier basis (Konidaris et al. 2011) on squashed inputs, bounded everywhere: the
    components ``y_j``, ``j`` in ``inputs``, of an observation become
    ``z_j = (1 + tanh((y_j - m_j) / h_j)) / 2`` in ``(0, 1)`` with ``m``, ``h`` the centre and
    half-width of the box ``[low, high]`` (mapped into ``[0.12, 0.88]``), and
    ``phi_c(y) = cos(pi c . z)`` for every ``c`` in ``{0, .., order}^k`` with
    ``sum_j c_j <= order`` (``C(k + order, order)`` features for ``k`` inputs, 20 for order 3
    and 3 inputs; the first is the constant). Every feature lies in ``[-1, 1]``, so
    ``||phi||_2 <= sqrt(d)`` for any input, as gradient clipping and privacy bounds need (Xie
    et al. 2019, Sec. 4). Computed elementwise, so a row's bits do not depend on its batch."""

    def __init__(self, order: int, low, high, inputs: tuple[int, ...]) -> None:
        self.order = require_int("order", order, minimum=0)
        low, high = feature_box(low, high)
        self.inputs = tuple(require_int("inputs", i, minimum=0) for i in inputs)
        if len(self.inputs) != low.size or len(set(self.inputs)) != low.size:
            raise ValueError(f"inputs must be {low.size} distinct indices (one per box "
                             f"dimension), got {inputs}")
        self.centre, self.half_width = (low + high) / 2, (high - low) / 2
        super().__init__(total_degree_vectors(low.size, self.order))

    def __call__(self, observations) -> np.ndarray:
        """Features of ``observations`` ``(..., n)`` (finite, ``n > max(inputs)``), as
        ``(..., d)``."""
        observations = require_array("observations", observations)
        if observations.ndim == 0 or observations.shape[-1] <= max(self.inputs):
            raise ValueError(f"observations must have shape (..., n) with n > "
                             f"{max(self.inputs)}, got {observations.shape}")
        y = observations[..., list(self.inputs)]
        z = 0.5 * (1.0 + np.tanh((y - self.centre) / self.half_width))
        return cosine_features(z, self._coefficients)


#: The observation components of the value features: ``log10`` of ``T1`` (CD4+ T cells),
#: ``V`` (viral load) and ``E`` (immune effectors).
VALUE_INPUTS = (0, 4, 5)


def value_features(order: int = 2) -> SquashedFourierBasis:
    """The value features of off-policy evaluation on the HIV domain (Xie et al. 2019,
    Sec. 7): :class:`SquashedFourierBasis` of ``order`` (10 features for order 2) on the
    ``log10`` of ``T1``, ``V`` and ``E`` (:data:`VALUE_INPUTS`), scaled by
    :data:`LOG10_BOX`. The infected cells are left out: the virions turn over within hours
    (``c = 13`` per day), so ``V`` follows ``T1* + T2*`` and their features would be nearly
    collinear (``E[phi phi^T]`` far worse conditioned); ``T2`` (macrophages) adds little.
    Order 2 rather than 3: GPOPE's noise has ``2 d`` dimensions, and order 3 (20 features)
    conditions ``C`` 40x worse (the experiments decorrelate them on public data,
    :class:`dprl.features.DecorrelatedFeatures`)."""
    low, high = (np.array(bound)[list(VALUE_INPUTS)] for bound in LOG10_BOX)
    return SquashedFourierBasis(order, low, high, VALUE_INPUTS)
