"""The one-dimensional MDP of Wang & Hegde (2019, Sec. 4, App. E.1), as in the authors'
public experiment code: a state on [0, 1] that two actions push up or down at random.

Conventions (shared by :class:`LineMDP` and :class:`LineEnv`):

- State ``s`` in [0, 1], start ``s0 ~ U[0, 1)``; episodes of ``horizon = 50`` steps, truncated
  (never terminated).
- Action 0: ``s' = min(s + 0.25 u, 1)``; action 1: ``s' = max(s - 0.25 u, 0)``, ``u ~ U[0, 1)``.
- Reward ``r = 0.5 - |s' - 0.5|`` (in [0, 0.5]), a function of the next state.
- Random numbers: one uniform for the start state, then one per step. :meth:`LineMDP.reset`
  and :meth:`LineMDP.step` draw them with ``rng.random``; :meth:`LineMDP.transition` takes
  them as input; :class:`LineEnv` draws them from its ``np_random`` in the same order, so an
  env and the vectorised twin fed the same uniforms produce identical transitions.

Optimum (:meth:`LineMDP.finite_horizon_values`): moving toward 0.5 (up below, down above) is
optimal at every step, and the optimal expected return of a 50-step episode from
``s0 ~ U[0, 1]`` is 20.7083 (20.70833 to 5 digits; the grid error is O(n_cells^-2)), about
0.414 a step against the bound 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces
from numpy.typing import ArrayLike

from dprl.validation import require_array, require_in_bounds, require_int, require_positive

N_ACTIONS = 2


@dataclass(frozen=True)
class LineValues:
    """Finite-horizon values of the line MDP on a grid (:meth:`LineMDP.finite_horizon_values`):
    ``values[t, i]`` is the expected return of steps ``t .. H-1`` from ``grid[i]``,
    ``actions[t, i]`` the action taken there, ``expected_return`` the value of ``s0 ~ U[0, 1]``."""

    grid: np.ndarray
    values: np.ndarray
    actions: np.ndarray
    expected_return: float


@dataclass(frozen=True)
class LineMDP:
    """The line MDP of Wang & Hegde (2019, Sec. 4; authors' code): vectorised reset and step
    for many runs at once, and exact-on-a-grid dynamic programming."""

    horizon: int = 50
    max_move: float = 0.25

    reward_range: ClassVar[tuple[float, float]] = (0.0, 0.5)

    def __post_init__(self) -> None:
        object.__setattr__(self, "horizon", require_int("horizon", self.horizon))
        max_move = require_positive("max_move", self.max_move)
        if max_move > 1:
            raise ValueError(f"max_move must be <= 1, got {max_move}")
        object.__setattr__(self, "max_move", max_move)

    @staticmethod
    def reward(next_states: ArrayLike) -> np.ndarray:
        """``r = 0.5 - |s' - 0.5|`` (Wang & Hegde 2019, App. E.1; authors' code)."""
        next_states = require_in_bounds("next_states", require_array(
            "next_states", next_states, nonempty=False), 0.0, 1.0)
        return 0.5 - np.abs(next_states - 0.5)

    def transition(self, states: ArrayLike, actions: ArrayLike,
                   uniforms: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Next states and rewards given ``uniforms`` in [0, 1], all of one shape: action 0
        moves up by ``max_move * u`` (capped at 1), action 1 down (floored at 0)."""
        states = require_in_bounds("states", require_array("states", states, nonempty=False),
                                   0.0, 1.0)
        actions = _actions(actions, states.shape)
        uniforms = require_array("uniforms", uniforms, nonempty=False)
        if uniforms.shape != states.shape:
            raise ValueError(f"uniforms must have shape {states.shape}, got {uniforms.shape}")
        require_in_bounds("uniforms", uniforms, 0.0, 1.0)
        move = self.max_move * uniforms
        next_states = np.where(actions == 0, np.minimum(states + move, 1.0),
                               np.maximum(states - move, 0.0))
        return next_states, self.reward(next_states)

    @staticmethod
    def reset(n: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """``n`` start states ``s0 ~ U[0, 1)``, one ``rng.random`` draw each."""
        shape = n if isinstance(n, tuple) else (n,)
        shape = tuple(require_int("n", k) for k in shape)
        return _generator(rng).random(shape)

    def step(self, states: ArrayLike, actions: ArrayLike,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`transition` with one ``rng.random`` uniform per state (in C order)."""
        states = require_array("states", states, nonempty=False)
        return self.transition(states, actions, _generator(rng).random(states.shape))

    def finite_horizon_values(self, n_cells: int = 1600,
                              actions: ArrayLike | None = None) -> LineValues:
        """Backward dynamic programming over the ``horizon`` steps (undiscounted return) on
        the grid ``i / n_cells``: the optimal values, or those of the stationary policy
        ``actions`` (one action per grid point). ``f = r + V_{t+1}`` is taken piecewise
        linear between grid points, so ``E f(s')`` (a uniform window of width ``max_move``
        plus the mass capped at 0 or 1) is exact from its cumulative integral; the only error
        is that of linear interpolation, O(n_cells^-2). ``n_cells`` must make 0.5 and
        ``max_move`` grid points (the kinks of ``r`` and of the cap)."""
        grid = self._grid(require_int("n_cells", n_cells))
        fixed = None if actions is None else _actions(actions, grid.shape)
        values = np.zeros((self.horizon + 1, grid.size))
        chosen = np.zeros((self.horizon, grid.size), dtype=np.int64)
        reward = self.reward(grid)
        for t in reversed(range(self.horizon)):
            q = self._expected_next(grid, reward + values[t + 1])
            chosen[t] = np.argmax(q, axis=0) if fixed is None else fixed
            values[t] = q[chosen[t], np.arange(grid.size)]
        expected = float(np.sum((values[0, 1:] + values[0, :-1]) / 2) / n_cells)
        return LineValues(grid, values, chosen, expected)

    def _grid(self, n_cells: int) -> np.ndarray:
        """The grid ``i / n_cells``, checked to hold 0.5 and ``max_move``."""
        shift = self.max_move * n_cells
        if n_cells % 2 or abs(shift - round(shift)) > 1e-9:
            raise ValueError(f"n_cells must make 0.5 and max_move = {self.max_move} grid "
                             f"points, got {n_cells}")
        return np.arange(n_cells + 1) / n_cells

    def _expected_next(self, grid: np.ndarray, f: np.ndarray) -> np.ndarray:
        """``E f(s')`` for each action (rows) and grid state, f piecewise linear."""
        h, shift = grid[1], int(round(self.max_move / grid[1]))
        cumulative = np.concatenate([[0.0], np.cumsum((f[1:] + f[:-1]) * h / 2)])
        index = np.arange(grid.size)
        up, down = np.minimum(index + shift, grid.size - 1), np.maximum(index - shift, 0)
        capped_up = np.maximum(grid + self.max_move - 1, 0.0)
        capped_down = np.maximum(self.max_move - grid, 0.0)
        q_up = cumulative[up] - cumulative + capped_up * f[-1]
        q_down = cumulative - cumulative[down] + capped_down * f[0]
        return np.stack([q_up, q_down]) / self.max_move

    def as_env(self) -> LineEnv:
        """This MDP as a Gymnasium environment."""
        return LineEnv(self)


def _actions(actions: ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """Integer actions in {0, 1} of the given shape."""
    raw = np.asarray(actions)
    if raw.dtype.kind not in "iu":
        raise ValueError(f"actions must be integers, got dtype {raw.dtype}")
    if raw.shape != shape:
        raise ValueError(f"actions must have shape {shape}, got {raw.shape}")
    if raw.size and (raw.min() < 0 or raw.max() >= N_ACTIONS):
        raise ValueError(f"actions must lie in {{0, 1}}, got values in [{raw.min()}, "
                         f"{raw.max()}]")
    return raw


def _generator(rng: np.random.Generator) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


class LineEnv(gymnasium.Env):
    """Gymnasium view of a :class:`LineMDP` (registered as ``dprl/Line-v0``).

    Observation ``Box(0, 1, (1,), float64)``; actions ``Discrete(2)`` (0 up, 1 down).
    Truncation after ``mdp.horizon`` steps is done here (no ``TimeLimit`` wrapper);
    ``terminated`` is always False. Build it from an ``mdp`` or from :class:`LineMDP` fields.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, mdp: LineMDP | None = None, **mdp_fields: Any) -> None:
        if mdp is not None and not isinstance(mdp, LineMDP):
            raise ValueError(f"mdp must be a LineMDP, got {type(mdp).__name__}")
        if mdp is not None and mdp_fields:
            raise ValueError("LineEnv takes either a LineMDP or LineMDP fields, not both")
        self.mdp = LineMDP(**mdp_fields) if mdp is None else mdp
        self.observation_space = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float64)
        self.action_space = spaces.Discrete(N_ACTIONS)
        self._state: float | None = None
        self._steps = 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode at ``s0 ~ U[0, 1)`` (one draw from ``np_random``); ``seed`` seeds
        the env's generator. No options are accepted."""
        super().reset(seed=seed)
        if options:
            raise ValueError(f"LineEnv.reset takes no options, got {sorted(options)}")
        self._state, self._steps = float(self.np_random.random()), 0
        return np.array([self._state]), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One move (one draw from ``np_random``); truncated after ``horizon`` steps."""
        if self._state is None:
            raise RuntimeError("step() needs reset() first (also after an episode ends)")
        if not self.action_space.contains(action):
            raise ValueError(f"action must be 0 or 1, got {action!r}")
        next_state, reward = self.mdp.transition(np.array(self._state), np.array(int(action)),
                                                 np.array(self.np_random.random()))
        self._steps += 1
        truncated = self._steps >= self.mdp.horizon
        self._state = None if truncated else float(next_state)
        return np.array([float(next_state)]), float(reward), False, truncated, {}
