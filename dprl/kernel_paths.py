"""The names of the matrix-product paths of the book's torch networks (:mod:`dprl.kernels`),
importable without torch (experiment configs validate them when the catalogue loads)."""

from dprl.validation import require_choice

#: The kernel paths: numpy's pinned OpenBLAS (same bits on every x86-64-v3 CPU) or torch's
#: own MKL / oneDNN (bits depend on the CPU vendor).
KERNELS = ("portable", "vendor")


def require_kernels(kernels: str) -> str:
    """``kernels`` if it names a kernel path of :data:`KERNELS`, else a ValueError."""
    return require_choice("kernels", kernels, KERNELS)
