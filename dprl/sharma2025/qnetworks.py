"""The networks of Sharma et al. (2025)'s offline RL learners: multilayer perceptrons of
``nn.Linear`` layers and ReLUs, ``observation (d) -> hidden -> |A| outputs``.

Sec. 6: "To represent each of the Q-value functions in both the algorithms and the generative
model in BCQ, we use a neural network with 2 hidden layers of 256 units each"
(:data:`PAPER_HIDDEN`); App. B.3: HIV uses "one hidden layer of size 512"
(:data:`HIV_HIDDEN`). Being built only from linear layers and ReLUs (no normalisation, no
shared inputs across examples), every example's gradient is a sum of rank-one products per
layer, which the fast per-example clipping of :mod:`dprl.sharma2025.dp_sgd` relies on.

Target networks are frozen copies refreshed by :func:`update_target`: a periodic hard copy
(``tau = 1``) as in DQN (Mnih et al. 2015) and in both learners' Atari code (CQL: Kumar et
al. 2020's QR-DQN agent, ``target_update_period = 8000`` agent steps, one update every 4;
discrete BCQ: Fujimoto et al. 2019b, ``target_update_freq = 8e3``), or Polyak averaging
(``tau < 1``), the discrete-BCQ code's setting for non-Atari tasks (``tau = 0.005`` every
step). Sharma et al. do not say which they use.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import torch
from torch import nn

from dprl.kernel_paths import require_kernels
from dprl.kernels import linear
from dprl.validation import require_int, require_probability

#: Hidden sizes of every network for CartPole, Acrobot and LunarLander (Sec. 6, App. B.3).
PAPER_HIDDEN: tuple[int, ...] = (256, 256)

#: Hidden sizes of the HIV Q-network (App. B.3: one hidden layer of 512).
HIV_HIDDEN: tuple[int, ...] = (512,)


class Linear(nn.Linear):
    """``nn.Linear`` whose products take the ``kernels`` path of :func:`dprl.kernels.linear`
    (``"portable"``: the same bits on every x86-64-v3 CPU); forward hooks and
    ``isinstance(layer, nn.Linear)`` work as for ``nn.Linear``."""

    kernels: str = "portable"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.kernels)


def set_kernels(module: nn.Module, kernels: str) -> nn.Module:
    """Set the kernel path of every :class:`Linear` layer of ``module`` (in place); returns
    ``module``."""
    kernels = require_kernels(kernels)
    for layer in module.modules():
        if isinstance(layer, Linear):
            layer.kernels = kernels
    return module


class QNetwork(nn.Module):
    """``x -> Linear -> ReLU -> ... -> Linear``: ``in_dim`` inputs, one hidden layer per entry
    of ``hidden``, ``n_outputs`` outputs (Q-values, or BCQ's behaviour-cloning logits).
    Weights and biases are drawn from ``generator`` as PyTorch's default ``nn.Linear`` init
    does, ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (He et al. 2015's uniform init with
    ``a = sqrt(5)``), layer by layer, weight before bias; no global random state is used.
    The layers' products take the ``kernels`` path (:mod:`dprl.kernels`)."""

    def __init__(self, in_dim: int, n_outputs: int, hidden: Sequence[int] = PAPER_HIDDEN, *,
                 generator: torch.Generator, kernels: str = "portable") -> None:
        super().__init__()
        if not isinstance(generator, torch.Generator):
            raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        sizes = [require_int("in_dim", in_dim), *(require_int("hidden", h) for h in hidden),
                 require_int("n_outputs", n_outputs)]
        self.layers = nn.ModuleList(
            nn.utils.skip_init(Linear, fan_in, fan_out)
            for fan_in, fan_out in zip(sizes[:-1], sizes[1:]))
        set_kernels(self, kernels)
        with torch.no_grad():
            for layer in self.layers:
                bound = 1.0 / math.sqrt(layer.in_features)
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.uniform_(-bound, bound, generator=generator)

    @property
    def in_dim(self) -> int:
        """The number of inputs ``d``."""
        return self.layers[0].in_features

    @property
    def n_outputs(self) -> int:
        """The number of outputs (``|A|``)."""
        return self.layers[-1].out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Outputs ``(B, n_outputs)`` for inputs ``(B, in_dim)``."""
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


def frozen_copy(network: QNetwork) -> QNetwork:
    """A copy of ``network`` whose parameters do not require gradients: a target network."""
    target = copy.deepcopy(network)
    target.requires_grad_(False)
    return target


@torch.no_grad()
def update_target(target: QNetwork, online: QNetwork, tau: float = 1.0) -> None:
    """``phi_target <- tau phi + (1 - tau) phi_target`` in place: ``tau = 1`` is DQN's periodic
    hard copy (Mnih et al. 2015), ``tau < 1`` Polyak averaging (Fujimoto et al.'s discrete-BCQ
    code, ``tau = 0.005``, for non-Atari tasks)."""
    tau = require_probability("tau", tau, open_low=True)
    pairs = list(zip(target.parameters(), online.parameters(), strict=True))
    for kept, new in pairs:
        if kept.shape != new.shape:
            raise ValueError(f"target and online networks differ in shape: {kept.shape} vs "
                             f"{new.shape}")
    for kept, new in pairs:
        if tau == 1.0:
            kept.copy_(new)
        else:
            kept.lerp_(new, tau)
