"""Gymnasium's LunarLander-v3 (discrete actions) with the parameters Sharma et al. (2025,
App. B.1) vary, and batches of its episodes run in lockstep under a vectorised controller.

- A :class:`LanderVariant` is ``gymnasium.make("LunarLander-v3", gravity=g,
  enable_wind=w_on, wind_power=w, turbulence_power=t)``. The experts' training settings have
  ``enable_wind=True`` (:meth:`LanderVariant.sharma2025`); the environment on which the
  demonstrations are recorded is Gymnasium's default (:data:`DEFAULT_VARIANT`: gravity -10,
  ``enable_wind=False``).
- With ``enable_wind=True`` Gymnasium's ``reset`` draws two more integers (the wind and
  torque phases) from the environment's generator before the first step, so the engine
  dispersion noise of a seeded episode differs from the same seed with ``enable_wind=False``
  even at ``wind_power = turbulence_power = 0`` (the forces are then exactly zero: the two
  environments have the same law, not the same episodes per seed).
- Box2D results may depend on its build: :func:`box2d_version` records it.
- An episode of length ``L`` is ``o_0, a_0, r_0, ..., a_{L-1}, r_{L-1}, o_L``; it ends when
  Gymnasium terminates it (crash, out of bounds, at rest) or after ``max_steps`` steps
  (Gymnasium's own limit is 1000).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import Box2D
import gymnasium
import numpy as np

from dprl.validation import (frozen_copy, require_array, require_finite, require_int,
                             require_nonnegative)

LANDER_ID = "LunarLander-v3"
N_ACTIONS = 4            # noop, left engine, main engine, right engine
OBSERVATION_DIM = 8      # x, y, vx, vy, angle, angular speed, leg 1 contact, leg 2 contact
TIME_LIMIT = 1000        # Gymnasium's max_episode_steps for LunarLander-v3

Controller = Callable[[np.ndarray, np.ndarray, int], np.ndarray]
"""``controller(observations (q, 8) float32, episodes (q,) int64, t) -> actions (q,)``: the
actions at step ``t`` of the ``q`` episodes still running, ``episodes`` their flat
(row-major) indices in the ``(m, n)`` batch (episode ``e`` is ``(e // n, e % n)``)."""


def box2d_version() -> str:
    """The version of the Box2D build that simulates LunarLander (results may differ between
    builds): recorded for the provenance of every expert and data set."""
    return str(Box2D.__version__)


@dataclass(frozen=True)
class LanderVariant:
    """LunarLander-v3's physical parameters (Gymnasium's names and ranges): ``gravity`` in
    (-12, 0), ``wind_power`` in [0, 20], ``turbulence_power`` in [0, 2]. The two powers act
    only when ``enable_wind`` is True; Gymnasium ignores them otherwise, so they must then
    be 0."""

    gravity: float = -10.0
    wind_power: float = 0.0
    turbulence_power: float = 0.0
    enable_wind: bool = False

    def __post_init__(self) -> None:
        gravity = require_finite("gravity", self.gravity)
        if not -12.0 < gravity < 0.0:
            raise ValueError(f"gravity must lie in (-12, 0) (Gymnasium's range), got {gravity}")
        powers = {"wind_power": 20.0, "turbulence_power": 2.0}
        for name, high in powers.items():
            value = require_nonnegative(name, getattr(self, name))
            if value > high:
                raise ValueError(f"{name} must lie in [0, {high}], got {value}")
            if not self.enable_wind and value != 0:
                raise ValueError(f"{name} must be 0 when enable_wind is False, got {value}")
            object.__setattr__(self, name, value)
        if not isinstance(self.enable_wind, (bool, np.bool_)):
            raise ValueError(f"enable_wind must be a bool, got {self.enable_wind!r}")
        object.__setattr__(self, "gravity", gravity)
        object.__setattr__(self, "enable_wind", bool(self.enable_wind))

    @classmethod
    def sharma2025(cls, gravity: float, wind_power: float,
                   turbulence_power: float) -> LanderVariant:
        """A training setting of Sharma et al. (2025, App. B.1): wind and turbulence on."""
        return cls(gravity, wind_power, turbulence_power, enable_wind=True)

    def make(self) -> gymnasium.Env:
        """``gymnasium.make("LunarLander-v3", ...)`` with these parameters (time limit 1000)."""
        return gymnasium.make(LANDER_ID, gravity=self.gravity, enable_wind=self.enable_wind,
                              wind_power=self.wind_power,
                              turbulence_power=self.turbulence_power)


#: Gymnasium's default LunarLander-v3, on which Sharma et al. (2025, App. B.1) record the
#: demonstrations and evaluate the experts.
DEFAULT_VARIANT = LanderVariant()


@dataclass(frozen=True)
class LanderEpisodes:
    """An ``(m, n)`` batch of LunarLander episodes capped at ``H`` steps.

    - ``observations``: ``(m, n, H + 1, 8)`` float32, ``o_0 .. o_L`` then NaN.
    - ``actions``: ``(m, n, H)`` int64, ``a_0 .. a_{L-1}`` then ``-1``.
    - ``rewards``: ``(m, n, H)`` float64, ``r_0 .. r_{L-1}`` then ``0``.
    - ``lengths``: ``(m, n)`` int64 in ``[1, H]``.
    - ``terminated``: ``(m, n)`` bool; False means cut at ``H`` (or Gymnasium's limit).
    - ``seeds``: ``(m, n)`` int64, the ``env.reset(seed=)`` of each episode (to replay it).

    Arrays are copied and made read-only.
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    lengths: np.ndarray
    terminated: np.ndarray
    seeds: np.ndarray

    def __post_init__(self) -> None:
        for name in ("observations", "actions", "rewards", "lengths", "terminated", "seeds"):
            object.__setattr__(self, name, frozen_copy(getattr(self, name)))

    @property
    def returns(self) -> np.ndarray:
        """Undiscounted returns ``(m, n)``."""
        return self.rewards.sum(axis=-1)


def _episode_seeds(seeds: np.ndarray) -> np.ndarray:
    """``seeds`` as a non-empty ``(m, n)`` int64 array of non-negative integers."""
    seeds = np.asarray(seeds)
    if not np.issubdtype(seeds.dtype, np.integer):
        raise ValueError(f"seeds must hold integers, got dtype {seeds.dtype}")
    seeds = require_array("seeds", seeds, ndim=2, dtype=np.int64)
    if seeds.min() < 0:
        raise ValueError(f"seeds must be >= 0, got {seeds.min()}")
    return seeds


def _checked_actions(actions: np.ndarray, shape: tuple[int]) -> np.ndarray:
    """A controller's ``(q,)`` integer actions in ``[0, 4)``."""
    actions = np.asarray(actions)
    if actions.shape != shape or not np.issubdtype(actions.dtype, np.integer):
        raise ValueError(f"the controller must return integer actions of shape {shape}, "
                         f"got {actions.dtype} {actions.shape}")
    if actions.min() < 0 or actions.max() >= N_ACTIONS:
        raise ValueError(f"actions must lie in [0, {N_ACTIONS - 1}]")
    return actions


def run_episodes(variant: LanderVariant, controller: Controller, seeds: np.ndarray,
                 max_steps: int = TIME_LIMIT) -> LanderEpisodes:
    """Run one episode of ``variant`` per entry of ``seeds`` ``(m, n)`` (``env.reset(seed=)``),
    all in lockstep: at each step the ``controller`` picks the actions of the episodes still
    running from their observations (:data:`Controller`), then each takes one Gymnasium
    step. Episodes end when Gymnasium terminates or truncates them or after
    ``max_steps`` (<= 1000) steps."""
    if not isinstance(variant, LanderVariant):
        raise ValueError(f"variant must be a LanderVariant, got {type(variant).__name__}")
    seeds = _episode_seeds(seeds)
    max_steps = require_int("max_steps", max_steps)
    if max_steps > TIME_LIMIT:
        raise ValueError(f"max_steps must be <= {TIME_LIMIT} (Gymnasium's limit), "
                         f"got {max_steps}")
    shape, size = seeds.shape, seeds.size
    envs = [variant.make() for _ in range(size)]
    observations = np.full((size, max_steps + 1, OBSERVATION_DIM), np.nan, dtype=np.float32)
    actions = np.full((size, max_steps), -1, dtype=np.int64)
    rewards = np.zeros((size, max_steps))
    lengths = np.full(size, max_steps, dtype=np.int64)
    terminated = np.zeros(size, dtype=bool)
    for k, (env, seed) in enumerate(zip(envs, seeds.ravel())):
        observations[k, 0] = env.reset(seed=int(seed))[0]
    live = np.arange(size)
    for t in range(max_steps):
        chosen = controller(observations[live, t], live, t)
        actions[live, t] = _checked_actions(chosen, live.shape)
        running = []
        for k, action in zip(live.tolist(), actions[live, t].tolist()):
            observations[k, t + 1], rewards[k, t], terminated[k], truncated, _ = \
                envs[k].step(action)
            if terminated[k] or truncated:
                lengths[k] = t + 1
            else:
                running.append(k)
        live = np.array(running, dtype=np.int64)
        if live.size == 0:
            break
    for env in envs:
        env.close()
    return LanderEpisodes(observations.reshape(*shape, max_steps + 1, -1),
                          actions.reshape(*shape, -1), rewards.reshape(*shape, -1),
                          lengths.reshape(shape), terminated.reshape(shape), seeds)
