"""GPOPE's noise by a sound PLD beside the paper's and RDP's (Xie et al. 2019, Lemma 1 and
Thm. 4; the PLD is beyond the paper: :func:`dprl.xie2019.pld_sigma`).

Trial ``i`` takes setting ``settings[i] = (eps, N, m)`` at ``delta``: the paper's sigma
(Lemma 1, sensitivity ``h``), RDP's (WBK Thm. 27, replace-one, ``2h``) and the PLD's, the eps
the PLD certifies for the RDP and the paper's sigma, and along ``curve_factors`` times the
RDP sigma the eps of the PLD, of RDP and of dp-accounting's Poisson PLD at the same rate
``1/m`` (its two orders composed separately: what composing GPOPE's orders separately would
claim, which is not sound here). Deterministic (no draw); NaN where the PLD is out of
reach (:class:`~dprl.accounting.pld.PLDOutOfReachError`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from dprl.accounting.pld import PLDOutOfReachError, poisson_gaussian_epsilon
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.seeding import trial_index
from dprl.xie2019 import lemma1_sigma, pld_epsilon, pld_sigma, tightest_epsilon, tightest_sigma

#: A setting: target eps, iterations N and trajectories m.
Setting = tuple[float, int, int]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CalibrationConfig(TrialConfig):
    """The settings (one per trial), ``delta`` and the curve's sigma factors."""

    settings: tuple[Setting, ...]
    delta: float = 1e-5
    curve_factors: tuple[float, ...] = (0.6, 0.7, 0.8, 0.9, 1.0, 1.2)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_trials != len(self.settings):
            raise ValueError(f"n_trials must equal the {len(self.settings)} settings")


def _or_nan(compute) -> float:
    try:
        return float(compute())
    except PLDOutOfReachError:
        return float("nan")


def calibration_trials(config: CalibrationConfig,
                       rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial (module docstring): ``paper``, ``rdp`` and ``pld`` sigma,
    ``pld_eps_of_rdp``, ``pld_eps_of_paper``, ``rdp_eps_of_paper``, and the curves
    ``curve_sigma``, ``curve_pld_eps``, ``curve_rdp_eps``, ``curve_poisson_eps``."""
    out: dict[str, list] = {}
    for rng in rngs:
        eps, n, m = config.settings[trial_index(rng)]
        d = config.delta
        rdp = tightest_sigma(eps, d, n, m)
        paper = lemma1_sigma(eps, d, n, m)
        curve = rdp * np.asarray(config.curve_factors)
        values = {"paper": paper, "rdp": rdp, "pld": _or_nan(lambda: pld_sigma(eps, d, n, m)),
                  "pld_eps_of_rdp": _or_nan(lambda: pld_epsilon(rdp, d, n, m)),
                  "pld_eps_of_paper": _or_nan(lambda: pld_epsilon(paper, d, n, m)),
                  "rdp_eps_of_paper": tightest_epsilon(paper, d, n, m),
                  "curve_sigma": curve,
                  "curve_pld_eps": [_or_nan(lambda s=s: pld_epsilon(s, d, n, m)) for s in curve],
                  "curve_rdp_eps": [tightest_epsilon(s, d, n, m) for s in curve],
                  "curve_poisson_eps": [_or_nan(lambda s=s: poisson_gaussian_epsilon(
                      s / 2, 1 / m, n, d)) for s in curve]}
        for name, value in values.items():
            out.setdefault(name, []).append(value)
    return {name: np.asarray(value, dtype=float) for name, value in out.items()}


#: The settings of the privacy chapter's table: the chain and Mountain Car (eps = 0.1,
#: N = m and N = 10 m), HIV (eps = 10, N = 10 m) and the audit's (eps = 1, N = m = 100).
TABLE_SETTINGS: tuple[Setting, ...] = (
    (0.1, 100, 100), (0.1, 300, 300), (0.1, 1000, 1000), (0.1, 10_000, 10_000),
    (0.1, 100_000, 100_000), (0.1, 10_000, 1000), (0.1, 100_000, 10_000), (10.0, 1000, 100),
    (10.0, 4000, 400), (1.0, 100, 100))
#: Every other setting the Xie chapters run: the chain (eps = 0.1, N = m), HIV (eps = 1, 3,
#: 10; N = 10 m), Mountain Car (eps = 0.1, 1, 10; N = m) and its N panel (eps = 10,
#: m = 1000, N = 1, 3, 10, 30 m); a test checks them against the experiments' configs.
CHAPTER_SETTINGS: tuple[Setting, ...] = tuple(dict.fromkeys(
    [(0.1, m, m) for m in (100, 316, 1000, 3162, 10_000, 31_623, 100_000)]
    + [(eps, 10 * m, m) for eps in (1.0, 3.0, 10.0)
       for m in (50, 100, 200, 400, 1000, 3000, 10_000)]
    + [(eps, m, m) for eps in (0.1, 1.0, 10.0) for m in (1000, 3162, 10_000, 31_623, 100_000)]
    + [(10.0, round(factor * 1000), 1000) for factor in (1, 3, 10, 30)]))
SETTINGS: tuple[Setting, ...] = TABLE_SETTINGS + tuple(
    s for s in CHAPTER_SETTINGS if s not in TABLE_SETTINGS)


def calibration_at(result, eps: float, n_iterations: int, m: int) -> dict[str, object]:
    """The arrays of a loaded ``xie2019-theorem4-pld`` result at one setting, by name."""
    settings = [tuple(s) for s in result.config["settings"]]
    key = (float(eps), int(n_iterations), int(m))
    if key not in settings:
        raise ValueError(f"setting (eps, N, m) = {key} is not in xie2019-theorem4-pld")
    i = settings.index(key)
    return {name: value[i] for name, value in result.arrays.items()}


PLD_CALIBRATION = register(Experiment(
    id="xie2019-theorem4-pld",
    title="Xie et al. (2019), Lemma 1 and Thm. 4: GPOPE's noise by a sound PLD beside the "
          "paper's and RDP's",
    chapter="book/xie2019/privacy-analysis.ipynb",
    configs={"smoke": CalibrationConfig(n_trials=2, root_seed=2607, batch_size=1,
                                        settings=((0.1, 100, 100), (0.2, 50, 50)),
                                        curve_factors=(1.0,)),
             "paper": CalibrationConfig(n_trials=len(SETTINGS), root_seed=2607, batch_size=1,
                                        settings=SETTINGS)},
    run_trials=calibration_trials))
