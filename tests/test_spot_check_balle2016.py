"""Committed results of the balle2016 family are current, and drawn ones recompute exactly (one
random trial; see spot_check).
"""

import pytest
from spot_check import family_results, spot_check


@pytest.mark.parametrize("sidecar", family_results("balle2016"), ids=lambda p: p.stem)
def test_committed_result_is_current_and_a_random_trial_recomputes_exactly(sidecar):
    spot_check(sidecar, "balle2016")
