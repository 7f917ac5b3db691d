"""Experiments: the registry, the resumable runner with provenance, and the chapters' loader."""

from dprl.experiments.registry import (SCALES, Experiment, TrialConfig, all_experiments, get,
                                       register)
from dprl.experiments.runner import (RECOMPUTE_ENV, RESULTS_DIR, Result, ResultNotCurrent, load,
                                     load_or_run, mismatched_trials, regenerate_command,
                                     result_paths, run, status)

__all__ = ["SCALES", "Experiment", "TrialConfig", "all_experiments", "get", "register",
           "RECOMPUTE_ENV", "RESULTS_DIR", "Result", "ResultNotCurrent", "load", "load_or_run",
           "mismatched_trials", "regenerate_command", "result_paths", "run", "status"]
