"""Bit-for-bit reproducible numpy across x86-64 machines.

The book's committed results are recomputed exactly by the test suite, possibly on another
machine than the one that made them. Two things make numpy's floating-point results depend on
the processor, not only on the code and the seed:

- numpy dispatches its loops (``exp``, ``log``, ``cos``, reductions, ``einsum``) to the widest
  SIMD extension the CPU has; the AVX-512 versions round differently in the last bits from the
  AVX2 ones;
- OpenBLAS (bundled with numpy and scipy) picks its kernels by CPU model (Haswell, SkylakeX,
  Zen, ...), and with several threads a reduction may be split differently.

- torch does the same: ATen dispatches its CPU kernels to AVX-512 where it can
  (``torch.backends.cpu.get_cpu_capability()``), and MKL (torch's BLAS) and oneDNN pick
  their code paths by CPU vendor and model; the deep networks of Sharma et al. (2025)'s
  experiments would train to different bits on different machines. Capping ATen at AVX2
  fixes its elementwise kernels and reductions; MKL's GEMM picks its path by vendor whatever
  ``MKL_CBWR`` says, so the networks' matrix products go through numpy's pinned OpenBLAS
  instead (:mod:`dprl.kernels`).

A last-bit difference is harmless for a mean, but it can flip an accept/reject test of a
sampler, after which the random stream, and the whole trial, differ. So every dprl process
pins the dispatch before numpy is loaded: numpy uses at most AVX2 (``X86_V3``), OpenBLAS its
Haswell (AVX2) kernels, on one thread; torch's ATen kernels, MKL (its conditional numerical
reproducibility mode, ``MKL_CBWR``) and oneDNN are capped at AVX2 too (some 30% slower for
the book's small networks than AVX-512, measured on 2 cores), which keeps one vendor's
machines consistent for the results still made with torch's own products. Machines with
AVX2 and FMA (x86-64-v3: every x86 server since 2013-2015), Intel or AMD, then compute the
same bits. Elsewhere (older x86, ARM) results are
correct but may differ in the last bits from the committed ones.

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
    """The environment that makes numpy's results machine-independent here: on an x86-64 CPU
    with AVX2 and FMA, numpy dispatch capped at AVX2 and OpenBLAS's Haswell kernels; one
    OpenBLAS thread everywhere."""
    values = {"OPENBLAS_NUM_THREADS": "1"}
    if platform.machine().lower() in ("x86_64", "amd64") and {"avx2", "fma"} <= _cpu_flags():
        values.update(NPY_DISABLE_CPU_FEATURES=_ABOVE_AVX2, OPENBLAS_CORETYPE="Haswell",
                      ATEN_CPU_CAPABILITY="avx2", MKL_CBWR="AVX2", ONEDNN_MAX_CPU_ISA="AVX2")
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
