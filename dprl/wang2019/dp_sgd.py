"""DP-SGD (Abadi et al. 2016, Alg. 1) inside the batched DQN of
:mod:`dprl.wang2019.q_learning`, the third baseline of Wang & Hegde (2019), Fig. 2.

:class:`ClippedNoisyMLPQ` is an :class:`~dprl.wang2019.q_functions.MLPQ` whose ``backward``
clips every example's gradient to L2 norm ``clip_norm`` and adds Gaussian noise to the sum;
:func:`~dprl.wang2019.q_learning.train` calls it at each SGD step (Alg. 1 line 22) and
post-processes the result as for the plain DQN (Huber residuals, the elementwise clamp,
RMSprop). Nothing else of the DQN changes.

**Per-example gradients without materialising them.** ``train`` hands ``backward`` the
upstream gradient ``dq`` (R, B, A) of the mean loss; row i holds ``(1/B) dl_i/dQ(s_i, .)``,
and the gradient is linear in ``dq``. Example i's gradient of layer k is the outer product
``u_i x_i^T`` (upstream times layer input) plus the bias ``u_i``, of squared norm
``|u_i|^2 (|x_i|^2 + 1)`` (Goodfellow 2015), so one backward recursion gives all B norms;
scaling row i of ``dq`` by ``c_i = min(1, C / |g_i|)`` then makes the batched backward
return ``(1/B) sum_i c_i g_i``, the mean of the clipped gradients, bit for bit the plain
gradient when no example is clipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dprl.validation import frozen_copy, require_array, require_positive
from dprl.wang2019.q_functions import MLPQ, Params


def per_example_sq_norms(params: Params, cache: list, dq: np.ndarray) -> np.ndarray:
    """Squared L2 norms (R, N), over all parameters, of the N per-example gradients of
    ``sum(dq * Q)`` for the MLP's forward ``cache`` (Abadi et al. 2016, Alg. 1 "compute
    gradient" per example; the outer-product norm trick of Goodfellow 2015)."""
    upstream, total = dq.transpose(0, 2, 1), np.zeros(dq.shape[:2])
    for k in reversed(range(len(cache))):
        x, z = cache[k]
        if k + 1 < len(cache):
            upstream = upstream * (z > 0)
        total += np.sum(upstream ** 2, axis=1) * (np.sum(x ** 2, axis=1) + 1)
        if k:
            upstream = np.matmul(params[2 * k].transpose(0, 2, 1), upstream)
    return total


@dataclass(frozen=True, eq=False)
class ClippedNoisyMLPQ(MLPQ):
    """The authors' DQN network with the DP-SGD gradient of Abadi et al. (2016, Alg. 1) for
    R runs: each example's loss gradient clipped to L2 norm ``clip_norm`` (``None``: no
    clipping), ``N(0, noise_stds[r]^2 I)`` added to run r's *sum* of clipped gradients, the
    sum divided by the batch size B. Run r's noise comes from ``noise_rngs[r]`` (one
    ``standard_normal`` call per update, all parameters in order)."""

    clip_norm: float | None = field(kw_only=True)
    noise_stds: np.ndarray = field(kw_only=True)
    noise_rngs: tuple[np.random.Generator, ...] = field(kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.clip_norm is not None:
            object.__setattr__(self, "clip_norm", require_positive("clip_norm", self.clip_norm))
        stds = require_array("noise_stds", self.noise_stds, ndim=1)
        if np.any(stds < 0):
            raise ValueError(f"noise_stds must be >= 0, got min {stds.min()}")
        object.__setattr__(self, "noise_stds", frozen_copy(stds))
        rngs = tuple(self.noise_rngs)
        if len(rngs) != stds.size or not all(isinstance(r, np.random.Generator) for r in rngs):
            raise ValueError(f"noise_rngs must be {stds.size} numpy Generators (one per run)")
        object.__setattr__(self, "noise_rngs", rngs)

    def backward(self, params: Params, cache: list, dq: np.ndarray) -> Params:
        """The DP-SGD gradient (Abadi et al. 2016, Alg. 1: clip, sum, add noise, divide by
        B) in place of the mean gradient of Wang & Hegde (2019, Alg. 1 line 22)."""
        batch = dq.shape[1]
        if self.clip_norm is not None:
            dq = dq * self.clip_factors(params, cache, dq)[..., None]
        grads = MLPQ.backward(params, cache, dq)
        if not np.any(self.noise_stds > 0):
            return grads
        return tuple(g + noise / batch for g, noise in zip(grads, self._noise(grads)))

    def clip_factors(self, params: Params, cache: list, dq: np.ndarray) -> np.ndarray:
        """``min(1, C / |g_i|)`` (R, B) for the per-example loss gradients ``g_i``, whose
        contributions to the mean are the rows of ``dq`` (Abadi et al. 2016, Alg. 1 "clip
        gradient"); exactly 1 where ``|g_i| <= C``."""
        norms = dq.shape[1] * np.sqrt(per_example_sq_norms(params, cache, dq))
        return np.divide(self.clip_norm, norms, out=np.ones_like(norms),
                         where=norms > self.clip_norm)

    def _noise(self, grads: Params) -> list[np.ndarray]:
        """One Gaussian draw per run and parameter entry, scaled by the run's std."""
        sizes = [g[0].size for g in grads]
        draws = np.stack([rng.standard_normal(sum(sizes)) for rng in self.noise_rngs])
        draws *= self.noise_stds[:, None]
        parts = np.split(draws, np.cumsum(sizes)[:-1], axis=1)
        return [part.reshape(g.shape) for part, g in zip(parts, grads)]

