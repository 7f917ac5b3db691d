"""The book's experiments and what chapters call to read their results.

The experiments of each paper live in modules of their own (:mod:`~dprl.experiments.primer`,
:mod:`~dprl.experiments.balle2016`, :mod:`~dprl.experiments.xie2019`,
:mod:`~dprl.experiments.wang2019`, :mod:`~dprl.experiments.sharma2025`, the privacy audits in
:mod:`~dprl.experiments.audits`), listed in :mod:`~dprl.experiments.catalogue`; the machine
that runs them is :mod:`dprl.engine`. The names below are the engine's, gathered here as the
one surface chapters and tests use: ``get`` an experiment, ``load_or_run`` its result.
"""

from dprl.engine.registry import SCALES, Experiment, TrialConfig, all_experiments, get, register
from dprl.engine.results import (RECOMPUTE_ENV, Result, ResultNotCurrent, load, regenerate_command,
                                 result_paths, status)
from dprl.engine.runner import load_or_run, mismatched_trials, run
from dprl.paths import RESULTS_DIR

__all__ = ["SCALES", "Experiment", "TrialConfig", "all_experiments", "get", "register",
           "RECOMPUTE_ENV", "RESULTS_DIR", "Result", "ResultNotCurrent", "load", "load_or_run",
           "mismatched_trials", "regenerate_command", "result_paths", "run", "status"]
