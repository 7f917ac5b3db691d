"""What an expert population agrees on: the quantity the release of Sharma et al. (2025)
lives on.

PrefixQuery (Alg. 1) compares ``count_{tau_{1:k}}(Pi) = sum_i prod_{j <= k} pi_i(a_j | s_j)``
with a threshold. For App. B.1's experts, ``pi_i(a | s)`` is ``h = 1 - (|A| - 1) p_min``
where ``a`` is expert ``i``'s greedy action and ``l = p_min`` elsewhere, so an expert whose
greedy actions disagree with the prefix at ``d_i`` of its ``k`` steps contributes
``h^k (l / h)^{d_i}``, and

    count / (m h^k) = (1/m) sum_i (l / h)^{d_i}
                    in [share_k, share_k + (1 - share_k) l / h],

with ``share_k`` the share of experts that agree at every step (``d_i = 0``). Up to terms of
order ``p_min``, a prefix is released exactly when enough experts agree with all of it; this
module measures that share on recorded trajectories.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dprl.sharma2025.demonstrations import Demonstrations
from dprl.sharma2025.experts import pmin_levels
from dprl.validation import require_int

#: The prefix lengths the book reports (issue 40: 10, 20 and 40 steps).
PREFIX_LENGTHS = (10, 20, 40)


def prefix_agreement(data: Demonstrations, trajectories: Sequence[int],
                     lengths: Sequence[int] = PREFIX_LENGTHS) -> np.ndarray:
    """``share_k`` (module docstring) of ``data``'s members on each of ``trajectories``
    (indices into the data set) at each prefix length ``k`` of ``lengths`` (cut to the
    trajectory's length where it is shorter): ``(len(trajectories), len(lengths))``."""
    index = np.asarray(trajectories, dtype=np.int64)
    if index.ndim != 1 or not index.size:
        raise ValueError(f"trajectories must be a non-empty 1-D sequence, got shape "
                         f"{index.shape}")
    lengths = [require_int("lengths", k, minimum=1) for k in lengths]
    if not lengths:
        raise ValueError("lengths must not be empty")
    data.prefetch(index)
    log_high = np.log(pmin_levels(data.experts.n_actions, data.p_min)[0])
    out = np.empty((index.size, len(lengths)))
    for row, t in enumerate(index.tolist()):
        log_probs = data.log_probs(t)
        span = min(max(lengths), log_probs.shape[1])
        agree = np.logical_and.accumulate(log_probs[:, 0:span] == log_high, axis=1)
        out[row] = [agree[:, min(k, span) - 1].mean() for k in lengths]
    return out
