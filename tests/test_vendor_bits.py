"""The same bits on an Intel and an AMD CPU, checked on one machine: in processes where MKL
takes the other vendor's code (:mod:`dprl.vendors`), under dprl's pinned floating-point
settings (:mod:`dprl.floating_point`),

- MKL's vector math, which serves torch's ``exp``, ``log``, ``sqrt`` and more, gives the bits
  of this CPU, and of the branch the committed torch results were made with (an AMD CPU under
  the earlier pin ``MKL_CBWR=AVX2``), while under ``MKL_CBWR=AVX2`` the two vendors differ:
  so the stand-in works and the tests can fail;
- a training trial of Sharma et al.'s learners has the same bits for both vendors and two
  oneDNN instruction sets, and other bits under the earlier pin;
- the torch results (the training family's training runs, learning curves, longer runs; the
  torch audits) are recomputed this way, a random trial of each drawn one, by their
  spot-check (:func:`spot_check.recomputed_for_the_other_vendor`); with
  ``DPRL_SPOT_HEAVY=1`` also every float32 input of ``exp``, ``log`` and ``sqrt``.
"""

from __future__ import annotations

import functools
import json

import pytest
from spot_check import HEAVY, TORCH_AUDITS, family_results, recomputed_for_the_other_vendor

from dprl.vendors import INTEL, available, other_vendor, run_python, training_trial

#: The stand-in works where MKL is pinned (x86-64-v3) and a C compiler builds it.
pytestmark = pytest.mark.skipif(
    not available(),
    reason="the other-vendor stand-in needs an x86-64-v3 CPU and a C compiler (cc), "
           "none found")

#: The earlier pin of MKL_CBWR, under which the committed torch results were made on AMD
#: EPYC machines (where MKL takes its generic branches whatever the value, but COMPATIBLE).
COMMITTED_CBWR = "AVX2"

#: Digests of torch's elementwise functions (float32 and float64) and of the composite
#: operations of the learners (logsumexp, softmax, x ** 0.5, Adam steps) over random bit
#: patterns, moderate and positive values, every short length (tail handling) and a strided
#: view; prints {name: sha256}.
VECTOR_MATH = r"""
import hashlib, json
import dprl
import numpy as np, torch

torch.set_num_threads(1)
rng = np.random.default_rng(20261127)
UNARY = ("exp", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "erfc",
         "erfinv", "sin", "cos", "tan", "asin", "acos", "atan", "expm1", "log1p", "trunc")


def inputs(dtype):
    uint = np.uint32 if dtype == np.float32 else np.uint64
    bits = rng.integers(0, np.iinfo(uint).max, size=1 << 18, dtype=uint, endpoint=True)
    parts = [bits.view(dtype), rng.standard_normal(1 << 18) * 10, rng.uniform(-90, 90, 1 << 17),
             np.exp(rng.uniform(-80, 80, 1 << 17)), rng.uniform(-1, 1, 1 << 16)]
    return torch.from_numpy(np.concatenate([p.astype(dtype) for p in parts]))


digests = {}
for dtype in (np.float32, np.float64):
    x = inputs(dtype)
    outputs = {name: lambda v, name=name: getattr(torch, name)(v) for name in UNARY}
    outputs.update(logsumexp=lambda v: torch.logsumexp(v[: v.numel() // 8 * 8].view(-1, 8), 1),
                   softmax=lambda v: torch.softmax(v[: v.numel() // 8 * 8].view(-1, 8), 1),
                   log_softmax=lambda v: torch.log_softmax(v[: v.numel() // 8 * 8].view(-1, 8), 1),
                   root=lambda v: v.abs() ** 0.5)
    for name, function in outputs.items():
        digest = hashlib.sha256()
        for view in [x, x[::3]] + [x[1 << 18:(1 << 18) + n] for n in range(1, 68)]:
            digest.update(function(view).numpy().tobytes())
        digests[f"{name} {np.dtype(dtype).name}"] = digest.hexdigest()
for foreach in (False, True):
    parameter = torch.nn.Parameter(torch.from_numpy(rng.standard_normal(4099).astype(np.float32)))
    adam = torch.optim.Adam([parameter], lr=1e-3, foreach=foreach)
    for _ in range(20):
        parameter.grad = torch.from_numpy(rng.standard_normal(4099).astype(np.float32))
        adam.step()
    digests[f"adam foreach={foreach}"] = hashlib.sha256(parameter.detach().numpy()).hexdigest()
print(json.dumps(digests))
"""


@functools.cache
def vector_math(other: bool, cbwr: str | None = None) -> dict[str, str]:
    """:data:`VECTOR_MATH`'s digests here (``other=False``) or for the other vendor, under
    the pinned settings or with ``MKL_CBWR=cbwr``."""
    variables = {"MKL_CBWR": cbwr} if cbwr else {}
    return run_python(VECTOR_MATH, other=other, timeout=600, **variables)


def _differing(a: dict[str, str], b: dict[str, str]) -> list[str]:
    assert a.keys() == b.keys()
    return sorted(name for name in a if a[name] != b[name])


def test_under_mkl_s_vendor_branches_the_two_vendors_differ():
    """The stand-in works, and the earlier pin was not enough: under MKL_CBWR=AVX2, the
    vector math of the two vendors differs (torch's exp, log and sqrt among it)."""
    differing = _differing(vector_math(False, COMMITTED_CBWR), vector_math(True, COMMITTED_CBWR))
    assert {"exp float32", "log float32", "sqrt float32", "logsumexp float32",
            "adam foreach=False"} <= set(differing), differing


def test_pinned_vector_math_has_the_same_bits_for_both_vendors():
    assert _differing(vector_math(False), vector_math(True)) == []


def test_pinned_vector_math_has_the_bits_of_the_committed_results():
    """The committed torch results were made on AMD CPUs under MKL_CBWR=AVX2: the pinned
    settings give those bits on either vendor."""
    amd_is_the_other = other_vendor() != INTEL
    assert _differing(vector_math(False), vector_math(amd_is_the_other, COMMITTED_CBWR)) == []


@functools.cache
def trial_digest(kernels: str, other: bool, **variables: str) -> str:
    """The digest of a 100-step training trial (:data:`dprl.vendors.TRAINING_TRIAL`)."""
    return training_trial(100, kernels, other, **variables)["digest"]


def test_a_portable_training_trial_has_the_same_bits_for_both_vendors_and_every_onednn_isa():
    digests = {(other, isa): trial_digest("portable", other, ONEDNN_MAX_CPU_ISA=isa)
               for other, isa in ((False, "AVX2"), (True, "SSE41"))}
    assert len(set(digests.values())) == 1, digests


def test_the_trial_would_differ_between_vendors_under_the_earlier_pin():
    """The test above could fail: under MKL_CBWR=AVX2 the other vendor's vector math changes
    the portable trial's bits."""
    assert (trial_digest("portable", True, MKL_CBWR=COMMITTED_CBWR)
            != trial_digest("portable", False, MKL_CBWR=COMMITTED_CBWR))


def test_torch_s_own_products_change_with_mkl_s_branch():
    """Why the networks' products are numpy's: torch's own (vendor kernels) round differently
    under MKL_CBWR=COMPATIBLE than under AVX2, as they do on another vendor's CPU."""
    assert (trial_digest("vendor", False, MKL_CBWR="AVX2")
            != trial_digest("vendor", False, MKL_CBWR="COMPATIBLE"))


#: The results whose trials run torch.
TORCH_RESULTS = family_results("sharma2025_training") + [
    sidecar for sidecar in family_results("audits") if sidecar.stem in TORCH_AUDITS]


def test_the_torch_results_are_the_ones_running_torch():
    configs = {sidecar.stem: json.loads(sidecar.read_text())["config"]
               for sidecar in TORCH_RESULTS}
    assert {stem for stem, config in configs.items() if "kernels" in config} | set(
        TORCH_AUDITS) == set(configs)
    assert all(config["kernels"] == "portable" for config in configs.values()
               if "kernels" in config)
    for sidecar in TORCH_RESULTS:  # COMMITTED_CBWR's premise, for the results made under it
        machine = json.loads(sidecar.read_text())["machine"]
        assert (machine["floating_point"]["MKL_CBWR"] == "COMPATIBLE"
                or machine["cpu"]["vendor"] != INTEL), sidecar.stem
    assert len(TORCH_RESULTS) == len(family_results("sharma2025_training")) + len(TORCH_AUDITS)
    assert len(TORCH_RESULTS) >= 12 + len(TORCH_AUDITS)      # four environments, three kinds
    assert all(recomputed_for_the_other_vendor(sidecar) for sidecar in TORCH_RESULTS)


#: Every float32 input of exp, log and sqrt, in blocks of 2^24: prints {name: sha256}.
EXHAUSTIVE = r"""
import hashlib, json
import dprl
import numpy as np, torch

torch.set_num_threads(1)
digests = {name: hashlib.sha256() for name in ("exp", "log", "sqrt")}
block = 1 << 24
for start in range(0, 1 << 32, block):
    x = torch.from_numpy(np.arange(start, start + block, dtype=np.uint64).astype(np.uint32)
                         .view(np.float32))
    for name, digest in digests.items():
        digest.update(getattr(torch, name)(x).numpy().tobytes())
print(json.dumps({name: digest.hexdigest() for name, digest in digests.items()}))
"""


@pytest.mark.skipif(not HEAVY, reason="every float32 input: minutes (DPRL_SPOT_HEAVY=1)")
def test_exp_log_and_sqrt_have_the_same_bits_for_both_vendors_on_every_float32():
    pinned = [run_python(EXHAUSTIVE, other=other, timeout=3600) for other in (False, True)]
    assert pinned[0] == pinned[1]
    amd_is_the_other = other_vendor() != INTEL
    assert pinned[0] == run_python(EXHAUSTIVE, other=amd_is_the_other, timeout=3600,
                                   MKL_CBWR=COMMITTED_CBWR)
