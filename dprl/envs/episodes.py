"""Episodes of continuous-state environments, simulated many at once.

The continuous counterpart of :mod:`dprl.envs.trajectories` (same conventions and, where they
make sense, the same attribute names): an episode of length ``L`` is
``o_0, a_0, r_0, o_1, ..., a_{L-1}, r_{L-1}, o_L`` with reward ``r_t`` received on the
transition ``o_t -> o_{t+1}``. A *vectorised environment* (:class:`VectorEnv`) steps a batch of
independent copies at once; a *policy* maps a batch of observations and a generator to actions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from dprl.envs.trajectories import EpisodeBatch, Trajectories, _integer_array
from dprl.validation import frozen_copy, require_finite, require_in_bounds, require_int


class VectorEnv(Protocol):
    """A batch of independent copies of an episodic environment with ``n_actions`` discrete
    actions, deterministic transitions (given state and action), rewards in ``reward_range``
    and truncation after ``horizon`` transitions. ``states`` are ``(n, ...)`` arrays;
    ``observe`` gives what an agent sees, ``(n, d)``."""

    n_actions: int
    horizon: int
    reward_range: tuple[float, float]

    def reset(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` start states drawn from the start distribution."""

    def step(self, states: np.ndarray, actions: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(next_states, rewards, terminated)`` of one transition of every copy."""

    def observe(self, states: np.ndarray) -> np.ndarray:
        """The observations of ``states``, ``(n, d)``."""


class Policy(Protocol):
    """``policy(observations, rng) -> actions``: ``(n, d)`` observations to ``(n,)`` int64
    actions, drawing any randomness from ``rng``."""

    def __call__(self, observations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One action per observation."""


@runtime_checkable
class StochasticPolicy(Protocol):
    """A policy that also gives its action probabilities ``(n, n_actions)`` (rows sum to 1),
    as importance ratios ``pi(a | s) / pi_b(a | s)`` need (Xie et al. 2019, Eq. 2.1). Calling
    it samples :func:`sample_actions` from :meth:`probabilities`."""

    def __call__(self, observations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Actions drawn from ``probabilities(observations)``."""

    def probabilities(self, observations: np.ndarray) -> np.ndarray:
        """``(n, n_actions)`` action probabilities."""


def sample_actions(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row of ``probabilities`` ``(n, A)`` by inversion: a single uniform
    ``u`` per row, action ``#{k < A - 1 : u >= p_0 + ... + p_k}`` (so always in ``[0, A)``)."""
    cumulative = np.cumsum(probabilities[:, :-1], axis=1)
    return (rng.random(probabilities.shape[0])[:, None] >= cumulative).sum(axis=1)


@dataclass(frozen=True)
class UniformPolicy:
    """The uniform random policy over ``n_actions`` actions (the off-policy target of Xie et al.
    2019, Sec. 7, Mountain Car)."""

    n_actions: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_actions", require_int("n_actions", self.n_actions))

    def probabilities(self, observations: np.ndarray) -> np.ndarray:
        """``1 / n_actions`` for every action, ``(n, n_actions)``."""
        return np.full((len(observations), self.n_actions), 1.0 / self.n_actions)

    def __call__(self, observations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Uniform actions, by :func:`sample_actions`."""
        return sample_actions(self.probabilities(observations), rng)


@dataclass(frozen=True)
class Episodes(EpisodeBatch):
    """Episodes with batch shape ``(*datasets, n)`` (as :class:`~dprl.envs.Trajectories`).

    - ``observations``: ``(*batch, H + 1, d)`` float, ``o_0 .. o_L`` then NaN padding.
    - ``actions``: ``(*batch, H)`` int64, ``a_0 .. a_{L-1}`` (>= 0) then ``-1`` padding.
    - ``rewards``: ``(*batch, H)`` float, ``r_0 .. r_{L-1}`` then ``0`` padding.
    - ``lengths``: ``(*batch,)`` int64 in ``[1, H]``.
    - ``terminated``: ``(*batch,)`` bool; False means truncated at ``H`` (then ``L == H``).
    - ``reward_range``: the declared bound ``(low, high)`` of every reward.
    - ``behaviour_probabilities``: ``(*batch, H)`` float or None, the probability with which
      the behaviour policy chose ``a_t`` (in ``(0, 1]``), then ``0`` padding.

    Arrays are validated, copied and made read-only.
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    lengths: np.ndarray
    terminated: np.ndarray
    reward_range: tuple[float, float]
    behaviour_probabilities: np.ndarray | None = None

    def __post_init__(self) -> None:
        fields = _validated(self)
        for name, value in fields.items():
            object.__setattr__(self, name, value if name == "reward_range" or value is None
                               else frozen_copy(value))

    def first(self, m: int) -> Episodes:
        """The first ``m`` episodes of every data set."""
        m = require_int("m", m)
        if m > self.batch_shape[-1]:
            raise ValueError(f"m must be <= the {self.batch_shape[-1]} episodes held, got {m}")
        return self._map(lambda a, axes: a[(..., slice(m)) + (slice(None),) * axes])

    def reshape(self, *batch_shape: int) -> Episodes:
        """The same episodes with a new batch shape (row-major, like ``numpy.reshape``)."""
        return self._map(lambda a, axes: a.reshape(*batch_shape, *a.shape[a.ndim - axes:]))

    def _map(self, transform) -> Episodes:
        """Apply ``transform(array, n_trailing_axes)`` to every per-episode array."""
        probs = self.behaviour_probabilities
        return Episodes(transform(self.observations, 2), transform(self.actions, 1),
                        transform(self.rewards, 1), transform(self.lengths, 0),
                        transform(self.terminated, 0), self.reward_range,
                        None if probs is None else transform(probs, 1))


def _validated(episodes: Episodes) -> dict[str, object]:
    """The fields of ``episodes`` as checked arrays; raises ValueError on any inconsistency."""
    rewards = _floating("rewards", episodes.rewards)
    if rewards.ndim < 2 or 0 in rewards.shape:
        raise ValueError(f"rewards must have shape (*batch, H) with H >= 1 and at least one "
                         f"episode, got {rewards.shape}")
    batch, horizon = rewards.shape[:-1], rewards.shape[-1]
    lengths, terminated = _episode_ends(episodes, batch, horizon)
    mask = np.arange(horizon) < lengths[..., None]
    low, high = (require_finite("reward_range", v) for v in episodes.reward_range)
    _check_padded("rewards", rewards, mask, (low, high), 0.0)
    actions = _integer_array("actions", episodes.actions)
    _check_padded("actions", actions, mask, (0, np.inf), -1)
    probs = episodes.behaviour_probabilities
    if probs is not None:
        probs = _floating("behaviour_probabilities", probs)
        _check_padded("behaviour_probabilities", probs, mask, (0, 1), 0.0)
        if np.any(probs[mask] == 0):
            raise ValueError("behaviour_probabilities must be > 0 at every transition: "
                             "the behaviour policy took those actions")
    return {"observations": _observations(episodes, lengths), "actions": actions,
            "rewards": rewards, "lengths": lengths, "terminated": terminated,
            "reward_range": (low, high), "behaviour_probabilities": probs}


def _episode_ends(episodes: Episodes, batch: tuple[int, ...],
                  horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Checked ``lengths`` (in ``[1, H]``) and ``terminated`` (False only if ``L == H``)."""
    lengths = _integer_array("lengths", episodes.lengths)
    if lengths.shape != batch or lengths.min() < 1 or lengths.max() > horizon:
        raise ValueError(f"lengths must have shape {batch} and lie in [1, H={horizon}], got "
                         f"shape {lengths.shape}, range [{lengths.min()}, {lengths.max()}]")
    terminated = np.asarray(episodes.terminated)
    if terminated.dtype != np.bool_ or terminated.shape != batch:
        raise ValueError(f"terminated must be a bool array of shape {batch}, "
                         f"got {terminated.dtype} {terminated.shape}")
    if np.any(~terminated & (lengths != horizon)):
        raise ValueError(f"an episode that is not terminated must be truncated at H={horizon}")
    return lengths, terminated


def _observations(episodes: Episodes, lengths: np.ndarray) -> np.ndarray:
    """Checked observations: ``(*batch, H + 1, d)``, finite up to ``o_L``, NaN after."""
    observations = _floating("observations", episodes.observations)
    horizon = episodes.rewards.shape[-1]
    if observations.shape[:-1] != (*lengths.shape, horizon + 1):
        raise ValueError(f"observations must have shape {(*lengths.shape, horizon + 1, 'd')}, "
                         f"got {observations.shape}")
    observed = np.arange(horizon + 1) <= lengths[..., None]
    if not (np.all(np.isfinite(observations[observed]))
            and np.all(np.isnan(observations[~observed]))):
        raise ValueError("observations must be finite for t <= L and NaN after")
    return observations


def _floating(name: str, value) -> np.ndarray:
    """``value`` as a floating array (float32 observations stay float32)."""
    array = np.asarray(value)
    if array.dtype.kind != "f":
        raise ValueError(f"{name} must hold floating-point numbers, got dtype {array.dtype}")
    return array


def _check_padded(name: str, values: np.ndarray, mask: np.ndarray,
                  bounds: tuple[float, float], padding: float) -> None:
    """Raise unless ``values`` has the shape of ``mask``, lies in ``bounds`` where ``mask``
    holds and equals ``padding`` elsewhere."""
    if values.shape != mask.shape:
        raise ValueError(f"{name} must have shape {mask.shape}, got {values.shape}")
    require_in_bounds(name, values[mask], *bounds)
    if np.any(values[~mask] != padding):
        raise ValueError(f"{name} must be padded with {padding} after the last transition")


def _batch_shape(n_episodes: int | tuple[int, ...]) -> tuple[int, ...]:
    shape = n_episodes if isinstance(n_episodes, tuple) else (n_episodes,)
    if not shape:
        raise ValueError("n_episodes must be an integer or a non-empty tuple of integers")
    return tuple(require_int("n_episodes", n) for n in shape)


def _act(policy: Policy, stochastic: bool, observations: np.ndarray,
         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | float]:
    """The policy's actions and, for a stochastic policy, their probabilities (else 0)."""
    if not stochastic:
        return policy(observations, rng), 0.0
    p = policy.probabilities(observations)
    actions = sample_actions(p, rng)
    return actions, p[np.arange(actions.size), actions]


def simulate(env: VectorEnv, policy: Policy, n_episodes: int | tuple[int, ...],
             rng: np.random.Generator, start_states: np.ndarray | None = None) -> Episodes:
    """Run ``n_episodes`` (an integer or a batch shape such as ``(n_trials, m)``) episodes of
    ``env`` under ``policy`` all at once; a finished episode stops while the others go on.

    Start states are drawn by ``env.reset`` unless given (``(n, ...)``, ``n`` the number of
    episodes). A :class:`StochasticPolicy` also has the probabilities of the actions it took
    recorded (``behaviour_probabilities``); it draws the same actions as calling it would.
    """
    shape = _batch_shape(n_episodes)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    n, H = int(np.prod(shape)), env.horizon
    states = env.reset(n, rng) if start_states is None else np.asarray(start_states)
    if states.shape[0] != n:
        raise ValueError(f"start_states must hold {n} states, got shape {states.shape}")
    seen = env.observe(states)
    # time-major while simulating, so that each step writes contiguous rows
    observations = np.full((H + 1, n, seen.shape[-1]), np.nan, dtype=seen.dtype)
    actions, rewards, probs = np.full((H, n), -1), np.zeros((H, n)), np.zeros((H, n))
    lengths, terminated = np.full(n, H), np.zeros(n, dtype=bool)
    observations[0], live = seen, np.arange(n)
    stochastic = isinstance(policy, StochasticPolicy)
    for t in range(H):
        chosen, chosen_probs = _act(policy, stochastic, seen, rng)
        states, rewards[t, live], done = env.step(states, chosen)  # the env checks actions
        actions[t, live], probs[t, live] = chosen, chosen_probs
        observations[t + 1, live] = seen = env.observe(states)
        lengths[live[done]], terminated[live[done]] = t + 1, True
        live, states, seen = live[~done], states[~done], seen[~done]
        if live.size == 0:
            break
    return Episodes(observations.swapaxes(0, 1).reshape(*shape, H + 1, -1),
                    actions.T.reshape(*shape, H), rewards.T.reshape(*shape, H),
                    lengths.reshape(shape), terminated.reshape(shape), env.reward_range,
                    probs.T.reshape(*shape, H) if stochastic else None)


def taken_action_probabilities(policy: StochasticPolicy, episodes: Episodes) -> np.ndarray:
    """``pi(a_t | o_t)`` of a stochastic ``policy`` at every transition of ``episodes``,
    ``(*batch, H)``, 0 on padding: the numerators of the importance ratios
    ``rho_t = pi(a_t | o_t) / pi_b(a_t | o_t)`` (Xie et al. 2019, Eq. 2.1)."""
    if not isinstance(policy, StochasticPolicy):
        raise ValueError(f"policy must give its action probabilities, got {type(policy).__name__}")
    mask = episodes.transition_mask
    observations = episodes.observations[..., :-1, :][mask]
    p = policy.probabilities(observations)
    out = np.zeros(mask.shape)
    out[mask] = p[np.arange(p.shape[0]), episodes.actions[mask]]
    return out


def importance_ratios(target: StochasticPolicy, episodes: Episodes) -> np.ndarray:
    """``rho_t = pi(a_t | o_t) / pi_b(a_t | o_t)`` (Xie et al. 2019, Eq. 2.1) at every
    transition of ``episodes``, ``(*batch, H)``, 0 on padding: the ``target``'s probabilities
    of the actions taken over the behaviour's, which ``episodes`` must have recorded."""
    probs = episodes.behaviour_probabilities
    if probs is None:
        raise ValueError("episodes must record their behaviour probabilities")
    mask = episodes.transition_mask
    return np.where(mask, taken_action_probabilities(target, episodes)
                    / np.where(mask, probs, 1.0), 0.0)


_FEATURE_CHUNK = 2**18  # observations whose features are computed at once


def feature_table(episodes: Episodes, features, table: np.ndarray | None = None
                  ) -> tuple[Trajectories, np.ndarray]:
    """``episodes`` as :class:`~dprl.envs.Trajectories` whose states index the rows of a feature
    table: row ``k`` is ``features(o)`` of the ``k``-th real observation ``o_0 .. o_L`` of every
    episode (row-major over the batch), so algorithms written for a feature table indexed by
    discrete states (Xie et al. 2019's GPOPE and LSTD, :mod:`dprl.xie2019`) run unchanged on
    continuous states. ``table``: those rows already computed (:func:`recorded_table`), else
    they are computed here. Returns ``(trajectories, table)``, ``table`` ``(rows, d)``."""
    if not isinstance(episodes, Episodes):
        raise ValueError(f"episodes must be Episodes, got {type(episodes).__name__}")
    observed = np.arange(episodes.horizon + 1) <= episodes.lengths[..., None]
    if table is None:
        table = _features_of(episodes.observations[observed], features)
    elif np.ndim(table) != 2 or len(table) != observed.sum():
        raise ValueError(f"table must hold one row per observation ({observed.sum()}), got "
                         f"shape {np.shape(table)}")
    rows = np.full(observed.shape, -1)
    rows[observed] = np.arange(table.shape[0])
    return Trajectories(rows, episodes.rewards, episodes.lengths, episodes.terminated,
                        episodes.reward_range), table


def _features_of(points: np.ndarray, features) -> np.ndarray:
    """``features`` of ``points`` ``(n, d)`` as ``(n, k)`` rows, in chunks: a feature map's rows
    do not depend on their batch, and the temporaries of one chunk stay small whatever the
    number of observations."""
    parts = []
    for start in range(0, len(points), _FEATURE_CHUNK):
        chunk = points[start:start + _FEATURE_CHUNK]
        part = np.asarray(features(chunk), dtype=float)
        if part.ndim != 2 or part.shape[0] != len(chunk):
            raise ValueError(f"features must map (n, d) observations to (n, k) rows, got "
                             f"{part.shape} for {len(chunk)} observations")
        parts.append(part)
    return np.concatenate(parts)


class RecordingFeatures:
    """A feature map that keeps every row it computes, call by call. A policy built on it and
    run by :func:`simulate` evaluates it once per step at the observations of the episodes
    still running, i.e. at every visited state but each episode's last: :func:`recorded_table`
    turns these rows into :func:`feature_table`'s table without computing them again."""

    def __init__(self, features) -> None:
        self.features = features
        self.rows: list[np.ndarray] = []

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        rows = np.asarray(self.features(observations), dtype=float)
        self.rows.append(rows)
        return rows


def recorded_table(episodes: Episodes, recorded: RecordingFeatures,
                   out: np.ndarray | None = None) -> np.ndarray:
    """:func:`feature_table`'s table of ``episodes`` (batch shape ``(n,)``, simulated by a
    policy that evaluated ``recorded`` once per step) from the recorded rows and the features
    of each episode's last observation: the same bits as computing them all (a feature map's
    rows do not depend on their batch). Call ``t`` of the recording holds the rows of the
    episodes with ``L_i > t``, in index order; row ``(i, t)`` of the table is row
    ``sum_{j < i} (L_j + 1) + t``. ``out``: the array to fill (e.g. a slice of a larger one)."""
    if not isinstance(episodes, Episodes) or len(episodes.batch_shape) != 1:
        raise ValueError("episodes must be Episodes of batch shape (n,)")
    lengths = episodes.lengths
    if len(recorded.rows) != lengths.max() or [len(r) for r in recorded.rows] != [
            int((lengths > t).sum()) for t in range(len(recorded.rows))]:
        raise ValueError("recorded must hold one call per step at the live episodes' "
                         "observations, as simulate makes them")
    starts = np.cumsum(lengths + 1) - (lengths + 1)
    last = _features_of(episodes.observations[np.arange(lengths.size), lengths],
                        recorded.features)
    shape = (int((lengths + 1).sum()), last.shape[1])
    table = np.empty(shape) if out is None else out
    if table.shape != shape:
        raise ValueError(f"out must have shape {shape}, got {table.shape}")
    for t, rows in enumerate(recorded.rows):
        table[starts[lengths > t] + t] = rows
    table[starts + lengths] = last
    return table


def stack_episodes(datasets: list[Episodes]) -> Episodes:
    """Episodes of equal batch shape and horizon stacked on a new leading (data set) axis."""
    if not datasets or not all(isinstance(e, Episodes) for e in datasets):
        raise ValueError("datasets must be a non-empty list of Episodes")
    probs = [e.behaviour_probabilities for e in datasets]
    if any(p is None for p in probs) and not all(p is None for p in probs):
        raise ValueError("either every data set has behaviour_probabilities or none has")
    first = datasets[0]
    return Episodes(*(np.stack([getattr(e, name) for e in datasets])
                      for name in ("observations", "actions", "rewards", "lengths",
                                   "terminated")), first.reward_range,
                    None if probs[0] is None else np.stack(probs))
