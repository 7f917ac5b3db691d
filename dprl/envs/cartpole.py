"""Cart-pole (Barto, Sutton & Anderson 1983), a vectorised numpy twin of Gymnasium 1.4.0's
``CartPole-v1`` that steps many copies of the App. B.1 variants of Sharma et al. (2025) at once.

Every copy may have its own ``gravity``, ``force_mag`` and ``masscart`` (App. B.1's grid,
:mod:`dprl.sharma2025.variants`); ``total_mass = masspole + masscart`` and
``polemass_length = masspole * length`` are derived from them as Gymnasium's ``__init__``
does. The twin repeats ``CartPoleEnv.step``'s float64 operations in Gymnasium's order
(``np.square`` is an exact product, as in Gymnasium), so on any parameters that Gymnasium's
attributes are set to, every step, reward and termination agrees bit for bit with
``gymnasium.make("CartPole-v1").unwrapped`` (tested):

- ``temp = (F + m_p l theta_dot^2 sin theta) / M``, ``F = +-force_mag`` (action 1: push right);
- ``theta_acc = (g sin theta - cos theta temp) / (l (4/3 - m_p cos^2 theta / M))``;
- ``x_acc = temp - m_p l theta_acc cos theta / M``; explicit Euler with ``tau = 0.02``;
- reward +1 on every step, the terminating one included (Gymnasium v1);
- terminated when ``|x| > 2.4`` or ``|theta| > 12 deg``; start state ``U(-0.05, 0.05)^4``.

States are Gymnasium's internal float64 ``(n, 4)`` arrays ``[x, x_dot, theta, theta_dot]``
and are also what :meth:`CartPoleVariants.observe` returns (Gymnasium hands out their float32
casts). The helpers below check the parameters, states and actions of both classic-control
twins (:mod:`dprl.envs.acrobot` too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from dprl.validation import frozen_copy, require_array, require_in_bounds, require_int

GYMNASIUM_ID = "CartPole-v1"


def variant_parameters(**values: float | np.ndarray) -> tuple[dict[str, np.ndarray], int | None]:
    """Positive physical parameters, each a scalar (shared by every copy) or a ``(k,)`` array
    (one value per copy), as read-only float64 arrays; returns them with ``k`` (``None``
    when all are scalars). Arrays must share their length."""
    checked, lengths = {}, set()
    for name, value in values.items():
        array = require_array(name, value)
        if array.ndim > 1:
            raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {array.shape}")
        if np.any(array <= 0):
            raise ValueError(f"{name} must be > 0, got values down to {array.min()}")
        if array.ndim == 1:
            lengths.add(array.size)
        checked[name] = frozen_copy(array)
    if len(lengths) > 1:
        raise ValueError(f"{', '.join(values)} must have the same length, got {sorted(lengths)}")
    return checked, lengths.pop() if lengths else None


def variant_values(env: Any, names: tuple[str, ...], copy: int) -> dict[str, float]:
    """The parameters ``names`` of copy ``copy`` of a twin ``env`` whose parameters are
    scalars or ``(env.n_variants,)`` arrays, as Python floats."""
    k = env.n_variants or 1
    copy = require_int("copy", copy, minimum=0)
    if copy >= k:
        raise ValueError(f"copy must be < the {k} variants held, got {copy}")
    return {name: float(np.broadcast_to(getattr(env, name), k)[copy]) for name in names}


def checked_states(states: np.ndarray, width: int, n_variants: int | None) -> np.ndarray:
    """``states`` as a float64 ``(n, width)`` array, with ``n = n_variants`` when every copy
    has its own parameters (row ``i`` is stepped with variant ``i``)."""
    states = require_array("states", states, shape=(None, width))
    if n_variants is not None and states.shape[0] != n_variants:
        raise ValueError(f"states must have one row per variant, {n_variants}, "
                         f"got {states.shape[0]}")
    return states


def checked_actions(actions: np.ndarray, n: int, n_actions: int) -> np.ndarray:
    """``actions`` as an int64 ``(n,)`` array with entries in ``{0, ..., n_actions - 1}``."""
    actions = np.asarray(actions)
    if not np.issubdtype(actions.dtype, np.integer) or actions.shape != (n,):
        raise ValueError(f"actions must be an integer array of shape ({n},), "
                         f"got {actions.dtype} {actions.shape}")
    require_in_bounds("actions", actions, 0, n_actions - 1)
    return actions.astype(np.int64)


@dataclass(frozen=True, eq=False)
class CartPoleVariants:
    """Gymnasium's CartPole-v1 with App. B.1's parameters (Sharma et al. 2025) per copy:
    ``gravity``, ``force_mag`` and ``masscart`` are scalars or ``(k,)`` arrays, copy ``i`` of
    a ``(k, 4)`` state batch taking value ``i``; ``horizon`` is the episode length (App. B.1's
    demonstrations: 200). Implements :class:`dprl.envs.episodes.VectorEnv`."""

    gravity: float | np.ndarray = 9.8
    force_mag: float | np.ndarray = 10.0
    masscart: float | np.ndarray = 1.0
    horizon: int = 200
    n_variants: int | None = field(init=False)  # k, or None when every copy is alike

    n_actions: ClassVar[int] = 2
    reward_range: ClassVar[tuple[float, float]] = (1.0, 1.0)
    masspole: ClassVar[float] = 0.1
    length: ClassVar[float] = 0.5  # half the pole's length
    tau: ClassVar[float] = 0.02
    x_threshold: ClassVar[float] = 2.4
    theta_threshold_radians: ClassVar[float] = 12 * 2 * math.pi / 360
    start_bound: ClassVar[float] = 0.05

    def __post_init__(self) -> None:
        params, n_variants = variant_parameters(gravity=self.gravity, force_mag=self.force_mag,
                                                masscart=self.masscart)
        for name, value in params.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "n_variants", n_variants)
        object.__setattr__(self, "horizon", require_int("horizon", self.horizon))

    @property
    def total_mass(self) -> np.ndarray:
        """``masspole + masscart``, as Gymnasium's ``__init__`` derives it."""
        return self.masspole + self.masscart

    @property
    def polemass_length(self) -> float:
        """``masspole * length`` (pole mass times half-length), as Gymnasium derives it."""
        return self.masspole * self.length

    def gymnasium_attributes(self, copy: int = 0) -> dict[str, float]:
        """The attributes of Gymnasium's ``CartPoleEnv`` that make it variant ``copy``, the
        derived ``total_mass`` and ``polemass_length`` included."""
        value = variant_values(self, ("gravity", "force_mag", "masscart"), copy)
        return {**value, "total_mass": self.masspole + value["masscart"],
                "polemass_length": self.masspole * self.length}

    def reset(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` start states ``U(-0.05, 0.05)^4``: the draws ``n`` Gymnasium resets make, in
        turn, from the same generator."""
        return rng.uniform(-self.start_bound, self.start_bound, size=(require_int("n", n), 4))

    def step(self, states: np.ndarray, actions: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One Euler step of every copy, ``CartPoleEnv.step`` in float64 (0: push left, 1: push
        right): returns ``(next_states, rewards, terminated)``."""
        states = checked_states(states, 4, self.n_variants)
        actions = checked_actions(actions, states.shape[0], self.n_actions)
        x, x_dot, theta, theta_dot = states.T
        force = np.where(actions == 1, self.force_mag, -self.force_mag)
        costheta, sintheta = np.cos(theta), np.sin(theta)
        total_mass, polemass_length = self.total_mass, self.polemass_length
        temp = (force + polemass_length * np.square(theta_dot) * sintheta) / total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * np.square(costheta) / total_mass))
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        terminated = ((x < -self.x_threshold) | (x > self.x_threshold)
                      | (theta < -self.theta_threshold_radians)
                      | (theta > self.theta_threshold_radians))
        return (np.stack([x, x_dot, theta, theta_dot], axis=1), np.ones(len(states)),
                terminated)

    def observe(self, states: np.ndarray) -> np.ndarray:
        """The float64 states themselves, ``(n, 4)`` (Gymnasium returns their float32 casts)."""
        return require_array("states", states, shape=(None, 4)).copy()
