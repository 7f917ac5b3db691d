"""The training data of Sharma et al. (2025, Alg. 3): the whole data set ``D^Pi`` as
transitions grouped by expert, and its split by a release into ``D_stable`` and ``D_unst``.

Alg. 2 releases stable prefixes ``tau_{1:k}`` of some queried trajectories (``D_stable``);
``D_unst`` holds their tails ``tau_{k+1:|tau|}`` and every other trajectory whole (Sec. 4's
definition). Both come from one flat table of the ``m N`` recorded trajectories, in expert,
trajectory and step order, that remembers where each transition came from.

Recording every trajectory of 3000 experts costs seconds on the twins and some 7 minutes on
LunarLander and HIV (2 cores), so :func:`cached_training_data` keeps the table in an ignored
folder, keyed by everything that determines it (the committed experts' checksum included); a
missing or stale file is recomputed, with the same bits, since every expert draws from its
own stream (:mod:`dprl.sharma2025.datasets`), and once, however many workers miss it at once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

from dprl.sharma2025.datasets import ExpertData
from dprl.sharma2025.experts import ExpertPopulation
from dprl.sharma2025.offline_rl import ExpertTransitions, Transitions, expert_transitions
from dprl.validation import require_array, require_int, require_positive

#: ``record(experts, index, per_expert)``: every trajectory of the experts ``index`` (a
#: population of ``len(index)`` experts), as :class:`~dprl.sharma2025.datasets.ExpertData`.
FullRecorder = Callable[[ExpertPopulation, np.ndarray, int], ExpertData]

_FIELDS = ("observations", "actions", "rewards", "next_observations", "terminals")


@dataclass(frozen=True)
class TrainingData:
    """All transitions of ``D^Pi`` (:class:`~dprl.sharma2025.offline_rl.ExpertTransitions`,
    member ``r`` = ``members[r]``) and, per transition, its trajectory index in ``[0, N)``
    and step ``t`` (``trajectory``, ``step``, ``(n,)`` int64)."""

    pool: ExpertTransitions
    members: np.ndarray
    trajectory: np.ndarray
    step: np.ndarray

    @property
    def member_of(self) -> np.ndarray:
        """The member row ``r`` of every transition, ``(n,)`` int64."""
        return np.repeat(np.arange(len(self.members)), self.pool.counts.numpy())

    def first(self, m: int) -> TrainingData:
        """The data of the first ``m`` members (nested subsets, Fig. 4)."""
        m = require_int("m", m)
        if m > len(self.members):
            raise ValueError(f"m must be <= {len(self.members)}, got {m}")
        if m == len(self.members):
            return self
        n = int(self.pool.counts[:m].sum())
        flat = self.pool.transitions.take(torch.arange(n))
        return TrainingData(ExpertTransitions(flat, self.pool.counts[:m].clone()),
                            self.members[:m], self.trajectory[:n], self.step[:n])


def record_training_data(experts: ExpertPopulation, members: np.ndarray, per_expert: int,
                         recorder: FullRecorder, reward_scale: float = 1.0,
                         chunk: int = 250) -> TrainingData:
    """Every trajectory of the experts ``members`` (global indices), ``chunk`` experts at a
    time, with rewards multiplied by ``reward_scale`` (HIV's rewards, up to 1e8 per step,
    are trained on in units of 1e6: the same optimal policies)."""
    members = require_array("members", members, ndim=1, dtype=np.int64)
    if members.size == 0:
        raise ValueError("members must not be empty")
    reward_scale = require_positive("reward_scale", reward_scale)
    parts, counts, trajectory, step = [], [], [], []
    for start in range(0, members.size, require_int("chunk", chunk)):
        index = members[start:start + chunk]
        data = recorder(experts.select(index), index, per_expert)
        grouped = expert_transitions(data)
        parts.append(grouped.transitions)
        counts.append(grouped.counts)
        recorded = np.arange(data.actions.shape[-1]) < data.lengths[..., None]
        where = np.nonzero(recorded)
        trajectory.append(where[1])
        step.append(where[2])
    columns = {name: torch.cat([getattr(part, name) for part in parts]) for name in _FIELDS}
    columns["rewards"] = columns["rewards"] * reward_scale
    flat = Transitions(**columns)
    return TrainingData(ExpertTransitions(flat, torch.cat(counts)), members,
                        np.concatenate(trajectory).astype(np.int64),
                        np.concatenate(step).astype(np.int64))


def split_by_release(data: TrainingData, experts: np.ndarray, trajectories: np.ndarray,
                     prefix_lengths: np.ndarray) -> tuple[Transitions, ExpertTransitions]:
    """``(D_stable, D_unst)`` (Sec. 4) of a release that gave trajectory ``trajectories[c]``
    of the global expert ``experts[c]`` a stable prefix of ``prefix_lengths[c]`` steps
    (0: nothing released): a transition is stable when its ``t`` is below its trajectory's
    prefix length. ``D_unst`` keeps every member, possibly with no transition."""
    experts, trajectories, prefix_lengths = (np.asarray(a, dtype=np.int64) for a in
                                             (experts, trajectories, prefix_lengths))
    if not experts.shape == trajectories.shape == prefix_lengths.shape or experts.ndim != 1:
        raise ValueError("experts, trajectories and prefix_lengths must be 1-D of one length")
    row = {int(g): r for r, g in enumerate(data.members.tolist())}
    if any(int(g) not in row for g in experts):
        raise ValueError("every released expert must be a member of the data")
    per_expert = int(data.trajectory.max()) + 1
    cutoff = np.zeros((len(data.members), per_expert), dtype=np.int64)
    rows = np.array([row[int(g)] for g in experts], dtype=np.int64)
    np.maximum.at(cutoff, (rows, trajectories), prefix_lengths)
    member = data.member_of
    stable = data.step < cutoff[member, data.trajectory]
    flat = data.pool.transitions
    stable_index = torch.as_tensor(np.flatnonzero(stable))
    unstable_index = torch.as_tensor(np.flatnonzero(~stable))
    counts = np.bincount(member[~stable], minlength=len(data.members))
    return (flat.take(stable_index),
            ExpertTransitions(flat.take(unstable_index), torch.as_tensor(counts,
                                                                         dtype=torch.int64)))


def cached_training_data(path: Path, key: dict[str, object],
                         compute: Callable[[], TrainingData]) -> TrainingData:
    """The training data stored at ``path`` when its stored ``key`` (JSON data) matches,
    otherwise ``compute()``, stored there (atomically) for the next call. Processes that
    miss together compute once: the first holds an exclusive lock on ``<path>.lock`` while
    it computes, and the others then load its file (no lock where ``fcntl`` is missing,
    Windows: each computes)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    data = _stored(path, digest)
    if data is not None:
        return data
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f"{path.name}.lock"), "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        data = _stored(path, digest)
        if data is None:
            data = compute()
            temporary = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
            np.savez(temporary, key=np.array(digest), **_to_arrays(data))
            os.replace(temporary, path)
    return data


def _stored(path: Path, digest: str) -> TrainingData | None:
    """The table at ``path`` if it exists with key ``digest``."""
    if path.exists():
        with np.load(path) as stored:
            if str(stored["key"]) == digest:
                return _from_arrays(stored)
    return None


def _to_arrays(data: TrainingData) -> dict[str, np.ndarray]:
    flat = data.pool.transitions
    return {**{name: getattr(flat, name).numpy() for name in _FIELDS},
            "counts": data.pool.counts.numpy(), "members": data.members,
            "trajectory": data.trajectory, "step": data.step}


def _from_arrays(stored: np.lib.npyio.NpzFile) -> TrainingData:
    flat = Transitions(*(torch.from_numpy(stored[name]) for name in _FIELDS))
    return TrainingData(ExpertTransitions(flat, torch.from_numpy(stored["counts"])),
                        stored["members"], stored["trajectory"], stored["step"])
