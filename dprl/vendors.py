"""Python processes in which MKL takes the other CPU vendor's code: a stand-in for running the
book on an Intel CPU when this one is AMD's (or on a non-Intel one when it is Intel's).

MKL, linked into torch, asks ``mkl_serv_intel_cpu_true()`` whether the CPU is Intel's before it
chooses its GEMM and vector-math (VML) code (:mod:`dprl.floating_point`); ``libtorch_cpu.so``
reaches that function through an overridable link. A shared library that defines it to answer
the other vendor, preloaded with ``LD_PRELOAD``, makes MKL take that vendor's branches on this
CPU. It is compiled once per process with the C compiler (``cc``). The tests of
:mod:`dprl.floating_point`'s promise (``tests/test_vendor_bits.py``) and ``python -m dprl bench
mkl-compatible-cost`` run their workloads in such processes.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dprl import floating_point
from dprl.kernel_paths import require_kernels
from dprl.validation import require_int, require_positive

#: The stand-in: MKL's question answered 1 (Intel) or 0 (another vendor).
SOURCE = "int mkl_serv_intel_cpu_true(void) {{ return {answer}; }}\n"

INTEL = "GenuineIntel"


def native_vendor() -> str | None:
    """This CPU's vendor string (``GenuineIntel``, ``AuthenticAMD``; None where unknown)."""
    return floating_point.processor()["vendor"]


def other_vendor() -> str:
    """The vendor the stand-in makes MKL see: Intel on any other CPU, 'not Intel' on Intel's."""
    return "not Intel" if native_vendor() == INTEL else INTEL


def compiler() -> str | None:
    """The C compiler that builds the stand-in (None where there is none)."""
    return shutil.which("cc") or shutil.which("gcc")


def available() -> bool:
    """Whether the stand-in can work here: MKL pinned (an x86-64-v3 CPU,
    :func:`dprl.floating_point.settings`) and a C compiler to build it."""
    return "MKL_CBWR" in floating_point.settings() and compiler() is not None


@functools.cache
def stand_in() -> Path:
    """The compiled stand-in library, built once per process (a RuntimeError where no C
    compiler is found)."""
    if compiler() is None:
        raise RuntimeError("no C compiler (cc or gcc) to build the other-vendor stand-in")
    folder = Path(tempfile.mkdtemp(prefix="dprl-vendor-"))
    atexit.register(shutil.rmtree, folder, True)
    (folder / "vendor.c").write_text(SOURCE.format(answer=int(native_vendor() != INTEL)))
    subprocess.run([compiler(), "-shared", "-fPIC", "-O2", "-o", str(folder / "libvendor.so"),
                    str(folder / "vendor.c")], check=True, capture_output=True, timeout=120)
    return folder / "libvendor.so"


def environment(other: bool, **variables: str) -> dict[str, str]:
    """This process's environment (without ``LD_PRELOAD``) with dprl's pinned floating-point
    settings (as the Makefile exports them), ``variables`` over them, and the stand-in
    preloaded if ``other``."""
    env = {**os.environ, **floating_point.settings(), **variables, "PYTHONWARNINGS": "ignore"}
    env.pop("LD_PRELOAD", None)
    if other:
        env["LD_PRELOAD"] = str(stand_in())
    return env


def run_python(code: str, *args: str, other: bool, timeout: float = 900,
               **variables: str) -> object:
    """Run ``python -c code args`` under :func:`environment` and return the JSON document its
    last line of output holds (a RuntimeError with its error output if it fails)."""
    timeout = require_positive("timeout", timeout)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=environment(other, **variables), timeout=timeout)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"the Python process failed (other vendor: {other}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


#: One training trial of Sharma et al.'s learners in a fresh process (arguments: steps,
#: kernels): CQL and BCQ on 2 x 256 networks, ``steps`` each alternating expert-level DP-SGD
#: (noise s = 1) and non-private steps, Adam, target copies, the greedy policy evaluated on
#: CartPole twice; prints the SHA-256 of the final parameters and returns, and the seconds
#: the two runs took (without the process's start).
TRAINING_TRIAL = r"""
import hashlib, json, sys, time
import dprl
import numpy as np, torch
from dprl.determinism import deterministic_torch, torch_generator
from dprl.sharma2025.dp_sgd import DPSGDConfig
from dprl.sharma2025.offline_rl import ExpertTransitions, Transitions
from dprl.sharma2025.training import Schedule, make_learner, train

deterministic_torch(1)
steps, kernels = int(sys.argv[1]), sys.argv[2]
digest, seconds = hashlib.sha256(), 0.0
for algorithm in ("CQL", "BCQ"):
    rng = np.random.default_rng(5)
    generator = torch_generator(rng)
    n, m = 6000, 1500
    data = Transitions(torch.randn(n, 4, generator=generator),
                       torch.randint(2, (n,), generator=generator), torch.ones(n),
                       torch.randn(n, 4, generator=generator),
                       (torch.rand(n, generator=generator) < 0.05).float())
    pool = ExpertTransitions(data, torch.full((m,), n // m))
    learner = make_learner("CartPole", algorithm, generator, kernels)
    start = time.perf_counter()
    outcome = train(learner, data, pool, np.arange(steps) % 2 == 0, DPSGDConfig(128, 1.0), 1e-3,
                    Schedule(steps, target_every=50, checkpoints=2, eval_episodes=2), "CartPole",
                    generator, rng)
    seconds += time.perf_counter() - start
    for parameter in learner.parameters():
        digest.update(parameter.detach().numpy().tobytes())
    digest.update(outcome.returns.tobytes())
print(json.dumps({"digest": digest.hexdigest(), "seconds": seconds}))
"""


def training_trial(steps: int, kernels: str, other: bool, **variables: str) -> dict:
    """:data:`TRAINING_TRIAL` of ``steps`` steps with ``kernels`` (:mod:`dprl.kernels`) in a
    fresh process (:func:`run_python`): ``{"digest": ..., "seconds": ...}``."""
    steps = require_int("steps", steps, minimum=2)
    return run_python(TRAINING_TRIAL, str(steps), require_kernels(kernels), other=other,
                      **variables)
