"""PPO experts for the classic-control twins, many independent agents trained in lockstep.

Sharma et al. (2025, App. B.1) train PPO agents (Schulman et al. 2017, "Proximal Policy
Optimization Algorithms") on each environment variant and keep the 3 best per variant. This
module trains ``E = S x runs`` agents at once, agent ``e`` on its own variant of the
vectorised twin (:class:`dprl.envs.cartpole.CartPoleVariants`), each with its own actor and
critic (tanh MLPs ``obs -> hidden -> |A|`` and ``obs -> hidden -> 1``) held as stacks of
weight matrices ``(E, in, out)``: every product is a stack of per-agent products by
:func:`dprl.kernels.matmul` (numpy's pinned OpenBLAS), forward and backward, so agents never
mix; with the elementwise functions (``tanh``, ``exp``, Adam's ``sqrt``) pinned by
:mod:`dprl.floating_point`, the bits do not depend on the CPU vendor.

Per update, every agent collects ``n_steps`` steps of ``n_envs`` copies of its variant,
computes GAE(lambda) advantages (Schulman et al. 2016, eq. 16; an episode cut at the time
limit ``train_horizon`` is bootstrapped with ``gamma V(s_final)``, as Stable-Baselines3
does), then runs ``n_epochs`` epochs of minibatches on the loss (Schulman et al. 2017,
eq. 9, as a loss to minimise)

    L = - mean min(r A, clip(r, 1 - c, 1 + c) A) + vf_coef mean (V - R)^2 - ent_coef H,

``r = pi(a|s) / pi_old(a|s)``, ``A`` normalised per agent and minibatch, ``R = A_GAE + V_old``;
the gradient of each agent is clipped to norm ``max_grad_norm`` and applied by Adam (Kingma &
Ba 2015). Learning rate and ``c`` decay linearly to 0. The defaults are RL Baselines3 Zoo's
tuned CartPole-v1 hyperparameters (8 copies x 32 steps, minibatch 256, 20 epochs,
gamma 0.98, lambda 0.8, lr 1e-3, c 0.2, no entropy bonus) with SB3's network (64, 64) and
Adam epsilon 1e-5.

Every draw of a setting (initial weights, actions, restarts, minibatch order, evaluation
starts) comes from named streams of that setting's generator; the same call gives the same
bits, and a setting's experts are the same bits whether it is trained alone or with others
(tested). Trained experts are :class:`MLPPolicies` (the greedy action of each actor), which
implement :class:`dprl.sharma2025.experts.ExpertPopulation` as
:class:`dprl.sharma2025.mlp_policies.TanhPolicies` does, so the release, the recorded
demonstrations and :mod:`dprl.sharma2025.agreement` take them unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from dprl.envs.episodes import VectorEnv
from dprl.kernels import matmul
from dprl.seeding import named_stream
from dprl.sharma2025.cem import EnvFactory, episode_returns
from dprl.sharma2025.ppo_settings import PPOSettings
from dprl.validation import require_array, require_int, require_positive

#: One layer of a stack of networks: weights ``(E, in, out)`` and biases ``(E, 1, out)``.
Layer = tuple[torch.Tensor, torch.Tensor]

_INIT, _ROLLOUT, _RESETS, _MINIBATCHES, _EVALUATION = 0, 1, 2, 3, 4  # named streams

#: The dtype of the networks and of their training.
DTYPE = np.float32


class _StackedLinear(torch.autograd.Function):
    """``y_e = x_e W_e + b_e`` for every agent ``e`` of a stack, forward and backward by
    :func:`dprl.kernels.matmul` (``dx = g W^T``, ``dW = x^T g``, ``db = 1^T g``)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return matmul(x, weight) + bias

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        need_x, need_weight, need_bias = ctx.needs_input_grad
        ones = torch.ones(grad.shape[0], 1, grad.shape[1], dtype=grad.dtype)
        return (matmul(grad, weight.mT) if need_x else None,
                matmul(x.mT, grad) if need_weight else None,
                matmul(ones, grad) if need_bias else None)


def mlp_forward(layers: Sequence[Layer], x: torch.Tensor) -> torch.Tensor:
    """Outputs ``(E, n, out)`` of the stacked tanh MLPs ``layers`` on inputs ``(E, n, in)``
    (tanh after every layer but the last)."""
    for k, (weight, bias) in enumerate(layers):
        x = _StackedLinear.apply(x, weight, bias)
        if k < len(layers) - 1:
            x = torch.tanh(x)
    return x


def layer_sizes(obs_dim: int, hidden: Sequence[int], n_outputs: int) -> list[int]:
    """``[obs_dim, *hidden, n_outputs]``, checked."""
    return [require_int("obs_dim", obs_dim), *(require_int("hidden", h) for h in hidden),
            require_int("n_outputs", n_outputs)]


def n_parameters(obs_dim: int, hidden: Sequence[int], n_outputs: int) -> int:
    """Parameters of one network, each layer's ``W (in, out)`` then ``b (out,)``."""
    sizes = layer_sizes(obs_dim, hidden, n_outputs)
    return sum(i * o + o for i, o in zip(sizes[:-1], sizes[1:]))


def unflatten(parameters: np.ndarray, sizes: Sequence[int]) -> list[Layer]:
    """The layers of flat networks ``(E, P)`` (each layer's ``W (in, out)`` row-major, then
    ``b``) as float32 tensors ``(E, in, out)`` and ``(E, 1, out)``."""
    flat = np.asarray(parameters, dtype=DTYPE)
    layers, start = [], 0
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        stop = start + fan_in * fan_out
        layers.append((torch.from_numpy(flat[:, start:stop].reshape(-1, fan_in, fan_out)),
                       torch.from_numpy(flat[:, stop:stop + fan_out].reshape(-1, 1, fan_out))))
        start = stop + fan_out
    return layers


def flatten(layers: Sequence[Layer]) -> np.ndarray:
    """The inverse of :func:`unflatten`: ``(E, P)`` float32."""
    return np.concatenate([t.detach().numpy().reshape(t.shape[0], -1)
                           for layer in layers for t in layer], axis=1)


@dataclass(frozen=True)
class MLPPolicies:
    """``m`` tanh MLPs ``obs -> hidden -> action logits`` held as flat ``parameters``
    ``(m, P)`` (:func:`unflatten`'s layout; with one hidden layer, that of
    :class:`~dprl.sharma2025.mlp_policies.TanhPolicies`), evaluated in float32 by the
    training's forward (:func:`mlp_forward`); greedy action = argmax of the logits (lowest
    index on ties). Implements :class:`dprl.sharma2025.experts.ExpertPopulation`."""

    parameters: np.ndarray
    obs_dim: int
    hidden: tuple[int, ...]
    n_actions: int

    def __post_init__(self) -> None:
        require_int("n_actions", self.n_actions, minimum=2)
        size = n_parameters(self.obs_dim, self.hidden, self.n_actions)
        object.__setattr__(self, "hidden", tuple(self.hidden))
        object.__setattr__(self, "parameters", require_array(
            "parameters", self.parameters, shape=(None, size), dtype=DTYPE))

    @property
    def n_experts(self) -> int:
        """The number of networks ``m``."""
        return self.parameters.shape[0]

    def logits(self, observations: np.ndarray) -> np.ndarray:
        """Action logits ``(m, n, A)`` for observations ``(m, n, d)`` (expert ``i`` on
        ``observations[i]``) or ``(1, n, d)`` (every expert on the same ones)."""
        obs = require_array("observations", observations, ndim=3, dtype=DTYPE)
        if obs.shape[0] not in (1, self.n_experts) or obs.shape[2] != self.obs_dim:
            raise ValueError(f"observations must have shape (1 or {self.n_experts}, n, "
                             f"{self.obs_dim}), got {obs.shape}")
        x = torch.from_numpy(np.broadcast_to(obs, (self.n_experts, *obs.shape[1:])).copy())
        layers = unflatten(self.parameters,
                           layer_sizes(self.obs_dim, self.hidden, self.n_actions))
        with torch.no_grad():
            return mlp_forward(layers, x).numpy()

    def select(self, index: np.ndarray) -> MLPPolicies:
        """The networks ``index`` (integer indices), in that order."""
        return MLPPolicies(self.parameters[np.asarray(index, dtype=np.int64)], self.obs_dim,
                           self.hidden, self.n_actions)

    def greedy_actions(self, observations: np.ndarray) -> np.ndarray:
        """The most probable action of every expert at every observation, ``(m, n)`` int64."""
        return self.logits(observations).argmax(axis=2).astype(np.int64)


def init_networks(sizes: Sequence[int], n: int, rng: np.random.Generator,
                  head_scale: float = 1.0) -> list[Layer]:
    """``n`` networks of layer ``sizes`` with PyTorch's default ``nn.Linear`` init,
    ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (weight then bias, layer by layer), drawn from
    ``rng``; the last layer scaled by ``head_scale`` (0.01 for a policy: a near-uniform start,
    as Stable-Baselines3's small policy-head gain)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    require_positive("head_scale", head_scale)
    layers = []
    for k, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        bound = (head_scale if k == len(sizes) - 2 else 1.0) / math.sqrt(fan_in)
        weight = rng.uniform(-bound, bound, (n, fan_in, fan_out)).astype(DTYPE)
        bias = rng.uniform(-bound, bound, (n, 1, fan_out)).astype(DTYPE)
        layers.append((torch.from_numpy(weight), torch.from_numpy(bias)))
    return layers


def gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, last_values: np.ndarray,
        gamma: float, lam: float) -> np.ndarray:
    """GAE(lambda) advantages (Schulman et al. 2016, eq. 16) of a rollout ``(T, ...)``:
    ``A_t = delta_t + gamma lam (1 - done_t) A_{t+1}``, ``delta_t = r_t + gamma (1 - done_t)
    V_{t+1} - V_t``, with ``V_T = last_values``; ``done_t``: the episode ended at step ``t``
    (its reward already holds any bootstrap of a cut episode)."""
    rewards = require_array("rewards", rewards, dtype=DTYPE)
    values = require_array("values", values, shape=rewards.shape, dtype=DTYPE)
    last_values = require_array("last_values", last_values, shape=rewards.shape[1:],
                                dtype=DTYPE)
    dones = np.asarray(dones)
    if dones.shape != rewards.shape or dones.dtype != bool:
        raise ValueError(f"dones must be a bool array of shape {rewards.shape}")
    gamma, lam = DTYPE(gamma), DTYPE(lam)
    advantages = np.empty_like(rewards)
    following, running = last_values, np.zeros_like(last_values)
    for t in range(len(rewards) - 1, -1, -1):
        live = DTYPE(1) - dones[t].astype(DTYPE)
        delta = rewards[t] + gamma * live * following - values[t]
        running = delta + gamma * lam * live * running
        advantages[t] = running
        following = values[t]
    return advantages


def ppo_loss(logits: torch.Tensor, values: torch.Tensor, actions: torch.Tensor,
             old_log_probs: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor,
             clip: float, vf_coef: float, ent_coef: float) -> torch.Tensor:
    """Per-agent PPO loss ``(E,)`` on minibatches ``(E, B)`` (module docstring; Schulman et
    al. 2017, eq. 9): the clipped surrogate on per-agent normalised advantages, plus
    ``vf_coef`` times the squared value error, minus ``ent_coef`` times the entropy."""
    if actions.ndim != 2 or logits.shape[:2] != actions.shape:
        raise ValueError(f"logits must be (E, B, A) and actions (E, B), got "
                         f"{tuple(logits.shape)} and {tuple(actions.shape)}")
    log_probs = torch.log_softmax(logits, dim=2)
    taken = log_probs.gather(2, actions[..., None])[..., 0]
    ratio = torch.exp(taken - old_log_probs)
    mean = advantages.mean(dim=1, keepdim=True)
    scaled = (advantages - mean) / (advantages.std(dim=1, keepdim=True) + 1e-8)
    surrogate = torch.minimum(ratio * scaled, torch.clamp(ratio, 1 - clip, 1 + clip) * scaled)
    entropy = -(log_probs.exp() * log_probs).sum(dim=2)
    return (-surrogate.mean(dim=1) + vf_coef * ((returns - values) ** 2).mean(dim=1)
            - ent_coef * entropy.mean(dim=1))


def _clip_gradients(parameters: Sequence[torch.Tensor], max_norm: float) -> None:
    """Scale each agent's gradient (over all its parameters) to norm at most ``max_norm``
    (``torch.nn.utils.clip_grad_norm_``'s rule, per agent)."""
    squares = sum(p.grad.pow(2).sum(dim=(1, 2)) for p in parameters)
    scale = torch.clamp(max_norm / (squares.sqrt() + 1e-6), max=1.0)[:, None, None]
    for p in parameters:
        p.grad.mul_(scale)


def _stack(per_setting: Sequence[Sequence[Layer]]) -> list[Layer]:
    """The networks of all settings as one stack, setting after setting."""
    return [(torch.cat([layers[k][0] for layers in per_setting]),
             torch.cat([layers[k][1] for layers in per_setting]))
            for k in range(len(per_setting[0]))]


@dataclass(eq=False)
class _Lockstep:
    """The agents of :func:`train_ppo` and their environments: the stacked actor and critic,
    the twin with ``n_envs`` copies per agent, its states and the steps since each copy's
    start, and every setting's named streams ``(init, rollout, resets, minibatches)``."""

    env: VectorEnv
    actor: list[Layer]
    critic: list[Layer]
    streams: list[list[np.random.Generator]]
    ppo: PPOSettings
    states: np.ndarray
    elapsed: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        """``(E, n_envs)``."""
        return self.elapsed.size // self.ppo.n_envs, self.ppo.n_envs

    def observe(self, states: np.ndarray) -> torch.Tensor:
        """Observations ``(E, n_envs, d)`` of twin states ``(E * n_envs, ...)``, float32."""
        return torch.from_numpy(self.env.observe(states).astype(DTYPE).reshape(
            *self.shape, -1))

    def value(self, states: np.ndarray) -> np.ndarray:
        """The critics' values ``(E * n_envs,)`` of twin states."""
        return mlp_forward(self.critic, self.observe(states))[..., 0].numpy().ravel()

    def draw(self, which: int, make: Callable[[np.random.Generator], np.ndarray]
             ) -> np.ndarray:
        """``make(stream)`` for every setting's stream ``which``, concatenated."""
        return np.concatenate([make(g) for g in self.streams[which]])

    @torch.no_grad()
    def rollout(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """``n_steps`` steps of every copy (module docstring): the samples ``(E, rollout,
        ...)`` with their GAE advantages and returns, and the mean length of the episodes
        that ended (NaN where none did) ``(E,)``."""
        ppo, (agents, n) = self.ppo, self.shape
        runs = agents // len(self.streams[0])
        steps = {name: [] for name in ("obs", "actions", "log_probs", "values", "rewards",
                                       "dones")}
        ended, lengths = np.zeros(agents), np.zeros(agents)
        for _ in range(ppo.n_steps):
            obs = self.observe(self.states)
            log_probs = torch.log_softmax(mlp_forward(self.actor, obs), dim=2).numpy()
            cumulative = np.cumsum(np.exp(log_probs.astype(float)), axis=2)[..., :-1]
            u = self.draw(_ROLLOUT, lambda g: g.random((runs, n)))
            actions = (u[..., None] >= cumulative).sum(axis=2)
            following, rewards, terminated = self.env.step(self.states, actions.ravel())
            self.elapsed += 1
            truncated = (self.elapsed >= ppo.train_horizon) & ~terminated
            if truncated.any():     # the time limit: bootstrap gamma V(s_final)
                rewards = rewards + np.where(truncated, ppo.gamma * self.value(following), 0.0)
            done = terminated | truncated
            ended += done.reshape(agents, n).sum(axis=1)
            lengths += np.where(done, self.elapsed, 0).reshape(agents, n).sum(axis=1)
            starts = self.draw(_RESETS, lambda g: self.env.reset(runs * n, g))
            self.states = np.where(done[:, None], starts, following)
            self.elapsed = np.where(done, 0, self.elapsed)
            for name, item in (("obs", obs.numpy()), ("actions", actions),
                               ("log_probs", np.take_along_axis(
                                   log_probs, actions[..., None], axis=2)[..., 0]),
                               ("values", mlp_forward(self.critic, obs)[..., 0].numpy()),
                               ("rewards", rewards.reshape(agents, n)),
                               ("dones", done.reshape(agents, n))):
                steps[name].append(item)
        batch = {name: np.stack(items) for name, items in steps.items()}
        batch["advantages"] = gae(batch["rewards"], batch["values"], batch.pop("dones"),
                                  self.value(self.states).reshape(agents, n), ppo.gamma,
                                  ppo.gae_lambda)
        batch["returns"] = batch["advantages"] + batch["values"]
        # (T, E, n, ...) -> (E, T * n, ...): agent-major samples
        samples = {name: np.ascontiguousarray(np.moveaxis(array, 0, 1).reshape(
            agents, ppo.rollout, *array.shape[3:])) for name, array in batch.items()}
        return samples, np.where(ended > 0, lengths / np.maximum(ended, 1), np.nan)

    def update(self, samples: Mapping[str, np.ndarray], optimizer: torch.optim.Optimizer,
               clip: float) -> None:
        """``n_epochs`` epochs of minibatch steps on the PPO loss of every agent, each
        agent's samples in the order of its setting's minibatch stream."""
        ppo = self.ppo
        runs = self.shape[0] // len(self.streams[0])
        tensors = {name: torch.from_numpy(array) for name, array in samples.items()}
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
        for _ in range(ppo.n_epochs):
            order = self.draw(_MINIBATCHES, lambda g: g.permuted(
                np.tile(np.arange(ppo.rollout), (runs, 1)), axis=1))
            for start in range(0, ppo.rollout, ppo.minibatch):
                index = torch.from_numpy(order[:, start:start + ppo.minibatch])
                mb = {name: torch.take_along_dim(t, index.reshape(
                    *index.shape, *[1] * (t.ndim - 2)), dim=1) for name, t in tensors.items()}
                loss = ppo_loss(mlp_forward(self.actor, mb["obs"]),
                                mlp_forward(self.critic, mb["obs"])[..., 0], mb["actions"],
                                mb["log_probs"], mb["advantages"], mb["returns"], clip,
                                ppo.vf_coef, ppo.ent_coef).sum()
                optimizer.zero_grad(set_to_none=False)
                loss.backward()
                _clip_gradients(parameters, ppo.max_grad_norm)
                optimizer.step()


def train_ppo(make_env: EnvFactory, obs_dim: int, n_actions: int,
              settings: Mapping[str, np.ndarray], rngs: Sequence[np.random.Generator],
              ppo: PPOSettings) -> tuple[np.ndarray, np.ndarray]:
    """Train ``ppo.runs`` PPO agents per setting (module docstring), all in lockstep.

    ``settings`` maps each variant parameter to ``(S,)`` values and ``rngs`` holds one
    generator per setting. Returns the actors ``(S, runs, P)`` (:class:`MLPPolicies`
    layout) and the training curves ``(S, runs, n_updates)``: the mean length of the
    episodes that ended in each update's rollout (NaN where none did).
    """
    n_settings, runs, n = len(rngs), ppo.runs, ppo.n_envs
    if not n_settings or any(np.shape(v) != (n_settings,) for v in settings.values()):
        raise ValueError(f"every settings array must have shape ({n_settings},), "
                         f"with at least one setting")
    env = make_env(**{name: np.repeat(value, runs * n) for name, value in settings.items()})
    streams = [[named_stream(rng, key) for rng in rngs]
               for key in (_INIT, _ROLLOUT, _RESETS, _MINIBATCHES)]
    initial = [(init_networks(layer_sizes(obs_dim, ppo.hidden, n_actions), runs, g, 0.01),
                init_networks(layer_sizes(obs_dim, ppo.hidden, 1), runs, g))
               for g in streams[_INIT]]
    actor, critic = (_stack([networks[k] for networks in initial]) for k in (0, 1))
    agents = _Lockstep(env, actor, critic, streams, ppo,
                       np.concatenate([env.reset(runs * n, g) for g in streams[_RESETS]]),
                       np.zeros(n_settings * runs * n, dtype=np.int64))
    optimizer = torch.optim.Adam([t.requires_grad_() for layer in (*actor, *critic)
                                  for t in layer], lr=ppo.learning_rate, eps=ppo.adam_eps,
                                 foreach=False)
    curves = np.full((n_settings * runs, ppo.n_updates), np.nan)
    for update in range(ppo.n_updates):
        remaining = 1.0 - update / ppo.n_updates   # linear decay of lr and clip range
        samples, curves[:, update] = agents.rollout()
        for group in optimizer.param_groups:
            group["lr"] = ppo.learning_rate * remaining
        agents.update(samples, optimizer, ppo.clip * remaining)
    shape = (n_settings, runs)
    return flatten(actor).reshape(*shape, -1), curves.reshape(*shape, -1)


def evaluate(make_env: EnvFactory, parameters: Mapping[str, np.ndarray],
             policies: MLPPolicies, rngs: Sequence[np.random.Generator], which: int,
             ppo: PPOSettings) -> np.ndarray:
    """Mean greedy return ``(S, n)`` of the ``S * n`` networks of ``policies`` (setting by
    setting) on the given variants (``(S * n,)`` each), over ``ppo.eval_episodes`` episodes
    of ``ppo.eval_horizon`` steps from each setting's evaluation stream ``which``."""
    n_settings = len(rngs)
    n = policies.n_experts // n_settings
    probe = make_env(**{name: value[:1] for name, value in parameters.items()})
    starts = np.stack([probe.reset(n * ppo.eval_episodes, named_stream(rng, _EVALUATION,
                                                                        which))
                       for rng in rngs]).reshape(n_settings * n, ppo.eval_episodes, -1)
    returns = episode_returns(make_env, parameters, policies, starts, ppo.eval_horizon)
    return returns.mean(axis=1).reshape(n_settings, n)


def train_ppo_experts(make_env: EnvFactory, obs_dim: int, n_actions: int,
                      settings: Mapping[str, np.ndarray], rngs: Sequence[np.random.Generator],
                      ppo: PPOSettings, default: Mapping[str, float]) -> dict[str, np.ndarray]:
    """App. B.1's selection on PPO agents: :func:`train_ppo`, then the ``ppo.keep`` best of
    each setting's ``ppo.runs`` on its own variant (mean greedy return, ties to the lower
    run). Returns ``parameters (S, keep, P)``, ``own_returns`` and ``default_returns`` (on
    the ``default`` variant) ``(S, keep)``, every run's ``candidate_returns (S, runs)`` and
    the training ``curves (S, runs, n_updates)``."""
    actors, curves = train_ppo(make_env, obs_dim, n_actions, settings, rngs, ppo)
    n_settings, runs = actors.shape[:2]
    policies = MLPPolicies(actors.reshape(n_settings * runs, -1), obs_dim, ppo.hidden,
                           n_actions)
    own = evaluate(make_env, {name: np.repeat(value, runs) for name, value in settings.items()},
                   policies, rngs, 0, ppo)
    best = np.argsort(-own, axis=1, kind="stable")[:, :ppo.keep]
    kept = np.take_along_axis(actors, best[..., None], axis=1)
    defaults = {name: np.full(n_settings * ppo.keep, value) for name, value in default.items()}
    kept_policies = MLPPolicies(kept.reshape(n_settings * ppo.keep, -1), obs_dim, ppo.hidden,
                                n_actions)
    return {"parameters": kept, "own_returns": np.take_along_axis(own, best, axis=1),
            "default_returns": evaluate(make_env, defaults, kept_policies, rngs, 1, ppo),
            "candidate_returns": own, "curves": curves}
