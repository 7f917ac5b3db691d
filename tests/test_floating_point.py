"""The floating-point pinning of dprl.floating_point: set before numpy loads, reported when late."""

import os
import subprocess
import sys

from dprl.floating_point import settings, shell_assignments

_CLEAN = {k: v for k, v in os.environ.items() if k not in settings()}


def _python(code: str, env: dict[str, str] = _CLEAN) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "always", "-c", code], env=env,
                          capture_output=True, text=True, check=True)


def test_importing_dprl_first_pins_numpy_and_openblas():
    out = _python("import dprl, os, numpy\n"
                  "from numpy._core._multiarray_umath import __cpu_features__ as f\n"
                  "print({k: os.environ.get(k) for k in dprl.floating_point.settings()})\n"
                  "print(any(f.get(n) for n in ('X86_V4', 'AVX512_ICL', 'AVX512_SPR')))")
    pinned, avx512 = out.stdout.splitlines()
    assert pinned == str(settings()) and avx512 == "False"
    assert "not pinned" not in out.stderr


def test_numpy_imported_first_is_reported():
    out = _python("import numpy, dprl")
    assert "not pinned" in out.stderr and "set after numpy was imported" in out.stderr


def test_the_exported_settings_pin_a_process_that_imports_numpy_first():
    env = dict(_CLEAN, **dict(word.split("=", 1) for word in shell_assignments().split()))
    out = _python("import numpy, dprl", env)
    assert "not pinned" not in out.stderr


def test_a_user_value_wins_and_is_reported():
    out = _python("import dprl, os; print(os.environ['OPENBLAS_NUM_THREADS'])",
                  dict(_CLEAN, OPENBLAS_NUM_THREADS="4"))
    assert out.stdout.strip() == "4" and "OPENBLAS_NUM_THREADS='4'" in out.stderr


def test_importing_dprl_first_pins_torch_kernels_to_avx2_and_mkl_to_one_branch():
    if "ATEN_CPU_CAPABILITY" not in settings():
        return  # not an x86-64 CPU with AVX2 and FMA: nothing is pinned (module docstring)
    out = _python("import dprl, torch, os\n"
                  "print(torch.backends.cpu.get_cpu_capability(), os.environ['MKL_CBWR'])")
    assert out.stdout.split() == ["AVX2", "COMPATIBLE"]
