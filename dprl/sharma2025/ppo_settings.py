"""The settings of the batched PPO of :mod:`dprl.sharma2025.ppo` (Schulman et al. 2017),
without torch, so that experiment configs load where no run computes."""

from __future__ import annotations

from dataclasses import dataclass

from dprl.validation import (require_int, require_nonnegative, require_positive,
                             require_probability)


@dataclass(frozen=True, kw_only=True)
class PPOSettings:
    """PPO's settings (:mod:`dprl.sharma2025.ppo`; the defaults are RL Baselines3 Zoo's
    tuned CartPole-v1 hyperparameters with SB3's (64, 64) networks); ``timesteps`` is each
    agent's budget of environment steps, ``eval_horizon`` the episode length of the
    evaluations (App. B.1's 200-step demonstrations), ``train_horizon`` the time limit in
    training (CartPole-v1's 500)."""

    hidden: tuple[int, ...] = (64, 64)
    runs: int = 4
    keep: int = 3
    timesteps: int = 100_000
    n_envs: int = 8
    n_steps: int = 32
    minibatch: int = 256
    n_epochs: int = 20
    gamma: float = 0.98
    gae_lambda: float = 0.8
    clip: float = 0.2
    learning_rate: float = 1e-3
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    adam_eps: float = 1e-5
    train_horizon: int = 500
    eval_horizon: int = 200
    eval_episodes: int = 10

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(require_int("hidden", h) for h in self.hidden))
        for name in ("runs", "keep", "timesteps", "n_envs", "n_steps", "minibatch", "n_epochs",
                     "train_horizon", "eval_horizon", "eval_episodes"):
            require_int(name, getattr(self, name))
        if self.keep > self.runs:
            raise ValueError(f"keep must be <= runs = {self.runs}, got {self.keep}")
        if self.rollout % self.minibatch:
            raise ValueError(f"minibatch must divide n_envs * n_steps = {self.rollout}, "
                             f"got {self.minibatch}")
        if self.timesteps < self.rollout:
            raise ValueError(f"timesteps must be >= n_envs * n_steps = {self.rollout}, "
                             f"got {self.timesteps}")
        for name in ("gamma", "gae_lambda", "clip"):
            require_probability(name, getattr(self, name))
        for name in ("learning_rate", "max_grad_norm", "adam_eps"):
            require_positive(name, getattr(self, name))
        for name in ("ent_coef", "vf_coef"):
            require_nonnegative(name, getattr(self, name))

    @property
    def rollout(self) -> int:
        """Samples per agent and update, ``n_envs * n_steps``."""
        return self.n_envs * self.n_steps

    @property
    def n_updates(self) -> int:
        """Updates per agent, ``timesteps // rollout``."""
        return self.timesteps // self.rollout
