"""Committed training runs of Sharma et al. (2025) retrain exactly (one random run per
environment; see spot_check).

Each run needs the environment's whole data set (:mod:`dprl.sharma2025.training_data`):
seconds to record for CartPole and Acrobot, about 7 minutes each for LunarLander and HIV on
two cores, too long for every CI run. Those two are checked where their data cache exists
(after any local run of their experiments or chapters); their runs are otherwise the same
code as the twins'.
"""

import pytest
from spot_check import check_random_trials, family_results, has_data_cache


@pytest.mark.parametrize("sidecar", family_results("sharma2025_training"), ids=lambda p: p.stem)
def test_a_random_run_of_committed_training_retrains_exactly(sidecar):
    if not has_data_cache(sidecar):
        pytest.skip("no data cache for this environment (recording it takes ~7 min)")
    check_random_trials(sidecar, count=1)

