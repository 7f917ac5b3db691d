"""The chain domain of Balle, Gomrokchi & Precup (2016, Sec. 6), also used by Xie, Thomas &
Miklau (2019, Sec. 7).

Conventions (shared by :class:`ChainMDP`, its sampler and :class:`ChainEnv`):

- States ``0 .. N-1``; ``A = N-1`` is absorbing. From ``i < A``: stay with probability ``p``,
  move to ``i+1`` with probability ``1-p``.
- Reward 1 on *entering* the goal (a transition ``s -> goal`` with ``s != goal``), else 0.
  The default goal ``N-2`` is the authors' code; ``goal = N-1`` is the paper text's
  "reward on reaching the absorbing state".
- Entering ``A`` terminates the episode. Starting in ``A`` (possible under the start
  distribution) gives one transition ``A -> A`` with reward 0, which terminates.
- Episodes are truncated after ``horizon`` transitions (truncation is not termination).
- A state is *visited* by an episode if a transition leaves it (``s_t = s`` for some
  ``t < L``), as in Balle et al.'s trajectories ``(s_t, a_t, r_t)``; the terminal or truncated
  last state ``s_L`` is not visited, so ``A`` is visited only by episodes that start there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces
from scipy import linalg

from dprl.envs.trajectories import Trajectories
from dprl.validation import require_array, require_int, require_probability


def _distribution(name: str, value, n: int) -> tuple[float, ...]:
    """A probability vector of length ``n`` (entries >= 0 summing to 1 within 1e-9)."""
    p = require_array(name, value, shape=(n,))
    if p.min() < 0 or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name} must be a probability vector (entries >= 0 summing to 1), "
                         f"got min {p.min()} and sum {p.sum()}")
    return tuple(float(x) for x in p)


#: Most multiply-adds :meth:`ChainMDP.finite_horizon_values` may spend (``n_states**2 *
#: horizon``, a dense matrix-vector product per step; ~4 s) and most states it may hold in a
#: dense matrix (8192: two 0.5 GB matrices).
MAX_VALUE_WORK, MAX_VALUE_STATES = 10**10, 2**13
#: Most multiply-adds :meth:`ChainMDP.state_visit_probabilities` may spend (``n_states**3 *
#: horizon``, a dense matrix product per step; ~3 s).
MAX_VISIT_WORK = 10**11


def _require_dense_work(method: str, n: int, horizon: int, work: int, limit: int,
                        formula: str) -> None:
    """Raise unless ``method``'s dense recursion stays within ``limit`` multiply-adds."""
    if work > limit:
        raise ValueError(f"n_states = {n} with horizon = {horizon} is too large for "
                         f"the dense recursion of {method}: {formula} = {work:.3g} multiply-adds "
                         f"exceeds {limit:.0e}")


def _batch_shape(n_trajectories: int | tuple[int, ...]) -> tuple[int, ...]:
    shape = n_trajectories if isinstance(n_trajectories, tuple) else (n_trajectories,)
    if not shape:
        raise ValueError("n_trajectories must be an integer or a non-empty tuple of integers")
    return tuple(require_int("n_trajectories", n) for n in shape)


@dataclass(frozen=True)
class ChainMDP:
    """The chain MDP (Balle et al. 2016, Sec. 6) with exact solutions and a vectorised sampler.

    ``goal=None`` means ``n_states - 2``; ``start_distribution=None`` means uniform over all
    states. Defaults: N = 40, p = 0.5, horizon 200, gamma = 0.99 (the paper's setting).
    """

    n_states: int = 40
    stay_prob: float = 0.5
    goal: int | None = None
    horizon: int = 200
    gamma: float = 0.99
    start_distribution: tuple[float, ...] | None = None

    reward_range: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def __post_init__(self) -> None:
        n = require_int("n_states", self.n_states, minimum=2)
        goal = n - 2 if self.goal is None else require_int("goal", self.goal, minimum=0)
        if goal > n - 1:
            raise ValueError(f"goal must be a state in [0, {n - 1}], got {goal}")
        start = self.start_distribution
        fields = {"n_states": n, "goal": goal,
                  "stay_prob": require_probability("stay_prob", self.stay_prob),
                  "horizon": require_int("horizon", self.horizon),
                  "gamma": require_probability("gamma", self.gamma, open_high=True),
                  "start_distribution": None if start is None else _distribution(
                      "start_distribution", start, n)}
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    @property
    def absorbing_state(self) -> int:
        """``N - 1``."""
        return self.n_states - 1

    @property
    def start_probabilities(self) -> np.ndarray:
        """The start distribution as an ``(N,)`` array."""
        if self.start_distribution is None:
            return np.full(self.n_states, 1.0 / self.n_states)
        return np.array(self.start_distribution)

    def transition_matrix(self) -> np.ndarray:
        """``P[s, s']``, ``(N, N)``; the absorbing row is a self-loop."""
        n = self.n_states
        P = np.zeros((n, n))
        moving = np.arange(n - 1)
        P[moving, moving] = self.stay_prob
        P[moving, moving + 1] = 1.0 - self.stay_prob
        P[-1, -1] = 1.0
        return P

    def reward_matrix(self) -> np.ndarray:
        """``R[s, s'] = 1`` if ``s' = goal != s``, else 0."""
        R = np.zeros((self.n_states, self.n_states))
        R[:, self.goal] = 1.0
        R[self.goal, self.goal] = 0.0
        return R

    def expected_rewards(self) -> np.ndarray:
        """``r(s) = sum_s' P(s, s') R(s, s')``: ``1 - p`` from the state before the goal (the
        only transition that enters it), 0 elsewhere; O(N)."""
        r = np.zeros(self.n_states)
        if self.goal > 0:
            r[self.goal - 1] = 1.0 - self.stay_prob
        return r

    def live_matrix(self) -> np.ndarray:
        """``P`` without the transitions that terminate (into, or out of, the absorbing state):
        the sub-stochastic matrix through which values are bootstrapped."""
        P = self.transition_matrix()
        P[:, -1] = 0.0
        return P

    def value_function(self) -> np.ndarray:
        """Exact infinite-horizon ``V``: solves ``(I - gamma P_live) V = r``, so ``V(A) = 0``.

        The chain only stays or moves right, so the system is upper bidiagonal and is solved
        by back substitution in O(N) (LAPACK's banded solver: the same bits as a dense
        solve, which needs no pivoting here)."""
        n, p = self.n_states, self.stay_prob
        bands = np.zeros((2, n))
        bands[0, 1:] = -self.gamma * (1.0 - p)  # M[s, s + 1]
        bands[0, -1] = 0.0  # live_matrix drops the move into the absorbing state
        bands[1, :-1], bands[1, -1] = 1.0 - self.gamma * p, 1.0  # M[s, s]
        return linalg.solve_banded((0, 1), bands, self.expected_rewards())

    def finite_horizon_values(self, horizon: int | None = None) -> np.ndarray:
        """Expected return over at most ``horizon`` transitions (default: ``self.horizon``), by
        backward dynamic programming ``V_{k+1} = r + gamma P_live V_k``, ``V_0 = 0``.

        With the dense ``gamma P_live`` (a banded product rounds differently in the last bits
        from the committed results'): it refuses (``ValueError``) more than
        :data:`MAX_VALUE_STATES` = 8192 states or ``n_states**2 * horizon`` above
        :data:`MAX_VALUE_WORK` = 1e10 (``n_states`` > 7071 at horizon 200);
        :meth:`value_function` is O(N) for any size."""
        horizon = self.horizon if horizon is None else require_int("horizon", horizon, minimum=0)
        n = self.n_states
        if n > MAX_VALUE_STATES:
            raise ValueError(f"n_states = {n} is too large for finite_horizon_values' dense "
                             f"matrix (at most {MAX_VALUE_STATES} states)")
        _require_dense_work("finite_horizon_values", n, horizon, n * n * horizon,
                            MAX_VALUE_WORK, "n_states**2 * horizon")
        r, G = self.expected_rewards(), self.gamma * self.live_matrix()
        V = np.zeros(n)
        for _ in range(horizon):
            V = r + G @ V
        return V

    def _live_step(self, row: np.ndarray) -> np.ndarray:
        """``row @ live_matrix()`` in O(N): ``p row[s] + (1 - p) row[s - 1]`` on the live
        states, 0 on the absorbing one; bit for bit the dense product (tested)."""
        n, p = self.n_states, self.stay_prob
        out = np.zeros(n)
        out[:n - 1] = p * row[:n - 1]
        out[1:n - 1] += (1.0 - p) * row[:n - 2]
        return out

    def _time_rows(self) -> Iterator[np.ndarray]:
        """The rows ``M[0], M[1], ...`` of :meth:`time_state_probabilities`, one at a time."""
        row = self.start_probabilities
        yield row
        for _ in range(1, self.horizon):
            row = self._live_step(row)
            yield row

    def time_state_probabilities(self) -> np.ndarray:
        """``M[t, s] = Pr(s_t = s and t < L)``, ``(H, N)``: the probability that transition
        ``t`` of an episode leaves ``s``. O(N H) (the chain is bidiagonal)."""
        return np.stack(list(self._time_rows()))

    def expected_visit_counts(self) -> np.ndarray:
        """Expected number of transitions leaving each state per episode, ``(N,)``: the sum
        over ``t`` of :meth:`time_state_probabilities`, accumulated in order (the same bits)
        in O(N) memory and O(N H) time."""
        rows = self._time_rows()
        counts = next(rows).copy()
        for row in rows:
            counts += row
        return counts

    def on_policy_distribution(self) -> np.ndarray:
        """Expected visit counts normalised to sum 1: the state distribution of a transition
        drawn uniformly from all transitions of many episodes."""
        counts = self.expected_visit_counts()
        return counts / counts.sum()

    def state_visit_probabilities(self) -> np.ndarray:
        """``p_s = Pr(s_t = s for some t < L)`` (Balle et al. 2016, Theorem 11), exact.

        By a dense recursion, row ``g`` the mass that has not met ``g`` (the committed
        results' bits): it refuses (``ValueError``) ``n_states**3 * horizon`` above
        :data:`MAX_VISIT_WORK` = 1e11 (``n_states`` > 793 at horizon 200)."""
        n = self.n_states
        _require_dense_work("state_visit_probabilities", n, self.horizon,
                            n**3 * self.horizon, MAX_VISIT_WORK, "n_states**3 * horizon")
        P = self.live_matrix()
        not_yet = np.tile(self.start_probabilities, (n, 1))  # row g: mass that has not met g
        np.fill_diagonal(not_yet, 0.0)
        p = self.start_probabilities.copy()
        for _ in range(1, self.horizon):
            not_yet = not_yet @ P
            p += np.diagonal(not_yet)
            np.fill_diagonal(not_yet, 0.0)
        return p

    def length_distribution(self) -> np.ndarray:
        """``Pr(L = l)`` for ``l = 0 .. H`` (entry 0 is 0), ``(H + 1,)``."""
        M = self.time_state_probabilities()
        into_absorbing = np.zeros(self.n_states)  # transition_matrix()[:, -1], without P
        into_absorbing[-2:] = 1.0 - self.stay_prob, 1.0
        probs = np.zeros(self.horizon + 1)
        probs[1:] = M @ into_absorbing
        probs[-1] += self._live_step(M[-1]).sum()
        return probs

    def expected_transition_counts(self, per_trajectory: bool = False) -> np.ndarray:
        """``K[s, s'] = E[sum_{t<L} w 1{s_t = s, s_{t+1} = s'}]`` with ``w = 1``, or ``w = 1/L``
        when ``per_trajectory`` (the per-trajectory averages of Xie et al. 2019, Eq. 2.1)."""
        if not isinstance(per_trajectory, (bool, np.bool_)):
            raise ValueError(f"per_trajectory must be a bool, got {per_trajectory!r}")
        M, P = self.time_state_probabilities(), self.transition_matrix()
        if not per_trajectory:
            return M.sum(axis=0)[:, None] * P
        K = np.zeros_like(P)
        inv_length_next = None  # E[1/L | transition t+1 leaves s'], by backward recursion
        for t in reversed(range(self.horizon)):
            weights = np.full_like(P, 1.0 / (t + 1))  # the episode ends after transition t
            if inv_length_next is not None:
                weights[:, :-1] = inv_length_next[:-1]
            K += M[t][:, None] * P * weights
            inv_length_next = (P * weights).sum(axis=1)
        return K

    def _step(self, states: np.ndarray, uniforms: np.ndarray,
              stay_prob: float | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """One transition from each state given ``uniforms ~ U[0, 1)``: advance iff
        ``u >= p`` (``stay_prob``, default the chain's) and not absorbing. Returns
        ``(next_states, rewards)``."""
        stay = self.stay_prob if stay_prob is None else stay_prob
        next_states = states + ((uniforms >= stay) & (states != self.absorbing_state))
        rewards = ((next_states == self.goal) & (states != self.goal)).astype(float)
        return next_states, rewards

    def sample(self, n_trajectories: int | tuple[int, ...],
               rng: np.random.Generator) -> Trajectories:
        """Independent episodes, all at once (one uniform per live episode per step).

        ``n_trajectories`` is the batch shape: ``n`` or e.g. ``(n_trials, m)``.
        """
        return self._simulate(n_trajectories, rng)[0]

    def _simulate(self, n_trajectories: int | tuple[int, ...], rng: np.random.Generator,
                  actions: tuple[float, float] | None = None
                  ) -> tuple[Trajectories, np.ndarray | None]:
        """Episodes, and with ``actions = (alternative_stay_prob, behaviour_prob)`` a second
        action: each step first draws the action (the chain's own with probability
        ``behaviour_prob``, else one that stays with ``alternative_stay_prob``), then the
        transition; also returns the ratios ``1 / behaviour_prob`` or 0 of a target policy
        that always takes the chain's own action (0 on padding)."""
        shape = _batch_shape(n_trajectories)
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        n, H = int(np.prod(shape)), self.horizon
        states = np.full((n, H + 1), -1, dtype=np.int64)
        rewards = np.zeros((n, H))
        ratios = None if actions is None else np.zeros((n, H))
        lengths = np.full(n, H, dtype=np.int64)
        terminated = np.zeros(n, dtype=bool)
        current = rng.choice(self.n_states, size=n, p=self.start_probabilities)
        states[:, 0] = current
        live = np.arange(n)
        for t in range(H):
            stay = None
            if actions is not None:
                own = rng.random(live.size) < actions[1]
                stay = np.where(own, self.stay_prob, actions[0])
                ratios[live, t] = np.where(own, 1 / actions[1], 0.0)
            current, rewards[live, t] = self._step(current, rng.random(live.size), stay)
            states[live, t + 1] = current
            done = current == self.absorbing_state
            lengths[live[done]] = t + 1
            terminated[live[done]] = True
            live, current = live[~done], current[~done]
            if live.size == 0:
                break
        trajectories = Trajectories(states.reshape(*shape, H + 1), rewards.reshape(*shape, H),
                                    lengths.reshape(shape), terminated.reshape(shape),
                                    self.reward_range)
        return trajectories, None if ratios is None else ratios.reshape(*shape, H)

    def as_env(self) -> ChainEnv:
        """This chain as a Gymnasium environment."""
        return ChainEnv(self)


class ChainEnv(gymnasium.Env):
    """Gymnasium view of a :class:`ChainMDP` (registered as ``dprl/Chain-v0``).

    Observation: the state index, ``Discrete(N)``. Action space ``Discrete(1)``: the chain is
    a Markov reward process (policy evaluation of its single policy), so the only action is 0.
    Truncation after ``mdp.horizon`` steps is done here, not by a ``TimeLimit`` wrapper, so
    episodes agree with :meth:`ChainMDP.sample`. ``reset(options={"start_state": s})`` starts
    in ``s`` instead of drawing from the start distribution. Build it from an ``mdp`` or from
    :class:`ChainMDP` fields (``ChainEnv(n_states=10)``), not both.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, mdp: ChainMDP | None = None, **mdp_fields: Any) -> None:
        if mdp is not None and not isinstance(mdp, ChainMDP):
            raise ValueError(f"mdp must be a ChainMDP, got {type(mdp).__name__}")
        if mdp is not None and mdp_fields:
            raise ValueError("ChainEnv takes either a ChainMDP or ChainMDP fields, not both")
        self.mdp = ChainMDP(**mdp_fields) if mdp is None else mdp
        self.observation_space = spaces.Discrete(self.mdp.n_states)
        self.action_space = spaces.Discrete(1)
        self._state: int | None = None
        self._steps = 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """Start an episode from the start distribution, or from ``options["start_state"]``;
        ``seed`` seeds the env's generator (Gymnasium's ``np_random``)."""
        super().reset(seed=seed)
        options = {} if options is None else dict(options)
        unknown = set(options) - {"start_state"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; "
                             "only 'start_state' is accepted")
        if "start_state" in options:
            start = require_int("start_state", options["start_state"], minimum=0)
            if start >= self.mdp.n_states:
                raise ValueError(f"start_state must lie in [0, {self.mdp.n_states - 1}], "
                                 f"got {start}")
        else:
            start = int(self.np_random.choice(self.mdp.n_states, p=self.mdp.start_probabilities))
        self._state, self._steps = start, 0
        return start, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """One transition of the chain (the single action 0): stay with probability p, else
        advance; reward 1 on entering the goal; terminated on entering the absorbing state,
        truncated after ``horizon`` transitions."""
        if self._state is None:
            raise RuntimeError("step() needs reset() first (also after an episode ends)")
        if not self.action_space.contains(action):
            raise ValueError(f"action must be 0 (the chain has a single action), got {action!r}")
        next_state, reward = self.mdp._step(np.array(self._state), self.np_random.random())
        state, self._steps = int(next_state), self._steps + 1
        terminated = state == self.mdp.absorbing_state
        truncated = not terminated and self._steps >= self.mdp.horizon
        self._state = None if terminated or truncated else state
        return state, float(reward), terminated, truncated, {}
