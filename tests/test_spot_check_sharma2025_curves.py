"""Committed learning curves of Sharma et al. (2025)'s non-private learners retrain exactly
(one random run of one random environment whose data cache exists; see spot_check and
test_spot_check_sharma2025_training)."""

import numpy as np
import pytest
from spot_check import SPOT_SEED, check_random_trials, family_results, has_data_cache


def test_a_random_run_of_one_environments_learning_curves_retrains_exactly():
    """The learning curves (20k steps a run, up to ~2 min each) are checked one run of one
    environment per test session, chosen afresh like every spot-check."""
    sidecars = [p for p in family_results("sharma2025_curves") if has_data_cache(p)]
    if not sidecars:
        pytest.skip("no committed learning curves with a data cache")
    chosen = sidecars[np.random.default_rng([SPOT_SEED, 14]).integers(len(sidecars))]
    check_random_trials(chosen, count=1)
