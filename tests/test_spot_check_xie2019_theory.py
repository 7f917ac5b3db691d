"""Committed results of the xie2019_theory family recompute exactly (random trials; see spot_check)."""

import pytest
from spot_check import check_random_trials, family_results


@pytest.mark.parametrize("sidecar", family_results("xie2019_theory"), ids=lambda p: p.stem)
def test_random_trials_of_committed_result_recompute_exactly(sidecar):
    check_random_trials(sidecar)
