"""Batches of finite-state episodes, padded to a common horizon.

A trajectory of length ``L`` is ``s_0, r_0, s_1, ..., r_{L-1}, s_L``: reward ``r_t`` is
received on the transition ``s_t -> s_{t+1}``. In Balle et al. (2016, Sec. 2.2) notation the
trajectory is the triples ``(s_t, a_t, r_t)`` for ``t < L``; ``s_L`` is where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dprl.validation import (frozen_copy, require_array, require_finite, require_in_bounds,
                             require_int)


def _integer_array(name: str, value) -> np.ndarray:
    """``value`` as an int64 array, refusing (not truncating) non-integer dtypes."""
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    return array.astype(np.int64)


class EpisodeBatch:
    """What batches of episodes share (:class:`Trajectories`, :class:`~dprl.envs.Episodes`):
    ``rewards`` ``(*batch, H)`` and ``lengths`` ``(*batch,)``."""

    rewards: np.ndarray
    lengths: np.ndarray

    @property
    def horizon(self) -> int:
        """``H``, the most transitions an episode can have."""
        return self.rewards.shape[-1]

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """``(*datasets, n)``."""
        return self.lengths.shape

    @property
    def transition_mask(self) -> np.ndarray:
        """``(*batch, H)`` bool, True at the real transitions ``t < L``."""
        return np.arange(self.horizon) < self.lengths[..., None]


@dataclass(frozen=True)
class Trajectories(EpisodeBatch):
    """Episodes with batch shape ``(*datasets, n)``: the last batch axis holds the ``n``
    trajectories of one data set, any leading axes index independent data sets (trials).

    - ``states``: ``(*batch, H + 1)`` int64, ``s_0 .. s_L`` then ``-1`` padding.
    - ``rewards``: ``(*batch, H)`` float, ``r_0 .. r_{L-1}`` then ``0`` padding.
    - ``lengths``: ``(*batch,)`` int64 in ``[1, H]``, the number of transitions ``L``.
    - ``terminated``: ``(*batch,)`` bool; True if ``s_L`` is terminal (value 0), False if
      the episode was truncated at the horizon (then ``L == H`` and ``s_L`` is bootstrapped).
    - ``reward_range``: the declared bound ``(low, high)`` every reward lies in.

    Arrays are validated, copied and made read-only.
    """

    states: np.ndarray
    rewards: np.ndarray
    lengths: np.ndarray
    terminated: np.ndarray
    reward_range: tuple[float, float]

    def __post_init__(self) -> None:
        states = _integer_array("states", self.states)
        if states.ndim < 2 or states.shape[-1] < 2:
            raise ValueError("states must have shape (*batch, H + 1) with H >= 1, "
                             f"got {states.shape}")
        batch, horizon = states.shape[:-1], states.shape[-1] - 1
        if 0 in batch:
            raise ValueError("Trajectories must hold at least one trajectory, "
                             f"got batch shape {batch}")
        lengths = _integer_array("lengths", self.lengths)
        if lengths.shape != batch:
            raise ValueError(f"lengths must have shape {batch}, got {lengths.shape}")
        if lengths.min() < 1 or lengths.max() > horizon:
            raise ValueError(f"lengths must lie in [1, H={horizon}], "
                             f"got [{lengths.min()}, {lengths.max()}]")
        rewards = require_array("rewards", self.rewards, shape=(*batch, horizon))
        terminated = np.asarray(self.terminated)
        if terminated.dtype != np.bool_ or terminated.shape != batch:
            raise ValueError(f"terminated must be a bool array of shape {batch}, "
                             f"got {terminated.dtype} {terminated.shape}")
        if np.any(~terminated & (lengths != horizon)):
            raise ValueError("a trajectory that is not terminated must be truncated at "
                             f"H={horizon} transitions")
        low, high = (require_finite("reward_range", v) for v in self.reward_range)
        if low > high:
            raise ValueError(f"reward_range must have low <= high, got ({low}, {high})")
        _check_padding(states, rewards, lengths, low, high)
        for name, value in (("states", states), ("rewards", rewards), ("lengths", lengths),
                            ("terminated", terminated)):
            object.__setattr__(self, name, frozen_copy(value))
        object.__setattr__(self, "reward_range", (low, high))

    def first(self, m: int) -> Trajectories:
        """The first ``m`` trajectories of every data set (nested data sets of size ``m``)."""
        m = require_int("m", m)
        if m > self.batch_shape[-1]:
            raise ValueError(f"m must be <= the {self.batch_shape[-1]} trajectories held, got {m}")
        return self._view(self.states[..., :m, :], self.rewards[..., :m, :],
                          self.lengths[..., :m], self.terminated[..., :m])

    def _view(self, states: np.ndarray, rewards: np.ndarray, lengths: np.ndarray,
              terminated: np.ndarray) -> Trajectories:
        """Trajectories made of views of this batch's checked, read-only arrays (a slice of
        valid trajectories is valid: no second check, no copy)."""
        view = object.__new__(Trajectories)
        for name, value in (("states", states), ("rewards", rewards), ("lengths", lengths),
                            ("terminated", terminated), ("reward_range", self.reward_range)):
            object.__setattr__(view, name, value)
        return view

    def reshape(self, *batch_shape: int) -> Trajectories:
        """The same trajectories with a new batch shape (row-major, like ``numpy.reshape``);
        e.g. ``reshape(n_trials, m)`` splits ``n_trials * m`` trajectories into data sets."""
        return Trajectories(self.states.reshape(*batch_shape, self.horizon + 1),
                            self.rewards.reshape(*batch_shape, self.horizon),
                            self.lengths.reshape(batch_shape), self.terminated.reshape(batch_shape),
                            self.reward_range)


def _check_padding(states: np.ndarray, rewards: np.ndarray, lengths: np.ndarray,
                   low: float, high: float) -> None:
    """Raise unless states are >= 0 up to ``s_L`` and -1 after, rewards lie in
    ``[low, high]`` up to ``r_{L-1}`` and are 0 after."""
    state_mask = np.arange(states.shape[-1]) <= lengths[..., None]
    if np.any(states[state_mask] < 0):
        raise ValueError("states must be >= 0 for t <= L (-1 is reserved for padding)")
    if np.any(states[~state_mask] != -1):
        raise ValueError("states must be padded with -1 after s_L")
    reward_mask = state_mask[..., 1:]
    require_in_bounds("rewards", rewards[reward_mask], low, high)
    if np.any(rewards[~reward_mask] != 0):
        raise ValueError("rewards must be padded with 0 after r_{L-1}")


def stack_trajectories(datasets: list[Trajectories]) -> Trajectories:
    """Stack data sets of equal batch shape and horizon along a new leading (trial) axis,
    e.g. one data set sampled per trial from that trial's own generator."""
    if not datasets:
        raise ValueError("stack_trajectories needs at least one data set")
    ranges = {d.reward_range for d in datasets}
    if len(ranges) != 1:
        raise ValueError(f"data sets declare different reward ranges: {sorted(ranges)}")
    return Trajectories(*(np.stack([getattr(d, name) for d in datasets])
                          for name in ("states", "rewards", "lengths", "terminated")),
                        reward_range=ranges.pop())
