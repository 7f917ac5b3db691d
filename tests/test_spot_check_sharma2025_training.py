"""Committed training runs and learning curves of Sharma et al. (2025) (the
sharma2025_training family) are current, and drawn ones recompute exactly (one random trial;
see spot_check).

Each run needs the environment's whole data set (:mod:`dprl.sharma2025.training_data`):
seconds to record for CartPole and Acrobot, about 7 minutes each for LunarLander and HIV on
two cores, too long for every CI run. Those two are drawn only where their data cache exists
(after any local run of their experiments or chapters); their runs are otherwise the same
code as the twins'.
"""

import pytest
from spot_check import family_results, spot_check


@pytest.mark.parametrize("sidecar", family_results("sharma2025_training"), ids=lambda p: p.stem)
def test_committed_result_is_current_and_a_random_trial_recomputes_exactly(sidecar):
    spot_check(sidecar, "sharma2025_training")
