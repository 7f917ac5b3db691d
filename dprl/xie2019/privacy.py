"""Privacy of GPOPE (Xie, Thomas & Miklau 2019, Sec. 5 and App. B).

Each of the ``N`` iterations picks one of the ``m`` trajectories uniformly (sampling one
record without replacement), clips its primal-dual gradient to L2 norm ``h`` and adds
``h N(0, sigma^2 I)``. Two accountings of this mechanism:

- **The paper's** (Lemma 1, Theorem 4 = Abadi et al. 2016, Thm. 2): the per-iteration log
  moment ``alpha(lambda) <= lambda (lambda + 1) / (2 m^2) min{4 (e^{1/sigma^2} - 1),
  2 e^{1/sigma^2}}``, composed over ``N`` iterations, and
  ``delta = min_lambda exp(N alpha(lambda) - lambda eps)``. It keeps only the ``j = 2`` term
  of Wang, Balle & Kasiviswanathan (2019, Thm. 9) ("since m >> 1"), and takes the gradients
  of neighbouring data sets to differ by ``h`` (the proof sets ``B(x_m) = e_1`` against 0).
- **The full bound** (:func:`gpope_epsilon`): every term of WBK Thm. 9, composed (Mironov
  2017) and converted to ``(eps, delta)`` (Balle et al. 2020). WBK Thm. 9 is stated for the
  replace-one relation, under which two clipped gradients differ by up to ``2h``:
  ``sensitivity=2`` (the default) is the consistent pairing, ``sensitivity=1`` the paper's.
  The noise multiplier of the accountant is ``sigma / sensitivity``.
- **The tightest** (:func:`tightest_epsilon`, :func:`tightest_sigma`): WBK's Gaussian-specific
  strengthening of Thm. 9 (their Thm. 27), which dp-accounting 0.6.0's RDP accountant
  computes for ``SampledWithoutReplacementDpEvent`` under replace-one, on the same orders
  (computed vectorised: :func:`dp_accounting_epsilon` is the slow independent check).
- **A sound PLD** (:func:`pld_epsilon`, :func:`pld_sigma`; beyond the papers):
  dp-accounting's PLD accountant does not take this event (0.6.0 accepts Poisson sampling
  only), and composing its remove and add orders separately is not sound here (which order
  is the worse depends on the other records, which change from step to step). The
  symmetrised per-step profile, Dong, Roth & Su's ``C_{1/m}(G_{2/sigma})``, is
  (:func:`dprl.accounting.pld.replace_one_gaussian_epsilon`), composed by dp-accounting's
  PLD: about 24 % less noise than RDP at ``eps = 1``, ``N = m = 100``.
  :func:`calibrations` puts the paper's, the book's and the RDP sigma side by side.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import dp_accounting as dpa
import numpy as np
from dp_accounting import rdp as dpa_rdp

from dprl.accounting import (poisson_subsampled_gaussian_rdp, rdp_to_delta, rdp_to_dp,
                             sampled_without_replacement_gaussian_rdp,
                             sampled_without_replacement_gaussian_rdp_tight,
                             self_compose_rdp, smallest_sufficient_scale)
from dprl.accounting.pld import (PLDOutOfReachError, poisson_gaussian_epsilon,
                                 replace_one_gaussian_epsilon)
from dprl.validation import (require_choice, require_delta, require_epsilon, require_int,
                             require_positive)

#: Integer Renyi orders for GPOPE: every order 2..256 (the optimum for eps = 0.1, delta = 1e-5
#: lies near 100, between the coarse default grid's 63 and 128), then coarser to 1024.
GPOPE_ORDERS = np.concatenate([np.arange(2, 257), np.arange(320, 1025, 64)]).astype(float)

#: The parameters of Table 1 (App. A), in its order.
RELATION_PARAMETERS = ("eps", "delta", "N", "sigma", "m")


def _lemma1_constant(m: int, sigma: float) -> float:
    """``min{4 (e^{1/sigma^2} - 1), 2 e^{1/sigma^2}} / (2 m^2)``."""
    m, sigma = require_int("m", m), require_positive("sigma", sigma)
    inverse = 1 / sigma**2
    return min(4 * math.expm1(inverse), 2 * math.exp(inverse)) / (2 * m**2)


def lemma1_log_moment(lam, m: int, sigma: float) -> np.ndarray:
    """Lemma 1 of Xie et al. (2019): the bound ``lambda (lambda + 1) / (2 m^2)
    min{4 (e^{1/sigma^2} - 1), 2 e^{1/sigma^2}}`` on one iteration's log moment
    ``alpha(lambda)``, at integers ``lambda >= 1`` (the orders ``lambda + 1`` of WBK Thm. 9)."""
    lam = np.asarray(lam)
    if not np.issubdtype(lam.dtype, np.integer) or np.any(lam < 1):
        raise ValueError(f"lam must be integers >= 1, got {lam!r}")
    return lam * (lam + 1) * _lemma1_constant(m, sigma)


def exact_log_moment(lam, m: int, sigma: float) -> np.ndarray:
    """The exact log moment of the pair Lemma 1's proof bounds (Xie et al. 2019, App. B.1:
    ``d = d' + x_m``, clipped gradients ``h e_1`` against 0, in units of ``h``): one
    iteration's output ``mu = (1 - q) N(0, sigma^2) + q N(1, sigma^2)`` against
    ``mu_0 = N(0, sigma^2)``, ``q = 1/m``, at integers ``lambda >= 1``:
    ``log E_{mu_0}[(mu / mu_0)^(lambda+1)] = log sum_k C(lambda+1, k) (1-q)^(lambda+1-k) q^k
    e^{k(k-1)/(2 sigma^2)}`` (Abadi et al. 2016, Sec. 3.2), i.e. ``lambda`` times the RDP of
    the Poisson-subsampled Gaussian at order ``lambda + 1`` (Mironov, Talwar & Zhang 2019).
    The moments accountant's ``alpha(lambda)`` is the larger of both directions, so a
    :func:`lemma1_log_moment` below this value is violated."""
    lam = np.asarray(lam)
    if not np.issubdtype(lam.dtype, np.integer) or np.any(lam < 1):
        raise ValueError(f"lam must be integers >= 1, got {lam!r}")
    m, sigma = require_int("m", m, minimum=2), require_positive("sigma", sigma)
    return lam * poisson_subsampled_gaussian_rdp(lam + 1.0, sigma, 1 / m)


def paper_pair_epsilon(sigma: float, delta: float, n_iterations: int, m: int) -> float:
    """eps at ``delta`` of ``N`` iterations on Lemma 1's own pair (:func:`exact_log_moment`)
    by dp-accounting's PLD accountant: the privacy the paper's sigma buys under the paper's
    own neighbouring pair, with no approximation (Xie et al. 2019, Lemma 1, Theorem 1)."""
    return poisson_gaussian_epsilon(sigma, 1 / require_int("m", m, minimum=2), n_iterations,
                                    delta)


def lemma1_delta(eps: float, n_iterations: int, m: int, sigma: float) -> float:
    """``min_{lambda >= 1} exp(N alpha(lambda) - lambda eps)`` with Lemma 1's ``alpha``:
    the paper's Theorem 4 tail bound for ``N`` iterations (Abadi et al. 2016, Thm. 2). The
    exponent is a convex quadratic in ``lambda``; its integer minimiser is next to
    ``(eps - a) / (2 a)``, ``a = N K``."""
    eps, n = require_epsilon(eps), require_int("n_iterations", n_iterations)
    a = n * _lemma1_constant(m, sigma)
    centre = max((eps - a) / (2 * a), 1.0)
    candidates = np.array([math.floor(centre), math.ceil(centre)], dtype=float)
    candidates = np.maximum(candidates, 1.0)
    exponents = a * candidates * (candidates + 1) - candidates * eps
    return math.exp(min(float(exponents.min()), 0.0))  # capped at 1 (no overflow)


def lemma1_sigma(eps: float, delta: float, n_iterations: int, m: int,
                 rtol: float = 1e-9) -> float:
    """The smallest ``sigma`` with :func:`lemma1_delta` ``<= delta``: the noise the paper's
    own analysis (Lemma 1 and Theorem 4) asks for."""
    delta = require_delta(delta)
    return smallest_sufficient_scale(lambda s: lemma1_delta(eps, n_iterations, m, s), delta,
                                     rtol=rtol)


def theorem1_constant(sigma: float, eps: float, delta: float, n_iterations: int,
                      m: int) -> float:
    """``c_2 = sigma m eps / sqrt(N log(1/delta))``: the constant of Theorem 1
    (``sigma >= c_2 sqrt(N log(1/delta)) / (m eps)``) that a given ``sigma`` implies."""
    sigma, eps, delta = (require_positive("sigma", sigma), require_epsilon(eps),
                         require_delta(delta))
    n, m = require_int("n_iterations", n_iterations), require_int("m", m)
    return sigma * m * eps / math.sqrt(n * math.log(1 / delta))


def _gpope_rdp(sigma: float, n_iterations: int, m: int, sensitivity: float,
               bound=sampled_without_replacement_gaussian_rdp) -> np.ndarray:
    multiplier = require_positive("sigma", sigma) / require_positive("sensitivity", sensitivity)
    per_step = bound(GPOPE_ORDERS, multiplier, 1, m)
    return self_compose_rdp(per_step, require_int("n_iterations", n_iterations))


def gpope_epsilon(sigma: float, delta: float, n_iterations: int, m: int,
                  sensitivity: float = 2.0, method: str = "improved") -> float:
    """``eps`` at ``delta`` of ``N`` GPOPE iterations on ``m`` trajectories with noise
    ``h N(0, sigma^2 I)``: WBK (2019) Thm. 9 with all terms (replace-one, one record sampled
    without replacement, noise multiplier ``sigma / sensitivity``), composed and converted by
    :func:`~dprl.accounting.rdp_to_dp` (``method``)."""
    return rdp_to_dp(GPOPE_ORDERS, _gpope_rdp(sigma, n_iterations, m, sensitivity), delta,
                     method)[0]


def gpope_delta(sigma: float, eps: float, n_iterations: int, m: int,
                sensitivity: float = 2.0, method: str = "improved") -> float:
    """``delta`` at ``eps`` of the same accounting as :func:`gpope_epsilon`."""
    return rdp_to_delta(GPOPE_ORDERS, _gpope_rdp(sigma, n_iterations, m, sensitivity), eps,
                        method)[0]


@functools.lru_cache(maxsize=1024)
def gpope_sigma(eps: float, delta: float, n_iterations: int, m: int,
                sensitivity: float = 2.0, method: str = "improved",
                rtol: float = 1e-9) -> float:
    """The smallest ``sigma`` with :func:`gpope_epsilon` ``<= eps``: the noise GPOPE
    (Algorithm 1) adds for ``(eps, delta)``-DP, calibrated by the full accountant (cached:
    experiments ask for the same calibration many times)."""
    eps = require_epsilon(eps)
    return smallest_sufficient_scale(
        lambda s: gpope_epsilon(s, delta, n_iterations, m, sensitivity, method), eps,
        rtol=rtol)


def tightest_epsilon(sigma: float, delta: float, n_iterations: int, m: int,
                     sensitivity: float = 2.0) -> float:
    """``eps`` at ``delta`` of ``N`` GPOPE iterations (Algorithm 1) under the tightest sound
    accountant: WBK (2019) Thm. 27 per iteration
    (:func:`~dprl.accounting.sampled_without_replacement_gaussian_rdp_tight`, one record of
    ``m`` sampled without replacement, replace-one, noise multiplier ``sigma /
    sensitivity``) at :data:`GPOPE_ORDERS`, composed and converted as dp-accounting converts
    (Balle et al. 2020, Thm. 21). Never above :func:`gpope_epsilon`."""
    rdp = _gpope_rdp(sigma, n_iterations, m, sensitivity,
                     sampled_without_replacement_gaussian_rdp_tight)
    return rdp_to_dp(GPOPE_ORDERS, rdp, delta, "improved")[0]


@functools.lru_cache(maxsize=1024)
def tightest_sigma(eps: float, delta: float, n_iterations: int, m: int,
                   sensitivity: float = 2.0, rtol: float = 1e-9) -> float:
    """The smallest ``sigma`` with :func:`tightest_epsilon` ``<= eps``: GPOPE's noise
    (Algorithm 1) for ``(eps, delta)``-DP under the tightest sound accountant; never above
    :func:`gpope_sigma` (cached)."""
    eps = require_epsilon(eps)
    return smallest_sufficient_scale(
        lambda s: tightest_epsilon(s, delta, n_iterations, m, sensitivity), eps, rtol=rtol)


def pld_epsilon(sigma: float, delta: float, n_iterations: int, m: int,
                sensitivity: float = 2.0) -> float:
    """``eps`` at ``delta`` of ``N`` GPOPE iterations (Algorithm 1) by the symmetrised
    per-step PLD (module docstring; one record of ``m`` sampled without replacement,
    replace-one, noise multiplier ``sigma / sensitivity``), composed by dp-accounting."""
    multiplier = require_positive("sigma", sigma) / require_positive("sensitivity", sensitivity)
    return replace_one_gaussian_epsilon(multiplier, 1 / require_int("m", m, minimum=2),
                                        require_int("n_iterations", n_iterations), delta)


@functools.lru_cache(maxsize=256)
def pld_sigma(eps: float, delta: float, n_iterations: int, m: int,
              sensitivity: float = 2.0, rtol: float = 1e-4) -> float:
    """The smallest ``sigma`` (to ``rtol``) with :func:`pld_epsilon` ``<= eps``: GPOPE's
    noise for ``(eps, delta)``-DP by the sound PLD, searched from the RDP sigma down
    (cached; each evaluation composes a PLD, about a second). A sigma too small for the
    PLD's grid (:class:`~dprl.accounting.pld.PLDOutOfReachError`) counts as exceeding
    ``eps``: the search can only return more noise for it, never less."""
    eps = require_epsilon(eps)

    def epsilon(s: float) -> float:
        try:
            return pld_epsilon(s, delta, n_iterations, m, sensitivity)
        except PLDOutOfReachError:
            return math.inf

    return smallest_sufficient_scale(
        epsilon, eps, initial=tightest_sigma(eps, delta, n_iterations, m, sensitivity),
        rtol=rtol)


@dataclasses.dataclass(frozen=True)
class Calibrations:
    """GPOPE's noise ``sigma`` (in units of ``h``) for one ``(eps, delta, N, m)`` under each
    accounting, and what the paper's buys (see :func:`calibrations`)."""

    #: Lemma 1 and Theorem 4 as printed (sensitivity ``h``): what the authors ran
    paper: float
    #: the book's full WBK Thm. 9 bound, replace-one (sensitivity ``2h``); NaN where it
    #: certifies ``eps`` at no sigma
    book: float
    #: the tightest RDP accountant (WBK Thm. 27, replace-one, sensitivity ``2h``)
    tightest: float
    #: the eps that the paper's sigma certifies under replace-one by the tightest RDP
    #: accountant
    paper_epsilon: float


def calibrations(eps: float, delta: float, n_iterations: int, m: int) -> Calibrations:
    """:class:`Calibrations` of GPOPE (Xie et al. 2019, Algorithm 1) at ``(eps, delta, N,
    m)``: :func:`lemma1_sigma`, :func:`gpope_sigma`, :func:`tightest_sigma` and
    :func:`tightest_epsilon` of the paper's sigma (all sensitivity ``2h`` but the paper's;
    the PLD's, seconds each, is :func:`pld_sigma`)."""
    paper = lemma1_sigma(eps, delta, n_iterations, m)
    try:
        book = gpope_sigma(eps, delta, n_iterations, m)
    except ValueError:  # unattainable: Thm. 9's bound exceeds eps at every sigma
        book = math.nan
    return Calibrations(paper, book, tightest_sigma(eps, delta, n_iterations, m),
                        tightest_epsilon(paper, delta, n_iterations, m))


#: GPOPE's calibrations by name (:func:`calibrated_sigma`).
CALIBRATIONS = ("paper", "book", "tightest", "pld")


def calibrated_sigma(calibration: str, eps: float, delta: float, n_iterations: int, m: int,
                     sensitivity: float = 2.0) -> float:
    """GPOPE's ``sigma`` (Algorithm 1) for ``(eps, delta, N, m)`` by the named calibration:
    ``"paper"`` :func:`lemma1_sigma` (Lemma 1, sensitivity ``h``: ``sensitivity`` unused),
    ``"book"`` :func:`gpope_sigma`, ``"tightest"`` :func:`tightest_sigma` (RDP), ``"pld"``
    :func:`pld_sigma`."""
    if calibration == "paper":
        return lemma1_sigma(eps, delta, n_iterations, m)
    if calibration == "book":
        return gpope_sigma(eps, delta, n_iterations, m, sensitivity)
    if calibration == "tightest":
        return tightest_sigma(eps, delta, n_iterations, m, sensitivity)
    if calibration == "pld":
        return pld_sigma(eps, delta, n_iterations, m, sensitivity)
    raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")


def certified_epsilon(calibration: str, sigma: float, delta: float, n_iterations: int, m: int,
                      sensitivity: float = 2.0) -> float:
    """``eps`` at ``delta`` that a sound accountant certifies for ``sigma`` of the named
    calibration: the accountant it was calibrated by, :func:`pld_epsilon` for ``"pld"``,
    else :func:`tightest_epsilon` (RDP, WBK 2019 Thm. 27; the tightest sound bound the other
    calibrations are checked against)."""
    require_choice("calibration", calibration, CALIBRATIONS)
    accountant = pld_epsilon if calibration == "pld" else tightest_epsilon
    return accountant(sigma, delta, n_iterations, m, sensitivity)


#: dp-accounting's RDP orders for GPOPE's sampled-without-replacement Gaussian.
DP_ACCOUNTING_ORDERS = tuple(float(k) for k in range(2, 129))
#: A sparser subset (2..32, then every 4th to 64 and every 8th to 128): a valid bound, a little
#: looser, about ten times faster (the cost grows like the sum of the squared orders).
DP_ACCOUNTING_SPARSE_ORDERS = tuple(float(k) for k in (*range(2, 33), *range(36, 65, 4),
                                                        *range(72, 129, 8)))


def dp_accounting_epsilon(sigma: float, delta: float, n_iterations: int, m: int,
                          sensitivity: float = 2.0,
                          orders: tuple[float, ...] = DP_ACCOUNTING_ORDERS) -> float:
    """eps at ``delta`` of GPOPE's ``N`` iterations by dp-accounting's RDP accountant
    (replace-one, one record sampled without replacement from ``m``; its Gaussian-specific
    bound of Wang, Balle & Kasiviswanathan 2019, orders 2..128), noise multiplier
    ``sigma / sensitivity``: an upper bound on the true eps, tighter than the general WBK
    bound of :func:`gpope_epsilon` (dp-accounting has no PLD for this sampling). Its cost
    grows like the cube of the largest order; fewer ``orders`` give a valid, looser bound."""
    multiplier = require_positive("sigma", sigma) / require_positive("sensitivity", sensitivity)
    accountant = dpa_rdp.RdpAccountant([float(a) for a in orders],
                                       dpa.NeighboringRelation.REPLACE_ONE)
    event = dpa.SampledWithoutReplacementDpEvent(require_int("m", m, minimum=2), 1,
                                                 dpa.GaussianDpEvent(multiplier))
    accountant.compose(event, require_int("n_iterations", n_iterations))
    return float(accountant.get_epsilon(require_delta(delta)))


def dp_accounting_sigma(eps: float, delta: float, n_iterations: int, m: int,
                        sensitivity: float = 2.0,
                        orders: tuple[float, ...] = DP_ACCOUNTING_ORDERS,
                        initial: float = 1.0, rtol: float = 1e-6) -> float:
    """The smallest ``sigma`` with :func:`dp_accounting_epsilon` ``<= eps`` (to ``rtol``;
    ``initial``: a first guess, which saves evaluations)."""
    eps = require_epsilon(eps)
    return smallest_sufficient_scale(
        lambda s: dp_accounting_epsilon(s, delta, n_iterations, m, sensitivity, orders), eps,
        initial=initial, rtol=rtol)


def theorem1_premise(eps: float, n_iterations: int, m: int, c1: float) -> bool:
    """Theorem 1's premise ``eps < c1 N / m^2`` (Xie et al. 2019; Abadi et al. 2016, Thm. 1,
    with sampling rate ``1/m`` and ``N`` steps); the paper leaves ``c1`` unspecified."""
    eps, c1 = require_epsilon(eps), require_positive("c1", c1)
    n, m = require_int("n_iterations", n_iterations), require_int("m", m)
    return bool(eps < c1 * n / m**2)


def _log_delta(point: dict[str, float], sensitivity: float) -> float:
    n, m = int(round(point["N"])), int(round(point["m"]))
    return math.log(gpope_delta(point["sigma"], point["eps"], n, m, sensitivity))


def relation_signs(eps: float, delta: float, n_iterations: int, m: int,
                   sensitivity: float = 2.0, step: float = 0.01) -> np.ndarray:
    """Table 1 (App. A) computed: ``signs[i, j]`` is the sign of the change the parameter
    ``j`` must make to keep the guarantee exact when parameter ``i`` increases and only ``j``
    adjusts (+1 positively related, -1 negatively, 0 on the diagonal), for the parameters
    :data:`RELATION_PARAMETERS`, at the point where ``sigma = gpope_sigma(eps, delta, N, m)``.

    On the boundary ``F = log delta_acc(eps, N, sigma, m) - log delta = 0``, implicit
    differentiation gives ``dj/di = -F_i / F_j``; the partial derivatives are central
    differences at relative ``step`` (``N`` and ``m`` rounded to integers)."""
    sigma = gpope_sigma(eps, delta, n_iterations, m, sensitivity, rtol=1e-12)
    point = {"eps": eps, "N": float(n_iterations), "sigma": sigma, "m": float(m)}
    partial = {"delta": -1.0}  # d F / d log delta
    for name, value in point.items():
        up, down = dict(point), dict(point)
        up[name], down[name] = value * (1 + step), value * (1 - step)
        partial[name] = (_log_delta(up, sensitivity) - _log_delta(down, sensitivity)) / (
            math.log(up[name] / down[name]) if name in ("eps", "sigma") else
            math.log(round(up[name]) / round(down[name])))
    grads = np.array([partial[name] for name in RELATION_PARAMETERS])
    signs = -np.sign(grads)[:, None] * np.sign(grads)[None, :]
    np.fill_diagonal(signs, 0)
    return signs.astype(int)
