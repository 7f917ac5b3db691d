"""Deterministic torch: fixed threads, deterministic kernels, generators tied to numpy streams.

Torch code in dprl takes a ``torch.Generator`` made by :func:`torch_generator` from the trial's
numpy generator, so a trial's torch randomness is part of its ``SeedSequence`` stream and reruns
match bit for bit on the same machine.
"""

from __future__ import annotations

import numpy as np
import torch

from dprl.validation import require_int


def deterministic_torch(threads: int = 1) -> None:
    """Fix torch's CPU thread count and require deterministic algorithms
    (``torch.use_deterministic_algorithms``), as every torch run of the book does."""
    torch.set_num_threads(require_int("threads", threads))
    torch.use_deterministic_algorithms(True)


def torch_generator(rng: np.random.Generator, device: str = "cpu") -> torch.Generator:
    """A ``torch.Generator`` seeded by a 63-bit draw from ``rng`` (the trial's stream)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    generator = torch.Generator(device=device)
    generator.manual_seed(int(rng.integers(0, 2**63 - 1)))
    return generator
