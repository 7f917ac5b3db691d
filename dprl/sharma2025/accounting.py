"""Privacy accounting of Sharma et al. (2025)'s DP-SGD phase (Alg. 3 and 4, Sec. 6, App. B).

Each DP-SGD step is a Poisson-subsampled Gaussian mechanism over experts (noise multiplier
``s``, sampling rate ``q``), composed over the steps. Sec. 6 accounts with privacy loss
distributions (dp-accounting's PLD accountant; Koskela et al. 2020, Doroshenko et al. 2022),
here ``accountant="pld"``; the book's Renyi-DP accountant (Mironov, Talwar & Zhang 2019,
:func:`dprl.accounting.poisson_subsampled_gaussian_epsilon`) is the cross-check,
``accountant="rdp"``. Training runs "until the privacy budget is used up" (Sec. 6, App. B.3):
:func:`steps_for_budget` is that number of steps.

**Two readings of Alg. 3's accounting.** The paper (Sec. 4, App. B.2) composes all ``N``
steps with ``q = p b / m``, as if the Bernoulli(p) coin of each step were part of the
subsampling (reading ``"paper"``). That holds only if the coins stay hidden; but the
noiseless stable steps move the parameters in a way the released iterates show, so the coins
are visible, and then only the DP steps compose, each with ``q = b / m`` (reading
``"visible_coins"``). Conditioning on the (data-independent) coin sequence with ``k`` DP
steps gives the ``k``-fold composition at ``q = b / m``; at a planned ``N`` the number of DP
steps is Binomial(N, p), and :func:`dp_steps_upper_bound` turns it into an
``(eps(k_max), delta + tail)`` statement. Since eps depends on ``q`` and the number of steps
roughly through ``q^2 N``, the paper's reading allows about ``1 / p`` times the steps
(:func:`reading_budgets`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.stats import binom

from dprl.accounting import (DEFAULT_ORDERS, poisson_subsampled_gaussian_epsilon,
                             poisson_subsampled_gaussian_rdp, rdp_to_dp, self_compose_rdp,
                             smallest_sufficient_scale)
from dprl.accounting.pld import PLDOutOfReachError, poisson_gaussian_epsilon
from dprl.sharma2025.release import appendix_b3_split
from dprl.validation import (require_choice, require_delta, require_epsilon, require_int,
                             require_nonnegative, require_positive, require_probability)

#: The accountants: dp-accounting's PLD (Sec. 6's choice) and the book's RDP accountant.
ACCOUNTANTS = ("pld", "rdp")

#: The readings of Alg. 3's accounting (module docstring).
READINGS = ("paper", "visible_coins")

#: Growth factor of the bracket search of :func:`steps_for_budget`.
_GROWTH = 1.25


class Table3Row(NamedTuple):
    """A DP-SGD configuration of Table 3 (App. B.3) with ``p > 0``: learning rate ``eta``,
    batch size ``b``, probability ``p`` of a DP step, noise multiplier ``s``."""

    env: str
    eps: float
    algorithm: str
    learning_rate: float
    batch_size: int
    p: float
    noise_multiplier: float


#: Table 3's 16 configurations that run DP-SGD (``p > 0``); the others have ``p = 0``.
TABLE3: tuple[Table3Row, ...] = tuple(Table3Row(*row) for row in [
    ("LunarLander", 5.0, "CQL", 0.0005, 256, 1.0, 80.0),
    ("LunarLander", 5.0, "BCQ", 0.005, 64, 1.0, 10.0),
    ("LunarLander", 7.5, "CQL", 0.005, 64, 0.8, 20.0),
    ("LunarLander", 7.5, "BCQ", 0.001, 128, 0.5, 50.0),
    ("LunarLander", 10.0, "CQL", 0.0005, 64, 0.8, 40.0),
    ("LunarLander", 10.0, "BCQ", 0.005, 128, 0.5, 20.0),
    ("CartPole", 5.0, "CQL", 0.005, 256, 1.0, 20.0),
    ("CartPole", 5.0, "BCQ", 0.005, 128, 1.0, 10.0),
    ("CartPole", 7.5, "CQL", 0.001, 128, 0.9, 50.0),
    ("CartPole", 7.5, "BCQ", 0.01, 128, 0.5, 20.0),
    ("CartPole", 10.0, "CQL", 0.0001, 128, 0.8, 80.0),
    ("CartPole", 10.0, "BCQ", 0.001, 128, 0.5, 40.0),
    ("HIV", 5.0, "CQL", 0.01, 256, 1.0, 10.0),
    ("HIV", 5.0, "BCQ", 0.005, 128, 1.0, 20.0),
    ("HIV", 7.5, "BCQ", 0.005, 64, 0.9, 20.0),
    ("HIV", 10.0, "BCQ", 0.005, 64, 0.9, 20.0),
])


#: Table 3's 8 configurations with ``p = 0`` (no DP-SGD, no noise multiplier): Acrobot, and
#: HIV's CQL at eps 7.5 and 10.
TABLE3_NO_DP: tuple[Table3Row, ...] = tuple(Table3Row(*row, 0.0, math.nan) for row in [
    ("Acrobot", 5.0, "CQL", 0.001, 128), ("Acrobot", 5.0, "BCQ", 0.01, 256),
    ("Acrobot", 7.5, "CQL", 0.001, 128), ("Acrobot", 7.5, "BCQ", 0.01, 256),
    ("Acrobot", 10.0, "CQL", 0.0005, 128), ("Acrobot", 10.0, "BCQ", 0.01, 256),
    ("HIV", 7.5, "CQL", 0.0001, 64), ("HIV", 10.0, "CQL", 0.0001, 64),
])


def table3_row(env: str, eps: float, algorithm: str) -> Table3Row:
    """Table 3's row of ``(env, eps, algorithm)`` (its ``p = 0`` rows included)."""
    for row in TABLE3 + TABLE3_NO_DP:
        if (row.env, row.eps, row.algorithm) == (env, eps, algorithm):
            return row
    raise ValueError(f"Table 3 has no row {(env, eps, algorithm)}")


def _require_accountant(accountant: str) -> str:
    return require_choice("accountant", accountant, ACCOUNTANTS)


def dp_sgd_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float,
                   accountant: str = "pld") -> float:
    """eps at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps (DP-SGD, Abadi et al.
    2016; Alg. 4 with ``sampling_rate = b / m``): dp-accounting's PLD accountant
    (:func:`dprl.accounting.pld.poisson_gaussian_epsilon`, Sec. 6) or the book's
    RDP accountant (``"rdp"``). Add-or-remove-one expert neighbours. PLD refuses settings
    beyond its size limits (tiny noise multipliers, very many steps) with a ``ValueError``
    (:class:`~dprl.accounting.pld.PLDOutOfReachError`) rather than run for minutes: see
    :func:`~dprl.accounting.pld.poisson_gaussian_epsilon`; use ``accountant="rdp"`` there."""
    if _require_accountant(accountant) == "pld":
        return poisson_gaussian_epsilon(noise_multiplier, sampling_rate, steps, delta)
    return poisson_subsampled_gaussian_epsilon(
        require_positive("noise_multiplier", noise_multiplier),
        require_probability("sampling_rate", sampling_rate, open_low=True),
        require_int("steps", steps), require_delta(delta))


def noise_for_budget(eps: float, delta: float, sampling_rate: float, steps: int,
                     accountant: str = "pld", rtol: float = 1e-4) -> float:
    """The smallest noise multiplier ``s`` (to relative precision ``rtol``) with which
    ``steps`` DP-SGD steps at ``sampling_rate`` are ``(eps, delta)``-DP by
    :func:`dp_sgd_epsilon` (:func:`dprl.accounting.smallest_sufficient_scale`; PLD's search
    starts from the RDP answer, which PLD rarely exceeds, to save slow evaluations). The
    PLD search counts noise multipliers too small for the PLD accountant
    (:func:`~dprl.accounting.pld.poisson_gaussian_epsilon`) as exceeding ``eps`` and raises
    :class:`~dprl.accounting.pld.PLDOutOfReachError` (a ``ValueError`` naming ``eps``) where
    the answer lies among them (e.g. ``eps = 50`` in 10 steps at rate 0.01). About 15 PLD
    evaluations at ``rtol = 1e-4``, each bounded as there (~7 s at most)."""
    eps, delta = require_epsilon(eps), require_delta(delta)
    rate, steps = require_probability("sampling_rate", sampling_rate, open_low=True), \
        require_int("steps", steps)
    rtol = require_positive("rtol", rtol)
    _require_accountant(accountant)
    try:
        scale = smallest_sufficient_scale(
            lambda s: dp_sgd_epsilon(s, rate, steps, delta, "rdp"), eps, initial=1.0, rtol=rtol)
    except ValueError as error:  # e.g. eps below what the order grid certifies
        raise ValueError(f"eps = {eps!r}: {error}") from error
    if accountant == "rdp":
        return scale
    probe = _PLDProbe(lambda s: dp_sgd_epsilon(s, rate, steps, delta, "pld"),
                      costlier=lambda a, b: a <= b)
    probe(scale)
    if probe.refused(scale):   # PLD rarely needs more noise than RDP: out of reach
        probe.raise_refusal(f"eps = {eps!r} in steps = {steps} at sampling_rate = {rate!r} "
                            f"needs a noise multiplier near {scale:.4g} (RDP's)")
    pld_scale = smallest_sufficient_scale(probe, eps, initial=scale, rtol=rtol)
    below = [s for s in probe.evaluated if s < pld_scale]
    if below and probe.refused(max(below)):
        probe.raise_refusal(f"eps = {eps!r} in steps = {steps} at sampling_rate = {rate!r} "
                            f"needs a noise multiplier below {pld_scale:.4g}")
    return pld_scale


class _PLDProbe:
    """``eps_of(x)`` by the PLD accountant for a search over ``x`` (a noise multiplier or a
    number of steps) that stays within the accountant's reach: a value it refuses
    (:class:`~dprl.accounting.pld.PLDOutOfReachError`) counts as exceeding any budget
    (eps = inf), and so, without evaluation, does every value ``costlier`` than a refused
    one (``costlier(a, b)``: ``a`` needs at least the PLD of ``b``). ``evaluated`` holds the
    values probed (each evaluated once), so that a search can tell whether its answer
    hinges on a refusal."""

    def __init__(self, eps_of: Callable[[float], float],
                 costlier: Callable[[float, float], bool]) -> None:
        self.eps_of, self.costlier = eps_of, costlier
        self.evaluated: dict[float, float] = {}
        self.refusal: tuple[float, PLDOutOfReachError] | None = None   # the least costly one

    def refused(self, x: float) -> bool:
        return self.refusal is not None and self.costlier(x, self.refusal[0])

    def __call__(self, x: float) -> float:
        if x not in self.evaluated:
            try:
                self.evaluated[x] = math.inf if self.refused(x) else self.eps_of(x)
            except PLDOutOfReachError as error:
                self.refusal, self.evaluated[x] = (x, error), math.inf
        return self.evaluated[x]

    def raise_refusal(self, what: str) -> None:
        raise PLDOutOfReachError(f"{what}, beyond the PLD accountant's reach "
                                 f"({self.refusal[1]})") from self.refusal[1]


def _largest_steps(epsilon_of: Callable[[int], float], eps: float, start: int,
                   rtol: float) -> int:
    """The largest ``N >= 1`` with ``epsilon_of(N) <= eps`` for ``epsilon_of`` non-decreasing
    (0 if none), to relative precision ``rtol``: bracket by factors of 1.25 from ``start``
    (halving first if ``start`` exceeds the budget), then bisect until
    ``hi - lo <= max(1, rtol lo)``, keeping ``epsilon_of(lo) <= eps < epsilon_of(hi)``."""
    if epsilon_of(1) > eps:
        return 0
    lo = max(1, start)
    while epsilon_of(lo) > eps:
        lo = max(1, lo // 2)
    hi = max(lo + 1, math.ceil(lo * _GROWTH))
    while epsilon_of(hi) <= eps:
        lo, hi = hi, math.ceil(hi * _GROWTH)
    while hi - lo > max(1.0, rtol * lo):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if epsilon_of(mid) <= eps else (lo, mid)
    return lo


def steps_for_budget(eps: float, delta: float, noise_multiplier: float, sampling_rate: float,
                     accountant: str = "pld", rtol: float = 1e-3) -> int:
    """The number of DP-SGD steps that spends ``(eps, delta)``: the largest ``N`` with
    :func:`dp_sgd_epsilon` ``<= eps`` (Sec. 6: "until the privacy budget is used up"), 0 if
    one step exceeds it. RDP: exact. PLD (a few seconds per evaluation at millions of
    steps): the search starts from the RDP answer and stops within relative precision
    ``rtol`` (``rtol = 0``: exact), always returning an ``N`` whose eps meets the budget.
    Step counts too many for the PLD accountant
    (:func:`~dprl.accounting.pld.poisson_gaussian_epsilon`) count as exceeding ``eps``; where
    the answer lies among them (or one step is already beyond its reach), it raises
    :class:`~dprl.accounting.pld.PLDOutOfReachError` (a ``ValueError`` naming ``eps``; e.g.
    ``eps = 50`` at ``s = 20``, ``q = 0.043``, beyond ~8e6 steps)."""
    eps, delta = require_epsilon(eps), require_delta(delta)
    s = require_positive("noise_multiplier", noise_multiplier)
    rate = require_probability("sampling_rate", sampling_rate, open_low=True)
    rtol = require_nonnegative("rtol", rtol)

    one_step = poisson_subsampled_gaussian_rdp(DEFAULT_ORDERS, s, rate)

    def rdp(n: int) -> float:  # = dp_sgd_epsilon(s, rate, n, delta, "rdp"), curve computed once
        return rdp_to_dp(DEFAULT_ORDERS, self_compose_rdp(one_step, n), delta)[0]

    start = _largest_steps(rdp, eps, 1, 0.0)
    if _require_accountant(accountant) == "rdp":
        return start
    probe = _PLDProbe(lambda n: dp_sgd_epsilon(s, rate, n, delta, "pld"),
                      costlier=lambda a, b: a >= b)
    what = f"eps = {eps!r} at noise_multiplier = {s!r}, sampling_rate = {rate!r}"
    probe(1)
    if probe.refused(1):                     # the noise multiplier itself is out of reach
        raise probe.refusal[1]
    if start > 1:
        probe(start)
        if probe.refused(start):             # PLD rarely allows fewer steps than RDP
            probe.raise_refusal(f"{what} allows about {start} steps (RDP's)")
    steps = _largest_steps(probe, eps, start, rtol)
    above = [n for n in probe.evaluated if n > steps]
    if above and probe.refused(min(above)):
        probe.raise_refusal(f"{what} allows more than {steps} steps")
    return steps


def dp_steps_upper_bound(total_steps: int, p: float, tail: float) -> int:
    """The smallest ``k`` with ``P(Binomial(N, p) > k) <= tail``: with probability at least
    ``1 - tail`` a run of ``N`` Alg. 3 steps takes at most ``k`` DP steps, so under the
    visible-coins reading it is ``(eps(k), delta + tail)``-DP."""
    n = require_int("total_steps", total_steps)
    p = require_probability("p", p)
    tail = require_probability("tail", tail, open_low=True, open_high=True)
    return int(binom.ppf(1 - tail, n, p))


def _batch_of_experts(batch_size: int, n_experts: int) -> tuple[int, int]:
    """``(b, m)``, validated: a batch of ``b >= 1`` experts out of ``m >= b``."""
    b, m = require_int("batch_size", batch_size), require_int("n_experts", n_experts)
    if b > m:
        raise ValueError(f"batch_size must be <= n_experts = {m}, got {b}")
    return b, m


def selective_epsilon(noise_multiplier: float, batch_size: int, n_experts: int, p: float,
                      total_steps: int, delta: float, reading: str = "paper",
                      dp_steps: int | None = None, accountant: str = "pld") -> float:
    """eps at ``delta`` of Alg. 3's DP-SGD phase under a ``reading`` (module docstring):
    ``"paper"``: all ``total_steps`` composed with ``q = p b / m`` (Sec. 4, App. B.2);
    ``"visible_coins"``: the realised ``dp_steps`` (required, ``<= total_steps``) composed
    with ``q = b / m``, conditionally on the coins (0 DP steps: eps 0)."""
    require_choice("reading", reading, READINGS)
    b, m = _batch_of_experts(batch_size, n_experts)
    p = require_probability("p", p, open_low=True)
    total_steps = require_int("total_steps", total_steps)
    if reading == "paper":
        return dp_sgd_epsilon(noise_multiplier, p * b / m, total_steps, delta, accountant)
    if dp_steps is None:
        raise ValueError("dp_steps is required under the visible_coins reading")
    dp_steps = require_int("dp_steps", dp_steps, minimum=0)
    if dp_steps > total_steps:
        raise ValueError(f"dp_steps must be <= total_steps = {total_steps}, got {dp_steps}")
    if dp_steps == 0:
        return 0.0
    return dp_sgd_epsilon(noise_multiplier, b / m, dp_steps, delta, accountant)


class ReadingBudgets(NamedTuple):
    """Steps allowed by a budget under the two readings: ``paper_steps`` total steps at
    ``q = p b / m``; ``visible_dp_steps`` DP steps at ``q = b / m``; ``ratio = p paper_steps
    / visible_dp_steps``, the paper's expected DP steps over the sound number (equally, its
    total steps over the expected total ``visible_dp_steps / p``)."""

    paper_steps: int
    visible_dp_steps: int
    ratio: float


def reading_budgets(eps: float, delta: float, noise_multiplier: float, batch_size: int,
                    n_experts: int, p: float, accountant: str = "pld",
                    rtol: float = 1e-3) -> ReadingBudgets:
    """The steps the budget ``(eps, delta)`` allows under both readings of Alg. 3
    (:func:`steps_for_budget`) and their ratio, about ``1 / p`` (module docstring)."""
    b, m = _batch_of_experts(batch_size, n_experts)
    p = require_probability("p", p, open_low=True)
    paper = steps_for_budget(eps, delta, noise_multiplier, p * b / m, accountant, rtol)
    visible = steps_for_budget(eps, delta, noise_multiplier, b / m, accountant, rtol)
    if visible == 0:
        raise ValueError("the budget does not allow a single DP step at q = b / m")
    return ReadingBudgets(paper, visible, p * paper / visible)


def hidden_coin_epsilon(noise_multiplier: float, batch_size: int, n_experts: int, p: float,
                        steps: int, delta: float) -> float:
    """eps at ``delta`` of ``steps`` steps of Alg. 3 whose coins the adversary does not see
    but whose stable steps are noiseless, by RDP (the book's accountant).

    Each step's output is the mixture of the stable step's point ``x0`` (probability
    ``1 - p``; the same under neighbouring expert sets, since the release fixes
    ``D_stable``) and a DP-SGD step at rate ``b / m`` (probability ``p``). The point carries
    no Gaussian mass, so the Renyi moment is ``(1 - p) + p A_alpha``, ``A_alpha`` the
    subsampled Gaussian's (Mironov, Talwar & Zhang 2019):
    ``eps_alpha = log(1 - p + p exp((alpha - 1) eps_alpha(b/m))) / (alpha - 1)``, composed
    over ``steps``. For small per-step losses this is about ``p eps_alpha(b/m)``, where the
    paper's rate ``q = p b / m`` gives about ``p^2 eps_alpha(b/m)``."""
    b, m = _batch_of_experts(batch_size, n_experts)
    rdp = hidden_coin_rdp(DEFAULT_ORDERS, noise_multiplier, b / m, p)
    return rdp_to_dp(DEFAULT_ORDERS, self_compose_rdp(rdp, require_int("steps", steps)),
                     require_delta(delta))[0]


def hidden_coin_rdp(orders: np.ndarray, noise_multiplier: float, sampling_rate: float,
                    p: float) -> np.ndarray:
    """RDP at ``orders`` of one hidden-coin step (:func:`hidden_coin_epsilon`):
    ``log(1 - p + p exp((alpha - 1) eps_alpha(q))) / (alpha - 1)``, ``q`` the DP step's
    sampling rate."""
    p = require_probability("p", p, open_low=True)
    orders = np.asarray(orders, dtype=float)
    rdp = poisson_subsampled_gaussian_rdp(orders, require_positive("noise_multiplier",
                                                                   noise_multiplier),
                                          sampling_rate)
    with np.errstate(divide="ignore"):            # p = 1: log(1 - p) = -inf, the plain step
        return np.logaddexp(np.log1p(-p), math.log(p) + (orders - 1) * rdp) / (orders - 1)


def table3_budgets(n_experts: int = 3000, accountant: str = "pld", rtol: float = 1e-3,
                   rows: tuple[Table3Row, ...] = TABLE3) -> list[dict[str, float | int | str]]:
    """For each Table 3 configuration with ``p > 0``: App. B.3's ``(eps2, delta2)``
    (:func:`dprl.sharma2025.release.appendix_b3_split`, ``delta = 1 / m``), the paper's rate
    ``q = p b / m`` and the steps that spend ``eps2`` at that rate (:func:`steps_for_budget`),
    i.e. the training length of "train until eps2 is spent"."""
    m = require_int("n_experts", n_experts, minimum=2)
    table = []
    for row in rows:
        split = appendix_b3_split(row.env, row.eps, m)
        q = row.p * row.batch_size / m
        table.append({**row._asdict(), "eps2": split.eps2, "delta2": split.delta2,
                      "sampling_rate": q,
                      "steps": steps_for_budget(split.eps2, split.delta2, row.noise_multiplier,
                                                q, accountant, rtol)})
    return table
