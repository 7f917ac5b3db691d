"""dprl.kernels: the portable products are numpy's, differentiate correctly, and a whole
training trial computes the same bits whichever MKL and oneDNN code paths this machine
offers (standing in for another vendor's CPU, on which MKL picks its own path)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from dprl import floating_point
from dprl.kernel_paths import KERNELS
from dprl.kernels import column_sum, linear, matmul, outer_sum

#: One training trial of Sharma et al.'s learners: CQL and BCQ on 2 x 256 networks, 300 steps
#: each alternating expert-level DP-SGD (noise s = 1) and non-private steps, Adam, target
#: copies, the greedy policy evaluated on CartPole twice; prints a digest of the final
#: parameters and the returns.
TRIAL = r"""
import hashlib, sys
import dprl
import numpy as np, torch
from dprl.determinism import deterministic_torch, torch_generator
from dprl.sharma2025.dp_sgd import DPSGDConfig
from dprl.sharma2025.offline_rl import ExpertTransitions, Transitions
from dprl.sharma2025.training import Schedule, make_learner, train

deterministic_torch(1)
digest = hashlib.sha256()
for algorithm in ("CQL", "BCQ"):
    rng = np.random.default_rng(5)
    generator = torch_generator(rng)
    n, m = 6000, 1500
    data = Transitions(torch.randn(n, 4, generator=generator),
                       torch.randint(2, (n,), generator=generator), torch.ones(n),
                       torch.randn(n, 4, generator=generator),
                       (torch.rand(n, generator=generator) < 0.05).float())
    pool = ExpertTransitions(data, torch.full((m,), n // m))
    learner = make_learner("CartPole", algorithm, generator, sys.argv[1])
    coins = np.arange(300) % 2 == 0
    outcome = train(learner, data, pool, coins, DPSGDConfig(128, 1.0), 1e-3,
                    Schedule(300, target_every=50, checkpoints=2, eval_episodes=2), "CartPole",
                    generator, rng)
    for parameter in learner.parameters():
        digest.update(parameter.detach().numpy().tobytes())
    digest.update(outcome.returns.tobytes())
print(digest.hexdigest())
"""

#: MKL's code paths (MKL_CBWR) and oneDNN's instruction sets (ONEDNN_MAX_CPU_ISA) that differ
#: on one machine; each value appears at least once.
SETTINGS = [("AUTO", "AVX2"), ("COMPATIBLE", "SSE41"), ("AVX2", "AVX2"), ("SSE4_2", "SSE41")]

x86_v3 = pytest.mark.skipif("MKL_CBWR" not in floating_point.settings(),
                            reason="the MKL / oneDNN stand-in needs an x86-64-v3 CPU")


def _trial_digest(kernels: str, cbwr: str, isa: str) -> str:
    env = dict(os.environ, MKL_CBWR=cbwr, ONEDNN_MAX_CPU_ISA=isa, PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-c", TRIAL, kernels], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    return done.stdout.strip()


@x86_v3
def test_a_portable_training_trial_has_the_same_bits_under_every_mkl_and_onednn_path():
    digests = {setting: _trial_digest("portable", *setting) for setting in SETTINGS}
    assert len(set(digests.values())) == 1, digests


@x86_v3
def test_the_stand_in_changes_torch_s_own_kernels():
    """The test above could fail: torch's vendor path rounds differently under
    MKL_CBWR=COMPATIBLE than under AVX2 (as it does on another vendor's CPU)."""
    assert _trial_digest("vendor", "AVX2", "AVX2") != _trial_digest("vendor", "COMPATIBLE",
                                                                     "SSE41")


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
    assert torch.autograd.gradcheck(lambda *t: linear(*(u.float() for u in t)).double(), leaves,
                                    eps=1e-2, atol=1e-2, rtol=1e-2)


def test_weight_and_bias_sums():
    rng = np.random.default_rng(2)
    delta, x = _float32(rng, 50, 6), _float32(rng, 50, 4)
    for kernels in KERNELS:
        torch.testing.assert_close(outer_sum(delta, x, kernels), delta.t() @ x)
        torch.testing.assert_close(column_sum(delta, kernels), delta.sum(0))
    assert torch.equal(column_sum(delta), torch.from_numpy(delta.numpy().sum(axis=0)))


@pytest.mark.parametrize("call", [lambda: matmul(torch.ones(2, 3), torch.ones(2, 3)),
                                  lambda: matmul(torch.ones(2, 3).double(), torch.ones(3, 2)),
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
