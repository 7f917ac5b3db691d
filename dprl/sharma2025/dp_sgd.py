"""Expert-level DP-SGD (Sharma et al. 2025, Alg. 4, App. B.2) and selective DP-SGD (Alg. 3),
with per-example clipping from layer identities instead of per-example gradients.

**Alg. 4.** Each expert is sampled independently with probability ``q = b / m`` (Poisson
sampling, the sampling of the accounting; App. B.2's "randomly sample b experts" is the
fixed-size variant), one transition is drawn uniformly from each sampled expert's data, each
example's gradient ``g_i`` is clipped to norm ``C``, and ``g = (sum_i g_i min(1, C / |g_i|)
+ N(0, s^2 C^2 I)) / b``; then ``phi <- optimizer step`` (plain SGD: ``phi - eta g``, line 9).
Line 8 divides by ``b``; under Poisson sampling the batch size is random and the division is
by its expectation ``b = q m`` (as in Abadi et al. 2016 and Opacus), which keeps the
sensitivity of the released sum at ``C``.

**Per-example norms without per-example gradients** (Goodfellow 2015, "Efficient per-example
gradient computations"). For a linear layer ``z = x W^T + b`` evaluated once per example, the
gradient of example ``i``'s loss is ``(delta_i x_i^T, delta_i)`` with ``delta_i =
d loss_i / d z_i``, so ``|g_i|^2 = sum_layers |delta_i|^2 (|x_i|^2 + 1)``. One forward pass
records every layer's inputs ``x`` (forward hooks) and one backward pass of ``sum_i loss_i``
to the layer outputs gives every ``delta`` (each loss depends only on its own example). The
clipped sum is then formed from the same tensors, ``sum_i c_i delta_i x_i^T`` and
``sum_i c_i delta_i`` with ``c_i = min(1, C / |g_i|)``: the layer gradients of
``sum_i c_i loss_i``, without the second backward pass of two-pass "ghost clipping" (Lee &
Kifer 2021; Li et al. 2022). :func:`vmap_clipped_gradient_sum` is the straightforward
reference, per-example gradients by ``torch.func.vmap(grad)``.

**Alg. 3.** Each step draws ``Bernoulli(p)``: 1 runs the expert-level DP-SGD step on
``D_unst``; 0 runs a noiseless step on a uniform batch of ``b`` transitions of ``D_stable``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from dprl.kernels import column_sum, outer_sum
from dprl.sharma2025.offline_rl import (ExpertTransitions, OfflineLearner, Transitions,
                                        sample_uniform, sgd_step)
from dprl.sharma2025.qnetworks import QNetwork, set_kernels
from dprl.validation import (require_choice, require_int, require_nonnegative, require_positive,
                             require_probability)


@dataclass(frozen=True)
class ClippedGradients:
    """The clipped per-example gradients of a batch, summed: ``grads`` aligned with
    ``module.parameters()``, with the per-example gradient ``norms`` ``(B,)`` before
    clipping and the per-example ``losses`` ``(B,)``."""

    grads: list[torch.Tensor]
    norms: torch.Tensor
    losses: torch.Tensor


@dataclass(frozen=True)
class DPSGDConfig:
    """Alg. 4's expected batch size ``b`` (experts sampled at rate ``b / m``), noise
    multiplier ``s`` (noise standard deviation over ``C``) and clipping norm ``C`` (App. B.3:
    1.0)."""

    batch_size: int
    noise_multiplier: float
    clip: float = 1.0

    def __post_init__(self) -> None:
        require_int("batch_size", self.batch_size)
        require_nonnegative("noise_multiplier", self.noise_multiplier)
        require_positive("clip", self.clip)


def linear_layers(module: nn.Module) -> list[nn.Linear]:
    """The ``nn.Linear`` layers of ``module``; raises unless every parameter belongs to one
    of them (the per-example identity covers nothing else)."""
    layers = [m for m in module.modules() if isinstance(m, nn.Linear)]
    covered = {id(p) for layer in layers for p in layer.parameters()}
    if any(id(p) not in covered for p in module.parameters()):
        raise ValueError("module must hold parameters only in nn.Linear layers")
    if any(layer.bias is None for layer in layers):
        raise ValueError("every nn.Linear layer must have a bias")
    return layers


class LayerTape:
    """Forward hooks that record each linear layer's input and output while gradients are
    on; a layer may run only once per recording (one input vector per example)."""

    def __init__(self, layers: list[nn.Linear]) -> None:
        self.records: dict[nn.Linear, tuple[torch.Tensor, torch.Tensor]] = {}
        self._handles = [layer.register_forward_hook(self._record) for layer in layers]

    def _record(self, layer: nn.Module, args: tuple[torch.Tensor, ...],
                output: torch.Tensor) -> None:
        if not torch.is_grad_enabled():
            return
        if layer in self.records:
            raise ValueError("a linear layer ran twice with gradients in one loss; the "
                             "per-example identity needs one input per example and layer")
        self.records[layer] = (args[0], output)

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


def _clip_factors(norms: torch.Tensor, clip: float) -> torch.Tensor:
    """``min(1, C / |g_i|)`` (1 where the gradient is 0)."""
    return clip / torch.clamp(norms, min=clip)


def _per_example_losses(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    losses = module(*inputs)
    if losses.ndim != 1:
        raise ValueError(f"module must return per-example losses (B,), got "
                         f"{tuple(losses.shape)}")
    return losses


def layer_deltas(module: nn.Module, inputs: tuple[torch.Tensor, ...]
                 ) -> tuple[torch.Tensor, list[tuple[nn.Linear, torch.Tensor, torch.Tensor]]]:
    """The per-example losses ``module(*inputs)`` ``(B,)`` and, per linear layer that ran,
    ``(layer, x, delta)``: its inputs ``x`` ``(B, in)`` and ``delta = d loss_i / d z_i``
    ``(B, out)`` at its outputs, by one forward and one backward of ``sum_i loss_i`` (module
    docstring). The parameters are frozen during the forward and the floating inputs are
    made leaves instead, so the backward computes only the products that carry ``delta``
    back, none of the weight gradients it would discard; every layer's input must depend
    on the floating inputs."""
    layers = linear_layers(module)
    leaves = tuple(x.detach().requires_grad_() if x.is_floating_point() else x for x in inputs)
    trained = [p for p in module.parameters() if p.requires_grad]
    tape = LayerTape(layers)
    try:
        for parameter in trained:
            parameter.requires_grad_(False)
        losses = _per_example_losses(module, leaves)
    finally:
        tape.close()
        for parameter in trained:
            parameter.requires_grad_(True)
    ran = [layer for layer in layers if layer in tape.records]
    outputs = [tape.records[layer][1] for layer in ran]
    if not all(output.requires_grad for output in outputs):
        raise ValueError("every linear layer's input must depend on the floating inputs")
    deltas = torch.autograd.grad(losses.sum(), outputs, allow_unused=True)
    terms = [(layer, tape.records[layer][0].detach(), delta)
             for layer, delta in zip(ran, deltas) if delta is not None]
    for _, x, _ in terms:
        if x.ndim != 2 or x.shape[0] != losses.shape[0]:
            raise ValueError(f"every linear layer must see one input row per example, got "
                             f"{tuple(x.shape)} for {losses.shape[0]} losses")
    return losses.detach(), terms


def gradient_norms(terms: list[tuple[nn.Linear, torch.Tensor, torch.Tensor]],
                   n: int) -> torch.Tensor:
    """``|g_i| = sqrt(sum_layers |delta_i|^2 (|x_i|^2 + 1))`` ``(n,)`` from
    :func:`layer_deltas`' terms (module docstring), layers added in order."""
    squared = torch.zeros(n)
    for _, x, delta in terms:
        squared = squared + delta.square().sum(1) * (x.square().sum(1) + 1)
    return squared.sqrt()


def clipped_gradient_sum(module: nn.Module, inputs: tuple[torch.Tensor, ...],
                         clip: float) -> ClippedGradients:
    """``sum_i g_i min(1, C / |g_i|)`` for the per-example losses ``module(*inputs)`` ``(B,)``
    (Alg. 4, lines 6-7), by the per-layer identity of the module docstring
    (:func:`layer_deltas`): no per-example gradient held. ``module`` must consist of
    ``nn.Linear`` layers (and parameter-free operations), each run once per example, and
    ``loss_i`` must depend on example ``i`` only (no batch statistics)."""
    clip = require_positive("clip", clip)
    losses, terms = layer_deltas(module, inputs)
    norms = gradient_norms(terms, losses.shape[0])
    factors = _clip_factors(norms, clip)[:, None]
    grads: dict[nn.Parameter, torch.Tensor] = {}
    for layer, x, delta in terms:
        weighted, kernels = factors * delta, getattr(layer, "kernels", "vendor")
        grads[layer.weight] = outer_sum(weighted, x, kernels)
        grads[layer.bias] = column_sum(weighted, kernels)
    return ClippedGradients([grads.get(p, torch.zeros_like(p)) for p in module.parameters()],
                            norms, losses)


def vmap_clipped_gradient_sum(module: nn.Module, inputs: tuple[torch.Tensor, ...],
                              clip: float) -> ClippedGradients:
    """The same sum from materialised per-example gradients, ``torch.func.vmap`` of
    ``grad`` over the batch (each example's loss computed alone): the reference for
    :func:`clipped_gradient_sum`, on a copy of ``module`` with torch's own kernels, the
    straightforward way to take them (the portable layers run under ``vmap`` too, as numpy's
    stacked products, but one small product per example)."""
    clip = require_positive("clip", clip)
    module = set_kernels(copy.deepcopy(module), "vendor")
    params = {name: p.detach() for name, p in module.named_parameters()}

    def one(parameters: dict[str, torch.Tensor], *example: torch.Tensor) -> torch.Tensor:
        batch = tuple(x.unsqueeze(0) for x in example)
        return functional_call(module, parameters, batch)[0]

    per_example, losses = vmap(grad_and_value(one), in_dims=(None, *(0,) * len(inputs)))(
        params, *inputs)
    norms = torch.stack([g.flatten(1).square().sum(1) for g in per_example.values()]).sum(0).sqrt()
    factors = _clip_factors(norms, clip)
    grads = [torch.einsum("b,b...->...", factors, per_example[name]) for name in params]
    return ClippedGradients(grads, norms, losses.detach())


#: Per-example clipping methods of :func:`expert_dp_sgd_step`.
CLIPPING: dict[str, Callable[[nn.Module, tuple[torch.Tensor, ...], float], ClippedGradients]] = {
    "layer_identity": clipped_gradient_sum, "vmap": vmap_clipped_gradient_sum}


def poisson_expert_batch(pool: ExpertTransitions, sampling_rate: float,
                         generator: torch.Generator) -> Transitions:
    """Alg. 4, lines 4-5: every expert independently with probability ``sampling_rate``
    (one uniform draw per expert, in expert order), then one transition uniformly from each
    sampled expert's ``counts[i]`` transitions (one float64 uniform per sampled expert);
    sampled experts without transitions contribute nothing."""
    rate = require_probability("sampling_rate", sampling_rate, open_low=True)
    sampled = torch.rand(pool.n_experts, generator=generator, dtype=torch.float64) < rate
    experts = torch.nonzero(sampled & (pool.counts > 0))[:, 0]
    uniforms = torch.rand(int(sampled.sum()), generator=generator, dtype=torch.float64)
    uniforms = uniforms[pool.counts[sampled] > 0]
    counts = pool.counts[experts]
    within = torch.minimum((uniforms * counts).long(), counts - 1)
    return pool.transitions.take(pool.offsets[experts] + within)


def noisy_gradient(clipped: list[torch.Tensor], noise_multiplier: float, clip: float,
                   expected_batch_size: float, generator: torch.Generator) -> list[torch.Tensor]:
    """Alg. 4, line 8: ``(sum + N(0, s^2 C^2 I)) / b``, one standard normal per coordinate,
    parameter by parameter in order."""
    s = require_nonnegative("noise_multiplier", noise_multiplier)
    clip = require_positive("clip", clip)
    b = require_positive("expected_batch_size", expected_batch_size)
    return [(g + s * clip * torch.randn(g.shape, generator=generator, dtype=g.dtype)) / b
            for g in clipped]


def expert_dp_sgd_step(learner: OfflineLearner, target: QNetwork, pool: ExpertTransitions,
                       config: DPSGDConfig, optimizer: torch.optim.Optimizer,
                       generator: torch.Generator, clipping: str = "layer_identity") -> int:
    """One step of expert-level DP-SGD (Alg. 4, lines 4-9) on the experts' transitions
    ``pool`` (``m = pool.n_experts``, rate ``b / m``): Poisson batch, Bellman targets without
    gradients, clipped per-example gradients (``clipping``: ``"layer_identity"`` or the
    ``"vmap"`` reference), Gaussian noise, division by the expected ``b``, then
    ``optimizer.step()`` (plain SGD: ``phi - eta g``). Returns the realised batch size."""
    require_choice("clipping", clipping, CLIPPING)
    if config.batch_size > pool.n_experts:
        raise ValueError(f"batch_size must be <= the {pool.n_experts} experts, got "
                         f"{config.batch_size}")
    batch = poisson_expert_batch(pool, config.batch_size / pool.n_experts, generator)
    clipped = CLIPPING[clipping](learner, learner.loss_inputs(batch, target), config.clip)
    noisy = noisy_gradient(clipped.grads, config.noise_multiplier, config.clip,
                           config.batch_size, generator)
    for parameter, gradient in zip(learner.parameters(), noisy):
        parameter.grad = gradient
    optimizer.step()
    return len(batch)


def selective_step(learner: OfflineLearner, target: QNetwork, stable: Transitions,
                   unstable: ExpertTransitions, private: bool, config: DPSGDConfig,
                   optimizer: torch.optim.Optimizer, generator: torch.Generator) -> bool:
    """Alg. 3, lines 5-6 for a given coin: ``private`` takes an expert-level DP-SGD step on
    ``unstable`` (:func:`expert_dp_sgd_step`), otherwise a noiseless step on
    ``config.batch_size`` uniform transitions of ``stable``, skipped when ``stable`` is
    empty. Returns whether a step was taken."""
    if private:
        expert_dp_sgd_step(learner, target, unstable, config, optimizer, generator)
    elif len(stable):
        sgd_step(learner, target, sample_uniform(stable, config.batch_size, generator),
                 optimizer)
    else:
        return False
    return True


def selective_dp_sgd_step(learner: OfflineLearner, target: QNetwork, stable: Transitions,
                          unstable: ExpertTransitions, p: float, config: DPSGDConfig,
                          optimizer: torch.optim.Optimizer, generator: torch.Generator) -> bool:
    """One step of selective DP-SGD (Alg. 3, lines 4-6): with probability ``p`` (one
    float64 uniform) an expert-level DP-SGD step on ``unstable``, otherwise a noiseless step
    on ``stable`` (:func:`selective_step`). Returns True where the DP-SGD branch ran."""
    p = require_probability("p", p)
    if p < 1 and len(stable) == 0:
        raise ValueError("stable must not be empty when p < 1")
    private = bool(torch.rand((), generator=generator, dtype=torch.float64) < p)
    selective_step(learner, target, stable, unstable, private, config, optimizer, generator)
    return private
