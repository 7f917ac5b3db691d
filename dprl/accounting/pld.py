"""dp-accounting's privacy-loss-distribution (PLD) accountant for the Poisson-subsampled
Gaussian mechanism: the tightest sound accountant the book uses (Koskela et al. 2020;
Doroshenko et al. 2022, as implemented in dp-accounting)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
from dp_accounting.pld import common, pld_pmf, privacy_loss_mechanism
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import fft

from dprl.accounting.gaussian_profile import hockey_stick
from dprl.validation import require_delta, require_int, require_positive, require_probability

#: dp-accounting's ``PLDAccountant`` defaults: loss grid and tail mass dropped by composition.
_DISCRETIZATION, _TAIL_MASS = 1e-4, 1e-15
#: The largest noise multiplier whose square dp-accounting can form, and the smallest
#: sampling rate it handles (the smallest normal float: below it, its loss bounds fail).
_MAX_NOISE, _MIN_RATE = math.sqrt(np.finfo(float).max), float(np.finfo(float).tiny)
#: Most grid points one step's PLD (each of remove and add) may have: ~2.5 s to build.
MAX_STEP_BINS = 2**19
#: Most grid points the composed PLD's FFT (each of remove and add) may have: ~6 s, ~0.9 GB.
MAX_COMPOSED_BINS = 2**23
#: The same for :func:`pmf_pair_epsilon`, whose one-use PLDs are sparse and small: the book's
#: group-privacy pair composes 1.2e7 points (about 1 GB); 3.4e7 at most.
MAX_PAIR_COMPOSED_BINS = 2**25


class PLDOutOfReachError(ValueError):
    """A setting beyond what :func:`poisson_gaussian_epsilon` evaluates: a PLD larger than
    :data:`MAX_STEP_BINS` or :data:`MAX_COMPOSED_BINS` (raised before the work), or a
    ``delta`` below the mass the PLD truncates (eps would be inf)."""


def poisson_gaussian_epsilon(noise_multiplier: float, sampling_rate: float, steps: int,
                             delta: float) -> float:
    """eps at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps (DP-SGD, Abadi et al.
    2016), by dp-accounting's PLD accountant (add-or-remove-one neighbours). Alg. 4 of Sharma
    et al. (2025) is this with ``sampling_rate = b / m`` over experts.

    The work is bounded (at most ~7 s and ~1 GB on 2 busy cores): it raises
    :class:`PLDOutOfReachError` (a ``ValueError`` naming ``noise_multiplier`` or ``steps``)
    instead of building a one-step PLD of more than :data:`MAX_STEP_BINS` = 2^19 grid points
    of 1e-4 (noise multipliers below about 0.21 at sampling rates up to 0.1, 0.42 at rate
    1), or composing it by an FFT of more than :data:`MAX_COMPOSED_BINS` = 2^23 points
    (e.g. about 8e6 steps at ``s = 20``, ``q = 0.043``, where eps ~ 43; 4000 at
    ``s = 0.215``, ``q = 0.01``, eps ~ 460). Both sizes are computed exactly beforehand,
    the first from the loss bounds, the second from the one-step PLD by dp-accounting's
    own Chernoff truncation. The RDP accountant
    (:func:`dprl.accounting.poisson_subsampled_gaussian_epsilon`, ``accountant="rdp"``),
    an upper bound on this eps, has no such limit. It raises the same error, naming
    ``delta``, where dp-accounting's eps would be inf: ``delta`` below the probability mass
    the PLD truncates (at least 1e-15 once composed by FFT). Noise multipliers above 1.3e154
    and subnormal sampling rates, where dp-accounting itself fails, are refused by a plain
    ``ValueError``.
    Otherwise the result is bit for bit ``PLDAccountant().get_epsilon(delta)`` of the
    self-composed event: the same calls, except that a small (sparse) one-step PLD is made
    dense before composition directly, skipping dp-accounting's ``size ** steps > 1000``
    test, a big integer of ``steps log2(size)`` bits (seconds at millions of steps,
    gigabytes at 1e9), that the Chernoff truncation bounds computed for the size check are
    not computed again for the composition (:func:`_plan`), and that scipy.fft's plan
    caches are emptied of its transforms afterwards (:func:`_evict_fft_plans`)."""
    noise, rate, steps, delta = _checked_arguments(noise_multiplier, sampling_rate, steps,
                                                   delta)
    return _composed_epsilon(_step_pmfs(noise, rate), noise, rate, steps, delta,
                             through_identity=True)


def _composed_epsilon(pmfs: Sequence[pld_pmf.PLDPmf], noise: float, rate: float, steps: int,
                      delta: float, through_identity: bool) -> float:
    """eps at ``delta`` of the PLD whose PMFs are ``pmfs`` each self-composed ``steps`` times
    (refused beyond the limits, :func:`_check_composition`); ``through_identity``: composed
    with dp-accounting's identity PLD first, as its ``PLDAccountant`` does."""
    plans = [_plan(pmf, steps) for pmf in pmfs]
    _check_composition(plans, noise, rate, steps, delta)
    try:
        composed = pld_lib.PrivacyLossDistribution(*(_self_compose(plan, steps)
                                                     for plan in plans))
        if through_identity:
            composed = pld_lib.identity(_DISCRETIZATION).compose(composed)
        eps = float(composed.get_epsilon_for_delta(delta))
    finally:
        _evict_fft_plans()
    if not math.isfinite(eps):
        _refuse_delta(delta, noise, rate, steps)
    return eps


def _checked_arguments(noise_multiplier: float, sampling_rate: float, steps: int,
                       delta: float) -> tuple[float, float, int, float]:
    """The arguments of a Poisson-subsampled Gaussian PLD, validated, where one step's PLD
    stays within :data:`MAX_STEP_BINS` (:func:`poisson_gaussian_epsilon`'s limits)."""
    rate = require_probability("sampling_rate", sampling_rate, open_low=True)
    noise = require_positive("noise_multiplier", noise_multiplier)
    steps, delta = require_int("steps", steps), require_delta(delta)
    if noise > _MAX_NOISE:
        raise ValueError(f"noise_multiplier = {noise!r} is too large for dp-accounting's PLD "
                         f"(its square overflows a float; at most {_MAX_NOISE:g})")
    if rate < _MIN_RATE:
        raise ValueError(f"sampling_rate = {rate!r} is too small for dp-accounting's PLD (a "
                         f"subnormal float; at least {_MIN_RATE:g})")
    step_bins = _step_bins(noise, rate)
    if step_bins > MAX_STEP_BINS:
        raise PLDOutOfReachError(
            f"noise_multiplier = {noise!r} is too small for the PLD accountant at "
            f"sampling_rate = {rate!r}: one step's PLD would have {step_bins} grid points "
            f"(limit {MAX_STEP_BINS}); use the RDP accountant (accountant='rdp')")
    return noise, rate, steps, delta


def _check_composition(plans: Sequence[_Plan], noise: float, rate: float, steps: int,
                       delta: float) -> None:
    """Refuse a composition of the plans' PMFs over ``steps`` beyond
    :data:`MAX_COMPOSED_BINS`, or at a ``delta`` below the mass its FFT truncates."""
    composed_bins = max(_composed_bins(plan) for plan in plans)
    if composed_bins > MAX_COMPOSED_BINS:
        raise PLDOutOfReachError(
            f"steps = {steps} is too many for the PLD accountant at noise_multiplier = "
            f"{noise!r}, sampling_rate = {rate!r}: the composed PLD would have "
            f"{composed_bins} grid points (limit {MAX_COMPOSED_BINS}); use the RDP "
            f"accountant (accountant='rdp')")
    if delta < _TAIL_MASS and any(bounds is not None for _, bounds in plans):
        _refuse_delta(delta, noise, rate, steps)  # FFT composition leaves >= _TAIL_MASS at inf


def _refuse_delta(delta: float, noise: float, rate: float, steps: int) -> None:
    raise PLDOutOfReachError(
        f"delta = {delta!r} is below what the PLD accountant resolves at noise_multiplier = "
        f"{noise!r}, sampling_rate = {rate!r}, steps = {steps} (the probability mass it "
        f"truncates, at least {_TAIL_MASS} once composed, exceeds it: eps would be inf); use "
        f"the RDP accountant (accountant='rdp')")


def _evict_fft_plans() -> None:
    """Push the composition's transforms out of scipy.fft's plan caches (pocketfft keeps the
    last 16 plans of each kind, with twiddle factors as long as the transform: a search of
    many PLD evaluations would otherwise hold gigabytes) by 16 tiny transforms of each kind
    (complex, and real as in ``rfft``/``irfft``). Only speed depends on the caches."""
    for length in range(1, 17):
        fft.fft(np.zeros(length, dtype=complex))
        fft.rfft(np.zeros(length))


@lru_cache(maxsize=4)
def _step_pmfs(noise: float, rate: float) -> tuple[pld_pmf.PLDPmf, ...]:
    """One step's PLD as dp-accounting's ``PLDAccountant`` builds it (remove, and add unless
    ``rate = 1``; ``from_gaussian_mechanism``'s connect-the-dots PMFs, the same bits, with
    the profile of :func:`~dprl.accounting.gaussian_profile.hockey_stick`), kept for the
    next calls: a search over the number of steps builds it once. Composition leaves it
    unchanged."""
    losses = _gaussian_losses(noise, rate)
    return tuple(_connect_dots_pmf(loss) for loss in (losses[:1] if rate == 1 else losses))


def _connect_dots_pmf(loss: privacy_loss_mechanism.GaussianPrivacyLoss) -> pld_pmf.PLDPmf:
    """dp-accounting's pessimistic connect-the-dots PMF of ``loss`` on its grid (Doroshenko
    et al. 2022, Alg. 1; ``_create_pld_pmf_from_monotone_privacy_loss``)."""
    lower, upper = _grid_range(loss)
    return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(
        _DISCRETIZATION, lower, upper,
        hockey_stick(loss, np.arange(lower, upper + 1) * _DISCRETIZATION))


def _gaussian_losses(noise: float, rate: float) -> tuple:
    """dp-accounting's privacy losses of one Poisson-subsampled Gaussian step, in the remove
    order, then the add order."""
    return tuple(privacy_loss_mechanism.GaussianPrivacyLoss(noise, sampling_prob=rate,
                                                            adjacency_type=adjacency)
                 for adjacency in (privacy_loss_mechanism.AdjacencyType.REMOVE,
                                   privacy_loss_mechanism.AdjacencyType.ADD))


def _grid_range(loss: privacy_loss_mechanism.GaussianPrivacyLoss) -> tuple[float, float]:
    """The grid indices ``(lowest, highest)`` that dp-accounting's connect-the-dots
    construction spans for ``loss``, from its loss bounds alone; ``(-inf, inf)`` where the
    loss overflows (noise far too small)."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        bounds = loss.connect_dots_bounds()
        if not math.isfinite(bounds.epsilon_upper - bounds.epsilon_lower):
            return -math.inf, math.inf
        return (math.floor(bounds.epsilon_lower / _DISCRETIZATION),
                math.ceil(bounds.epsilon_upper / _DISCRETIZATION))


def _grid_ranges(noise: float, rate: float) -> list[tuple[float, float]]:
    """:func:`_grid_range` of each order (:func:`_gaussian_losses`) of one step."""
    return [_grid_range(loss) for loss in _gaussian_losses(noise, rate)]


def _step_bins(noise: float, rate: float) -> int:
    """Grid points of one step's PLD (the larger of remove and add), as dp-accounting's
    connect-the-dots construction will lay them out, from the loss bounds alone."""
    return max(upper - lower + 1 for lower, upper in _grid_ranges(noise, rate))


def _goes_dense(pmf: pld_pmf.PLDPmf, steps: int) -> bool:
    """Whether dp-accounting composes ``pmf`` ``steps`` times by FFT: dense, or sparse with
    ``size ** steps > 1000`` (exactly ``size ** min(steps, 10)`` for sizes >= 2). A single
    grid point, which connect-the-dots never produces (it spans 0), goes dense too, where
    dp-accounting would loop over ``steps`` sparse compositions."""
    return not isinstance(pmf, pld_pmf.SparsePLDPmf) or (
        steps > 1 and (pmf.size == 1 or pmf.size ** min(steps, 10) > 1000))


#: One PMF as dp-accounting self-composes it: made dense where it would be, with the Chernoff
#: truncation bounds of ``common.self_convolve`` (None where it stays sparse).
_Plan = tuple[pld_pmf.PLDPmf, tuple[int, int] | None]


def _plan(pmf: pld_pmf.PLDPmf, steps: int) -> _Plan:
    """How dp-accounting composes ``pmf`` ``steps`` times (:data:`_Plan`): the bounds are
    computed once, for the size check (:func:`_composed_bins`) and the composition
    (:func:`_self_compose`) alike, where dp-accounting's composition computes them again."""
    if not _goes_dense(pmf, steps):
        return pmf, None
    dense = pmf.to_dense_pmf()                    # a sparse PMF spans its dense grid
    return dense, common.compute_self_convolve_bounds(dense._probs, steps, _TAIL_MASS)


def _composed_bins(plan: _Plan) -> int:
    """Length of the FFT of dp-accounting's self-convolution (``common.self_convolve``) of
    the plan's PMF, from its truncation bounds (its size when it stays sparse); beyond
    :data:`MAX_COMPOSED_BINS` the length before rounding up to a fast one."""
    pmf, bounds = plan
    if bounds is None:
        return pmf.size
    length = max(bounds[1] - bounds[0] + 1, pmf.size)
    return length if length > MAX_COMPOSED_BINS else fft.next_fast_len(length)


def _self_compose(plan: _Plan, steps: int) -> pld_pmf.PLDPmf:
    """``pmf.self_compose(steps)`` of the plan's PMF, bit for bit: a dense one by
    ``DensePLDPmf.self_compose`` and ``common.self_convolve``'s operations with the plan's
    bounds (not computed again), without ``SparsePLDPmf``'s big-integer size test."""
    pmf, bounds = plan
    if bounds is None:
        return pmf.self_compose(steps, _TAIL_MASS)
    lower, upper = bounds
    length = upper - lower + 1
    spectrum = fft.fft(pmf._probs, fft.next_fast_len(max(length, pmf.size)))
    probs = np.roll(np.real(fft.ifft(spectrum ** steps)), -lower)[:length]
    infinity_mass = _TAIL_MASS - math.expm1(steps * math.log1p(-pmf._infinity_mass))
    return pld_pmf.DensePLDPmf(pmf._discretization, pmf._lower_loss * steps + lower,
                               np.array(probs), infinity_mass, pmf._pessimistic_estimate)


def pmf_pair_epsilon(log_pmf_a: dict[int, float], log_pmf_b: dict[int, float],
                     compositions: int, delta: float, *, pessimistic: bool = True,
                     discretization: float = _DISCRETIZATION) -> float:
    """eps at ``delta`` of ``compositions`` independent uses of a mechanism whose outputs on
    two neighbours have the probability mass functions ``a`` and ``b`` (log probabilities by
    outcome), both orders (the larger eps): dp-accounting's PLD of two PMFs, self-composed.
    ``pessimistic=False`` rounds the privacy loss down (a lower bound on eps). Each log-PMF
    must sum to 1 (to 1e-9); the composed PLD has at most :data:`MAX_PAIR_COMPOSED_BINS`
    grid points (a :class:`PLDOutOfReachError` naming ``discretization`` or ``compositions``
    beyond it). eps is inf, truly, where the outcomes one PMF gives and the other cannot
    (infinite loss) have probability above ``delta`` over the compositions."""
    compositions, delta = require_int("compositions", compositions), require_delta(delta)
    discretization = require_positive("discretization", discretization)
    for name, pmf in (("log_pmf_a", log_pmf_a), ("log_pmf_b", log_pmf_b)):
        _require_log_pmf(name, pmf)
    pmfs = [pld_lib.from_two_probability_mass_functions(
        lower, upper, pessimistic_estimate=pessimistic,
        value_discretization_interval=discretization, symmetric=False)._pmf_remove
        for lower, upper in ((log_pmf_a, log_pmf_b), (log_pmf_b, log_pmf_a))]
    if any(pmf.size == 0 for pmf in pmfs):     # disjoint supports: every loss is infinite
        return math.inf
    for pmf in pmfs:                 # a sparse PMF composed by FFT is laid on its dense grid
        span = max(pmf._loss_probs) - min(pmf._loss_probs) + 1 if isinstance(
            pmf, pld_pmf.SparsePLDPmf) else 1
        if _goes_dense(pmf, compositions) and span > MAX_PAIR_COMPOSED_BINS:
            raise PLDOutOfReachError(
                f"discretization = {discretization!r} is too fine for these PMFs composed "
                f"{compositions} times: one use's PLD spans {span} grid points (limit "
                f"{MAX_PAIR_COMPOSED_BINS}); use a coarser discretization")
    plans = [_plan(pmf, compositions) for pmf in pmfs]
    bins = max(_composed_bins(plan) for plan in plans)
    if bins > MAX_PAIR_COMPOSED_BINS:
        raise PLDOutOfReachError(
            f"compositions = {compositions} is too many for the PLD accountant: the composed "
            f"PLD would have {bins} grid points (limit {MAX_PAIR_COMPOSED_BINS}); a "
            f"discretization coarser than {discretization!r} makes proportionally fewer")
    try:
        return max(float(pld_lib.PrivacyLossDistribution(_self_compose(plan, compositions))
                         .get_epsilon_for_delta(delta)) for plan in plans)
    finally:
        _evict_fft_plans()


def _require_log_pmf(name: str, log_pmf: dict[int, float]) -> None:
    """A non-empty PMF of log probabilities (finite or -inf) that sums to 1 (to 1e-9)."""
    values = np.asarray(list(log_pmf.values())) if isinstance(log_pmf, Mapping) else np.zeros(0)
    if (values.dtype.kind not in "iuf" or not values.size or np.any(np.isnan(values))
            or np.any(values > 0)):
        raise ValueError(f"{name} must be a non-empty dict of log probabilities (<= 0)")
    total = float(np.exp(values.astype(float)).sum())
    if abs(total - 1) > 1e-9:
        raise ValueError(f"{name} must sum to 1 as probabilities, got {total!r}")


def _with_idle_steps(pmf: pld_pmf.PLDPmf, p: float) -> pld_pmf.DensePLDPmf:
    """The privacy loss distribution of a step that is ``pmf``'s with probability ``p`` and
    an idle one (loss 0: a visible coin and a noiseless step on public data) otherwise."""
    dense = pmf.to_dense_pmf()
    probs = p * dense._probs
    zero = -dense._lower_loss
    if not 0 <= zero < len(probs):
        raise ValueError("the step's privacy loss grid must contain 0")
    probs[zero] += 1 - p
    return pld_pmf.DensePLDPmf(dense._discretization, dense._lower_loss, probs,
                               p * dense._infinity_mass, dense._pessimistic_estimate)


def poisson_gaussian_or_idle_epsilon(noise_multiplier: float, sampling_rate: float,
                                     steps: int, p: float, delta: float) -> float:
    """eps at ``delta`` of ``steps`` steps each of which is, with probability ``p`` and
    visibly, a Poisson-subsampled Gaussian step (one step of
    :func:`poisson_gaussian_epsilon`) and otherwise idle: the PLD of that mixture,
    self-composed, so ``delta(eps) = sum_k P(K = k) delta_k(eps)``, ``K ~ Binomial(steps,
    p)``. Sharma et al. (2025)'s Alg. 3 as a white-box auditor sees it (its coins visible);
    ``p = 1``: Alg. 4. The limits and errors of :func:`poisson_gaussian_epsilon` apply."""
    p = require_probability("p", p, open_low=True)
    noise, rate, steps, delta = _checked_arguments(noise_multiplier, sampling_rate, steps,
                                                   delta)
    return _composed_epsilon([_with_idle_steps(pmf, p) for pmf in _step_pmfs(noise, rate)],
                             noise, rate, steps, delta, through_identity=False)


def _profiles(noise: float, rate: float, epsilons: np.ndarray) -> np.ndarray:
    """``(2, n)``: the exact hockey-stick divergences ``H_{e^eps}(P || Q)`` of dp-accounting's
    remove pair ``(P, Q) = ((1 - q) N(0, s^2) + q N(1, s^2), N(0, s^2))`` and of its add pair
    (the reverse order) at ``epsilons``."""
    return np.stack([hockey_stick(loss, epsilons) for loss in _gaussian_losses(noise, rate)])


def replace_one_profile(noise_multiplier: float, sampling_rate: float,
                        epsilons: np.ndarray) -> np.ndarray:
    """The privacy profile ``delta(eps)`` of one Gaussian step on one record drawn uniformly
    from ``n = 1 / sampling_rate`` without replacement, replace-one neighbours (noise over
    the replace-one sensitivity: ``noise_multiplier``): ``max(delta_remove, delta_add)``
    at every eps, the profile of Dong, Roth & Su's (2022, Thm. 4.2) ``C_q(G_{1/s}) =
    min{f_q, f_q^{-1}}**`` with ``f_q = q G_{1/s} + (1 - q) Id``.

    Why it bounds every neighbouring pair (derived in the Xie privacy chapter): the outputs
    are ``A = (1 - q) R + q N(g, .)`` and ``B = (1 - q) R + q N(g', .)``, ``R`` the other
    records' mixture, ``|g - g'| <= 1``; advanced joint convexity (Balle et al. 2018, Thm. 2)
    bounds ``H_a(A || B)`` and ``H_a(B || A)`` by the remove pair's ``H_a`` for ``a >= 1``,
    hence ``H_a(A || B)`` by the add pair's for ``a < 1``. Which order is the worse one
    depends on ``R``, which the data can change from step to step, so the two orders must
    not be composed separately: the symmetric profile is composed."""
    noise = require_positive("noise_multiplier", noise_multiplier)
    rate = require_probability("sampling_rate", sampling_rate, open_low=True)
    eps = np.asarray(epsilons, dtype=float)
    if eps.ndim != 1 or not eps.size or np.any(np.diff(eps) < 0) or not np.isfinite(eps).all():
        raise ValueError("epsilons must be a non-empty, finite, non-decreasing 1-D array")
    return _profiles(noise, rate, eps).max(axis=0)


@lru_cache(maxsize=8)
def _replace_one_step_pmf(noise: float, rate: float) -> pld_pmf.PLDPmf:
    """One step's symmetric PLD (:func:`replace_one_profile`) by pessimistic
    connect-the-dots (Doroshenko et al. 2022, Alg. 1) on the union of dp-accounting's remove
    and add loss ranges at its grid: a PLD whose profile dominates ``C_q(G_{1/s})``'s."""
    ranges = _grid_ranges(noise, rate)
    lower, upper = min(low for low, _ in ranges), max(high for _, high in ranges)
    if upper - lower + 1 > MAX_STEP_BINS:
        raise PLDOutOfReachError(
            f"noise_multiplier = {noise!r} is too small for the PLD accountant at "
            f"sampling_rate = {rate!r}: one step's PLD would have {upper - lower + 1} grid "
            f"points (limit {MAX_STEP_BINS})")
    deltas = _profiles(noise, rate, np.arange(lower, upper + 1) * _DISCRETIZATION).max(axis=0)
    return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(_DISCRETIZATION, lower, upper,
                                                                  deltas)


def replace_one_gaussian_epsilon(noise_multiplier: float, sampling_rate: float, steps: int,
                                 delta: float) -> float:
    """eps at ``delta`` of ``steps`` adaptive Gaussian steps, each on one record drawn
    uniformly without replacement from ``1 / sampling_rate`` records, replace-one neighbours
    (Xie et al. 2019's GPOPE; noise over the replace-one sensitivity): the symmetric
    per-step PLD of :func:`replace_one_profile` self-composed (f-DP composition, Dong, Roth
    & Su 2022, Thm. 3.2) by dp-accounting. A sound bound, never below the
    Poisson-subsampled eps of :func:`poisson_gaussian_epsilon` at the same noise and rate
    (which composes each order separately). The limits and errors of
    :func:`poisson_gaussian_epsilon` apply."""
    noise, rate, steps, delta = _checked_arguments(noise_multiplier, sampling_rate, steps,
                                                   delta)
    return _composed_epsilon([_replace_one_step_pmf(noise, rate)], noise, rate, steps, delta,
                             through_identity=False)
