"""Scoring DP-LSL's ridge schedules ``lambda = c m^q`` (Balle et al. 2016, Sec. 6: "a
regularization schedule proportional to sqrt(m) ... achieves the best overall accuracy").

A schedule's *score* over a range of batch sizes is the mean over those sizes of ``log10``
of its mean RMSE over runs (a geometric mean over the grid; lower is better). Within a
tolerance (in decades) two scores are indistinguishable. A *reference* score (that of the
trivial estimate ``theta = 0``) caps every score: a schedule that does worse than releasing
``theta = 0`` is of no use, so it cannot win or lose against another such schedule.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dprl.validation import require_array, require_nonnegative, require_positive


def schedule_scores(rmse, sizes, upto: float) -> np.ndarray:
    """Scores over the batch sizes ``m <= upto``: ``rmse`` ``(runs, ..., len(sizes))`` (NaN
    where a schedule is refused) gives ``(...)``, NaN for a schedule refused at any size."""
    rmse = np.asarray(rmse, dtype=float)
    sizes = require_array("sizes", sizes, ndim=1)
    if rmse.ndim < 2 or rmse.shape[-1] != sizes.size or rmse.shape[0] == 0:
        raise ValueError(f"rmse must have shape (runs, ..., {sizes.size}) with runs >= 1 (NaN "
                         f"where refused), got {rmse.shape}")
    keep = sizes <= require_positive("upto", upto)
    if not keep.any():
        raise ValueError(f"no batch size is <= upto = {upto}")
    return np.log10(rmse[..., keep].mean(axis=0)).mean(axis=-1)


@dataclasses.dataclass(frozen=True)
class ScheduleJudgement:
    """How the schedules with power ``target`` compare with the others on one range.

    ``outcome``: "best" (``target``'s best score beats every other power's by more than the
    tolerance), "beaten" (some other power beats it by more than the tolerance) or
    "inconclusive" (neither). ``gap``: ``target``'s best score minus the best overall
    (>= 0); ``margin``: the best other power's score minus ``target``'s (> 0 when ``target``
    wins). With a reference score, every power's score is first capped at it (both
    figures are then of the capped scores)."""

    outcome: str
    best_power: float
    best_scale: float
    best_scale_at_edge: bool
    gap: float
    margin: float


def judge_schedules(scores, scales, powers, target: float = 0.5, tolerance: float = 0.02,
                    reference: float | None = None) -> ScheduleJudgement:
    """Judge the power ``target`` on scores ``(len(scales), len(powers))`` (NaN = refused);
    ``best_scale_at_edge`` says whether the best schedule's ``c`` is the grid's smallest or
    largest (the grid may be too narrow). ``reference``: the score of the trivial estimate
    ``theta = 0``; each power's best score is capped at it, so a power wins only by beating
    ``theta = 0`` as well (by more than the tolerance), and two powers that both do worse
    than ``theta = 0`` compare as equal."""
    scales = require_array("scales", scales, ndim=1)
    powers = require_array("powers", powers, ndim=1)
    scores = np.asarray(scores, dtype=float)
    if scores.shape != (scales.size, powers.size):
        raise ValueError(f"scores must have shape {(scales.size, powers.size)}, got "
                         f"{scores.shape}")
    tolerance = require_nonnegative("tolerance", tolerance)
    hits = np.flatnonzero(np.isclose(powers, target))
    if hits.size != 1:
        raise ValueError(f"target must be one of the powers {powers.tolist()}, got {target}")
    if np.isnan(scores).all():
        raise ValueError("scores are all NaN (every schedule refused)")
    per_power = np.array([np.nanmin(col) if np.isfinite(col).any() else np.inf
                          for col in scores.T])
    if reference is not None:
        if not np.isfinite(reference):
            raise ValueError(f"reference must be a finite score, got {reference!r}")
        per_power = np.minimum(per_power, float(reference))
    mine, others = per_power[hits[0]], np.delete(per_power, hits[0])
    c_idx, q_idx = np.unravel_index(np.nanargmin(scores), scores.shape)
    gap, margin = float(mine - per_power.min()), float(others.min() - mine)
    outcome = ("best" if margin > tolerance else "beaten" if gap > tolerance
               else "inconclusive")
    return ScheduleJudgement(outcome, float(powers[q_idx]), float(scales[c_idx]),
                             bool(c_idx in (0, scales.size - 1)), gap, margin)
