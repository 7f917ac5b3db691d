"""Algorithm 1 of Wang & Hegde (2019), differentially private Q-learning with functional
noise, on the line MDP (:mod:`dprl.envs.line_mdp`), many runs trained as one batch.

**Where the noise enters.** Each run keeps one Ornstein-Uhlenbeck path ``g_a`` per action
(kernel ``sigma^2 exp(-beta |x - y|)``, :class:`~dprl.wang2019.run_paths.RunPaths`), replaced
by fresh paths every ``reset_period`` environment steps (Alg. 1 lines 7-8; ``J = T /
reset_period`` paths in all, T the number of steps) and extended to each new state (lines
14-18). The noisy function ``Q~(s, a) = Q_theta(s, a) + g_a(s)`` is used wherever Alg. 1
uses Q:

- acting, line 12: ``a_t = argmax_a Q_theta(s_t, a) + g_a(s_t)`` (epsilon-greedy on top, as
  in the authors' code);
- the target, line 19: ``y = r + gamma max_a [Q_theta'(s', a) + g_a(s')]`` (``g_a`` inside
  the max: the max runs over the index of ``g``);
- the loss, line 20: ``l = loss(Q_theta(s, a) + g_a(s) - y)``; ``g`` does not depend on
  ``theta``, so it shifts the residual but adds no gradient term;
- the release, line 24 and Prop. 9: ``Q_theta + g`` with the paths current at the end.

Ambiguities and choices (the learner follows the authors' public DQN code, the noise Alg. 1):

- Alg. 1 updates once per B steps on the last B transitions (``schedule="iterations"``);
  the authors' DQN updates after every step on a replay sample of B (once B transitions are
  stored), uniform without replacement from the last ``replay_capacity`` transitions
  (``schedule="replay"``, the default). :data:`ALGORITHM1` is Alg. 1 read literally. A replayed
  transition is scored with the *current* paths at its states, as in the authors' code (and
  in Alg. 1, whose batch lies within one path's lifetime). At a reset the fresh paths are
  drawn at once at every state the buffer can still return; drawing a Gaussian process at
  extra points does not change its law at the points used.
- Alg. 1 has one ``g`` for lines 12, 19 and 20. The authors' target network carries its own,
  independent path. ``target_noise="shared"`` (default) is Alg. 1, ``"separate"`` the code.
- Loss: Alg. 1 line 20 is ``(1/2) delta^2`` (``loss="squared"``); the authors' code uses
  PyTorch's smooth L1 (Huber) loss with gradients clamped to [-1, 1] (the defaults).
- The last step of an episode is terminal in the authors' code (no bootstrap); Alg. 1 has
  no episodes. ``bootstrap_truncation`` chooses.

**Batching.** R runs (seeds and noise levels side by side) advance in lockstep through one
Python loop over environment steps; parameters, optimiser state, transition logs and noise
paths carry a leading run axis and every operation acts on each run separately (stacked
``np.matmul``, no reduction across runs), in float64 numpy with hand-written
backpropagation and RMSprop (much faster than autograd for a 1-16-16-2 network). Each run's
randomness comes from its own generator, split by ``rng.spawn(6)`` into streams for: the
initial parameters; the environment (per episode, ``H + 1`` uniforms: start state, then one
per step, as :class:`~dprl.envs.line_mdp.LineEnv` draws them); exploration (per episode,
``H`` uniforms, then ``H`` random actions); replay sampling (one ``choice(n, B,
replace=False)`` per update); the noise paths; the target network's separate paths. A run's
result therefore does not depend on the runs batched with it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from dprl.envs.line_mdp import LineMDP
from dprl.seeding import trial_generator
from dprl.validation import (require_array, require_choice, require_in_bounds, require_int,
                             require_positive, require_probability)
from dprl.wang2019.q_functions import Learner, LinearQ, MLPQ, Params
from dprl.wang2019.run_paths import RunNoise

LOSSES, OPTIMIZERS, TARGET_NOISE = ("huber", "squared"), ("rmsprop", "sgd"), ("shared",
                                                                              "separate")
SCHEDULES = ("replay", "iterations")
_STREAMS = ("init", "env", "explore", "replay", "noise", "target_noise")


@dataclass(frozen=True)
class QLearningConfig:
    """Settings of :func:`train`; the defaults are the authors' DQN (public code of Wang &
    Hegde 2019, after PyTorch's DQN tutorial): 100 episodes, batch 128, gamma 0.999, replay
    10,000, epsilon ``0.05 + 0.85 exp(-step/200)``, target network copied after episodes 0,
    10, 20, ... (``None``: no target network, Alg. 1), RMSprop (PyTorch defaults lr 0.01,
    alpha 0.99, eps 1e-8), Huber loss, gradients clamped to [-1, 1] (``None``: no clamp),
    OU kernel beta = 1, fresh noise paths every 50 steps (each episode), no bootstrap at
    truncation, updates on replay samples. See the module docstring for ``target_noise``,
    ``loss`` and ``schedule``."""

    n_episodes: int = 100
    batch_size: int = 128
    gamma: float = 0.999
    replay_capacity: int = 10_000
    epsilon_start: float = 0.9
    epsilon_end: float = 0.05
    epsilon_decay: float = 200.0
    target_update_episodes: int | None = 10
    optimizer: str = "rmsprop"
    learning_rate: float = 0.01
    rmsprop_alpha: float = 0.99
    rmsprop_eps: float = 1e-8
    loss: str = "huber"
    grad_clip: float | None = 1.0
    beta: float = 1.0
    reset_period: int = 50
    target_noise: str = "shared"
    bootstrap_truncation: bool = False
    schedule: str = "replay"

    def __post_init__(self) -> None:
        for name in ("n_episodes", "batch_size", "replay_capacity", "reset_period"):
            require_int(name, getattr(self, name))
        if self.batch_size > self.replay_capacity:
            raise ValueError(f"batch_size ({self.batch_size}) must be <= replay_capacity "
                             f"({self.replay_capacity})")
        for name in ("gamma", "epsilon_start", "epsilon_end", "rmsprop_alpha"):
            require_probability(name, getattr(self, name))
        for name in ("epsilon_decay", "learning_rate", "rmsprop_eps", "beta"):
            require_positive(name, getattr(self, name))
        if self.target_update_episodes is not None:
            require_int("target_update_episodes", self.target_update_episodes)
        if self.grad_clip is not None:
            require_positive("grad_clip", self.grad_clip)
        require_choice("optimizer", self.optimizer, OPTIMIZERS)
        require_choice("loss", self.loss, LOSSES)
        require_choice("target_noise", self.target_noise, TARGET_NOISE)
        require_choice("schedule", self.schedule, SCHEDULES)
        if not isinstance(self.bootstrap_truncation, bool):
            raise ValueError(f"bootstrap_truncation must be a bool, got "
                             f"{self.bootstrap_truncation!r}")

    def epsilon(self, step: int) -> float:
        """Exploration rate before environment step ``step`` (0-based), as the authors'
        code: ``end + (start - end) exp(-step / decay)``."""
        return self.epsilon_end + (self.epsilon_start - self.epsilon_end) * math.exp(
            -step / self.epsilon_decay)


#: The authors' DQN setting (Wang & Hegde 2019, Sec. 4; public code).
AUTHORS_DQN = QLearningConfig()
#: Algorithm 1 of Wang & Hegde (2019) read literally, the configuration Theorem 5's proof
#: covers: greedy actions on Q + g (line 12, no epsilon-greedy), one plain SGD step (line 22,
#: learning rate alpha) per B = 128 transitions on those B transitions, squared loss (line
#: 20), no target network and no gradient clamp, targets bootstrapped at every step (no
#: episodes in Alg. 1), a fresh path per iteration (J = T/B: reset every B steps).
ALGORITHM1 = QLearningConfig(epsilon_start=0.0, epsilon_end=0.0, target_update_episodes=None,
                             optimizer="sgd", loss="squared", grad_clip=None, reset_period=128,
                             bootstrap_truncation=True, schedule="iterations")


@dataclass(frozen=True, eq=False)
class NoisyQ:
    """The released functions ``Q~(s, a) = Q_theta(s, a) + g_a(s)`` of R runs (Wang & Hegde
    2019, Alg. 1 lines 12 and 24, Prop. 9), ``g`` the runs' current noise paths. Queries
    extend the paths lazily and consistently (a state asked twice gets the same value)."""

    learner: Learner
    params: Params
    noise: RunNoise

    def __call__(self, states: ArrayLike) -> np.ndarray:
        """``Q~`` at ``states`` (R, N) in [0, 1], as (R, N, A)."""
        states = require_array("states", states, ndim=2)
        if states.shape[0] != self.noise.n_runs:
            raise ValueError(f"states must have one row per run ({self.noise.n_runs}), "
                             f"got shape {states.shape}")
        require_in_bounds("states", states, 0.0, 1.0)
        return self.learner.forward(self.params, states)[0] + self.noise(states)


@dataclass(frozen=True, eq=False)
class TrainResult:
    """Output of :func:`train` for R runs, H steps per episode, E episodes.

    ``returns`` (R, E): undiscounted return of every training episode (Fig. 1 plots it
    against ``H (e + 1)`` samples); ``states`` (R, E, H + 1), ``actions`` (R, E, H): the
    training trajectories; ``grid`` (G,), ``released_q`` and ``network_q`` (R, G, A): the
    released ``Q_theta + g`` and the network alone on the grid; ``released``: the released
    functions (:class:`NoisyQ`); ``noise_points`` (R, E H): distinct states in each run's
    noise paths after every step (Alg. 1's list ``g``, 0 without noise); ``n_resets``: noise
    paths drawn per run (J, the first included); ``n_updates``: SGD steps per run."""

    sigmas: np.ndarray
    returns: np.ndarray
    states: np.ndarray
    actions: np.ndarray
    grid: np.ndarray
    released_q: np.ndarray
    network_q: np.ndarray
    released: NoisyQ
    noise_points: np.ndarray
    n_resets: int
    n_updates: int


class _Log:
    """Every transition of every run, one float64 row ``[s, a, r, s', done, g(s), g'(s')]``
    per step, (R, T, 5 + 2A), with ``g`` the current paths' values (``g'`` the target's):
    the replay buffer is the last ``replay_capacity`` rows, and a batch gathers whole rows
    (one cache line or two per transition)."""

    def __init__(self, n_runs: int, n_steps: int, n_actions: int) -> None:
        self.data = np.zeros((n_runs, n_steps, 5 + 2 * n_actions))
        self.noise_points = np.zeros((n_runs, n_steps), dtype=np.int64)
        self.n_actions = n_actions

    states = property(lambda self: self.data[:, :, 0])
    actions = property(lambda self: self.data[:, :, 1].astype(np.int64))
    rewards = property(lambda self: self.data[:, :, 2])
    next_states = property(lambda self: self.data[:, :, 3])
    noise = property(lambda self: self.data[:, :, 5:5 + self.n_actions])
    next_noise = property(lambda self: self.data[:, :, 5 + self.n_actions:])

    def record(self, step: int, s: np.ndarray, a: np.ndarray, r: np.ndarray,
               s_next: np.ndarray, done: bool, g: np.ndarray, g_next: np.ndarray) -> None:
        """Store transition ``step`` of every run."""
        row = self.data[:, step]
        row[:, 0], row[:, 1], row[:, 2], row[:, 3], row[:, 4] = s, a, r, s_next, done
        row[:, 5:5 + self.n_actions], row[:, 5 + self.n_actions:] = g, g_next

    def batch(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """The transitions ``rows`` (R, B) of each run: s, a, r, s', done, g, g'."""
        n_runs, n_steps, width = self.data.shape
        batch = self.data.reshape(n_runs * n_steps, width)[
            rows + n_steps * np.arange(n_runs)[:, None]]
        n = self.n_actions
        return (batch[..., 0], batch[..., 1].astype(np.int64), batch[..., 2], batch[..., 3],
                batch[..., 4] != 0, batch[..., 5:5 + n], batch[..., 5 + n:])


@dataclass
class _State:
    """Mutable training state of the batched runs."""

    params: Params
    target: Params
    moments: Params
    noise: RunNoise
    target_noise: RunNoise
    n_updates: int = 0


def _sigmas(sigmas: ArrayLike, rngs: Sequence[np.random.Generator]) -> np.ndarray:
    sigmas = require_array("sigmas", sigmas, ndim=1)
    if np.any(sigmas < 0):
        raise ValueError(f"sigmas must be >= 0, got min {sigmas.min()}")
    if len(rngs) != sigmas.size or not all(isinstance(r, np.random.Generator) for r in rngs):
        raise ValueError(f"rngs must be {sigmas.size} numpy Generators (one per run)")
    return sigmas


def train(learner: Learner, config: QLearningConfig, sigmas: ArrayLike,
          rngs: Sequence[np.random.Generator], mdp: LineMDP = LineMDP(),
          grid: ArrayLike | None = None,
          on_episode: Callable[[int, Params], None] | None = None) -> TrainResult:
    """Algorithm 1 of Wang & Hegde (2019), Q-learning with functional noise, for R runs in
    one batch: run i has noise level ``sigmas[i]`` (0: plain DQN) and generator ``rngs[i]``
    (split as in the module docstring). Per environment step: fresh paths if
    ``step % reset_period == 0`` (lines 7-8), act on ``Q_theta + g`` (line 12), extend the
    paths to the next state (lines 14-18), and once B transitions are stored one SGD step on
    a replay batch with targets and residuals from ``Q + g`` (lines 19-22). ``grid``
    (default 101 points) is where the released Q is tabulated; ``on_episode(e, params)``, if
    given, sees the parameters (R runs) before training (e = -1) and at the end of every
    episode e (checkpoints)."""
    if not isinstance(learner, (MLPQ, LinearQ)):
        raise ValueError(f"learner must be an MLPQ or LinearQ, got {type(learner).__name__}")
    if not isinstance(config, QLearningConfig):
        raise ValueError(f"config must be a QLearningConfig, got {type(config).__name__}")
    sigmas = _sigmas(sigmas, rngs)
    grid = np.linspace(0, 1, 101) if grid is None else require_in_bounds(
        "grid", require_array("grid", grid, ndim=1), 0.0, 1.0)
    streams = [dict(zip(_STREAMS, rng.spawn(len(_STREAMS)))) for rng in rngs]
    params = _stack([learner.init(s["init"]) for s in streams])
    noise = RunNoise(sigmas, config.beta, [s["noise"] for s in streams], learner.n_actions)
    target_noise = noise if config.target_noise == "shared" else RunNoise(
        sigmas, config.beta, [s["target_noise"] for s in streams], learner.n_actions)
    state = _State(params, params, tuple(np.zeros_like(p) for p in params), noise,
                   target_noise)
    log = _run_episodes(learner, config, mdp, state, streams, on_episode)
    released = NoisyQ(learner, state.params, noise)
    grid_states = np.broadcast_to(grid, (sigmas.size, grid.size))
    shape = (sigmas.size, config.n_episodes, mdp.horizon)
    states = np.concatenate([log.states.reshape(shape),
                             log.next_states.reshape(shape)[:, :, -1:]], axis=2)
    return TrainResult(sigmas, log.rewards.reshape(shape).sum(axis=2), states,
                       log.actions.reshape(shape), grid, released(grid_states),
                       learner.forward(state.params, grid_states)[0], released,
                       log.noise_points, noise.n_resets, state.n_updates)


def _stack(per_run: Sequence[Params]) -> Params:
    return tuple(np.stack(arrays) for arrays in zip(*per_run))


def _run_episodes(learner: Learner, config: QLearningConfig, mdp: LineMDP, state: _State,
                  streams: list[dict],
                  on_episode: Callable[[int, Params], None] | None = None) -> _Log:
    """The environment loop of every run in lockstep; returns the transition log."""
    n_runs, horizon = len(streams), mdp.horizon
    log = _Log(n_runs, config.n_episodes * horizon, learner.n_actions)
    if on_episode is not None:
        on_episode(-1, state.params)
    for episode in range(config.n_episodes):
        uniforms = np.stack([s["env"].random(horizon + 1) for s in streams])
        explore_u = np.stack([s["explore"].random(horizon) for s in streams])
        explore_a = np.stack([s["explore"].integers(0, learner.n_actions, horizon)
                              for s in streams])
        s = uniforms[:, 0]
        for t in range(horizon):
            step = episode * horizon + t
            if step % config.reset_period == 0:
                _reset(config, state, log, step)
            g = state.noise.extend(s)
            noisy_q = learner.forward(state.params, s[:, None])[0][:, 0] + g
            a = np.where(explore_u[:, t] < config.epsilon(step), explore_a[:, t],
                         np.argmax(noisy_q, axis=1))
            s_next, r = mdp.transition(s, a, uniforms[:, t + 1])
            done = t == horizon - 1 and not config.bootstrap_truncation
            log.record(step, s, a, r, s_next, done, g, state.target_noise.extend(s_next))
            log.noise_points[:, step] = state.noise.n_points
            rows = _batch_rows(config, step, streams)
            if rows is not None:
                _update(learner, config, state, log.batch(rows))
            s = s_next
        if config.target_update_episodes and episode % config.target_update_episodes == 0:
            state.target = state.params
        if on_episode is not None:
            on_episode(episode, state.params)
    return log


def _window_start(config: QLearningConfig, step: int) -> int:
    """First transition still in the replay buffer once transition ``step`` is stored."""
    return max(0, step + 1 - config.replay_capacity)


def _batch_rows(config: QLearningConfig, step: int, streams: list[dict]) -> np.ndarray | None:
    """The rows (R, B) of the update after transition ``step``, or None when there is none:
    a replay sample once B transitions are stored (the DQN), or the B transitions of the
    iteration that ``step`` completes (Alg. 1 lines 10-22)."""
    batch = config.batch_size
    if config.schedule == "iterations":
        if (step + 1) % batch:
            return None
        return np.broadcast_to(np.arange(step + 1 - batch, step + 1), (len(streams), batch))
    return _replay_rows(config, step, streams) if step + 1 >= batch else None


def _replay_rows(config: QLearningConfig, step: int, streams: list[dict]) -> np.ndarray:
    """B transitions per run, uniform without replacement from the buffer, one
    ``choice`` call on each run's replay stream."""
    start = _window_start(config, step)
    return start + np.stack([s["replay"].choice(step + 1 - start, config.batch_size,
                                                replace=False) for s in streams])


def _reset(config: QLearningConfig, state: _State, log: _Log, step: int) -> None:
    """Fresh paths (Alg. 1 lines 7-8) before ``step``, drawn at once at every state the
    replay buffer can still return (marginalising over unused points changes nothing)."""
    window = slice(_window_start(config, step), step)
    states, next_states = log.states[:, window], log.next_states[:, window]
    if state.noise is state.target_noise:
        values = state.noise.refresh(np.concatenate([states, next_states], axis=1))
        log.noise[:, window], log.next_noise[:, window] = np.split(values, 2, axis=1)
    else:
        log.noise[:, window] = state.noise.refresh(states)
        log.next_noise[:, window] = state.target_noise.refresh(next_states)


def _update(learner: Learner, config: QLearningConfig, state: _State,
            batch: tuple[np.ndarray, ...]) -> None:
    """One SGD step of every run on its batch (Alg. 1 lines 19-22): residual
    ``Q(s, a) + g_a(s) - r - gamma (1 - done) max_b [Q'(s', b) + g'_b(s')]``, ``Q'`` the
    target network (or Q itself), ``g' = g`` unless ``target_noise="separate"``."""
    s, a, r, s_next, done, g, g_next = batch
    q, cache = learner.forward(state.params, s)
    target = state.target if config.target_update_episodes else state.params
    q_next = learner.forward(target, s_next)[0] + g_next
    y = r + config.gamma * np.where(done, 0.0, q_next.max(axis=2))
    taken = a[..., None]
    delta = np.take_along_axis(q + g, taken, axis=2)[..., 0] - y
    grad_q = np.clip(delta, -1.0, 1.0) if config.loss == "huber" else delta
    dq = np.zeros_like(q)
    np.put_along_axis(dq, taken, grad_q[..., None] / s.shape[1], axis=2)
    grads = learner.backward(state.params, cache, dq)
    if config.grad_clip is not None:
        grads = tuple(np.clip(grad, -config.grad_clip, config.grad_clip) for grad in grads)
    state.params, state.moments = _optimizer_step(config, state.params, state.moments, grads)
    state.n_updates += 1


def _optimizer_step(config: QLearningConfig, params: Params, moments: Params,
                    grads: Params) -> tuple[Params, Params]:
    """SGD, or RMSprop as PyTorch (Tieleman & Hinton 2012): ``v <- alpha v + (1 - alpha)
    grad^2``, ``theta <- theta - lr grad / (sqrt(v) + eps)``."""
    lr = config.learning_rate
    if config.optimizer == "sgd":
        return tuple(p - lr * g for p, g in zip(params, grads)), moments
    alpha, eps = config.rmsprop_alpha, config.rmsprop_eps
    moments = tuple(alpha * v + (1 - alpha) * (g * g) for v, g in zip(moments, grads))
    return (tuple(p - lr * (g / (np.sqrt(v) + eps)) for p, g, v in zip(params, grads, moments)),
            moments)


def sweep(learner: Learner, config: QLearningConfig, sigma_levels: Sequence[float],
          seeds: Sequence[int], root_seed: int, mdp: LineMDP = LineMDP()) -> TrainResult:
    """Fig. 1 of Wang & Hegde (2019): Algorithm 1 at every noise level and seed, one batch,
    runs ordered level-major (run ``k * len(seeds) + i`` is level k, seed i). Seed i uses
    ``trial_generator(root_seed, seeds[i])`` at every level (common random numbers, as the
    authors' code reuses its seeds across noise levels)."""
    sigma_levels = require_array("sigma_levels", sigma_levels, ndim=1)
    seeds = [require_int("seed", s, minimum=0) for s in seeds]
    if not seeds:
        raise ValueError("seeds must not be empty")
    rngs = [trial_generator(root_seed, s) for _ in sigma_levels for s in seeds]
    return train(learner, config, np.repeat(sigma_levels, len(seeds)), rngs, mdp)


def evaluate_greedy(released: NoisyQ, n_episodes: int, rngs: Sequence[np.random.Generator],
                    mdp: LineMDP = LineMDP()) -> np.ndarray:
    """Average undiscounted return of the greedy policy ``argmax_a Q_theta(s, a) + g_a(s)``
    w.r.t. each run's released noisy Q (Wang & Hegde 2019, Alg. 1 line 24) over
    ``n_episodes`` episodes, shape (R,). Run i's episodes draw an (H + 1, K) array of
    uniforms from ``rngs[i]`` (start states, then one row per step). The paths are copied,
    so ``released`` is left as it was and each evaluation is reproducible."""
    if not isinstance(released, NoisyQ):
        raise ValueError(f"released must be a NoisyQ, got {type(released).__name__}")
    n_episodes, n_runs = require_int("n_episodes", n_episodes), released.noise.n_runs
    if len(rngs) != n_runs or not all(isinstance(r, np.random.Generator) for r in rngs):
        raise ValueError(f"rngs must be {n_runs} numpy Generators (one per run)")
    policy = replace(released, noise=copy.deepcopy(released.noise))
    uniforms = np.stack([rng.random((mdp.horizon + 1, n_episodes)) for rng in rngs])
    states, total = uniforms[:, 0], np.zeros((n_runs, n_episodes))
    for t in range(mdp.horizon):
        states, rewards = mdp.transition(states, np.argmax(policy(states), axis=2),
                                         uniforms[:, t + 1])
        total += rewards
    return total.mean(axis=1)
