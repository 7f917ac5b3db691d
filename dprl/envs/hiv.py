"""The HIV treatment domain of Ernst et al. (2006) (model of Adams et al. 2004), as used by
Xie, Thomas & Miklau (2019, Sec. 7) and, with 20-day steps, by Sharma et al. (2025, App. B).

Conventions (shared by :class:`HIVTreatmentMDP`, its batch simulator and
:class:`HIVTreatmentEnv`):

- The state is ``x = (T1, T2, T1*, T2*, V, E)``; observations are ``log10 x``.
- Action ``a`` holds the drug efficacies ``(e1, e2) = actions[a]`` for ``step_days`` days.
- The reward of a step is taken at the post-step state:
  ``r = -virus_weight V - p1 e1^2 - p2 e2^2 + effector_weight E``.
- Episodes start in ``initial_state`` (the unhealthy steady state) and are truncated after
  ``horizon`` steps (never terminated); the discounted return is ``sum_t gamma^t r_t``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces

from dprl.envs.hiv_model import (UNHEALTHY_STEADY_STATE, HIVConstants, integrate,
                                 integrate_reference)
from dprl.validation import (frozen_copy, require_array, require_int, require_nonnegative,
                             require_positive, require_probability)

Policy = Callable[[np.ndarray, np.random.Generator], np.ndarray]
"""A policy for :meth:`HIVTreatmentMDP.simulate`: ``(observations (n, 6), rng) -> actions
(n,)`` (integers), where observations are ``log10`` states."""

ERNST_ACTIONS = ((0.0, 0.0), (0.7, 0.0), (0.0, 0.3), (0.7, 0.3))
LOG10_RANGE = (float(np.log10(np.finfo(np.float64).smallest_subnormal)),
               float(np.log10(np.finfo(np.float64).max)))
"""The range of ``log10 x`` over positive float64 ``x``: the bounds of the observation space."""


def _efficacy_table(actions: Any) -> tuple[tuple[float, float], ...]:
    """The action table as a tuple of ``(e1, e2)`` pairs, each efficacy in [0, 1]."""
    table = require_array("actions", actions, shape=(None, 2))
    if table.min() < 0 or table.max() > 1:
        raise ValueError("action efficacies must lie in [0, 1], got values in "
                         f"[{table.min()}, {table.max()}]")
    return tuple((float(e1), float(e2)) for e1, e2 in table)


def _positive_state(name: str, value: Any) -> tuple[float, ...]:
    """A 6-D state with every component finite and > 0."""
    state = require_array(name, value, shape=(6,))
    if state.min() <= 0:
        raise ValueError(f"{name} must be > 0 in every component, got {tuple(state)}")
    return tuple(float(x) for x in state)


def _pair(name: str, value: Any) -> tuple[float, float]:
    """Two finite coefficients >= 0."""
    pair = require_array(name, value, shape=(2,))
    return (require_nonnegative(f"{name}[0]", pair[0]), require_nonnegative(f"{name}[1]", pair[1]))


@dataclass(frozen=True)
class HIVEpisodes:
    """Simulated episodes of the Ernst et al. (2006) HIV domain (:class:`HIVTreatmentMDP`),
    all of the same length ``T``.

    - ``observations``: ``(n, T + 1, 6)``, ``log10`` of the states ``x_0 .. x_T``.
    - ``actions``: ``(n, T)`` int64 action indices.
    - ``rewards``: ``(n, T)``; ``rewards[:, t]`` is received at ``x_{t+1}``.

    Arrays are validated, copied and made read-only.
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray

    def __post_init__(self) -> None:
        observations = require_array("observations", self.observations, shape=(None, None, 6))
        n, steps = observations.shape[0], observations.shape[1] - 1
        actions = np.asarray(self.actions)
        if not np.issubdtype(actions.dtype, np.integer) or actions.shape != (n, steps):
            raise ValueError(f"actions must be integers of shape {(n, steps)}, got "
                             f"{actions.dtype} {actions.shape}")
        rewards = require_array("rewards", self.rewards, shape=(n, steps))
        for name, value in (("observations", observations), ("rewards", rewards),
                            ("actions", actions.astype(np.int64))):
            object.__setattr__(self, name, frozen_copy(value))

    @property
    def states(self) -> np.ndarray:
        """The states ``10 ** observations``, ``(n, T + 1, 6)``."""
        return 10.0 ** self.observations

    def discounted_returns(self, gamma: float) -> np.ndarray:
        """``sum_t gamma^t r_t`` per episode, ``(n,)``."""
        gamma = require_probability("gamma", gamma)
        return self.rewards @ gamma ** np.arange(self.rewards.shape[1])


@dataclass(frozen=True)
class HIVTreatmentMDP:
    """The HIV treatment MDP of Ernst et al. (2006) with a vectorised batch simulator.

    Defaults are Ernst et al.'s (also Xie et al. 2019, Sec. 7): 5-day steps, 200 steps,
    gamma = 0.98, drug penalties ``(2e4, 2e3)`` on ``(e1^2, e2^2)``, reward weights 0.1 on
    ``V`` and 1e3 on ``E``, actions ``{0, 0.7} x {0, 0.3}``, start in the unhealthy steady
    state. ``tol`` is the per-step local error tolerance of the integrator on ``ln x``
    (see :func:`dprl.envs.hiv_model.integrate`).
    """

    constants: HIVConstants = field(default_factory=HIVConstants)
    step_days: float = 5.0
    horizon: int = 200
    gamma: float = 0.98
    drug_penalties: tuple[float, float] = (2e4, 2e3)
    virus_weight: float = 0.1
    effector_weight: float = 1e3
    actions: tuple[tuple[float, float], ...] = ERNST_ACTIONS
    initial_state: tuple[float, ...] = UNHEALTHY_STEADY_STATE
    tol: float = 1e-8

    def __post_init__(self) -> None:
        if not isinstance(self.constants, HIVConstants):
            raise ValueError("constants must be an HIVConstants, got "
                             f"{type(self.constants).__name__}")
        tol = require_positive("tol", self.tol)
        if tol >= 1e-3:
            raise ValueError(f"tol must be < 1e-3, got {tol}")
        fields = {"step_days": require_positive("step_days", self.step_days),
                  "horizon": require_int("horizon", self.horizon),
                  "gamma": require_probability("gamma", self.gamma),
                  "drug_penalties": _pair("drug_penalties", self.drug_penalties),
                  "virus_weight": require_nonnegative("virus_weight", self.virus_weight),
                  "effector_weight": require_nonnegative("effector_weight",
                                                         self.effector_weight),
                  "actions": _efficacy_table(self.actions),
                  "initial_state": _positive_state("initial_state", self.initial_state),
                  "tol": tol}
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    @classmethod
    def sharma2025(cls, **fields: Any) -> HIVTreatmentMDP:
        """Sharma et al. (2025, App. B)'s default setting: 50 steps of 20 days (their experts
        vary ``drug_penalties`` in [18750, 21250] x [1850, 2150]); other fields as given."""
        return cls(**{"step_days": 20.0, "horizon": 50, **fields})

    @property
    def n_actions(self) -> int:
        """The number of actions (4 in Ernst et al. 2006)."""
        return len(self.actions)

    def efficacies(self, actions: np.ndarray) -> np.ndarray:
        """The drug efficacies ``(e1, e2)`` of each action index (Ernst et al. 2006's action
        table by default), ``(n, 2)``."""
        actions = np.asarray(actions)
        if not np.issubdtype(actions.dtype, np.integer) or actions.ndim != 1:
            raise ValueError(f"actions must be a 1-D integer array, got {actions.dtype} "
                             f"{actions.shape}")
        if actions.size and (actions.min() < 0 or actions.max() >= self.n_actions):
            raise ValueError(f"actions must lie in [0, {self.n_actions - 1}], got values in "
                             f"[{actions.min()}, {actions.max()}]")
        return np.array(self.actions)[actions]

    def rewards(self, next_states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Ernst et al. (2006)'s reward at the post-step states ``(n, 6)``, ``(n,)``."""
        next_states = require_array("next_states", next_states, shape=(None, 6))
        e1, e2 = self.efficacies(actions).T
        p1, p2 = self.drug_penalties
        return (-self.virus_weight * next_states[:, 4] - p1 * e1 ** 2 - p2 * e2 ** 2
                + self.effector_weight * next_states[:, 5])

    def step(self, states: np.ndarray, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One treatment step of Ernst et al. (2006) for every patient (the efficacies held
        for ``step_days`` days): ``(next_states (n, 6), rewards (n,))``."""
        next_states = integrate(states, self.efficacies(actions), self.step_days,
                                self.constants, self.tol)
        return next_states, self.rewards(next_states, actions)

    def initial_states(self, n_patients: int) -> np.ndarray:
        """``n_patients`` copies of the initial state (Ernst et al. 2006: the unhealthy steady
        state), ``(n, 6)``."""
        return np.tile(self.initial_state, (require_int("n_patients", n_patients), 1))

    def simulate(self, policy: Policy, n_patients: int,
                 rng: np.random.Generator | Sequence[np.random.Generator]) -> HIVEpisodes:
        """``n_patients`` episodes of ``horizon`` steps under ``policy``, all patients at once
        (e.g. the behaviour data of Xie et al. 2019, Sec. 7). ``rng`` is passed to the policy
        at every step and is the only source of randomness. A sequence of ``k`` generators
        simulates ``k`` groups of ``n_patients`` (``k n`` episodes, group by group) in one
        integration: group ``g``'s actions are drawn from ``rng[g]`` alone, so each group is
        the same bits as its own call (the integrator steps every patient on its own)."""
        rngs = list(rng) if isinstance(rng, Sequence) else [rng]
        if not rngs or not all(isinstance(g, np.random.Generator) for g in rngs):
            raise ValueError("rng must be a numpy.random.Generator or a non-empty sequence "
                             "of them")
        n_patients = require_int("n_patients", n_patients)
        states = self.initial_states(n_patients * len(rngs))
        observations = [np.log10(states)]
        actions, rewards = [], []
        for _ in range(self.horizon):
            groups = np.split(observations[-1], len(rngs))
            action = np.concatenate([self._policy_actions(policy, o, g)
                                     for o, g in zip(groups, rngs)])
            states, reward = self.step(states, action)
            observations.append(np.log10(states))
            actions.append(action)
            rewards.append(reward)
        return HIVEpisodes(np.stack(observations, axis=1), np.stack(actions, axis=1),
                           np.stack(rewards, axis=1))

    def _policy_actions(self, policy: Policy, observations: np.ndarray,
                        rng: np.random.Generator) -> np.ndarray:
        """The policy's actions for ``observations``, checked to be ``n`` valid indices."""
        actions = np.asarray(policy(observations.copy(), rng))
        if actions.shape != (observations.shape[0],):
            raise ValueError(f"the policy must return {observations.shape[0]} actions, got "
                             f"shape {actions.shape}")
        self.efficacies(actions)
        return actions.astype(np.int64)

    def simulate_actions(self, actions: np.ndarray) -> HIVEpisodes:
        """Open-loop episodes: patient ``i`` takes ``actions[i, t]`` at step ``t``; ``actions``
        is ``(n, T)`` with any ``T >= 1`` (vectorised integrator)."""
        return self._open_loop(actions, self.step)

    def simulate_actions_reference(self, actions: np.ndarray, method: str = "LSODA",
                                   rtol: float = 1e-10) -> HIVEpisodes:
        """:meth:`simulate_actions` with the per-patient ``scipy.integrate.solve_ivp``
        reference solver (``method`` e.g. ``"LSODA"``, ``"BDF"``, ``"Radau"``)."""
        def reference_step(states: np.ndarray, action: np.ndarray):
            next_states = integrate_reference(states, self.efficacies(action), self.step_days,
                                              self.constants, method, rtol)
            return next_states, self.rewards(next_states, action)
        return self._open_loop(actions, reference_step)

    def _open_loop(self, actions: np.ndarray, step: Callable) -> HIVEpisodes:
        """Episodes that follow the action plan ``(n, T)`` with the given one-step map."""
        plan = np.asarray(actions)
        if plan.ndim != 2 or 0 in plan.shape:
            raise ValueError(f"actions must have shape (n, T) with n, T >= 1, got {plan.shape}")
        states = self.initial_states(plan.shape[0])
        observations, rewards = [np.log10(states)], []
        for t in range(plan.shape[1]):
            states, reward = step(states, plan[:, t])
            observations.append(np.log10(states))
            rewards.append(reward)
        return HIVEpisodes(np.stack(observations, axis=1), plan, np.stack(rewards, axis=1))

    def as_env(self) -> HIVTreatmentEnv:
        """This MDP as a Gymnasium environment."""
        return HIVTreatmentEnv(self)


class HIVTreatmentEnv(gymnasium.Env):
    """Gymnasium view of a :class:`HIVTreatmentMDP` (Ernst et al. 2006; to be registered as
    ``dprl/HIVTreatment-v0``).

    Observation: ``log10`` of the state, a float64 ``Box`` over :data:`LOG10_RANGE`; action:
    an index into ``mdp.actions``, ``Discrete(len(actions))``; reward at the post-step state.
    Truncation after ``mdp.horizon`` steps is done here (episodes never terminate). The start
    is deterministic; ``info["state"]`` is the untransformed state. Build it from an ``mdp``
    or from :class:`HIVTreatmentMDP` fields (``HIVTreatmentEnv(step_days=20.0)``), not both.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, mdp: HIVTreatmentMDP | None = None, **mdp_fields: Any) -> None:
        if mdp is not None and not isinstance(mdp, HIVTreatmentMDP):
            raise ValueError(f"mdp must be an HIVTreatmentMDP, got {type(mdp).__name__}")
        if mdp is not None and mdp_fields:
            raise ValueError("HIVTreatmentEnv takes either an HIVTreatmentMDP or its fields, "
                             "not both")
        self.mdp = HIVTreatmentMDP(**mdp_fields) if mdp is None else mdp
        self.observation_space = spaces.Box(*LOG10_RANGE, shape=(6,), dtype=np.float64)
        self.action_space = spaces.Discrete(self.mdp.n_actions)
        self._state: np.ndarray | None = None
        self._steps = 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode in ``mdp.initial_state``; ``seed`` seeds ``np_random`` (unused by
        the deterministic dynamics). No options are accepted."""
        super().reset(seed=seed)
        if options:
            raise ValueError(f"HIVTreatmentEnv.reset takes no options, got {sorted(options)}")
        self._state, self._steps = np.array(self.mdp.initial_state), 0
        return np.log10(self._state), {"state": self._state.copy()}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Hold the efficacies of ``action`` for ``mdp.step_days`` days; truncated after
        ``mdp.horizon`` steps."""
        if self._state is None:
            raise RuntimeError("step() needs reset() first (also after an episode ends)")
        if not self.action_space.contains(action):
            raise ValueError(f"action must lie in [0, {self.mdp.n_actions - 1}], got {action!r}")
        next_states, reward = self.mdp.step(self._state[None], np.array([action]))
        state, self._steps = next_states[0], self._steps + 1
        truncated = self._steps >= self.mdp.horizon
        self._state = None if truncated else state
        return np.log10(state), float(reward[0]), False, truncated, {"state": state.copy()}
