"""Acrobot (Sutton 1996; Sutton & Barto's "book" dynamics), a vectorised numpy twin of
Gymnasium 1.4.0's ``Acrobot-v1`` that steps many copies of the App. B.1 variants of Sharma et
al. (2025) at once.

The twin repeats ``AcrobotEnv.step`` in float64 in Gymnasium's order of operations: one RK4
step of ``dt = 0.2`` (Gymnasium's ``rk4``) of the book's ``_dsdt`` with the torque
``(-1, 0, +1)[a]`` held, ``wrap`` of both angles into ``[-pi, pi]``, ``bound`` of the
velocities to ``4 pi`` and ``9 pi``; every scalar ``x ** 2`` of Gymnasium is libm ``pow``,
reproduced by ``np.float_power(x, 2)`` (an exact ``x * x`` differs in about 0.09% of cases).
So, on parameters that Gymnasium's attributes are set to (:meth:`AcrobotVariants.
gymnasium_attributes`), every step, reward and termination agrees bit for bit with
``gymnasium.make("Acrobot-v1").unwrapped`` (tested). Rewards are -1 per step and 0 on the
terminating one; start states are ``U(-0.1, 0.1)^4`` rounded to float32, as Gymnasium stores
them; states are ``(n, 4)`` float64 ``[theta1, theta2, dtheta1, dtheta2]``.

*Link length.* App. B.1 gives both links one length ``L``; Gymnasium's dynamics read only
``LINK_LENGTH_1`` and the centres of mass ``LINK_COM_POS_1/2`` (``LINK_LENGTH_2`` only
draws). The twin sets ``LINK_LENGTH_1 = LINK_LENGTH_2 = L`` and ``LINK_COM_POS_1 =
LINK_COM_POS_2 = L / 2`` (each centre stays mid-link, as at Gymnasium's 1 and 0.5), so the
whole geometry scales; ``LINK_MOI`` stays 1, as Gymnasium keeps it when the masses change (it
is not a rod's inertia, ``m L^2 / 12``, at the default either). At ``L = 1`` these are
Gymnasium's values, so the default agrees bit for bit. Termination, ``-cos(theta1) -
cos(theta1 + theta2) > 1``, does not depend on ``L`` in Gymnasium nor here: with equal links
it says the tip is more than one link length above the pivot, whatever ``L``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

import numpy as np
from numpy import pi

from dprl.envs.cartpole import (checked_actions, checked_states, variant_parameters,
                                variant_values)
from dprl.validation import require_array, require_int

GYMNASIUM_ID = "Acrobot-v1"


def _pow2(x):
    """``x ** 2`` as Gymnasium's scalar code computes it: libm ``pow``, not ``x * x``."""
    return np.float_power(x, 2)


class _Coefficients(NamedTuple):
    """The parameter-only products of Gymnasium's ``_dsdt``, each formed as there."""

    m2: np.ndarray
    d1_const: np.ndarray  # m1 * lc1**2
    d1_lengths: np.ndarray  # l1**2 + lc2**2
    d1_cross: np.ndarray  # 2 * l1 * lc2
    lc2_sq: np.ndarray  # lc2**2
    l1_lc2: np.ndarray  # l1 * lc2
    phi2: np.ndarray  # m2 * lc2 * g
    phi1_vel2: np.ndarray  # -m2 * l1 * lc2
    phi1_cross: np.ndarray  # 2 * m2 * l1 * lc2
    phi1_gravity: np.ndarray  # (m1 * lc1 + m2 * l1) * g
    centripetal: np.ndarray  # m2 * l1 * lc2
    denominator: np.ndarray  # m2 * lc2**2 + I2


@dataclass(frozen=True, eq=False)
class AcrobotVariants:
    """Gymnasium's Acrobot-v1 with App. B.1's parameters (Sharma et al. 2025) per copy: the
    common ``link_length`` of both links and the masses ``link_mass_1``, ``link_mass_2``, each
    a scalar or a ``(k,)`` array, copy ``i`` of a ``(k, 4)`` state batch taking value ``i``;
    ``horizon`` is the episode length (App. B.1: 200). Implements
    :class:`dprl.envs.episodes.VectorEnv`."""

    link_length: float | np.ndarray = 1.0
    link_mass_1: float | np.ndarray = 1.0
    link_mass_2: float | np.ndarray = 1.0
    horizon: int = 200
    n_variants: int | None = field(init=False)  # k, or None when every copy is alike
    _coefficients: _Coefficients = field(init=False, repr=False)

    n_actions: ClassVar[int] = 3
    reward_range: ClassVar[tuple[float, float]] = (-1.0, 0.0)
    dt: ClassVar[float] = 0.2
    LINK_MOI: ClassVar[float] = 1.0
    MAX_VEL_1: ClassVar[float] = 4 * pi
    MAX_VEL_2: ClassVar[float] = 9 * pi
    AVAIL_TORQUE: ClassVar[tuple[float, float, float]] = (-1.0, 0.0, 1.0)
    g: ClassVar[float] = 9.8
    start_bound: ClassVar[float] = 0.1

    def __post_init__(self) -> None:
        params, n_variants = variant_parameters(link_length=self.link_length,
                                                link_mass_1=self.link_mass_1,
                                                link_mass_2=self.link_mass_2)
        for name, value in params.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "n_variants", n_variants)
        object.__setattr__(self, "horizon", require_int("horizon", self.horizon))
        m1, m2, l1 = params["link_mass_1"], params["link_mass_2"], params["link_length"]
        lc1 = lc2 = l1 / 2.0
        g, moi = self.g, self.LINK_MOI
        object.__setattr__(self, "_coefficients", _Coefficients(
            m2, m1 * _pow2(lc1), _pow2(l1) + _pow2(lc2), 2 * l1 * lc2, _pow2(lc2), l1 * lc2,
            m2 * lc2 * g, -m2 * l1 * lc2, 2 * m2 * l1 * lc2, (m1 * lc1 + m2 * l1) * g,
            m2 * l1 * lc2, m2 * _pow2(lc2) + moi))

    def gymnasium_attributes(self, copy: int = 0) -> dict[str, float]:
        """The attributes of Gymnasium's ``AcrobotEnv`` that make it variant ``copy``
        (the module docstring's link-length convention)."""
        value = variant_values(self, ("link_length", "link_mass_1", "link_mass_2"), copy)
        length = value["link_length"]
        return {"LINK_LENGTH_1": length, "LINK_LENGTH_2": length, "LINK_COM_POS_1": length / 2,
                "LINK_COM_POS_2": length / 2, "LINK_MASS_1": value["link_mass_1"],
                "LINK_MASS_2": value["link_mass_2"], "LINK_MOI": self.LINK_MOI}

    def reset(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` start states ``U(-0.1, 0.1)^4`` rounded to float32: the draws ``n``
        Gymnasium resets make, in turn, from the same generator."""
        draws = rng.uniform(-self.start_bound, self.start_bound, size=(require_int("n", n), 4))
        return draws.astype(np.float32).astype(np.float64)

    def step(self, states: np.ndarray, actions: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One step of every copy, ``AcrobotEnv.step`` in float64 (actions 0, 1, 2: torque
        -1, 0, +1): returns ``(next_states, rewards, terminated)``."""
        states = checked_states(states, 4, self.n_variants)
        actions = checked_actions(actions, states.shape[0], self.n_actions)
        torque = np.asarray(self.AVAIL_TORQUE)[actions]
        theta1, theta2, dtheta1, dtheta2 = self._rk4(states.T.copy(), torque)
        theta1, theta2 = _wrap(theta1, -pi, pi), _wrap(theta2, -pi, pi)
        dtheta1 = np.clip(dtheta1, -self.MAX_VEL_1, self.MAX_VEL_1)
        dtheta2 = np.clip(dtheta2, -self.MAX_VEL_2, self.MAX_VEL_2)
        terminated = -np.cos(theta1) - np.cos(theta2 + theta1) > 1.0
        return (np.stack([theta1, theta2, dtheta1, dtheta2], axis=1),
                np.where(terminated, 0.0, -1.0), terminated)

    def observe(self, states: np.ndarray) -> np.ndarray:
        """Gymnasium's observations ``[cos theta1, sin theta1, cos theta2, sin theta2,
        dtheta1, dtheta2]`` in float64, unscaled, ``(n, 6)`` (Gymnasium casts them to
        float32)."""
        theta1, theta2, dtheta1, dtheta2 = require_array("states", states, shape=(None, 4)).T
        return np.stack([np.cos(theta1), np.sin(theta1), np.cos(theta2), np.sin(theta2),
                         dtheta1, dtheta2], axis=1)

    def _rk4(self, y: np.ndarray, torque: np.ndarray) -> np.ndarray:
        """Gymnasium's ``rk4`` over ``[0, dt]`` for ``(4, n)`` states ``y`` (the torque is
        the constant fifth component there: its derivative is 0, so it stays exact)."""
        dt = self.dt
        dt2 = dt / 2.0
        k1 = self._dsdt(y, torque)
        k2 = self._dsdt(y + dt2 * k1, torque)
        k3 = self._dsdt(y + dt2 * k2, torque)
        k4 = self._dsdt(y + dt * k3, torque)
        return y + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)

    def _dsdt(self, y: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Gymnasium's ``_dsdt`` ("book" dynamics) for ``(4, n)`` states: ``(4, n)``
        derivatives, every product in Gymnasium's order."""
        c, moi = self._coefficients, self.LINK_MOI
        theta1, theta2, dtheta1, dtheta2 = y
        cos2, sin2 = np.cos(theta2), np.sin(theta2)
        d1 = c.d1_const + c.m2 * (c.d1_lengths + c.d1_cross * cos2) + moi + moi
        d2 = c.m2 * (c.lc2_sq + c.l1_lc2 * cos2) + moi
        phi2 = c.phi2 * np.cos(theta1 + theta2 - pi / 2.0)
        phi1 = (c.phi1_vel2 * _pow2(dtheta2) * sin2 - c.phi1_cross * dtheta2 * dtheta1 * sin2
                + c.phi1_gravity * np.cos(theta1 - pi / 2) + phi2)
        ddtheta2 = (a + d2 / d1 * phi1 - c.centripetal * _pow2(dtheta1) * sin2 - phi2) / (
            c.denominator - _pow2(d2) / d1)
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return np.stack([dtheta1, dtheta2, ddtheta1, ddtheta2])


def _wrap(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """Gymnasium's ``wrap``: subtract ``high - low`` while above ``high``, then add it while
    below ``low`` (elementwise, the same operations as the scalar loop)."""
    diff = high - low
    x = x.copy()
    while (above := x > high).any():
        x[above] -= diff
    while (below := x < low).any():
        x[below] += diff
    return x
