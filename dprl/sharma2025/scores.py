"""Scoring training runs as Sharma et al. (2025, Sec. 6, Fig. 3) do: the return at the end of
training, normalised between the random policy (0) and the optimal one (1), as a fraction of
the non-private baseline's.

Fig. 3's double normalisation cancels the optimal return: with ``R`` a run's return,
``R_0`` the random policy's and ``R_np`` the non-private baseline's,
``((R - R_0) / (R* - R_0)) / ((R_np - R_0) / (R* - R_0)) = (R - R_0) / (R_np - R_0)``
whatever ``R*`` is, so the paper's missing definition of "optimal" for LunarLander and HIV
does not matter here. ``R`` is the mean over the evaluation episodes at the last checkpoint
(Sec. 6: "averaged over 10 evaluation runs at the end of training"), ``R_0`` the random
policy's mean over every run of the environment (each run evaluates it on its own episodes),
``R_np`` the mean of the non-private runs of the same algorithm and ``m``. Where
``R_np = R_0`` the score is infinite or NaN: the non-private learner gives no scale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np
from scipy.stats import t as student_t

from dprl.validation import require_array, require_int, require_probability


@dataclass(frozen=True)
class Scored:
    """A run (its config fields as ``spec``) with its final return ``final``, checkpoint
    means ``curve``, normalised ``score`` and the arrays of its trial (``values``)."""

    spec: Mapping[str, object]
    final: float
    curve: np.ndarray
    score: float
    values: Mapping[str, object]

    def __getitem__(self, name: str) -> object:
        """A field of the trial's arrays, else of the run's spec: ``noise_multiplier`` is in
        both (the run's fixed one or None, and the one it used) and reads the one used."""
        return self.values[name] if name in self.values else self.spec[name]


def _mean_nonprivate(runs: Iterable[tuple[Mapping[str, object], float]]
                     ) -> dict[tuple[str, int], float]:
    """``R_np`` by ``(algorithm, m)`` from ``(spec, final return)`` pairs."""
    finals: dict[tuple[str, int], list[float]] = {}
    for spec, final in runs:
        if spec["method"] == "nonprivate":
            finals.setdefault((spec["algorithm"], spec["m"]), []).append(final)
    return {key: float(np.mean(values)) for key, values in finals.items()}


def nonprivate_returns(scored: Iterable[Scored]) -> dict[tuple[str, int], float]:
    """``R_np`` by ``(algorithm, m)``: the mean final return of the non-private runs."""
    return _mean_nonprivate((s.spec, s.final) for s in scored)


def score_runs(runs: Sequence[object], arrays: Mapping[str, np.ndarray],
               nonprivate: Mapping[tuple[str, int], float] | None = None) -> list[Scored]:
    """Score every run (dataclasses, or dicts of their fields, in trial order) of a training
    result whose ``arrays`` hold ``returns`` ``(trials, checkpoints, episodes)`` and
    ``random_returns`` ``(trials, episodes)`` (module docstring). ``R_np`` comes from the
    result's own non-private runs or, for a result without them, from ``nonprivate``
    (:func:`nonprivate_returns` of another result of the same data)."""
    specs = [run if isinstance(run, Mapping) else {f.name: getattr(run, f.name)
                                                   for f in fields(run)} for run in runs]
    returns = np.asarray(arrays["returns"], dtype=float)
    if returns.ndim != 3 or len(returns) != len(specs) or not len(specs):
        raise ValueError(f"returns must be (trials, checkpoints, episodes) with one trial per "
                         f"run ({len(specs)}), got {returns.shape}")
    curves = returns.mean(axis=2)
    random = float(np.mean(arrays["random_returns"]))
    if nonprivate is None:
        nonprivate = _mean_nonprivate(zip(specs, curves[:, -1]))
    out = []
    for i, (spec, curve) in enumerate(zip(specs, curves)):
        key = (spec["algorithm"], spec["m"])
        if key not in nonprivate:
            raise ValueError(f"nonprivate must give R_np of {key}: the result has no "
                             f"non-private run of it")
        reference = nonprivate[key]
        values = {name: array[i] for name, array in arrays.items()}
        with np.errstate(divide="ignore", invalid="ignore"):  # inf or NaN: no margin
            score = float(np.float64(curve[-1] - random) / (reference - random))
        out.append(Scored(spec, float(curve[-1]), curve, score, values))
    return out


def window_return(curve: np.ndarray, evaluated_at: np.ndarray, window: int = 10_000) -> float:
    """App. B.3's return of a run: the mean of its checkpoint means ``curve`` over the
    checkpoints ``evaluated_at`` within its last ``window`` steps ("10 evaluation runs spaced
    over the last 10000 steps of training"); the run must be at least ``window`` steps long."""
    curve, at = np.asarray(curve, dtype=float), np.asarray(evaluated_at)
    window = require_int("window", window, minimum=1)
    if curve.ndim != 1 or curve.shape != at.shape or not curve.size:
        raise ValueError(f"curve and evaluated_at must have one entry per checkpoint, got "
                         f"{curve.shape} and {at.shape}")
    if not np.isfinite(curve).all():
        raise ValueError("curve must be finite")
    if not np.all(np.diff(at) > 0):
        raise ValueError("evaluated_at must be increasing (one checkpoint per step count)")
    if at[-1] < window:
        raise ValueError(f"window must be at most the run's {at[-1]} steps, got {window}")
    return float(curve[at > at[-1] - window].mean())


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """``(mean, half-width)`` of the Student-t confidence interval of the mean of i.i.d.
    ``values`` at ``level`` (Fig. 3's "95% confidence intervals" over 3 runs: the half-width
    is ``t_{0.975, 2} = 4.303`` standard errors)."""
    x = require_array("values", values, ndim=1)  # real, finite numbers
    if x.size < 2:
        raise ValueError(f"values must be 1-D with at least 2 entries, got shape {x.shape}")
    level = require_probability("level", level, open_low=True, open_high=True)
    with np.errstate(over="ignore", invalid="ignore"):
        mean, se = x.mean(), x.std(ddof=1) / np.sqrt(x.size)
    if not np.isfinite([mean, se]).all():
        raise ValueError("values are too large: their mean or variance overflows a float")
    return float(mean), float(student_t.ppf((1 + level) / 2, x.size - 1) * se)


def select(scored: Iterable[Scored], **match: object) -> list[Scored]:
    """The scored runs whose fields equal ``match``, by seed."""
    chosen = [s for s in scored if all(s[name] == value for name, value in match.items())]
    return sorted(chosen, key=lambda s: s["seed"])


def scores_of(scored: Iterable[Scored], **match: object) -> np.ndarray:
    """The normalised scores of the matching runs, by seed."""
    return np.array([s.score for s in select(scored, **match)])


@dataclass(frozen=True)
class PairedGap:
    """``ours - baseline`` per seed (paired by seed): mean, standard error, seeds."""

    differences: np.ndarray

    @property
    def mean(self) -> float:
        return float(self.differences.mean())

    @property
    def se(self) -> float:
        n = len(self.differences)
        return float(self.differences.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")

    def better(self, margin_se: float = 2.0) -> bool:
        """Ours better: the mean gap positive and at least ``margin_se`` standard errors."""
        return self.mean > 0 and self.mean >= margin_se * self.se

    def worse(self, margin_se: float = 2.0) -> bool:
        """Ours worse: the mean gap negative and at least ``margin_se`` standard errors."""
        return self.mean < 0 and -self.mean >= margin_se * self.se


def paired_gap(ours: Sequence[Scored], baseline: Sequence[Scored],
               raw: bool = False) -> PairedGap:
    """The per-seed gaps of two equally seeded lists (:func:`select` orders by seed), in
    normalised scores or, with ``raw``, in returns (free of the normalisation, whose
    non-private reference may itself be noise)."""
    if [s["seed"] for s in ours] != [s["seed"] for s in baseline] or not ours:
        raise ValueError("ours and baseline must hold the same non-empty seeds")
    value = (lambda s: s.final) if raw else (lambda s: s.score)
    return PairedGap(np.array([value(a) - value(b) for a, b in zip(ours, baseline)]))


def above_random(runs: Sequence[Scored]) -> PairedGap:
    """Each run's final return minus the random policy's on the same episodes (the trivial
    reference), as a :class:`PairedGap` over the runs."""
    if not runs:
        raise ValueError("runs must not be empty")
    return PairedGap(np.array([s.final - float(np.mean(s.values["random_returns"]))
                               for s in runs]))


#: Table 1 of Sharma et al. (2025): the best p per (env, algorithm) at eps = 5, 7.5, 10.
PAPER_TABLE1 = {("LunarLander", "CQL"): (1.0, 0.8, 0.8), ("LunarLander", "BCQ"): (1.0, 0.5, 0.5),
                ("Acrobot", "CQL"): (0.0, 0.0, 0.0), ("Acrobot", "BCQ"): (0.0, 0.0, 0.0),
                ("CartPole", "CQL"): (1.0, 0.9, 0.8), ("CartPole", "BCQ"): (1.0, 0.5, 0.5),
                ("HIV", "CQL"): (1.0, 0.0, 0.0), ("HIV", "BCQ"): (1.0, 0.9, 0.9)}

#: Table 2 (top) of Sharma et al. (2025), eps = 10: normalised return per p (None: "inf").
PAPER_TABLE2_P = {("LunarLander", "CQL"): {0.0: None, 0.8: 0.75, 1.0: 0.67},
                  ("LunarLander", "BCQ"): {0.0: None, 0.5: 0.57, 1.0: 0.54},
                  ("CartPole", "CQL"): {0.0: 0.67, 0.8: 1.03, 1.0: 0.92},
                  ("CartPole", "BCQ"): {0.0: 0.31, 0.5: 0.99, 1.0: 0.67}}

#: Table 2 (bottom): BCQ's normalised return with eps1 = 3 eps / 4 and with eps1 = 0.
PAPER_TABLE2_SPLIT = {("Acrobot", 2.5): (0.74, 0.95), ("CartPole", 2.5): (0.28, 0.58),
                      ("CartPole", 5.0): (0.56, 0.60)}


@dataclass(frozen=True)
class LearningCurve:
    """One algorithm's non-private curves on one environment: ``learns`` (its final return,
    the mean of the last ``window`` checkpoints, beats the random policy by ``margin_se``
    standard errors over seeds), the final margin over random and the first evaluated step
    at which the windowed mean reaches ``fraction`` of that margin (None: never)."""

    algorithm: str
    learns: bool
    margin: PairedGap
    reached_at: int | None


def learning_curves(runs: Sequence[Scored], evaluated_at: Sequence[int], fraction: float = 0.9,
                    window: int = 3, margin_se: float = 2.0) -> list[LearningCurve]:
    """Sharma et al. (2025) leave the number of steps open ("until the budget is spent"); the
    book caps it where the non-private learners stop improving. For each algorithm among
    ``runs`` (non-private, one per seed, evaluated after ``evaluated_at`` steps): does it
    learn, and where does the mean over seeds of the ``window``-checkpoint moving average
    first reach ``R_0 + fraction (F - R_0)``, ``F`` the final level and ``R_0`` random's."""
    evaluated_at = np.asarray(evaluated_at)
    if not runs or any(s.curve.shape != evaluated_at.shape for s in runs):
        raise ValueError("runs must be non-empty with one return per evaluated step")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    if not 1 <= window <= evaluated_at.size:
        raise ValueError(f"window must lie in [1, {evaluated_at.size}], got {window}")
    out = []
    for algorithm in sorted({str(s["algorithm"]) for s in runs}):
        mine = select(runs, algorithm=algorithm)
        curves = np.array([s.curve for s in mine])
        randoms = np.array([float(np.mean(s.values["random_returns"])) for s in mine])
        smooth = np.array([np.convolve(c, np.ones(window) / window, "valid") for c in curves])
        margin = PairedGap(smooth[:, -1] - randoms)
        target = margin.mean * fraction
        level = (smooth - randoms[:, None]).mean(axis=0)  # at evaluated_at[window - 1:]
        hits = np.flatnonzero(level >= target)
        out.append(LearningCurve(algorithm, margin.better(margin_se), margin,
                                 int(evaluated_at[window - 1 + hits[0]]) if hits.size else None))
    return out


def step_cap(curves: Sequence[LearningCurve], candidates: Sequence[int]) -> int:
    """The smallest of ``candidates`` by which every learning algorithm has reached its level
    (:func:`learning_curves`); the smallest candidate where none learns (more steps then
    decide nothing: Fig. 3's normalisation needs a learner above the random policy)."""
    candidates = sorted(require_int("candidates", c, minimum=1) for c in candidates)
    if not candidates:
        raise ValueError("candidates must name at least one step count")
    needed = [c.reached_at for c in curves if c.learns]
    if not needed:
        return candidates[0]
    if any(n is None for n in needed):
        return candidates[-1]
    return next((c for c in candidates if c >= max(needed)), candidates[-1])
