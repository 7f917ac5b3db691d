"""dprl.kernels: the portable products are numpy's, differentiate correctly (also under
torch.func's grad and vmap, and in float64), and have the bits recorded on AMD and Intel
CPUs; a whole training trial's bits for both vendors are checked in test_vendor_bits.py."""

import numpy as np
import pytest
import torch

from dprl import floating_point
from dprl.kernel_paths import KERNELS
from dprl.kernels import column_sum, linear, matmul, outer_sum
from dprl.sharma2025.qnetworks import QNetwork

x86_v3 = pytest.mark.skipif("MKL_CBWR" not in floating_point.settings(),
                            reason="the recorded digest holds on x86-64-v3 CPUs")


def _float32(rng, *shape):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def test_matmul_is_numpy_s_product():
    rng = np.random.default_rng(0)
    a, b = _float32(rng, 37, 19), _float32(rng, 19, 23)
    assert torch.equal(matmul(a, b), torch.from_numpy(a.numpy() @ b.numpy()))
    assert torch.equal(matmul(a.t().contiguous().t(), b), matmul(a, b))
    assert matmul(a[:0], b).shape == (0, 23)
    np.testing.assert_allclose(matmul(a, b).double(), a.double() @ b.double(), rtol=1e-5,
                               atol=1e-5)



def test_matmul_refuses_a_product_too_large_before_allocating_it():
    from dprl.kernels import MAX_PRODUCT_BYTES
    a = torch.zeros(1, 3).expand(10**6, 3)          # views: nothing allocated
    b = torch.zeros(3, 1).expand(3, 10**4)
    with pytest.raises(ValueError, match="37.3 GiB .*multiply fewer rows"):
        matmul(a, b)
    rows = MAX_PRODUCT_BYTES // (4 * 10**4)
    assert matmul(a[:rows // 1000], b).shape == (rows // 1000, 10**4)

def test_linear_forward_and_backward_match_torch_s_to_rounding():
    rng = np.random.default_rng(1)
    x, w, b, g = (_float32(rng, 64, 7), _float32(rng, 5, 7), _float32(rng, 5),
                  _float32(rng, 64, 5))
    grads = {}
    for kernels in KERNELS:
        leaves = [t.clone().requires_grad_(True) for t in (x, w, b)]
        y = linear(*leaves, kernels)
        y.backward(g)
        grads[kernels] = [y.detach()] + [leaf.grad for leaf in leaves]
    for portable, vendor in zip(grads["portable"], grads["vendor"]):
        torch.testing.assert_close(portable, vendor, rtol=1e-5, atol=1e-5)
    leaves = [t.double().requires_grad_(True) for t in (x, w, b)]
    assert torch.autograd.gradcheck(linear, leaves)


def test_matmul_takes_stacks_and_float64():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 5, 4)), rng.standard_normal((3, 4, 2))
    assert torch.equal(matmul(torch.from_numpy(a), torch.from_numpy(b)),
                       torch.from_numpy(np.matmul(a, b)))
    a32, b32 = torch.from_numpy(a.astype(np.float32)), torch.from_numpy(b.astype(np.float32))
    for i in range(3):
        assert torch.equal(matmul(a32, b32)[i], matmul(a32[i], b32[i]))


def _network_and_loss(dtype):
    generator = torch.Generator().manual_seed(4)
    net = QNetwork(4, 2, (32, 16), generator=generator).to(dtype)
    x = torch.randn(24, 4, generator=generator, dtype=dtype)
    params = {name: p.detach() for name, p in net.named_parameters()}

    def loss(parameters, inputs):
        return torch.func.functional_call(net, parameters, (inputs,)).square().sum()

    return net, x, params, loss


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_func_grad_through_a_portable_network_is_autograd_s_gradient(dtype):
    net, x, params, loss = _network_and_loss(dtype)
    grads = torch.func.grad(loss)(params, x)
    loss(dict(net.named_parameters()), x).backward()
    for name, p in net.named_parameters():
        assert grads[name].dtype == dtype and torch.equal(grads[name], p.grad), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_func_per_example_gradients_are_each_example_s_gradient(dtype):
    """vmap(grad) through the portable layers: each example's gradient is bit for bit the
    gradient of its loss alone (a stack's products are its slices' products)."""
    net, x, params, loss = _network_and_loss(dtype)
    per_example = torch.func.vmap(torch.func.grad(lambda p, xi: loss(p, xi[None])),
                                  in_dims=(None, 0))(params, x)
    for i in (0, 7, 23):
        net.zero_grad()
        loss(dict(net.named_parameters()), x[i:i + 1]).backward()
        for name, p in net.named_parameters():
            assert torch.equal(per_example[name][i], p.grad), (i, name)


def test_torch_func_jacobians_and_batched_weights_run_through_portable_layers():
    net, x, params, _ = _network_and_loss(torch.float64)
    jacobian = torch.func.jacrev(net)(x[:3])
    expected = torch.autograd.functional.jacobian(net, x[:3])
    torch.testing.assert_close(jacobian, expected, rtol=1e-12, atol=1e-12)
    stacked = {name: torch.stack([p, 2 * p]) for name, p in params.items()}
    outputs = torch.func.vmap(lambda p: torch.func.functional_call(net, p, (x,)))(stacked)
    doubled = {name: 2 * p for name, p in params.items()}
    torch.testing.assert_close(outputs[1], torch.func.functional_call(net, doubled, (x,)))


def test_weight_and_bias_sums():
    rng = np.random.default_rng(2)
    delta, x = _float32(rng, 50, 6), _float32(rng, 50, 4)
    for kernels in KERNELS:
        torch.testing.assert_close(outer_sum(delta, x, kernels), delta.t() @ x)
        torch.testing.assert_close(column_sum(delta, kernels), delta.sum(0))
    assert torch.equal(column_sum(delta), torch.from_numpy(delta.numpy().sum(axis=0)))


@pytest.mark.parametrize("call", [lambda: matmul(torch.ones(2, 3), torch.ones(2, 3)),
                                  lambda: matmul(torch.ones(2, 3).double(), torch.ones(3, 2)),
                                  lambda: matmul(torch.ones(2, 3).half(), torch.ones(3, 2).half()),
                                  lambda: matmul(np.ones((2, 3)), np.ones((3, 2))),
                                  lambda: matmul(torch.ones(2, 2, 3), torch.ones(3, 3, 2)),
                                  lambda: linear(torch.ones(1, 3), torch.ones(2, 3, 1),
                                                 torch.ones(2)),
                                  lambda: linear(torch.ones(3), torch.ones(2, 3), torch.ones(2)),
                                  lambda: linear(torch.ones(1, 3), torch.ones(2, 3),
                                                 torch.ones(2), "mkl")])
def test_bad_input_is_rejected(call):
    with pytest.raises(ValueError):
        call()


#: The digest of :func:`_product_digest`, computed with numpy 2.4.6 (scipy-openblas 0.3.31)
#: pinned by dprl.floating_point on an AMD EPYC and on an Intel Xeon (the unpinned Xeon, on
#: OpenBLAS's SkylakeX kernels, gives another digest): the portable products' bits.
PRODUCT_DIGEST = "0bf6a53427febfff5a2846bd0268c96f48e1ed5c87eb511f8d7aeda723a29129"


def _product_digest() -> str:
    """SHA-256 of float32 products (and row sums) of exactly representable inputs in the
    shapes of the book's networks: batches of 256, 62 and 10 through 2 x 256 and 1 x 512."""
    import hashlib

    rng = np.random.Generator(np.random.PCG64(12345))

    def mat(*shape):
        return (rng.integers(-2**20, 2**20, size=shape) / 2**20).astype(np.float32)

    digest = hashlib.sha256()
    for m, k, n in [(256, 4, 256), (256, 256, 256), (256, 256, 2), (256, 256, 4), (4, 256, 256),
                    (10, 4, 256), (10, 256, 256), (1, 256, 2), (1, 4, 256), (62, 256, 256),
                    (256, 62, 256), (512, 6, 512), (3, 512, 4), (300, 300, 300), (37, 1000, 41)]:
        a, b = mat(m, k), mat(k, n)
        for product in (np.matmul(a, b), np.matmul(b.T, a.T), np.matmul(a.T.copy().T, b),
                        a.sum(axis=0)):
            digest.update(product.tobytes())
    return digest.hexdigest()


@x86_v3
def test_portable_products_have_the_bits_recorded_on_amd_and_intel():
    if np.__version__ != "2.4.6":
        pytest.skip(f"the digest was recorded with numpy 2.4.6, this is {np.__version__}")
    assert _product_digest() == PRODUCT_DIGEST
