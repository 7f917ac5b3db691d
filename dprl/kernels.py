"""Dense-layer matrix products whose bits do not depend on the CPU vendor.

torch's CPU matrix products (``mm``, ``addmm``, ``linear``, ``bmm``) go to MKL, or oneDNN,
which choose their code path by CPU vendor and model whatever ``MKL_CBWR`` says: the same
training run rounds differently on an Intel and an AMD processor, and after a few hundred
steps the parameters differ (issue 27; measured on an AMD EPYC: ``MKL_CBWR=AVX2`` and
``COMPATIBLE`` gave different parameters after 500 CQL steps). Elementwise ATen kernels
(``exp``, ``relu``, Adam's updates) and its reductions, capped at AVX2 by
:mod:`dprl.floating_point`, are code fixed at build time and compute the same bits on every
x86-64-v3 processor.

``"portable"`` kernels route every matrix product of the book's networks through numpy's
OpenBLAS, pinned by :mod:`dprl.floating_point` to its Haswell (AVX2 + FMA) kernels on one
thread: a summation order fixed by the code, not chosen by the CPU. :func:`linear` is
``y = x W^T + b`` as a ``torch.autograd.Function`` whose backward is also three products,
``dL/dx = g W``, ``dL/dW = g^T x``, ``dL/db = sum_i g_i`` (the last by numpy's sum over the
rows, in row order). ``"vendor"`` kernels are torch's own (the results made before issue 27
were computed with them).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from dprl.kernel_paths import require_kernels

def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().numpy()


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for 2-D float32 tensors by numpy's ``matmul`` (OpenBLAS ``sgemm``/``sgemv``,
    the Haswell kernels on one thread under :mod:`dprl.floating_point`), without autograd."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"a and b must be 2-D with a.shape[1] == b.shape[0], got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != torch.float32 or b.dtype != torch.float32:
        raise ValueError(f"a and b must be float32, got {a.dtype} and {b.dtype}")
    return torch.from_numpy(np.matmul(_array(a), _array(b)))


def _sum_rows(a: torch.Tensor) -> torch.Tensor:
    """``sum_i a[i]`` of a 2-D tensor, rows added in order by numpy."""
    return torch.from_numpy(_array(a).sum(axis=0))


class _Linear(torch.autograd.Function):
    """``x W^T + b`` with forward and backward products by :func:`matmul`. The forward takes
    ``ctx`` itself (the older form): ``apply`` then binds no signature, a saving of about
    a tenth of a small network's step."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return matmul(x, weight.t()) + bias

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        need_x, need_weight, need_bias = ctx.needs_input_grad
        return (matmul(grad, weight) if need_x else None,
                matmul(grad.t(), x) if need_weight else None,
                _sum_rows(grad) if need_bias else None)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
           kernels: str = "portable") -> torch.Tensor:
    """``y = x W^T + b`` for inputs ``(B, in)``, ``weight`` ``(out, in)``, ``bias`` ``(out,)``:
    by :func:`matmul` (``"portable"``, differentiable) or ``torch.nn.functional.linear``
    (``"vendor"``)."""
    if require_kernels(kernels) == "vendor":
        return F.linear(x, weight, bias)
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D (B, in), got shape {tuple(x.shape)}")
    return _Linear.apply(x, weight, bias)


def outer_sum(delta: torch.Tensor, x: torch.Tensor, kernels: str = "portable") -> torch.Tensor:
    """``sum_i delta_i x_i^T = delta^T x`` ``(out, in)`` for ``delta`` ``(B, out)`` and ``x``
    ``(B, in)``: a linear layer's weight gradient (no autograd)."""
    if require_kernels(kernels) == "vendor":
        return delta.t().mm(x)
    return matmul(delta.t(), x)


def column_sum(delta: torch.Tensor, kernels: str = "portable") -> torch.Tensor:
    """``sum_i delta_i`` ``(out,)``: a linear layer's bias gradient (no autograd)."""
    return delta.sum(0) if require_kernels(kernels) == "vendor" else _sum_rows(delta)
