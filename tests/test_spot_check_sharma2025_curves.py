"""Committed results of the sharma2025_curves family are current, and drawn ones recompute exactly (one
random trial; see spot_check).

Like the training runs, LunarLander's and HIV's curves are drawn only where their data cache
exists.
"""

import pytest
from spot_check import family_results, spot_check


@pytest.mark.parametrize("sidecar", family_results("sharma2025_curves"), ids=lambda p: p.stem)
def test_committed_result_is_current_and_a_random_trial_recomputes_exactly(sidecar):
    spot_check(sidecar, "sharma2025_curves")
