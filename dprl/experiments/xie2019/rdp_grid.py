"""GPOPE's noise over the privacy chapter's grids of ``(N, m)``, checked by dp-accounting's RDP
accountant (Xie et al. 2019, Lemma 1, Thm. 1 and Thm. 4): its per-order loops take seconds a
point, so the chapter reads these results.

- ``xie2019-theorem4-dp-accounting``: per trial ``(N, m)``, the paper's sigma (Lemma 1,
  sensitivity ``h``), the full WBK bound's sigma at ``h`` and ``2h``
  (:func:`dprl.xie2019.gpope_sigma`; NaN where no sigma reaches eps), dp-accounting's eps of
  the paper's sigma at ``h`` and ``2h`` and of the ``2h`` sigma, and the PLD eps of the
  paper's sigma on Lemma 1's own pair.
- ``xie2019-theorem1-premise``: per trial ``(N, m)``, dp-accounting's sigma for ``2h``
  (:func:`dprl.xie2019.dp_accounting_sigma` at ``orders``, from Theorem 1's closed form with
  ``c2 = 4`` as the first guess).

Deterministic (no draw).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.seeding import trial_index
from dprl.validation import require_delta, require_epsilon
from dprl.xie2019 import (dp_accounting_epsilon, dp_accounting_sigma, gpope_sigma, lemma1_sigma,
                          paper_pair_epsilon)
from dprl.xie2019.privacy import DP_ACCOUNTING_ORDERS, DP_ACCOUNTING_SPARSE_ORDERS


@dataclasses.dataclass(frozen=True, kw_only=True)
class GridConfig(TrialConfig):
    """The points ``(N, m)`` (one per trial), the target ``(eps, delta)`` and dp-accounting's
    RDP orders."""

    points: tuple[tuple[int, int], ...]
    eps: float = 0.1
    delta: float = 1e-5
    orders: tuple[float, ...] = DP_ACCOUNTING_ORDERS

    def __post_init__(self) -> None:
        super().__post_init__()
        require_epsilon(self.eps)
        require_delta(self.delta)
        if self.n_trials != len(self.points):
            raise ValueError(f"n_trials must equal the {len(self.points)} points")


def _full_sigma(config: GridConfig, n: int, m: int, sensitivity: float) -> float:
    """The full-bound sigma, or NaN where no sigma reaches eps."""
    try:
        return gpope_sigma(config.eps, config.delta, n, m, sensitivity=sensitivity)
    except ValueError:
        return math.nan


def theorem4_trials(config: GridConfig,
                    rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial (module docstring): ``paper``, ``full_h``, ``full_2h``, ``eps_paper_h``,
    ``eps_paper``, ``eps_ours`` and ``eps_pair_pld``."""
    out: dict[str, list[float]] = {}
    eps, delta = config.eps, config.delta
    for rng in rngs:
        n, m = config.points[trial_index(rng)]
        paper = lemma1_sigma(eps, delta, n, m)
        full_2h = _full_sigma(config, n, m, 2.0)

        def accounted(sigma: float, sensitivity: float = 2.0) -> float:
            return dp_accounting_epsilon(sigma, delta, n, m, sensitivity, config.orders)

        row = {"paper": paper, "full_h": _full_sigma(config, n, m, 1.0), "full_2h": full_2h,
               "eps_paper_h": accounted(paper, 1.0), "eps_paper": accounted(paper),
               "eps_ours": accounted(full_2h) if math.isfinite(full_2h) else math.nan,
               "eps_pair_pld": paper_pair_epsilon(paper, delta, n, m)}
        for name, value in row.items():
            out.setdefault(name, []).append(value)
    return {name: np.asarray(values, dtype=float) for name, values in out.items()}


def premise_trials(config: GridConfig,
                   rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial: ``sigma``, dp-accounting's noise for ``(eps, delta)`` at ``2h`` (to
    ``rtol = 1e-4``), first guessed as ``4 sqrt(N log(1/delta)) / (m eps)``."""
    sigmas = []
    for rng in rngs:
        n, m = config.points[trial_index(rng)]
        guess = 4.0 * math.sqrt(n * math.log(1 / config.delta)) / (m * config.eps)
        sigmas.append(dp_accounting_sigma(config.eps, config.delta, n, m, orders=config.orders,
                                          initial=guess, rtol=1e-4))
    return {"sigma": np.asarray(sigmas)}


_CHAPTER = "book/xie2019/privacy-analysis.ipynb"
#: The chapter's grid: N and m in {10^3, 10^4, 10^5}.
THEOREM4_POINTS = tuple((n, m) for n in (1_000, 10_000, 100_000) for m in (1_000, 10_000, 100_000))
#: Theorem 1's premise grid: m in {10^2, 10^3, 10^4}, N in {10^3, 10^5, 10^7}.
PREMISE_POINTS = tuple((n, m) for m in (100, 1_000, 10_000) for n in (1_000, 100_000, 10_000_000))
#: Both experiments' smoke scale: two points, a few orders.
_SMOKE = GridConfig(n_trials=2, root_seed=0, batch_size=2, points=((100, 100), (1_000, 100)),
                    eps=1.0, orders=(2.0, 4.0, 8.0, 16.0))

THEOREM4 = register(Experiment(
    id="xie2019-theorem4-dp-accounting",
    title="Xie et al. (2019), Lemma 1 and Thm. 4: the paper's and the full bound's sigma over "
          "N, m in {10^3, 10^4, 10^5}, and dp-accounting's RDP eps of each",
    chapter=_CHAPTER,
    configs={"smoke": _SMOKE,
             "paper": GridConfig(n_trials=9, root_seed=0, batch_size=3,
                                 points=THEOREM4_POINTS)},
    run_trials=theorem4_trials))

PREMISE = register(Experiment(
    id="xie2019-theorem1-premise",
    title="Xie et al. (2019), Thm. 1: dp-accounting's RDP sigma inside and outside the premise "
          "eps < c1 N / m^2",
    chapter=_CHAPTER,
    configs={"smoke": _SMOKE,
             "paper": GridConfig(n_trials=9, root_seed=0, batch_size=3, points=PREMISE_POINTS,
                                 orders=DP_ACCOUNTING_SPARSE_ORDERS)},
    run_trials=premise_trials))
