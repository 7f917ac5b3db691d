"""The offline data of Sharma et al. (2025, App. B.1): every expert, modified to
``p_min``, records ``N`` trajectories on the default environment.

Expert ``i``'s trajectories draw only from its own stream, ``named_stream(rng, i)`` of the
data set's generator (start states, then one uniform per step for the action), so one
expert's trajectories are the same bits whatever experts are recorded with it, and any
expert's data can be recomputed alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dprl.envs.episodes import VectorEnv
from dprl.seeding import named_stream
from dprl.sharma2025.experts import ExpertPopulation, pmin_actions
from dprl.validation import require_int


@dataclass(frozen=True)
class ExpertData:
    """``N`` trajectories of each of ``m`` experts, padded to ``L`` steps after termination:

    - ``observations`` ``(m, N, L + 1, d)``: ``o_1 .. o_{L+1}`` (repeated after the end);
    - ``actions`` ``(m, N, L)`` int64, ``rewards`` ``(m, N, L)`` (0 after the end);
    - ``lengths`` ``(m, N)``: the number of transitions ``|tau|`` (``L`` when truncated);
    - ``terminated`` ``(m, N)``: whether the trajectory ended in a terminal state.
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    lengths: np.ndarray
    terminated: np.ndarray

    @property
    def n_transitions(self) -> int:
        """The number of recorded transitions, ``sum |tau|``."""
        return int(self.lengths.sum())


def checked_picks(picks: np.ndarray, n_experts: int, per_expert: int) -> np.ndarray:
    """``picks`` ``(m,)``: one trajectory index in ``[0, per_expert)`` per recorded expert."""
    picks = np.asarray(picks)
    if picks.shape != (n_experts,) or not np.issubdtype(picks.dtype, np.integer) or (
            picks.size and (picks.min() < 0 or picks.max() >= per_expert)):
        raise ValueError(f"picks must hold one trajectory index in [0, {per_expert}) for each "
                         f"of the {n_experts} experts")
    return picks.astype(np.int64)


def pick(draws: np.ndarray, picks: np.ndarray | None) -> np.ndarray:
    """Per-expert draws ``(m, N, ...)``, or only the picked trajectory's ``(m, 1, ...)``."""
    if picks is None:
        return draws
    return draws[np.arange(len(picks)), picks][:, None]


def record(env: VectorEnv, experts: ExpertPopulation, experts_index: Sequence[int],
           per_expert: int, p_min: float, rng: np.random.Generator,
           picks: np.ndarray | None = None) -> ExpertData:
    """``per_expert`` trajectories of ``env.horizon`` steps of each of the experts
    ``experts_index`` (all of ``experts``, in order, usually), modified to ``p_min``
    (:func:`dprl.sharma2025.experts.pmin_actions`), all stepped at once. With ``picks``, only
    trajectory ``picks[k]`` of expert ``k`` (the same bits as among all ``per_expert``: every
    expert's draws are made in full), and the data hold one trajectory per expert."""
    per_expert = require_int("per_expert", per_expert)
    index = np.asarray(experts_index)
    if index.ndim != 1 or index.size != experts.n_experts:
        raise ValueError(f"experts_index must name each of the {experts.n_experts} experts")
    if picks is not None:
        picks = checked_picks(picks, index.size, per_expert)
    m, horizon = experts.n_experts, env.horizon
    streams = [named_stream(rng, int(i)) for i in index]
    states = np.stack([env.reset(per_expert, g) for g in streams])
    uniforms = pick(np.stack([g.random((per_expert, horizon)) for g in streams]), picks)
    states = pick(states, picks).reshape(-1, states.shape[-1])
    per_expert = uniforms.shape[1]
    alive = np.ones(m * per_expert, dtype=bool)
    lengths = np.zeros(m * per_expert, dtype=np.int64)
    terminated = np.zeros(m * per_expert, dtype=bool)
    observations, actions, rewards = [env.observe(states)], [], []
    for t in range(horizon):
        greedy = experts.greedy_actions(observations[-1].reshape(m, per_expert, -1))
        action = pmin_actions(greedy, uniforms[:, :, t], experts.n_actions, p_min).ravel()
        following, reward, done = env.step(states, action)
        lengths += alive
        actions.append(np.where(alive, action, 0))
        rewards.append(np.where(alive, reward, 0.0))
        terminated |= alive & done
        states = np.where(alive[:, None], following, states)
        alive &= ~done
        observations.append(env.observe(states))
    shape = (m, per_expert)
    return ExpertData(np.stack(observations, axis=1).reshape(*shape, horizon + 1, -1),
                      np.stack(actions, axis=1).reshape(*shape, horizon),
                      np.stack(rewards, axis=1).reshape(*shape, horizon),
                      lengths.reshape(shape), terminated.reshape(shape))
