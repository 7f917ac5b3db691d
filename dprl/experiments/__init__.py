"""Experiments: the registry, the resumable runner with provenance, and the chapters' loader."""

from dprl.experiments.registry import (SCALES, Experiment, TrialConfig, all_experiments, get,
                                       register)
from dprl.experiments.runner import (RESULTS_DIR, Result, load, load_or_run, mismatched_trials,
                                     result_paths, run, status)

__all__ = ["SCALES", "Experiment", "TrialConfig", "all_experiments", "get", "register",
           "RESULTS_DIR", "Result", "load", "load_or_run", "mismatched_trials", "result_paths",
           "run", "status"]
