"""Noise calibration of Wang & Hegde (2019), Sec. 3.2: the Gaussian-process mechanism
(Prop. 4), Theorem 5 / Algorithm 1 line 5, Lemma 6's norm bound, Lemma 8's uniform bound on
the sample path, and the generic composition bounds the paper compares with.

**Theorem 5: C inside or outside the square root.** In the book's copy of the paper (a
text extraction) the extent of the statement's root is not legible: it may read
``sigma >= sqrt(2 (T/B) ln(e + eps/delta) C) / eps`` or
``sigma >= sqrt(2 (T/B) ln(e + eps/delta)) C / eps`` ("C outside", a reading the copy cannot
rule out; ``variant="statement"``, a key name that does not say the paper prints it), with
``C = ((4 alpha (k+1)/B)^2 + 4 alpha (k+1)/B) L^2``; its proof ends with
``sigma >= sqrt(2 (T/B) ||f||_H^2 ln(e + eps/delta)) / eps`` and bounds ``||f||_H^2 <= C``.
The proof is right (``variant="proof"``): with ``v = 4 alpha (k+1)/B``, one update moves
Q by at most ``v L`` in sup norm (so ``f = Q - Q'`` has ``||f||_inf <= v L``) and f is
L-Lipschitz; Lemma 6 gives ``||f||_H^2 <= (1 + beta/2) ||f||_inf^2 + ||f'||_2^2 / (2 beta)``,
and ``beta = 1/v`` turns this into ``(v^2 + v) L^2 = C``. C is thus the *squared*
sensitivity, and every Gaussian calibration (Prop. 4, and the composition step of the proof)
scales sigma with the sensitivity ``||f||_H <= sqrt(C)``, not with its square. Scaling Q
(and L) by c must scale the noise by c: the proof's sigma does, the C-outside one scales by
c^2. With ``C < 1`` (small learning rates) the C-outside reading under-noises by the factor
``sqrt(C)``: :func:`exact_composition_delta` shows its delta far above target.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dprl.accounting import advanced_composition
from dprl.envs.line_mdp import LineMDP
from dprl.mechanisms import analytic_gaussian_sigma, gaussian_delta
from dprl.validation import (require_array, require_choice, require_delta, require_epsilon,
                             require_int, require_positive, require_probability)
from dprl.wang2019.baselines import dp_sgd_updates, n_rewards
from dprl.wang2019.functional_noise import OUPath
from dprl.wang2019.q_learning import QLearningConfig

#: Lemma 8's constant: E max_{[0,1]} g <= 8.68 sqrt(beta) sigma for g ~ GP(0, sigma^2 K).
LEMMA8_CONSTANT = 8.68
GP_SOURCES = {"wang2019": 1.25, "hall2013": 2.0}
SIGMA_VARIANTS = ("proof", "statement")
TAIL_VARIANTS = ("statement", "borell-tis")
#: How Theorem 5 is applied to Algorithm 1 inside the authors' DQN (:func:`dqn_calibration`).
READINGS = ("updates", "iterations", "outside")
#: How the T/B updates are composed: Theorem 5's bound, or exactly (:func:`exact_composition_sigma`).
COMPOSITIONS = ("theorem5", "exact")


def gp_mechanism_sigma(sensitivity: float, eps: float, delta: float, *,
                       source: str = "wang2019") -> float:
    """Noise scale of the Gaussian-process mechanism (Wang & Hegde 2019, Prop. 4):
    releasing f + g, g ~ GP(0, sigma^2 K), is (eps, delta)-DP for 0 < eps < 1 when
    sigma >= sqrt(2 ln(c/delta)) Delta_H / eps, Delta_H the sensitivity in the RKHS norm of K;
    c = 1.25 (Prop. 4, ``source="wang2019"``) or 2 (Hall, Rinaldo & Wasserman 2013, as
    quoted below Prop. 4, ``source="hall2013"``)."""
    sensitivity = require_positive("sensitivity", sensitivity)
    eps, delta = require_epsilon(eps), require_delta(delta)
    require_choice("source", source, GP_SOURCES)
    if eps >= 1:
        raise ValueError(f"Prop. 4 holds for 0 < eps < 1 only, got eps={eps}")
    return math.sqrt(2 * math.log(GP_SOURCES[source] / delta)) * sensitivity / eps


def gp_mechanism(f: Callable[[np.ndarray], ArrayLike], sensitivity: float, eps: float,
                 delta: float, beta: float, rng: np.random.Generator, *,
                 source: str = "wang2019") -> Callable[[ArrayLike], np.ndarray]:
    """The released function x -> f(x) + g(x), g ~ GP(0, sigma^2 exp(-beta |x - y|)) with
    sigma from :func:`gp_mechanism_sigma` (Wang & Hegde 2019, Prop. 4; Hall et al. 2013).
    ``sensitivity`` bounds ||f - f'||_H in the RKHS of exp(-beta |x - y|)
    (:func:`ou_rkhs_norm_squared`). One path serves every query, so answers stay consistent."""
    path = OUPath(gp_mechanism_sigma(sensitivity, eps, delta, source=source), beta, rng)

    def released(x: ArrayLike) -> np.ndarray:
        x = require_array("x", x)
        return np.asarray(f(x), dtype=float) + path(x)

    return released


def ou_rkhs_norm_squared(x: ArrayLike, f: ArrayLike, beta: float) -> float:
    """Squared norm, in the RKHS of exp(-beta |x - y|) on [x_0, x_n], of the piecewise-linear
    interpolant of (x, f): (1/(2 beta)) int (f'^2 + beta^2 f^2) + (f(x_0)^2 + f(x_n)^2)/2,
    the order-1 Sobolev norm of Wang & Hegde (2019), Lemma 6 (exact for piecewise-linear f,
    e.g. ReLU networks on a grid holding their kinks)."""
    x = require_array("x", x, ndim=1)
    f = require_array("f", f, shape=x.shape)
    beta = require_positive("beta", beta)
    if x.size < 2 or np.any(np.diff(x) <= 0):
        raise ValueError("x must hold at least 2 strictly increasing points")
    dx, df = np.diff(x), np.diff(f)
    slope_part = np.sum(df ** 2 / dx)
    value_part = np.sum(dx * (f[:-1] ** 2 + f[:-1] * f[1:] + f[1:] ** 2) / 3)
    return float((slope_part + beta ** 2 * value_part) / (2 * beta) + (f[0] ** 2 + f[-1] ** 2) / 2)


def ou_whiten(x: ArrayLike, values: ArrayLike, beta: float) -> np.ndarray:
    """Innovations ``(v_k - rho_k v_{k-1}) / sqrt(1 - rho_k^2)``, ``rho_k = exp(-beta (x_k -
    x_{k-1}))`` (``v_{-1} = 0``), of values at strictly increasing points x (last axis): the
    Markov (AR(1)) factorisation of the kernel exp(-beta |x - y|), so ``<w(a), w(b)> =
    a^T K^{-1} b``. Under GP(0, sigma^2 K) the innovations are i.i.d. N(0, sigma^2);
    ``||w(f - f')||`` is the sensitivity of releasing f at the points x with
    Gaussian-process noise (Hall et al. 2013), which grows to the RKHS norm ||f - f'||_H
    (:func:`ou_rkhs_norm_squared`) as the points fill the interval (Wang & Hegde 2019,
    Sec. 2.2 and Lemma 6). O(n), no matrix inverted."""
    x = require_array("x", x, ndim=1)
    values = require_array("values", values)
    if values.shape[-1:] != x.shape:
        raise ValueError(f"values must end with an axis of {x.size} points, got {values.shape}")
    if np.any(np.diff(x) <= 0):
        raise ValueError("x must be strictly increasing")
    steps = require_positive("beta", beta) * np.diff(x)
    rho = np.exp(-steps)
    innovations = values.copy()
    innovations[..., 1:] = (values[..., 1:] - rho * values[..., :-1]) / np.sqrt(-np.expm1(
        -2 * steps))
    return innovations


def lemma6_norm_bound(sup_norm: float, lipschitz: float, beta: float,
                      length: float = 1.0) -> float:
    """Bound on ||f||_H^2 on [0, ``length``] from ||f||_inf and the Lipschitz constant L, the
    step of the proof of Theorem 5 that uses Lemma 6 (Wang & Hegde 2019): on [0, 1]
    (1 + beta/2) ||f||_inf^2 + L^2 / (2 beta); on [0, l] (1 + l beta/2) ||f||_inf^2 +
    l L^2 / (2 beta), the supremum over such f
    (:func:`~dprl.wang2019.canary.admissible_norm_sup`)."""
    sup_norm = require_positive("sup_norm", sup_norm)
    lipschitz = require_positive("lipschitz", lipschitz)
    beta = require_positive("beta", beta)
    length = require_positive("length", length)
    return (1 + length * beta / 2) * sup_norm ** 2 + length * lipschitz ** 2 / (2 * beta)


def theorem5_scale(alpha: float, k: float, batch_size: int) -> float:
    """v = 4 alpha (k + 1) / B: one update moves Q by at most v L in sup norm when
    max |g| <= k (proof of Theorem 5, Wang & Hegde 2019); the kernel width is 1/beta = v."""
    alpha, k = require_positive("alpha", alpha), require_positive("k", k)
    return 4 * alpha * (k + 1) / require_int("batch_size", batch_size)


def theorem5_beta(alpha: float, k: float, batch_size: int) -> float:
    """The kernel parameter beta = B / (4 alpha (k + 1)) chosen in the proof of Theorem 5
    (Wang & Hegde 2019, "1/beta = 4 alpha (k+1)/B"); the kernel printed a line later,
    exp(-4 alpha L (k+1) |x - y| / B), inverts it (and adds L): C needs beta = 1/v."""
    return 1 / theorem5_scale(alpha, k, batch_size)


def theorem5_constant(alpha: float, k: float, lipschitz: float, batch_size: int) -> float:
    """C(alpha, k, L, B) = ((4 alpha (k+1)/B)^2 + 4 alpha (k+1)/B) L^2 (Wang & Hegde 2019,
    Thm. 5), the bound on the squared RKHS sensitivity ||f||_H^2."""
    v = theorem5_scale(alpha, k, batch_size)
    return (v ** 2 + v) * require_positive("lipschitz", lipschitz) ** 2


def theorem5_composition_sigma(eps: float, delta: float, n_steps: float,
                               sensitivity: float) -> float:
    """sigma = sqrt(2 n ||f||_H^2 ln(e + eps/delta)) / eps: the noise for n Gaussian-process
    updates derived in the proof of Theorem 5 (Wang & Hegde 2019), n = T/B. Exact accounting
    (:func:`exact_composition_delta`) confirms it for eps up to about 12 and refutes it beyond
    (e.g. eps = 20, delta = 1e-6: the exact delta is ten times larger)."""
    eps, delta = require_epsilon(eps), require_delta(delta)
    n_steps = require_positive("n_steps", n_steps)
    sensitivity = require_positive("sensitivity", sensitivity)
    return math.sqrt(2 * n_steps * math.log(math.e + eps / delta)) * sensitivity / eps


def exact_composition_sigma(eps: float, delta: float, n_steps: float,
                            sensitivity: float) -> float:
    """The smallest sigma for which n adaptive Gaussian-process releases of RKHS sensitivity
    Delta_H are (eps, delta)-DP: one Gaussian mechanism of sensitivity sqrt(n) Delta_H (Hall
    et al. 2013; Dong, Roth & Su 2022), calibrated by the analytic Gaussian mechanism (Balle &
    Wang 2018), the exact alternative to Theorem 5's composition (Wang & Hegde 2019)."""
    n_steps = require_positive("n_steps", n_steps)
    return analytic_gaussian_sigma(math.sqrt(n_steps) * require_positive(
        "sensitivity", sensitivity), eps, delta)


def theorem5_sigma(eps: float, delta: float, T: int, batch_size: int, alpha: float, k: float,
                   lipschitz: float, *, variant: str = "proof",
                   composition: str = "theorem5") -> float:
    """Noise level of Algorithm 1 line 5 / Theorem 5 (Wang & Hegde 2019), T/B updates:
    ``"proof"`` sqrt(2 (T/B) C ln(e + eps/delta)) / eps (correct, see module docstring);
    ``"statement"`` sqrt(2 (T/B) ln(e + eps/delta)) C / eps, Theorem 5 read with C outside
    the root (the paper copy's root is not legible; the key does not say the paper prints
    it). ``composition="exact"`` composes the updates of sensitivity sqrt(C) (or C) exactly
    instead (:func:`exact_composition_sigma`)."""
    require_choice("variant", variant, SIGMA_VARIANTS)
    require_choice("composition", composition, COMPOSITIONS)
    constant = theorem5_constant(alpha, k, lipschitz, batch_size)
    n_steps = require_int("T", T) / batch_size
    sensitivity = math.sqrt(constant) if variant == "proof" else constant
    compose = theorem5_composition_sigma if composition == "theorem5" else exact_composition_sigma
    return compose(eps, delta, n_steps, sensitivity)


def lemma8_offset(sigma: float, beta: float) -> float:
    """8.68 sqrt(beta) sigma, Lemma 8's bound on E max_{[0,1]} g (Wang & Hegde 2019)."""
    return LEMMA8_CONSTANT * math.sqrt(require_positive("beta", beta)) * require_positive(
        "sigma", sigma)


def lemma8_tail_bound(u: ArrayLike, sigma: float, *, variant: str = "statement") -> np.ndarray:
    """Bound on P(max_{[0,1]} g > 8.68 sqrt(beta) sigma + u), g ~ GP(0, sigma^2 K), u >= 0
    (Wang & Hegde 2019, Lemma 8). ``"statement"``: exp(-u^2/2) as printed, which holds only
    for sigma <= 1 (a sigma = 3, beta = 0.01 path already has P(g(0) > 8.68 sqrt(beta) sigma
    + 4) = 0.014 > e^-8); ``"borell-tis"``: exp(-u^2 / (2 sigma^2)), the Borell-TIS
    inequality (Adler & Taylor 2007, Thm. 2.1.1) that the lemma rests on."""
    u = require_array("u", u)
    if np.any(u < 0):
        raise ValueError(f"u must be >= 0, got min {u.min()}")
    require_choice("variant", variant, TAIL_VARIANTS)
    scale = 1.0 if variant == "statement" else require_positive("sigma", sigma)
    return np.exp(-u ** 2 / (2 * scale ** 2))


def sample_path_maxima(sigma: float, beta: float, n_paths: int, rng: np.random.Generator,
                       grid_size: int = 1025) -> np.ndarray:
    """max over an even grid of [0, 1] of n_paths independent GP(0, sigma^2 exp(-beta |x-y|))
    paths: the empirical side of Lemma 8 (Wang & Hegde 2019); a grid maximum is a lower
    bound on the path maximum."""
    grid = np.linspace(0.0, 1.0, require_int("grid_size", grid_size, minimum=2))
    return OUPath(sigma, beta, rng, n_paths=require_int("n_paths", n_paths))(grid).max(axis=1)


def theorem5_delta(delta: float, k: float, sigma: float, beta: float, resets: int, *,
                   tail: str = "statement") -> float:
    """Total delta of Algorithm 1 (Wang & Hegde 2019, Thm. 5): delta plus ``resets`` = J
    times the chance that a path breaks the bound max |g| <= k used in the proof.
    ``"statement"``: delta + J exp(-(2k - 8.68 sqrt(beta) sigma)^2 / 2) as printed, needs
    2k > 8.68 sqrt(beta) sigma. ``"borell-tis"``: delta + 2 J exp(-(k - 8.68 sqrt(beta)
    sigma)^2 / (2 sigma^2)), the union of max g > k and min g < -k under
    :func:`lemma8_tail_bound` (Borell-TIS), needs k > 8.68 sqrt(beta) sigma."""
    delta = require_probability("delta", delta, open_high=True)
    margin = _tail_margin(require_positive("k", k), sigma, beta, tail)
    resets = require_int("resets", resets)
    if margin <= 0:
        raise ValueError(f"Theorem 5 needs a positive margin, got {margin} (k too small)")
    return delta + (1 if tail == "statement" else 2) * resets * math.exp(-margin ** 2 / 2)


def _tail_margin(k: float, sigma: float, beta: float, tail: str) -> float:
    """The standardised margin of the bound max |g| <= k in :func:`theorem5_delta`."""
    require_choice("tail", tail, TAIL_VARIANTS)
    offset = lemma8_offset(sigma, beta)
    return 2 * k - offset if tail == "statement" else (k - offset) / sigma


@dataclass(frozen=True)
class Theorem5Calibration:
    """A parameter set meeting Theorem 5 (Wang & Hegde 2019): the path bound k, the
    kernel parameter beta, C(alpha, k, L, B), the noise level sigma and the total delta."""

    k: float
    beta: float
    constant: float
    sigma: float
    total_delta: float


def calibrate_theorem5(eps: float, delta: float, T: int, batch_size: int, alpha: float,
                       lipschitz: float, resets: int, tail_delta: float, *,
                       variant: str = "proof", tail: str = "statement",
                       composition: str = "theorem5") -> Theorem5Calibration:
    """The smallest k (on a geometric grid, refined by bisection) whose Theorem 5 tail
    term J exp(...) is at most ``tail_delta``, with sigma and beta = B / (4 alpha (k+1)) from
    :func:`theorem5_sigma` at that k (Wang & Hegde 2019, Thm. 5 and Alg. 1 line 5): the
    algorithm is then (eps, delta + tail_delta)-DP. Sigma and beta both depend on k; J = ``resets``
    fresh paths over the T/B updates; ``composition`` as in :func:`theorem5_sigma`."""
    require_probability("tail_delta", tail_delta, open_low=True, open_high=True)
    if require_int("resets", resets) > require_int("T", T) / require_int("batch_size", batch_size):
        raise ValueError(f"resets (J) must be at most T/B = {T / batch_size}, got {resets}")
    copies = 1 if tail == "statement" else 2
    needed = math.sqrt(2 * math.log(copies * resets / tail_delta))

    def meets(k: float) -> bool:
        sigma = theorem5_sigma(eps, delta, T, batch_size, alpha, k, lipschitz, variant=variant,
                               composition=composition)
        return _tail_margin(k, sigma, theorem5_beta(alpha, k, batch_size), tail) >= needed

    grid = np.geomspace(1e-6, 1e12, 361)
    first = next((i for i, k in enumerate(grid) if meets(k)), None)
    if first is None:
        raise ValueError("no path bound k in [1e-6, 1e12] meets the tail target")
    k = grid[0] if first == 0 else _bisect(meets, grid[first - 1], grid[first])[1]
    sigma = theorem5_sigma(eps, delta, T, batch_size, alpha, k, lipschitz, variant=variant,
                           composition=composition)
    beta = theorem5_beta(alpha, k, batch_size)
    return Theorem5Calibration(k, beta, theorem5_constant(alpha, k, lipschitz, batch_size),
                               sigma, theorem5_delta(delta, k, sigma, beta, resets, tail=tail))


def _bisect(predicate: Callable[[float], bool], lo: float, hi: float,
            rtol: float = 1e-12) -> tuple[float, float]:
    """Geometric bisection of [lo, hi] with predicate(lo) false and predicate(hi) true, to
    hi <= lo (1 + rtol); returns the final (lo, hi). A numerical routine (no paper)."""
    while hi > lo * (1 + rtol):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if predicate(mid) else (mid, hi)
    return lo, hi


def exact_composition_delta(eps: float, sigma: float, sensitivity: float, n_steps: int) -> float:
    """Exact delta(eps) of n adaptive Gaussian-process releases with RKHS sensitivity
    Delta_H and noise GP(0, sigma^2 K): their privacy loss is that of one Gaussian mechanism
    of sensitivity sqrt(n) Delta_H (Hall et al. 2013; Balle & Wang 2018, Thm. 8), the yard
    stick for Theorem 5's composition (Wang & Hegde 2019)."""
    n_steps = require_int("n_steps", n_steps)
    return gaussian_delta(require_epsilon(eps),
                          math.sqrt(n_steps) * require_positive("sensitivity", sensitivity),
                          sigma)


def kov13_sigma(eps: float, delta: float, n_steps: int, sensitivity: float) -> float:
    """sqrt(2 n ln(1.25/delta) ln(e + eps/delta)) Delta_H / eps: the noise the composition
    theorem of Kairouz, Oh & Viswanath (2013) gives for n steps, as quoted in the proof of
    Theorem 5 (Wang & Hegde 2019) as "the best known bound"."""
    eps, delta = require_epsilon(eps), require_delta(delta)
    n_steps = require_int("n_steps", n_steps)
    sensitivity = require_positive("sensitivity", sensitivity)
    return math.sqrt(2 * n_steps * math.log(1.25 / delta) * math.log(math.e + eps / delta)) \
        * sensitivity / eps


def advanced_composition_sigma(eps: float, delta: float, n_steps: int, sensitivity: float, *,
                               delta_split: float = 0.5) -> float:
    """Noise for n Gaussian-process steps (Prop. 4, per step (eps0, delta0)) composed by the
    advanced composition theorem (Dwork, Rothblum & Vadhan 2010; Dwork & Roth 2014,
    Cor. 3.21): delta' = delta_split delta, delta0 = (1 - delta_split) delta / n, and eps0
    the largest per-step epsilon whose composition stays within eps (bisection)."""
    eps, delta = require_epsilon(eps), require_delta(delta)
    n_steps = require_int("n_steps", n_steps)
    split = require_probability("delta_split", delta_split, open_low=True, open_high=True)
    delta0, delta_prime = (1 - split) * delta / n_steps, split * delta
    eps0, _ = _bisect(lambda e: advanced_composition(e, delta0, n_steps, delta_prime)[0] > eps,
                      eps * 1e-12, eps)
    return gp_mechanism_sigma(sensitivity, eps0, delta0)


#: Assumed settings of the authors' experiment (App. E.3 is not public): 100 episodes of 50
#: steps, batch 128, PyTorch's RMSprop default learning rate 0.01, a Lipschitz constant of
#: 1 for the Q-network, target delta 1e-4 (Fig. 2) split evenly between the mechanism and
#: the tail term.
AUTHORS_SETTING = {"episodes": 100, "steps": 50, "batch_size": 128, "alpha": 0.01,
                   "lipschitz": 1.0, "delta_total": 1e-4}


def dqn_calibration(eps: float, config: QLearningConfig, reading: str = "updates",
                    mdp: LineMDP = LineMDP(), *,
                    delta_total: float = AUTHORS_SETTING["delta_total"],
                    lipschitz: float = AUTHORS_SETTING["lipschitz"],
                    composition: str = "theorem5") -> Theorem5Calibration:
    """Theorem 5 (Wang & Hegde 2019) for Algorithm 1 run inside the DQN ``config`` (Fig. 2):
    learning rate alpha = ``config.learning_rate``, batch B, Lipschitz constant ``lipschitz``,
    total delta split evenly between the mechanism and the tail term, tail as printed
    (:func:`calibrate_theorem5`). ``reading`` says how T/B, J and sigma are read:

    - ``"updates"``: the proof's sigma with T/B = the SGD updates the DQN makes (one per
      step once B transitions are stored) and J = the paths it draws (one per
      ``reset_period`` steps): the reading whose guarantee covers the run;
    - ``"iterations"``: the proof's sigma with T/B = floor(steps / B), Alg. 1's count of
      iterations (one update per B transitions), and J = T/B: it ignores the DQN's extra
      updates, so it does not cover the run;
    - ``"outside"``: Theorem 5 read with C outside the root (a reading the paper copy
      cannot rule out; module docstring) with the ``"iterations"`` count: under-noised twice
      over.

    The updates are composed by Theorem 5's bound or exactly (``composition``, as in
    :func:`theorem5_sigma`). With ``config.schedule="iterations"`` (Alg. 1 read literally)
    the DQN's updates are Alg. 1's iterations, and ``"updates"`` counts those."""
    require_choice("reading", reading, READINGS)
    if not isinstance(config, QLearningConfig):
        raise ValueError(f"config must be a QLearningConfig, got {type(config).__name__}")
    steps, batch = n_rewards(config, mdp), config.batch_size
    if reading == "updates":
        n_updates, resets = dp_sgd_updates(config, mdp), -(-steps // config.reset_period)
    else:
        n_updates = resets = require_int("steps // batch_size", steps // batch)
    variant = "statement" if reading == "outside" else "proof"
    delta_total = require_delta(delta_total, "delta_total")
    return calibrate_theorem5(eps, delta_total / 2, n_updates * batch, batch,
                              config.learning_rate, lipschitz, resets, delta_total / 2,
                              variant=variant, composition=composition)


def authors_calibration(eps: float, n_updates: int, resets: int, *, variant: str = "proof",
                        tail: str = "statement", alpha: float = AUTHORS_SETTING["alpha"],
                        lipschitz: float = AUTHORS_SETTING["lipschitz"]) -> Theorem5Calibration:
    """:func:`calibrate_theorem5` at the assumed settings of Wang & Hegde (2019, Sec. 4,
    App. E.3) with T = n_updates B: n_updates = 39 for Algorithm 1 read literally (T = 5000
    transitions, B = 128), 5000 for the authors' DQN (one update per step); J = ``resets``."""
    delta_total = AUTHORS_SETTING["delta_total"]
    batch = AUTHORS_SETTING["batch_size"]
    return calibrate_theorem5(eps, delta_total / 2, require_int("n_updates", n_updates) * batch,
                              batch, alpha, lipschitz, resets, delta_total / 2,
                              variant=variant, tail=tail)


def theorem5_premises(config: QLearningConfig, calibration: Theorem5Calibration,
                      lipschitz: float, mdp: LineMDP = LineMDP(), *,
                      assumed_lipschitz: float = AUTHORS_SETTING["lipschitz"],
                      tail_delta: float = AUTHORS_SETTING["delta_total"] / 2) -> dict[str, float]:
    """What the proof of Theorem 5 (Wang & Hegde 2019) needs of a run, measured on
    ``config`` and its ``calibration``: ``updates_per_path``, the SGD updates each noise path
    serves (the proof adds a fresh Gaussian-process draw per update: needs <= 1);
    ``plain_sgd_squared``, 1.0 when the update is line 22's plain SGD step on line 20's
    squared loss without clamping (the proof's one-step bound ``||Q - Q_0||_inf <= v L``),
    else 0.0; ``lipschitz_over_assumed``, a measured Lipschitz constant of the network over
    the L the calibration assumed (needs <= 1; a measurement on one run is a lower bound on
    the worst case the proof needs); ``tail_margin_in_sigma``, ``(k - 8.68 sqrt(beta)
    sigma) / sigma``, against ``tail_margin_needed``, ``sqrt(2 ln(2 J / tail_delta))``, for
    the Borell-TIS tail with Lemma 8's mean bound to stay within ``tail_delta``
    (:func:`lemma8_tail_bound`)."""
    if not isinstance(calibration, Theorem5Calibration):
        raise ValueError(f"calibration must be a Theorem5Calibration, got "
                         f"{type(calibration).__name__}")
    updates = dp_sgd_updates(config, mdp)
    paths = -(-n_rewards(config, mdp) // config.reset_period)
    plain = (config.optimizer == "sgd" and config.loss == "squared" and config.grad_clip is None)
    margin = (calibration.k - lemma8_offset(calibration.sigma, calibration.beta)) / calibration.sigma
    return {"updates_per_path": updates / min(paths, updates),
            "plain_sgd_squared": float(plain),
            "lipschitz_over_assumed": require_positive("lipschitz", lipschitz)
            / require_positive("assumed_lipschitz", assumed_lipschitz),
            "tail_margin_in_sigma": margin,
            "tail_margin_needed": math.sqrt(2 * math.log(2 * min(paths, updates) / require_probability(
                "tail_delta", tail_delta, open_low=True, open_high=True)))}

