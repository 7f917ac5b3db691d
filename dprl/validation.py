"""Input checks shared by every public function of dprl.

Each check raises :class:`ValueError` naming the argument, the value received and the
condition it violates; nothing is clipped, dropped or coerced.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Hashable, Mapping, Sequence, Set
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, DTypeLike


def _require_real(name: str, value) -> None:
    """Raise unless ``value`` is a real number (bools and strings are refused, not coerced)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                      np.floating)):
        raise ValueError(f"{name} must be a real number, got {value!r}")


def require_finite(name: str, value: float) -> float:
    """Return ``value`` as a float, or raise if it is not a real number or is NaN/infinite."""
    _require_real(name, value)
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def require_positive(name: str, value: float) -> float:
    """Return ``value`` as a float, or raise unless it is finite and > 0."""
    value = require_finite(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def require_nonnegative(name: str, value: float) -> float:
    """Return ``value`` as a float, or raise unless it is finite and >= 0."""
    value = require_finite(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def require_epsilon(eps: float, name: str = "eps") -> float:
    """A privacy parameter epsilon: finite and > 0 (eps = 0 admits no useful mechanism)."""
    return require_positive(name, eps)


def require_delta(delta: float, name: str = "delta") -> float:
    """A privacy parameter delta: strictly inside (0, 1)."""
    delta = require_finite(name, delta)
    if not 0 < delta < 1:
        raise ValueError(f"{name} must lie in (0, 1), got {delta}")
    return delta


def require_probability(name: str, value: float, *, open_low: bool = False,
                        open_high: bool = False) -> float:
    """A probability in [0, 1]; ``open_low``/``open_high`` exclude the end points."""
    value = require_finite(name, value)
    low_ok = value > 0 if open_low else value >= 0
    high_ok = value < 1 if open_high else value <= 1
    if not (low_ok and high_ok):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ValueError(f"{name} must lie in {interval}, got {value}")
    return value


def require_choice(name: str, value: Hashable, choices: Collection) -> Hashable:
    """``value`` if it is one of ``choices`` (a tuple in its order; a mapping's keys or a
    set, sorted), else a ValueError listing them."""
    try:
        known = value in choices
    except TypeError:                       # unhashable: not a valid key of a mapping or set
        known = False
    if not known:
        shown = sorted(choices) if isinstance(choices, (Mapping, Set)) else tuple(choices)
        raise ValueError(f"{name} must be one of {shown}, got {value!r}")
    return value


def require_int(name: str, value: int, minimum: int = 1) -> int:
    """An integer (numpy integers accepted, bools and floats refused) that is >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def require_folder(name: str, value: str | os.PathLike) -> Path:
    """The path of an existing folder (a ``str`` or ``os.PathLike``), as a :class:`Path`."""
    if not isinstance(value, (str, os.PathLike)) or not Path(value).is_dir():
        raise ValueError(f"{name} must be an existing folder, got {value!r}")
    return Path(value)


def require_array(name: str, value: ArrayLike, ndim: int | None = None,
                  shape: Sequence[int | None] | None = None, *, nonempty: bool = True,
                  dtype: DTypeLike = float) -> np.ndarray:
    """Return ``value`` (real numbers: no bools or strings) as an array of ``dtype`` with the
    given ``ndim``/``shape``.

    ``shape`` may hold ``None`` for a free axis. Raises on NaN or infinite entries for
    floating dtypes and, when ``nonempty``, on zero-size arrays.
    """
    raw = np.asarray(value)
    if raw.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold real numbers, got dtype {raw.dtype}")
    array = raw.astype(dtype, copy=False)
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {array.shape}")
    if shape is not None:
        if array.ndim != len(shape) or any(
                want is not None and got != want for got, want in zip(array.shape, shape)):
            want = tuple("any" if s is None else s for s in shape)
            raise ValueError(f"{name} must have shape {want}, got {array.shape}")
    if nonempty and array.size == 0:
        raise ValueError(f"{name} must not be empty")
    if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must contain only finite values")
    return array


def initial_vectors(name: str, value: ArrayLike | None, datasets: tuple[int, ...],
                    d: int) -> np.ndarray:
    """A ``(D, d)`` copy (``D`` data sets) of a starting point given as ``(d,)`` (shared) or
    ``(*datasets, d)`` (one per data set); zeros when ``value`` is None."""
    if value is None:
        return np.zeros((int(np.prod(datasets)), d))
    value = require_array(name, value)
    if value.shape not in ((d,), (*datasets, d)):
        raise ValueError(f"{name} must have shape ({d},) or {(*datasets, d)}, got {value.shape}")
    return np.broadcast_to(value, (*datasets, d)).reshape(-1, d).copy()


def require_in_bounds(name: str, values: np.ndarray, low: float, high: float) -> np.ndarray:
    """Raise unless every entry lies in [low, high] (the declared bound of the data)."""
    values = np.asarray(values)
    if values.size and not np.all((values >= low) & (values <= high)):
        raise ValueError(
            f"{name} must lie in [{low}, {high}] (its declared bound), "
            f"got values in [{values.min()}, {values.max()}]")
    return values


def frozen_copy(array: ArrayLike) -> np.ndarray:
    """A read-only copy of ``array`` (data held by frozen dataclasses cannot change later)."""
    array = np.array(array)
    array.setflags(write=False)
    return array
