"""The spot-check of committed results, shared by the test_spot_check_*.py files.

Each file checks one family of results, so that pytest-xdist (``--dist loadfile``, which
schedules whole files) spreads the expensive recomputations over its workers.
"""

import json
import os

import numpy as np

from dprl.experiments import RESULTS_DIR, load, mismatched_trials, status

COMMITTED = sorted(RESULTS_DIR.glob("*.json"))
# A fresh choice of trials on every run; set DPRL_SPOT_SEED to replay a failing choice.
SPOT_SEED = int(os.environ.get("DPRL_SPOT_SEED", np.random.SeedSequence().entropy % 2**32))
#: experiment-id prefixes of each family (one test file per family)
FAMILIES = {"balle2016": ("balle2016-", "primer-"), "xie2019_chain": ("xie2019-chain",),
            "xie2019_theory": ("xie2019-theorem",),
            "mountain_car": ("xie2019-mountain-car",), "hiv": ("xie2019-hiv",),
            "wang2019": ("wang2019-",), "audits": ("audit-",),
            "sharma2025_experts": tuple(f"sharma2025-{env}-experts"
                                        for env in ("cartpole", "acrobot", "lunarlander", "hiv")),
            "sharma2025_release": tuple(f"sharma2025-{env}-release"
                                        for env in ("cartpole", "acrobot", "lunarlander", "hiv")),
            "sharma2025_training": tuple(f"sharma2025-{env}-training"
                                         for env in ("cartpole", "acrobot", "lunarlander", "hiv")),
            "sharma2025_curves": tuple(f"sharma2025-{env}-curves"
                                       for env in ("cartpole", "acrobot", "lunarlander", "hiv"))}


def experiment_id(sidecar) -> str:
    return json.loads(sidecar.read_text())["experiment"]


def family_results(family: str) -> list:
    """The committed sidecars of ``family``."""
    return [p for p in COMMITTED if experiment_id(p).startswith(FAMILIES[family])]


def check_random_trials(sidecar, count: int = 2) -> None:
    """``count`` random trials of the committed result recomputed alone must match it
    exactly."""
    experiment = experiment_id(sidecar)
    assert status(experiment) == "current", (
        f"{experiment}: committed result is stale; rerun python -m dprl run {experiment} "
        "--scale paper")
    n_trials = load(experiment).provenance["n_trials"]
    rng = np.random.default_rng([SPOT_SEED, len(experiment)])
    indices = sorted(rng.choice(n_trials, size=min(count, n_trials), replace=False).tolist())
    assert mismatched_trials(experiment, indices) == [], (
        f"trials {indices} (DPRL_SPOT_SEED={SPOT_SEED})")


def has_data_cache(sidecar) -> bool:
    """Whether the Sharma training data of the sidecar's environment are available without
    recording them (CartPole and Acrobot take seconds; LunarLander and HIV need the cache)."""
    from dprl.experiments.sharma2025_training import CACHE_DIR
    env = json.loads(sidecar.read_text())["config"]["env"]
    return env in ("CartPole", "Acrobot") or any(
        CACHE_DIR.glob(f"sharma2025-{env.lower()}-paper-m*.npz"))
