"""Explicit randomness: one root seed, one independent stream per trial.

Trial ``i`` of an experiment with root seed ``s`` always draws from
``SeedSequence(s, spawn_key=(i,))``, which is exactly the ``i``-th child of
``SeedSequence(s).spawn(n)`` for any ``n > i``. So a single trial of any figure can be
recomputed alone, whatever the number of trials or the batch it ran in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dprl.validation import require_int


def trial_seed(root_seed: int, index: int) -> np.random.SeedSequence:
    """The seed sequence of trial ``index``: child ``index`` of ``SeedSequence(root_seed)``."""
    root_seed = require_int("root_seed", root_seed, minimum=0)
    index = require_int("index", index, minimum=0)
    return np.random.SeedSequence(root_seed, spawn_key=(index,))


def trial_generator(root_seed: int, index: int) -> np.random.Generator:
    """The generator of trial ``index`` (PCG64 seeded by :func:`trial_seed`)."""
    return np.random.default_rng(trial_seed(root_seed, index))


def trial_generators(root_seed: int, indices: Sequence[int] | int) -> list[np.random.Generator]:
    """Generators for the given trial indices (or for trials ``0..n-1`` when given ``n``)."""
    if isinstance(indices, (int, np.integer)) and not isinstance(indices, bool):
        indices = range(require_int("n_trials", indices, minimum=0))
    return [trial_generator(root_seed, i) for i in indices]


def named_stream(rng: np.random.Generator, *key: int) -> np.random.Generator:
    """The child stream of ``rng`` named by ``key`` (non-negative integers): PCG64 seeded by
    ``SeedSequence(entropy, spawn_key=spawn_key + key)`` of ``rng``'s seed sequence. It does
    not depend on ``rng``'s state nor on which other names are used, so an experiment can
    give every run of a trial its own stream by name (e.g. (policy, batch size, eps, step)),
    and a run gives the same bits wherever it is computed."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    seeds = rng.bit_generator.seed_seq
    if not isinstance(seeds, np.random.SeedSequence):
        raise ValueError("rng must be seeded by a SeedSequence (e.g. trial_generator)")
    key = tuple(require_int("key", k, minimum=0) for k in key)
    return np.random.default_rng(np.random.SeedSequence(seeds.entropy,
                                                        spawn_key=(*seeds.spawn_key, *key)))


def trial_index(rng: np.random.Generator) -> int:
    """The index ``i`` of the trial whose generator :func:`trial_generator` made ``rng``
    (the last entry of its seed sequence's spawn key): for experiments whose trials are not
    exchangeable, e.g. trial ``i`` trains the experts of environment setting ``i``."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    seeds = rng.bit_generator.seed_seq
    if not isinstance(seeds, np.random.SeedSequence) or len(seeds.spawn_key) != 1:
        raise ValueError("rng must come from trial_generator (a spawn key of one entry)")
    return int(seeds.spawn_key[0])
