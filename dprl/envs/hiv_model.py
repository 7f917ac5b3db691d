"""The HIV infection model of Adams et al. (2004) in the form used by Ernst et al. (2006), and a
vectorised stiff integrator for many patients at once.

State ``x = (T1, T2, T1*, T2*, V, E)`` (cells or copies per ml, time in days); drug
efficacies ``e1`` (reverse-transcriptase inhibitor) and ``e2`` (protease inhibitor):

- dT1  = l1 - d1 T1 - (1 - e1) k1 V T1
- dT2  = l2 - d2 T2 - (1 - f e1) k2 V T2
- dT1* = (1 - e1) k1 V T1 - delta T1* - m1 E T1*
- dT2* = (1 - f e1) k2 V T2 - delta T2* - m2 E T2*
- dV   = (1 - e2) NT delta (T1* + T2*) - c V - [(1 - e1) rho1 k1 T1 + (1 - f e1) rho2 k2 T2] V
- dE   = lE + bE I / (I + Kb) E - dE I / (I + Kd) E - deltaE E,  with I = T1* + T2*.

The integrator (:func:`integrate`) is the linearly implicit Euler method extrapolated on the
harmonic sequence 1, ..., 10 (Deuflhard 1985; Hairer & Wanner, Solving ODEs II, Sec. IV.9,
the fixed-order core of SEULEX) with the exact Jacobian, applied to ``y = ln x`` so the state
stays positive and the error control is relative. Every patient has its own adaptive step
size; all patients (in blocks of ``_BLOCK``), and the ten sub-step sequences of each step,
advance together in numpy. The linear systems ``I - h J`` are inverted by Gauss-Jordan
elimination that skips the Jacobian's structural zeros (:data:`_PATTERN`): the same bits as
the dense elimination, with 84 instead of 216 multiply-subtracts per matrix.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.integrate import solve_ivp

from dprl.validation import (require_array, require_nonnegative, require_positive,
                             require_probability)

STATE_NAMES = ("T1", "T2", "T1*", "T2*", "V", "E")
UNHEALTHY_STEADY_STATE = (163573.0, 5.0, 11945.0, 46.0, 63919.0, 24.0)
HEALTHY_STEADY_STATE = (967839.0, 621.0, 76.0, 6.0, 415.0, 353108.0)

# Extrapolation: T_kk = sum_j w_j T_j1 with the weights of the polynomial through the nodes
# h_j = H / n_j evaluated at h = 0 (Aitken-Neville in closed form); the error estimate is
# T_kk - T_{k,k-1}, of order H^k.
_SEQUENCE = np.arange(1, 11)
_SAFETY, _MAX_GROWTH, _MAX_SHRINK = 0.9, 4.0, 0.1
_INITIAL_STEP = 0.05  # days
_MAX_ITERATIONS = 100_000
_MIN_PIVOT = 1e-3  # the diagonal of I - h J is >= 1; smaller pivots switch to LAPACK
_BLOCK = 1024  # patients per extrapolation step (the working arrays stay in cache)


def _extrapolation_weights(sequence: np.ndarray) -> np.ndarray:
    """Weights of the polynomial through ``(1 / n_j, T_j)`` evaluated at 0."""
    n = sequence.astype(float)
    return np.array([np.prod([nj / (nj - nl) for nl in n if nl != nj]) for nj in n])


_WEIGHTS = _extrapolation_weights(_SEQUENCE)
_RUNNING = np.searchsorted(_SEQUENCE, np.arange(_SEQUENCE[-1]), side="right")  # first n_j > i
_ERROR_WEIGHTS = _WEIGHTS - np.concatenate([[0.0], _extrapolation_weights(_SEQUENCE[1:])])


@dataclass(frozen=True)
class HIVConstants:
    """The constants of the Adams et al. (2004) model with the values of Ernst et al. (2006).

    Rates are per day. All are finite and >= 0; ``f`` lies in [0, 1] and the saturation
    constants ``k_b``, ``k_d`` are > 0.
    """

    lambda1: float = 1e4      # production of type-1 target cells (CD4+ T cells)
    lambda2: float = 31.98    # production of type-2 target cells (macrophages)
    d1: float = 0.01          # death rate of type-1 target cells
    d2: float = 0.01          # death rate of type-2 target cells
    f: float = 0.34           # efficacy reduction of drug 1 in type-2 cells
    k1: float = 8e-7          # infection rate, type 1
    k2: float = 1e-4          # infection rate, type 2
    delta: float = 0.7        # death rate of infected cells
    m1: float = 1e-5          # immune-induced clearance, type 1
    m2: float = 1e-5          # immune-induced clearance, type 2
    n_t: float = 100.0        # virions produced per infected cell
    c: float = 13.0           # natural death rate of virions
    rho1: float = 1.0         # virions infecting a type-1 cell
    rho2: float = 1.0         # virions infecting a type-2 cell
    lambda_e: float = 1.0     # production of immune effectors
    b_e: float = 0.3          # maximum birth rate of immune effectors
    k_b: float = 100.0        # saturation constant of effector birth
    d_e: float = 0.25         # maximum death rate of immune effectors
    k_d: float = 500.0        # saturation constant of effector death
    delta_e: float = 0.1      # natural death rate of immune effectors

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            check = {"f": require_probability, "k_b": require_positive,
                     "k_d": require_positive}.get(name, require_nonnegative)
            object.__setattr__(self, name, check(name, value))


def _check_batch(states: np.ndarray, efficacies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """States ``(n, 6)`` (all > 0) and efficacies ``(n, 2)`` (in [0, 1]) as float arrays."""
    states = require_array("states", states, shape=(None, 6))
    efficacies = require_array("efficacies", efficacies, shape=(states.shape[0], 2))
    if states.min() <= 0:
        raise ValueError(f"states must be > 0, got minimum {states.min()}")
    if efficacies.min() < 0 or efficacies.max() > 1:
        raise ValueError("efficacies must lie in [0, 1], got values in "
                         f"[{efficacies.min()}, {efficacies.max()}]")
    return states, efficacies


def _rates(efficacies: np.ndarray, p: HIVConstants) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Effective infection rates ``(1 - e1) k1``, ``(1 - f e1) k2`` and virion production
    ``(1 - e2) NT delta``, each ``(n,)``."""
    e1, e2 = efficacies[:, 0], efficacies[:, 1]
    return (1 - e1) * p.k1, (1 - p.f * e1) * p.k2, (1 - e2) * p.n_t * p.delta


def _derivatives(x: np.ndarray, rates: tuple[np.ndarray, ...], p: HIVConstants) -> np.ndarray:
    """The right-hand side, component-major: ``x`` is ``(6, ...)``, the rates broadcast
    against ``x[0]``."""
    t1, t2, i1, i2, v, e = x
    u1, u2, production = rates
    inf1, inf2, infected = u1 * v * t1, u2 * v * t2, i1 + i2
    f = np.empty(x.shape)
    f[0] = p.lambda1 - p.d1 * t1 - inf1
    f[1] = p.lambda2 - p.d2 * t2 - inf2
    f[2] = inf1 - (p.delta + p.m1 * e) * i1
    f[3] = inf2 - (p.delta + p.m2 * e) * i2
    f[4] = production * infected - (p.c + p.rho1 * u1 * t1 + p.rho2 * u2 * t2) * v
    f[5] = p.lambda_e + (p.b_e * infected / (infected + p.k_b)
                         - p.d_e * infected / (infected + p.k_d) - p.delta_e) * e
    return f


def _jacobian(x: np.ndarray, rates: tuple[np.ndarray, ...], p: HIVConstants) -> np.ndarray:
    """``J[i, j] = d f_i / d x_j``, component-major: ``(6, 6, ...)`` for ``x`` ``(6, ...)``."""
    t1, t2, i1, i2, v, e = x
    u1, u2, production = rates
    infected = i1 + i2
    J = np.zeros((6, 6) + np.broadcast_shapes(t1.shape, u1.shape))
    J[0, 0], J[0, 4] = -p.d1 - u1 * v, -u1 * t1
    J[1, 1], J[1, 4] = -p.d2 - u2 * v, -u2 * t2
    J[2, 0], J[2, 2], J[2, 4], J[2, 5] = u1 * v, -p.delta - p.m1 * e, u1 * t1, -p.m1 * i1
    J[3, 1], J[3, 3], J[3, 4], J[3, 5] = u2 * v, -p.delta - p.m2 * e, u2 * t2, -p.m2 * i2
    J[4, 0], J[4, 1] = -p.rho1 * u1 * v, -p.rho2 * u2 * v
    J[4, 2] = J[4, 3] = production
    J[4, 4] = -p.c - p.rho1 * u1 * t1 - p.rho2 * u2 * t2
    J[5, 2] = J[5, 3] = (p.b_e * p.k_b / (infected + p.k_b) ** 2
                         - p.d_e * p.k_d / (infected + p.k_d) ** 2) * e
    J[5, 5] = (p.b_e * infected / (infected + p.k_b)
               - p.d_e * infected / (infected + p.k_d) - p.delta_e)
    return J


def derivatives(states: np.ndarray, efficacies: np.ndarray,
                constants: HIVConstants = HIVConstants()) -> np.ndarray:
    """The right-hand side of the Adams et al. (2004) / Ernst et al. (2006) model, ``(n, 6)``,
    for states ``(n, 6)`` and per-patient efficacies ``(e1, e2)`` ``(n, 2)``."""
    states, efficacies = _check_batch(states, efficacies)
    return _derivatives(states.T, _rates(efficacies, constants), constants).T


def jacobian(states: np.ndarray, efficacies: np.ndarray,
             constants: HIVConstants = HIVConstants()) -> np.ndarray:
    """The Jacobian ``J[k, i, j] = d f_i / d x_j`` of :func:`derivatives` (Adams et al. 2004
    model), ``(n, 6, 6)``."""
    states, efficacies = _check_batch(states, efficacies)
    return np.moveaxis(_jacobian(states.T, _rates(efficacies, constants), constants), -1, 0)


def _log_rhs(y: np.ndarray, rates: tuple[np.ndarray, ...], p: HIVConstants) -> np.ndarray:
    """The model in ``y = ln x``, ``g(y) = f(x) / x``, written out per component
    (component-major; the rates broadcast against ``y[0]``), each component evaluated in
    place, operation by operation as its formula reads (no temporaries per operation)."""
    t1, t2, i1, i2, v, e = np.exp(y)
    u1, u2, production = rates
    u1v, u2v, infected = u1 * v, u2 * v, i1 + i2
    g, work = np.empty(y.shape), np.empty(v.shape)
    np.divide(p.lambda1, t1, out=g[0])  # lambda1 / t1 - d1 - u1 v
    g[0] -= p.d1
    g[0] -= u1v
    np.divide(p.lambda2, t2, out=g[1])  # lambda2 / t2 - d2 - u2 v
    g[1] -= p.d2
    g[1] -= u2v
    for row, uv, t, i, m in ((2, u1v, t1, i1, p.m1), (3, u2v, t2, i2, p.m2)):
        np.multiply(uv, t, out=g[row])  # u v t / i - delta - m e
        g[row] /= i
        g[row] -= p.delta
        g[row] -= np.multiply(m, e, out=work)
    np.multiply(production, infected, out=g[4])  # production I / v - c - rho1 u1 t1 - ...
    g[4] /= v
    g[4] -= p.c
    g[4] -= np.multiply(p.rho1 * u1, t1, out=work)
    g[4] -= np.multiply(p.rho2 * u2, t2, out=work)
    np.divide(p.lambda_e, e, out=g[5])  # lambda_E / E + bE I / (I + Kb) - dE I / (I + Kd) - ...
    g[5] += np.divide(np.multiply(p.b_e, infected, out=work), infected + p.k_b, out=work)
    g[5] -= np.divide(np.multiply(p.d_e, infected, out=work), infected + p.k_d, out=work)
    g[5] -= p.delta_e
    return g


def _log_jacobian(y: np.ndarray, rates: tuple[np.ndarray, ...],
                  p: HIVConstants) -> tuple[np.ndarray, np.ndarray]:
    """``g(y)`` and its Jacobian ``diag(1/x) J diag(x) - diag(g)``, component-major."""
    x = np.exp(y)
    g = _derivatives(x, rates, p) / x
    Jg = _jacobian(x, rates, p) * (x[None] / x[:, None])
    Jg[np.arange(6), np.arange(6)] -= g
    return g, Jg


def _elimination(pattern: tuple[tuple[int, ...], ...]
                 ) -> tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]:
    """The work of in-place Gauss-Jordan on the diagonal for matrices whose nonzeros lie in
    ``pattern`` (row ``i``'s nonzero columns, diagonal included), found symbolically: per
    pivot ``c``, the rows ``i != c`` with a nonzero in column ``c`` and the nonzero columns
    of row ``c`` (with fill-in). Every other entry of the rank-one update is ``x - 0 y``."""
    nonzero = np.zeros((6, 6), dtype=bool)
    for i, columns in enumerate(pattern):
        nonzero[i, list(columns)] = True
    plan = []
    for c in range(6):
        rows = tuple(int(i) for i in np.flatnonzero(nonzero[:, c]) if i != c)
        columns = tuple(int(j) for j in np.flatnonzero(nonzero[c]))
        nonzero[np.ix_(rows, columns)] = True
        plan.append((c, rows, columns))
    return tuple(plan)


# The nonzeros of the Jacobian (and of I - h J), row by row, read off the equations above.
_PATTERN = ((0, 4), (1, 4), (0, 2, 4, 5), (1, 3, 4, 5), (0, 1, 2, 3, 4), (2, 3, 5))
_NONZERO = tuple((i, j) for i, columns in enumerate(_PATTERN) for j in columns)
_ELIMINATION = _elimination(_PATTERN)


def _invert(A: np.ndarray) -> np.ndarray:
    """Inverses of the 6 x 6 matrices ``A[:, :, k]`` (``A`` is ``(6, 6, N)``, nonzero only in
    :data:`_PATTERN`): in-place Gauss-Jordan elimination on the diagonal, vectorised over
    ``k``, skipping the updates by structural zeros (:func:`_elimination`); matrices that
    meet a pivot below ``_MIN_PIVOT`` are inverted by LAPACK with partial pivoting instead
    (NaN if singular, which makes the integrator reject the step)."""
    inverse, smallest_pivot = A.copy(), np.full(A.shape[2], np.inf)
    product = np.empty(A.shape[2])
    with np.errstate(divide="ignore", invalid="ignore"):
        for c, rows, columns in _ELIMINATION:
            pivot = inverse[c, c].copy()
            smallest_pivot = np.fmin(smallest_pivot, np.abs(pivot))
            for j in columns:
                inverse[c, j] = 1.0 / pivot if j == c else inverse[c, j] / pivot
            for i in rows:
                factor = inverse[i, c].copy()
                inverse[i, c] = 0.0
                for j in columns:
                    np.multiply(factor, inverse[c, j], out=product)
                    np.subtract(inverse[i, j], product, out=inverse[i, j])
    fallback = ~(smallest_pivot >= _MIN_PIVOT)
    if fallback.any():
        inverse[:, :, fallback] = _pivoted_inverse(A[:, :, fallback])
    return inverse


def _pivoted_inverse(A: np.ndarray) -> np.ndarray:
    """``numpy.linalg.inv`` of the matrices ``A[:, :, k]``; all NaN if one is singular."""
    try:
        return np.moveaxis(np.linalg.inv(np.moveaxis(A, -1, 0)), 0, -1)
    except np.linalg.LinAlgError:
        return np.full_like(A, np.nan)


def _matvec(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``A[:, :, ...] @ b[:, ...]`` for component-major stacks."""
    return np.einsum("ij...,j...->i...", A, b)


def _extrapolation_step(y: np.ndarray, H: np.ndarray, rates: tuple[np.ndarray, ...],
                        p: HIVConstants) -> tuple[np.ndarray, np.ndarray]:
    """One extrapolated linearly implicit Euler step of size ``H`` ``(m,)`` from log-states
    ``y`` ``(6, m)``; all sub-step sequences run side by side. Returns the new log-states and
    the error estimate."""
    g0, Jg = _log_jacobian(y, rates, p)
    k, m = _SEQUENCE.size, y.shape[1]
    h = H / _SEQUENCE[:, None]
    W = np.zeros((6, 6, k, m))
    for i, j in _NONZERO:
        W[i, j] = float(i == j) - h * Jg[i, j]
    W_inv = _invert(W.reshape(6, 6, k * m)).reshape(6, 6, k, m)
    Z = _matvec(W_inv, h * g0[:, None])
    for i in range(1, _SEQUENCE[-1]):
        s = _RUNNING[i]
        g = _log_rhs(y[:, None] + Z[:, s:], rates, p)
        Z[:, s:] += _matvec(W_inv[:, :, s:], h[s:] * g)
    return y + _combine(_WEIGHTS, Z), _combine(_ERROR_WEIGHTS, Z)


def _blocked_step(y: np.ndarray, H: np.ndarray, rates: tuple[np.ndarray, ...],
                  p: HIVConstants) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_extrapolation_step` on blocks of at most ``_BLOCK`` patients, so that the
    working arrays (``(6, 6, 10, block)`` inverses) stay in cache; the same bits, since every
    patient is stepped on its own."""
    starts = range(0, y.shape[1], _BLOCK)
    steps = [_extrapolation_step(y[:, k:k + _BLOCK], H[k:k + _BLOCK],
                                 tuple(r[k:k + _BLOCK] for r in rates), p) for k in starts]
    return tuple(np.concatenate(parts, axis=1) for parts in zip(*steps))


def _combine(weights: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """``sum_j weights[j] Z[:, j]``, summed in order (the same rounding for every patient,
    whatever the batch)."""
    total = weights[0] * Z[:, 0]
    for j in range(1, weights.size):
        total = total + weights[j] * Z[:, j]
    return total


def integrate(states: np.ndarray, efficacies: np.ndarray, days: float,
              constants: HIVConstants = HIVConstants(), tol: float = 1e-8) -> np.ndarray:
    """Advance each patient of ``states`` ``(n, 6)`` by ``days`` with its efficacies ``(n, 2)``
    held (one treatment step of Ernst et al. 2006): extrapolated linearly implicit Euler on
    the log-state, one adaptive step size per patient, all patients vectorised.

    ``tol`` bounds the estimated local error of every component of ``ln x`` per step (a
    relative error on ``x``). Raises ``RuntimeError`` if a patient's step size collapses.
    """
    states, efficacies = _check_batch(states, efficacies)
    days = require_positive("days", days)
    tol = require_positive("tol", tol)
    n = states.shape[0]
    y, t = np.ascontiguousarray(np.log(states).T), np.zeros(n)
    h, rejected = np.full(n, min(days, _INITIAL_STEP)), np.zeros(n, dtype=bool)
    rates = _rates(efficacies, constants)
    active = np.arange(n)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        for _ in range(_MAX_ITERATIONS):
            if active.size == 0:
                return np.exp(y).T.copy()
            active = _advance(y, t, h, rejected, active, rates, days, tol, constants)
    raise RuntimeError(f"integrate: {active.size} patients unfinished after "
                       f"{_MAX_ITERATIONS} steps")


def _advance(y: np.ndarray, t: np.ndarray, h: np.ndarray, rejected: np.ndarray,
             active: np.ndarray, rates: tuple[np.ndarray, ...], days: float, tol: float,
             p: HIVConstants) -> np.ndarray:
    """Attempt one step for every active patient, in place: accepted steps update ``y`` and
    ``t``; every attempt updates the patient's step size (factor in [0.1, 4], no growth right
    after a rejection). Returns the patients still short of ``days``."""
    last = t[active] + 1.0001 * h[active] >= days
    step = np.where(last, days - t[active], h[active])
    y_new, error = _blocked_step(y[:, active], step, tuple(r[active] for r in rates), p)
    err = np.max(np.abs(error), axis=0) / tol
    err = np.where(np.isfinite(err) & np.all(np.isfinite(y_new), axis=0), err, np.inf)
    accept = err <= 1.0
    factor = np.clip(err ** (1.0 / _SEQUENCE.size) / _SAFETY, 1 / _MAX_GROWTH, 1 / _MAX_SHRINK)
    h_next = np.where(accept & rejected[active], np.minimum(step / factor, step), step / factor)
    if np.any(h_next < 1e-12 * days):
        raise RuntimeError("integrate: step size underflow (the state is not finite or the "
                           "problem is too stiff for the tolerance)")
    done = active[accept]
    y[:, done] = y_new[:, accept]
    t[done] = np.where(last[accept], days, t[done] + step[accept])
    h[active], rejected[active] = h_next, ~accept
    return active[t[active] < days]


def integrate_reference(states: np.ndarray, efficacies: np.ndarray, days: float,
                        constants: HIVConstants = HIVConstants(), method: str = "LSODA",
                        rtol: float = 1e-10, atol: float = 1e-12) -> np.ndarray:
    """The step of :func:`integrate`, one patient at a time with ``scipy.integrate.solve_ivp``
    on the untransformed Adams et al. (2004) model (the reference solver). ``atol`` is
    relative to each patient's initial state, component by component."""
    states, efficacies = _check_batch(states, efficacies)
    days = require_positive("days", days)
    rates = _rates(efficacies, constants)
    out = np.empty_like(states)
    for i, x0 in enumerate(states):
        patient_rates = tuple(r[i] for r in rates)
        solution = solve_ivp(lambda _, x: _derivatives(x, patient_rates, constants),
                             (0.0, days), x0, method=method, rtol=rtol, atol=atol * x0)
        if not solution.success:
            raise RuntimeError(f"solve_ivp ({method}) failed for patient {i}: "
                               f"{solution.message}")
        out[i] = solution.y[:, -1]
    return out


def fixed_point(state, efficacies=(0.0, 0.0), constants: HIVConstants = HIVConstants(),
                tol: float = 1e-14) -> np.ndarray:
    """The steady state of the Adams et al. (2004) model with the efficacies ``(e1, e2)``
    held, found by Newton's method (``scipy.optimize.root``, hybrid Powell with the exact
    Jacobian) on ``g(ln x) = f(x) / x = 0`` from ``state`` ``(6,)`` (> 0), e.g. the rounded
    steady states of Ernst et al. (2006). Raises ``RuntimeError`` if it does not converge."""
    from scipy.optimize import root

    start = require_array("state", state, shape=(6,))
    if start.min() <= 0:
        raise ValueError(f"state must be > 0 in every component, got {tuple(start)}")
    states, held = _check_batch(start[None], np.asarray(efficacies, dtype=float)[None])
    rates = _rates(held, constants)

    def residual_and_jacobian(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g, Jg = _log_jacobian(y[:, None], rates, constants)
        return g[:, 0], Jg[:, :, 0]

    solution = root(residual_and_jacobian, np.log(states[0]), jac=True, tol=tol)
    if not solution.success:
        raise RuntimeError(f"fixed_point: no convergence from {tuple(start)}: "
                           f"{solution.message}")
    return np.exp(solution.x)
