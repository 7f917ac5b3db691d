"""The spot-check of committed results, shared by the test_spot_check_*.py files.

Each file checks one family of results, so that pytest-xdist (``--dist loadfile``, which
schedules whole files) spreads the expensive recomputations over its workers. Every committed
result must be current; one random trial of it is recomputed when the result is *drawn*: each
test session draws, per family, the results in a fresh random order while their estimated
recomputation time stays within :data:`BUDGET_S` (always at least one), so that CI stays short
and, over sessions, every result of every family is recomputed; the heavy results
(:func:`is_heavy`: those of :data:`HEAVY_RESULTS`, and any whose trial takes over
:data:`HEAVY_TRIAL_S`, more than a spot-check needs to show that a result reproduces) are
drawn instead in sessions with ``DPRL_SPOT_HEAVY=1`` (``make spot-check-heavy``).
"""

import json
import os

import numpy as np
import pytest

from dprl import vendors
from dprl.experiments import RESULTS_DIR, load, mismatched_trials, status

COMMITTED = sorted(RESULTS_DIR.glob("*.json"))
# A fresh choice of trials on every run; set DPRL_SPOT_SEED to replay a failing choice.
SPOT_SEED = int(os.environ.get("DPRL_SPOT_SEED", np.random.SeedSequence().entropy % 2**32))
#: experiment-id prefixes of each family (one test file per family)
FAMILIES = {"balle2016": ("balle2016-", "primer-"),
            "xie2019_chain": ("xie2019-chain", "xie2019-theorem"),
            "mountain_car": ("xie2019-mountain-car",), "hiv": ("xie2019-hiv",),
            "wang2019": ("wang2019-",), "audits": ("audit-",),
            "sharma2025_experts": tuple(f"sharma2025-{env}-experts"
                                        for env in ("cartpole", "acrobot", "lunarlander", "hiv")),
            # releases, the experts' agreement, and the Sec. 3.2 group attack's accounting
            "sharma2025_release": tuple(f"sharma2025-{env}-release"
                                        for env in ("cartpole", "acrobot", "lunarlander", "hiv"))
            + ("sharma2025-agreement", "sharma2025-cartpole-ppo-agreement",
               "sharma2025-acrobot-ppo-agreement", "sharma2025-group-attack"),
            # training runs and learning curves: the same training code, minutes a run
            "sharma2025_training": tuple(
                f"sharma2025-{env}-{kind}" for kind in ("training", "curves", "long", "sgd")
                for env in ("cartpole", "acrobot", "lunarlander", "hiv"))
            + ("sharma2025-offline-rl-curves",)}


def experiment_id(sidecar) -> str:
    return json.loads(sidecar.read_text())["experiment"]


def family_results(family: str) -> list:
    """The committed sidecars of ``family``."""
    return [p for p in COMMITTED if experiment_id(p).startswith(FAMILIES[family])]


#: seconds of recomputation one family may spend in one test session, estimated from the
#: per-trial time each sidecar records: one result a session shows that the family's code
#: reproduces its bits, and further draws within the budget are cheap ones; every result is
#: drawn within a few dozen sessions (all of them in a median of 26 sessions, against 11 with
#: 30 s, simulated over the committed sidecars). DPRL_SPOT_BUDGET_S=1e9 draws them all.
BUDGET_S = float(os.environ.get("DPRL_SPOT_BUDGET_S", 10.0))
#: results recomputed only in sessions with DPRL_SPOT_HEAVY=1 (`make spot-check-heavy`): the
#: largest-m extensions of Xie et al.'s experiments, 3-5 CPU minutes and up to ~10 GB a trial,
#: Sharma et al.'s longer runs and SGD runs, 1-11 CPU minutes a trial, and the Acrobot PPO
#: population (a trial alone trains its 4 agents in 121 s, against the 50 s a trial its sidecar
#: records from batches of 40 agents); CI checks that they are current
HEAVY_RESULTS = ("xie2019-mountain-car-large", "xie2019-hiv-large",
                 "sharma2025-acrobot-experts-ppo") + tuple(
    f"sharma2025-{env}-{kind}" for env in ("cartpole", "acrobot", "lunarlander", "hiv")
    for kind in ("long", "sgd"))
HEAVY = os.environ.get("DPRL_SPOT_HEAVY") == "1"
#: CPU seconds of one trial above which a result is heavy: its trials are those of lighter
#: results of its family, run longer (training runs at 20 000 steps, curves to the cap)
HEAVY_TRIAL_S = 60.0
#: families whose runs need the environment's training data (:func:`has_data_cache`)
NEEDS_DATA = ("sharma2025_training",)


def per_trial_seconds(sidecar) -> float:
    """The recorded compute time of the result divided by its trials: CPU seconds where the
    sidecar records them (a loaded machine does not inflate them), else elapsed seconds."""
    record = json.loads(sidecar.read_text())
    return record.get("cpu_time_s", record["wall_time_s"]) / record["n_trials"]


def is_heavy(sidecar) -> bool:
    """Whether the result is recomputed only with ``DPRL_SPOT_HEAVY=1``: named in
    :data:`HEAVY_RESULTS`, or a trial takes over :data:`HEAVY_TRIAL_S` CPU seconds."""
    return (experiment_id(sidecar) in HEAVY_RESULTS
            or per_trial_seconds(sidecar) > HEAVY_TRIAL_S)


def drawn(family: str, stream: int = 0) -> list:
    """The results of ``family`` whose random trial this session recomputes (see above);
    ``stream`` > 0 draws independently of the spot-check (for other checks of the family)."""
    candidates = [p for p in family_results(family)
                  if (family not in NEEDS_DATA or has_data_cache(p))
                  and is_heavy(p) == HEAVY]
    rng = np.random.default_rng([SPOT_SEED, len(family)] + ([stream] if stream else []))
    chosen, spent = [], 0.0
    for k in rng.permutation(len(candidates)):
        cost = per_trial_seconds(candidates[k])
        if not chosen or spent + cost <= BUDGET_S:
            chosen.append(candidates[k])
            spent += cost
    return chosen


def spot_check(sidecar, family: str) -> None:
    """The committed result is current, and, when drawn this session, a random trial of it
    recomputed alone matches it exactly."""
    experiment = experiment_id(sidecar)
    assert status(experiment) == "current", (
        f"{experiment}: committed result is stale; rerun python -m dprl run {experiment} "
        "--scale paper")
    if sidecar not in drawn(family):
        pytest.skip(f"not drawn this session (DPRL_SPOT_SEED={SPOT_SEED}; budget "
                    f"{BUDGET_S:g} s per family; heavy results ({', '.join(HEAVY_RESULTS)} "
                    f"and trials over {HEAVY_TRIAL_S:g} s) only with DPRL_SPOT_HEAVY=1)")
    n_trials = load(experiment).provenance["n_trials"]
    index = int(np.random.default_rng([SPOT_SEED, len(experiment)]).integers(n_trials))
    where = "here"
    if recomputed_for_the_other_vendor(sidecar) and vendors.available():
        where = f"with MKL taking {vendors.other_vendor()}'s code"
        problems = recompute_for_the_other_vendor({experiment: index})[experiment]
    else:
        problems = mismatched_trials(experiment, [index])
    assert problems == [], f"trial {index}, computed {where} (DPRL_SPOT_SEED={SPOT_SEED})"


#: Families whose drawn trial (and results whose drawn trial, below) is recomputed in a
#: process where MKL takes the other CPU vendor's code (dprl.vendors; on this AMD machine:
#: Intel's), against the committed bits made on AMD: the torch results, whose vector math MKL
#: chooses by vendor. One recomputation checks both promises: the bits are the committed
#: ones, and they do not depend on the vendor (test_vendor_bits.py shows that MKL's vector
#: math is the same here and there, element by element, so a native recomputation would
#: repeat this one).
OTHER_VENDOR_FAMILIES = ("sharma2025_training",)
#: The audits whose trials run torch (expert-level DP-SGD), recomputed the same way.
TORCH_AUDITS = ("audit-sharma2025-dp-sgd", "audit-sharma2025-selective",
                "audit-sharma2025-one-run", "audit-sharma2025-one-run-pilot")


def recomputed_for_the_other_vendor(sidecar) -> bool:
    """Whether the spot-check recomputes the result's trial where MKL takes the other
    vendor's code: the torch results (:data:`OTHER_VENDOR_FAMILIES`, :data:`TORCH_AUDITS`)."""
    experiment = experiment_id(sidecar)
    return experiment in TORCH_AUDITS or any(
        experiment.startswith(FAMILIES[family]) for family in OTHER_VENDOR_FAMILIES)


#: Recomputes one trial of each result named ``id=index`` alone and prints, for each, the
#: disagreements with the committed result (JSON).
RECOMPUTE = r"""
import json, sys
import dprl
from dprl.experiments import mismatched_trials
pairs = [argument.rsplit("=", 1) for argument in sys.argv[1:]]
print(json.dumps({id: mismatched_trials(id, [int(index)]) for id, index in pairs}))
"""


def recompute_for_the_other_vendor(trials: dict[str, int]) -> dict[str, list[str]]:
    """:func:`mismatched_trials` of one trial of each result (``{id: index}``), in one process
    where MKL takes the other vendor's code, under the pinned floating-point settings."""
    return vendors.run_python(RECOMPUTE, *(f"{id}={index}" for id, index in trials.items()),
                      other=True, timeout=3600)


def has_data_cache(sidecar) -> bool:
    """Whether the Sharma training data of the sidecar's environment are available without
    recording them (CartPole and Acrobot take seconds; LunarLander and HIV need the cache)."""
    from dprl.experiments.sharma2025.training import CACHE_DIR
    env = json.loads(sidecar.read_text())["config"]["env"]
    return env in ("CartPole", "Acrobot") or any(
        CACHE_DIR.glob(f"sharma2025-{env.lower()}-paper-m*.npz"))
