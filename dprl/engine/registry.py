"""The registry of experiments: each a frozen config per scale and a vectorised trial function.

An experiment maps a config and one generator per trial to per-trial arrays (leading axis =
trials). Trial ``i`` always draws from :func:`dprl.seeding.trial_generator` ``(root_seed, i)``, so
the registry, the runner and the spot-check agree on what every trial is.

Trial functions must be *batch-invariant*: a trial's arrays must be bit-for-bit the same
whichever trials it is computed with. Vectorise across trials with elementwise operations,
reductions along an axis, ``np.einsum`` and stacked ``np.linalg`` calls; avoid BLAS products
whose rows are trials (``(trials, n) @ (n,)``), whose rounding depends on the number of rows.
The test suite checks every registered experiment for this at smoke scale.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from dprl.validation import require_int

SCALES = ("smoke", "paper")

TrialFunction = Callable[[Any, Sequence[np.random.Generator]], dict[str, np.ndarray]]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrialConfig:
    """Fields every experiment config carries: trials, root seed and trials per batch.

    ``batch_size`` trials are computed together (vectorised) and saved as one unit, so an
    interrupted run loses at most one batch.
    """

    n_trials: int
    root_seed: int
    batch_size: int = 10

    def __post_init__(self) -> None:
        require_int("n_trials", self.n_trials, minimum=1)
        require_int("root_seed", self.root_seed, minimum=0)
        require_int("batch_size", self.batch_size, minimum=1)


def own_settings(config: TrialConfig, kind: type[TrialConfig]) -> tuple:
    """The values in ``config`` (any config with those fields) of the fields that ``kind``
    adds to :class:`TrialConfig`, in ``kind``'s order: what a shared input (a reference
    problem) depends on, whichever experiment's config asks for it."""
    common = {field.name for field in dataclasses.fields(TrialConfig)}
    return tuple(getattr(config, field.name) for field in dataclasses.fields(kind)
                 if field.name not in common)


def config_to_dict(config: TrialConfig) -> dict[str, Any]:
    """The config as plain JSON data (tuples become lists), as stored in provenance."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A registered experiment: ``run_trials(config, rngs)`` returns per-trial arrays.

    ``after``: the experiments whose paper-scale results this one's paper scale reads (an
    evaluated policy, experts, releases) or whose outcome its config holds (tuned steps,
    step caps); ``python -m dprl run --all`` computes them first."""

    id: str
    title: str
    chapter: str
    configs: Mapping[str, TrialConfig]
    run_trials: TrialFunction
    after: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if set(self.configs) != set(SCALES):
            raise ValueError(
                f"experiment {self.id!r} must define exactly the scales {SCALES}, "
                f"got {sorted(self.configs)}")
        for scale, config in self.configs.items():
            if not isinstance(config, TrialConfig):
                raise ValueError(f"config {scale!r} of {self.id!r} must be a TrialConfig")

    def config(self, scale: str) -> TrialConfig:
        """The config at ``scale`` ('smoke' or 'paper')."""
        if scale not in self.configs:
            raise ValueError(f"unknown scale {scale!r}; choose one of {SCALES}")
        return self.configs[scale]


_REGISTRY: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to the registry; ids are unique."""
    if experiment.id in _REGISTRY and _REGISTRY[experiment.id] is not experiment:
        raise ValueError(f"experiment id {experiment.id!r} is already registered")
    _REGISTRY[experiment.id] = experiment
    return experiment


def get(experiment_id: str) -> Experiment:
    """The registered experiment ``experiment_id``."""
    _load_catalogue()
    if experiment_id not in _REGISTRY:
        raise ValueError(
            f"unknown experiment {experiment_id!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[experiment_id]


def all_experiments() -> list[Experiment]:
    """Every registered experiment, sorted by id."""
    _load_catalogue()
    return [_REGISTRY[key] for key in sorted(_REGISTRY)]


#: The entry-point group of the modules that register experiments (the book's:
#: :mod:`dprl.experiments.catalogue`, named in ``pyproject.toml``)
CATALOGUE_GROUP = "dprl.catalogues"


@functools.cache
def _load_catalogue() -> None:
    """Import the modules that register experiments: every entry point of
    :data:`CATALOGUE_GROUP` (the engine itself names no experiment module)."""
    catalogues = importlib.metadata.entry_points(group=CATALOGUE_GROUP)
    if not catalogues:
        raise RuntimeError(f"no experiment catalogue is installed (entry points "
                           f"{CATALOGUE_GROUP!r}): install dprl with `make install` or "
                           "`pip install -e .`")
    for catalogue in catalogues:
        catalogue.load()


def run_order(experiment_ids: Iterable[str] | None = None) -> list[str]:
    """``experiment_ids`` (default: every registered experiment) and everything they read,
    each after its dependencies (depth first, ids in sorted order otherwise)."""
    wanted = sorted(e.id for e in all_experiments()) if experiment_ids is None else list(
        experiment_ids)
    order: list[str] = []
    visiting: list[str] = []

    def visit(experiment_id: str) -> None:
        if experiment_id in order:
            return
        if experiment_id in visiting:
            cycle = " -> ".join(visiting[visiting.index(experiment_id):] + [experiment_id])
            raise ValueError(f"experiments depend on each other in a cycle: {cycle}")
        visiting.append(experiment_id)
        for dependency in sorted(get(experiment_id).after):
            visit(dependency)
        visiting.pop()
        order.append(experiment_id)

    for experiment_id in wanted:
        visit(experiment_id)
    return order
