"""Bit-for-bit reproducible numpy and torch across x86-64 machines, Intel or AMD.

The book's committed results are recomputed exactly by the test suite, possibly on another
machine than the one that made them. Three things make floating-point results depend on the
processor, not only on the code and the seed:

- numpy dispatches its loops (``exp``, ``log``, ``cos``, reductions, ``einsum``) to the widest
  SIMD extension the CPU has; the AVX-512 versions round differently in the last bits from the
  AVX2 ones. torch's ATen does the same (``torch.backends.cpu.get_cpu_capability()``).
- OpenBLAS (bundled with numpy and scipy) picks its kernels by CPU model (Haswell, SkylakeX,
  Zen, ...), and with several threads a reduction may be split differently.
- MKL, linked into torch, picks its code by CPU *vendor*: its GEMM (``mm``, ``addmm``,
  ``linear``) and its vector math library VML, which serves torch's CPU ``exp``, ``log``,
  ``sqrt``, ``tanh``, ``erf``, ``sin``, ``cos`` and more (``logsumexp``, ``x ** 0.5`` and
  Adam's ``exp_avg_sq.sqrt()`` among them). MKL asks ``mkl_serv_intel_cpu_true()``: on an
  Intel CPU it takes its Intel branches, chosen by ``MKL_CBWR``; on any other vendor it takes
  its generic branches, whatever ``MKL_CBWR`` says, except ``COMPATIBLE``. Under
  ``MKL_CBWR=AVX2`` an Intel CPU computes ``exp`` 1 ulp apart from an AMD one in about 4% of
  random inputs, ``sqrt`` in 17%, ``log`` in 0.1% (measured with :mod:`dprl.vendors`).
  ``MKL_CBWR=COMPATIBLE`` selects one branch on both vendors, and for VML it is the branch
  an AMD CPU takes anyway: the results made on AMD EPYC machines (under the earlier pin
  ``AVX2``) keep their bits.

A last-bit difference is harmless for a mean, but it can flip an accept/reject test of a
sampler or a greedy action, after which the random stream, and the whole trial, differ. So
every dprl process pins the dispatch before numpy is loaded: numpy uses at most AVX2
(``X86_V3``), OpenBLAS its Haswell (AVX2) kernels, on one thread; torch's ATen kernels and
oneDNN are capped at AVX2 (some 30% slower for the book's small networks than AVX-512,
measured on 2 cores) and MKL runs in its ``COMPATIBLE`` mode. MKL's GEMM under
``COMPATIBLE`` is not the AMD branch, so the networks' matrix products do not use it: they go
through numpy's pinned OpenBLAS (:mod:`dprl.kernels`). Machines with AVX2 and FMA (x86-64-v3:
every x86 server since 2013-2015), Intel or AMD, then compute the same bits. Elsewhere (older
x86, ARM) results are correct but may differ in the last bits from the committed ones.

How it is tested: ``tests/test_vendor_bits.py`` preloads a library whose
``mkl_serv_intel_cpu_true`` answers the other vendor (on an AMD CPU: Intel), which makes MKL
take that vendor's GEMM and VML branches, and recomputes trials of the committed torch
results in such processes against the committed bits; it also compares MKL's vector math of
both vendors element by element and checks that under ``MKL_CBWR=AVX2`` they differ (so the
test can fail). Not verified: a run on a real Intel CPU with torch 2.13 (the stand-in makes
MKL take the Intel code, but not, say, a microcode difference in the CPU itself).

:func:`pin` runs when :mod:`dprl` is imported; it only sets variables not already set, and it
is effective only if numpy was not imported before. The Makefile exports the same settings
(``python -m dprl env`` prints them) for the processes it starts, such as the chapters'
kernels. :func:`problems` says what is not pinned in this process.
"""

from __future__ import annotations

import os
import platform
import sys

#: numpy's dispatch targets above AVX2 (numpy 2.x names, comma-separated; names the CPU lacks are ignored)
_ABOVE_AVX2 = "X86_V4,AVX512_ICL,AVX512_SPR"


#: The CPU flags that decide which SIMD code paths numpy, OpenBLAS, ATen and MKL may take.
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
              "avx_vnni", "amx_tile")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` (empty where it cannot be read)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if not line.strip():
                    break
                name, _, value = line.partition(":")
                fields[name.strip()] = value.strip()
    except OSError:
        pass
    return fields


def _cpu_flags() -> set[str]:
    """The CPU flags of ``/proc/cpuinfo`` (empty where it cannot be read)."""
    return set(_cpuinfo().get("flags", "").split())


def processor() -> dict[str, object]:
    """This machine's processor: ``vendor`` (``GenuineIntel``, ``AuthenticAMD``; None where
    unknown), ``model`` name and which of :data:`SIMD_FLAGS` it has. Torch results made with
    vendor-dependent kernels (:mod:`dprl.kernels`) reproduce only on the same vendor and model."""
    info, flags = _cpuinfo(), _cpu_flags()
    return {"vendor": info.get("vendor_id"), "model": info.get("model name"),
            "flags": [flag for flag in SIMD_FLAGS if flag in flags]}


def settings() -> dict[str, str]:
    """The environment that makes numpy's and torch's results machine-independent here: on an
    x86-64 CPU with AVX2 and FMA, numpy, ATen and oneDNN dispatch capped at AVX2, OpenBLAS's
    Haswell kernels and MKL's vendor-independent ``COMPATIBLE`` branches; one OpenBLAS thread
    everywhere."""
    values = {"OPENBLAS_NUM_THREADS": "1"}
    if platform.machine().lower() in ("x86_64", "amd64") and {"avx2", "fma"} <= _cpu_flags():
        values.update(NPY_DISABLE_CPU_FEATURES=_ABOVE_AVX2, OPENBLAS_CORETYPE="Haswell",
                      ATEN_CPU_CAPABILITY="avx2", MKL_CBWR="COMPATIBLE",
                      ONEDNN_MAX_CPU_ISA="AVX2")
    return values


def pin() -> list[str]:
    """Set :func:`settings` in ``os.environ`` where not already set (a user's own value
    wins), and return what keeps this process from them (:func:`problems`). Effective for
    numpy only before numpy's first import: a variable set after it is reported."""
    late = "numpy" in sys.modules
    unset = [name for name in settings() if name not in os.environ]
    for name in unset:
        os.environ[name] = settings()[name]
    return [f"{name} was set after numpy was imported" for name in unset if late] + problems()


def problems() -> list[str]:
    """What keeps this process from the pinned configuration (empty when pinned): variables
    set to other values, numpy running with AVX-512 dispatch, or torch's (if loaded)."""
    found = [f"{name}={os.environ.get(name)!r} (reproducible: {value!r})"
             for name, value in settings().items() if os.environ.get(name) != value]
    if "numpy" in sys.modules:
        from numpy._core._multiarray_umath import __cpu_features__

        if any(__cpu_features__.get(name) for name in _ABOVE_AVX2.split(",")):
            found.append("numpy dispatches to AVX-512")
    if "torch" in sys.modules and "ATEN_CPU_CAPABILITY" in settings():
        import torch

        if torch.backends.cpu.get_cpu_capability() != "AVX2":
            found.append(f"torch dispatches to {torch.backends.cpu.get_cpu_capability()}")
    return found


def shell_assignments() -> str:
    """:func:`settings` as ``NAME=value`` words for ``env`` (``python -m dprl env``)."""
    return " ".join(f"{name}={value}" for name, value in settings().items())


if __name__ == "__main__":  # the Makefile reads the settings before the environment exists
    print(shell_assignments())
