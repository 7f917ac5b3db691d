"""Dense-layer matrix products whose bits do not depend on the CPU vendor.

torch's CPU matrix products (``mm``, ``addmm``, ``linear``, ``bmm``) go to MKL, or oneDNN,
which choose their code path by CPU vendor (:mod:`dprl.floating_point`): the same training
run rounds differently on an Intel and an AMD processor, and after a few hundred steps the
parameters differ (measured on an AMD EPYC: ``MKL_CBWR=AVX2`` and ``COMPATIBLE`` gave
different parameters after 500 CQL steps). MKL's ``COMPATIBLE`` mode would fix the GEMM branch
too, but it is not the branch the committed results were made with. The rest of a training
step is made vendor-independent by :mod:`dprl.floating_point`: ATen's own elementwise kernels
and reductions capped at AVX2, and the elementwise functions that torch hands to MKL's vector
math (``exp``, ``log``, ``sqrt``, ...) pinned to MKL's ``COMPATIBLE`` branch.

``"portable"`` kernels route every matrix product of the book's networks through numpy's
OpenBLAS, pinned by :mod:`dprl.floating_point` to its Haswell (AVX2 + FMA) kernels on one
thread: a summation order fixed by the code, not chosen by the CPU. :func:`linear` is
``y = x W^T + b`` as a ``torch.autograd.Function`` whose backward is also three products,
``dL/dx = g W``, ``dL/dW = g^T x``, ``dL/db = sum_i g_i`` (the last by numpy's sum over the
rows, in row order). Under ``torch.func`` transforms (``grad``, ``vmap``, ``jacrev``) the same
products run through functions with ``setup_context`` and ``vmap`` rules (a batch of products
is numpy's stacked ``matmul``); outside them :func:`linear` takes the leaner function, which
binds no signature per call. ``"vendor"`` kernels are torch's own (the results made before
the portable kernels were computed with them).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from dprl.kernel_paths import require_kernels

#: The floating types the portable products take (both operands of one type).
DTYPES = (torch.float32, torch.float64)
#: The largest product :func:`matmul` makes (bytes): the book's are kilobytes to megabytes; a
#: larger one is refused before numpy tries to allocate it
MAX_PRODUCT_BYTES = 2**32


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().numpy()


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for float32 or float64 tensors by numpy's ``matmul`` (OpenBLAS ``gemm``/``gemv``,
    the Haswell kernels on one thread under :mod:`dprl.floating_point`), without autograd.
    ``a`` ``(..., m, k)`` and ``b`` ``(..., k, n)`` are 2-D matrices or stacks of them with the
    same leading shape (a stack's products are its slices' products)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        raise ValueError(f"a and b must be torch tensors, got {type(a).__name__} and "
                         f"{type(b).__name__}")
    if a.dtype not in DTYPES or b.dtype != a.dtype:
        raise ValueError(f"a and b must both be float32 or both float64, got {a.dtype} and "
                         f"{b.dtype}")
    if not (a.ndim == b.ndim == 2 or a.ndim == b.ndim > 2 and a.shape[:-2] == b.shape[:-2]) \
            or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"a and b must be (..., m, k) and (..., k, n) with the same leading "
                         f"shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    size = a.element_size() * b.shape[-1] * int(np.prod(a.shape[:-1], dtype=np.float64))
    if size > MAX_PRODUCT_BYTES:
        raise ValueError(f"a @ b would take {size / 2**30:.3g} GiB (MAX_PRODUCT_BYTES = "
                         f"{MAX_PRODUCT_BYTES / 2**30:g} GiB): multiply fewer rows at a time")
    return torch.from_numpy(np.matmul(_array(a), _array(b)))


def _sum_rows(a: torch.Tensor) -> torch.Tensor:
    """``sum_i a[..., i, :]``: the rows of a matrix (or of each matrix of a stack) added in
    order by numpy."""
    return torch.from_numpy(_array(a).sum(axis=-2))


def _batch_first(info, in_dims: tuple, *tensors: torch.Tensor) -> list[torch.Tensor]:
    """A ``vmap`` rule's inputs with the batch in front: batched ones moved, the others
    expanded (a view) to the batch size."""
    return [x.movedim(dim, 0) if dim is not None else x.expand(info.batch_size, *x.shape)
            for x, dim in zip(tensors, in_dims)]


class _MatMul(torch.autograd.Function):
    """:func:`matmul` for ``torch.func``: ``d(a b) = da b + a db``, and a batch of products
    is the stack's product."""

    @staticmethod
    def forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return matmul(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        return (_MatMul.apply(grad, b.mT) if need_a else None,
                _MatMul.apply(a.mT, grad) if need_b else None)

    @staticmethod
    def vmap(info, in_dims, a, b):
        return _MatMul.apply(*_batch_first(info, in_dims, a, b)), 0


class _SumRows(torch.autograd.Function):
    """:func:`_sum_rows` for ``torch.func``: every row receives the gradient of the sum."""

    @staticmethod
    def forward(a: torch.Tensor) -> torch.Tensor:
        return _sum_rows(a)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.rows = inputs[0].shape[-2]

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad.unsqueeze(-2).expand(*grad.shape[:-1], ctx.rows, grad.shape[-1])

    @staticmethod
    def vmap(info, in_dims, a):
        return _SumRows.apply(*_batch_first(info, in_dims, a)), 0


def _forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
             product: Callable) -> torch.Tensor:
    """``x W^T + b`` with ``product`` (under ``vmap``, of the logical, unbatched shapes)."""
    return product(x, weight.t()) + bias


def _backward(x: torch.Tensor, weight: torch.Tensor, grad: torch.Tensor, needs: tuple,
              product: Callable, sum_rows: Callable) -> tuple:
    """``(g W, g^T x, sum_i g_i)``, each only where ``needs`` asks for it."""
    need_x, need_weight, need_bias = needs
    return (product(grad, weight) if need_x else None,
            product(grad.t(), x) if need_weight else None,
            sum_rows(grad) if need_bias else None)


class _Linear(torch.autograd.Function):
    """``x W^T + b`` with forward and backward products by :func:`matmul`. The forward takes
    ``ctx`` itself (the older form): ``apply`` then binds no signature, a saving of about
    a tenth of a small network's step."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return _forward(x, weight, bias, matmul)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _backward(*ctx.saved_tensors, grad, ctx.needs_input_grad, matmul, _sum_rows)


class _TransformableLinear(torch.autograd.Function):
    """:class:`_Linear`'s products for ``torch.func`` (``setup_context``; its forward and
    backward are built from :class:`_MatMul` and :class:`_SumRows`, whose ``vmap`` rules let
    torch generate this function's)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return _forward(x, weight, bias, _MatMul.apply)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(*inputs[:2])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _backward(*ctx.saved_tensors, grad, ctx.needs_input_grad, _MatMul.apply,
                         _SumRows.apply)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
           kernels: str = "portable") -> torch.Tensor:
    """``y = x W^T + b`` for inputs ``(B, in)``, ``weight`` ``(out, in)``, ``bias`` ``(out,)``:
    by :func:`matmul` (``"portable"``, differentiable, also under ``torch.func`` transforms)
    or ``torch.nn.functional.linear`` (``"vendor"``)."""
    if require_kernels(kernels) == "vendor":
        return F.linear(x, weight, bias)
    if x.ndim != 2 or weight.ndim != 2:
        raise ValueError(f"x and weight must be (B, in) and (out, in), got {tuple(x.shape)} and "
                         f"{tuple(weight.shape)}")
    # under a torch.func transform (grad, vmap, ...), the function it can trace
    if torch._C._are_functorch_transforms_active():
        return _TransformableLinear.apply(x, weight, bias)
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
