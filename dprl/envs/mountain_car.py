"""Mountain Car (Moore 1990; Sutton & Barto 1998), a vectorised numpy twin of Gymnasium 1.4.0's
``MountainCar-v0``, as used by Xie, Thomas & Miklau (2019, Sec. 7).

The twin steps many cars at once with exactly Gymnasium's float64 arithmetic, in Gymnasium's
order of operations, and hands out the same float32 observations, so that every step agrees
bit for bit with ``gymnasium.make("MountainCar-v0")`` (tested):

- ``v <- clip(v + ((a - 1) * 0.001 + cos(3 x) * (-0.0025)), -0.07, 0.07)``;
- ``x <- clip(x + v, -1.2, 0.6)``, and ``v <- 0`` if ``x == -1.2`` and ``v < 0``;
- reward -1 per step; terminated when ``x >= 0.5`` and ``v >= goal_velocity`` (default 0);
- truncated after 200 steps (Gymnasium's ``TimeLimit``); start ``x ~ U[-0.6, -0.4)``, ``v = 0``.

States are the internal float64 ``(n, 2)`` arrays ``[x, v]``; observations are their float32
casts, as Gymnasium returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dprl.envs.episodes import Episodes, Policy, simulate
from dprl.features import FourierBasis
from dprl.validation import require_array, require_finite, require_in_bounds, require_int

GYMNASIUM_ID = "MountainCar-v0"


@dataclass(frozen=True)
class MountainCar:
    """Gymnasium's MountainCar-v0 (Moore 1990), vectorised: :meth:`reset`, :meth:`step` and
    :meth:`observe` act on ``(n, 2)`` batches of cars, :meth:`simulate` runs whole episodes.

    ``goal_velocity`` is Gymnasium's keyword of the same name; ``horizon`` is its
    ``max_episode_steps`` (200).
    """

    goal_velocity: float = 0.0
    horizon: int = 200

    n_actions: ClassVar[int] = 3
    reward_range: ClassVar[tuple[float, float]] = (-1.0, -1.0)
    min_position: ClassVar[float] = -1.2
    max_position: ClassVar[float] = 0.6
    max_speed: ClassVar[float] = 0.07
    goal_position: ClassVar[float] = 0.5
    force: ClassVar[float] = 0.001
    gravity: ClassVar[float] = 0.0025
    start_low: ClassVar[float] = -0.6
    start_high: ClassVar[float] = -0.4

    def __post_init__(self) -> None:
        object.__setattr__(self, "goal_velocity",
                           require_finite("goal_velocity", self.goal_velocity))
        object.__setattr__(self, "horizon", require_int("horizon", self.horizon))

    @property
    def observation_low(self) -> np.ndarray:
        """``[-1.2, -0.07]`` as float32 (Gymnasium's ``observation_space.low``)."""
        return np.array([self.min_position, -self.max_speed], dtype=np.float32)

    @property
    def observation_high(self) -> np.ndarray:
        """``[0.6, 0.07]`` as float32 (Gymnasium's ``observation_space.high``)."""
        return np.array([self.max_position, self.max_speed], dtype=np.float32)

    def start_states(self, positions) -> np.ndarray:
        """``(n, 2)`` states at rest at the given positions (each in ``[-1.2, 0.6]``)."""
        positions = require_array("positions", positions, ndim=1)
        require_in_bounds("positions", positions, self.min_position, self.max_position)
        return np.stack([positions, np.zeros_like(positions)], axis=1)

    def reset(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` start states ``[x, 0]``, ``x ~ U[-0.6, -0.4)``: the draws Gymnasium's
        ``reset`` makes, one per car, from the same generator."""
        positions = rng.uniform(self.start_low, self.start_high, size=require_int("n", n))
        return self.start_states(positions)

    def step(self, states, actions) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One step of every car, MountainCar-v0's ``step`` in float64: returns
        ``(next_states, rewards, terminated)``. ``actions`` are integers in ``{0, 1, 2}``
        (push left, no push, push right)."""
        states = self._states(states)
        actions = self._actions(actions, states.shape[0])
        position, velocity = states[:, 0], states[:, 1]
        velocity = velocity + ((actions - 1) * self.force
                               + np.cos(3 * position) * (-self.gravity))
        velocity = np.clip(velocity, -self.max_speed, self.max_speed)
        position = np.clip(position + velocity, self.min_position, self.max_position)
        velocity = np.where((position == self.min_position) & (velocity < 0), 0.0, velocity)
        terminated = (position >= self.goal_position) & (velocity >= self.goal_velocity)
        return np.stack([position, velocity], axis=1), np.full(len(states), -1.0), terminated

    def observe(self, states) -> np.ndarray:
        """The float32 observations Gymnasium returns for ``states``."""
        return self._states(states).astype(np.float32)

    def simulate(self, n_episodes: int | tuple[int, ...], policy: Policy,
                 rng: np.random.Generator, start_states=None) -> Episodes:
        """Episodes under ``policy`` (observations, generator -> actions), all cars at once;
        see :func:`dprl.envs.episodes.simulate`."""
        if start_states is not None:
            start_states = self._states(start_states)
        return simulate(self, policy, n_episodes, rng, start_states)

    def _states(self, states) -> np.ndarray:
        """``states`` as a checked float64 ``(n, 2)`` array of positions and velocities."""
        states = require_array("states", states, shape=(None, 2))
        require_in_bounds("positions", states[:, 0], self.min_position, self.max_position)
        require_in_bounds("velocities", states[:, 1], -self.max_speed, self.max_speed)
        return states

    def _actions(self, actions, n: int) -> np.ndarray:
        """``actions`` as a checked int64 ``(n,)`` array with entries in ``{0, 1, 2}``."""
        actions = np.asarray(actions)
        if not np.issubdtype(actions.dtype, np.integer) or actions.shape != (n,):
            raise ValueError(f"actions must be an integer array of shape ({n},), "
                             f"got {actions.dtype} {actions.shape}")
        require_in_bounds("actions", actions, 0, self.n_actions - 1)
        return actions.astype(np.int64)


def mountain_car_features(order: int = 5) -> FourierBasis:
    """The Fourier basis of ``order`` (Konidaris et al. 2011) on Mountain Car observations:
    position and velocity scaled from Gymnasium's observation box ``[-1.2, 0.6] x
    [-0.07, 0.07]`` (its float32 end points, so every float32 observation is inside) to
    ``[0, 1]^2``; ``(order + 1)^2`` features, 36 for order 5 (Xie et al. 2019, Sec. 7)."""
    car = MountainCar()
    return FourierBasis(order, car.observation_low, car.observation_high)
