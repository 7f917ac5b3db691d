"""The experts' prefix agreement against PrefixQuery's counts (dprl.sharma2025.agreement)."""

import numpy as np
import pytest

from dprl.engine.registry import get
from dprl.experiments.sharma2025.release import members, population
from dprl.sharma2025.agreement import prefix_agreement
from dprl.sharma2025.demonstrations import Demonstrations
from dprl.sharma2025.experts import pmin_levels
from dprl.sharma2025.release import log_prefix_counts


@pytest.mark.parametrize("env", ["cartpole", "acrobot"])
def test_agreement_brackets_the_normalised_prefix_count(env):
    """count / (m h^k) lies in [share_k, share_k + (1 - share_k) l / h] (module docstring),
    with the counts from the release's own log_prefix_counts; and a member always agrees
    with its own greedy steps, so a trajectory without p_min deviations has share >= 1/m."""
    config = get(f"sharma2025-{env}-release").config("smoke")
    experts, recorder = population(config)
    data = Demonstrations(experts, members(experts.n_experts, 30, config.data_seed),
                          config.per_expert, config.p_min, recorder)
    trajectories = np.arange(0, data.n_trajectories, 7)
    lengths = (1, 3, 10, 20)
    shares = prefix_agreement(data, trajectories, lengths)
    high, low = pmin_levels(experts.n_actions, config.p_min)
    m = len(data.members)
    for row, t in enumerate(trajectories):
        lazy = data.log_probs(int(t))
        log_probs = lazy[:, 0:lazy.shape[1]]
        counts = np.exp(log_prefix_counts(log_probs))
        for share, k in zip(shares[row], lengths):
            k = min(k, log_probs.shape[1])
            normalised = counts[k - 1] / (m * high ** k)
            assert share - 1e-12 <= normalised <= share + (1 - share) * low / high + 1e-12
            assert np.isclose(share * m, round(share * m))     # a share of whole experts
    assert np.all(np.diff(shares, axis=1) <= 0)                 # longer prefixes: fewer agree
    assert shares.max() > shares.min()                          # not a constant


def test_agreement_rejects_bad_input():
    config = get("sharma2025-cartpole-release").config("smoke")
    experts, recorder = population(config)
    data = Demonstrations(experts, members(experts.n_experts, 5, config.data_seed),
                          config.per_expert, config.p_min, recorder)
    with pytest.raises(ValueError, match="trajectories"):
        prefix_agreement(data, [])
    with pytest.raises(ValueError, match="lengths"):
        prefix_agreement(data, [0], (0,))
    with pytest.raises(ValueError, match="lengths"):
        prefix_agreement(data, [0], ())


def test_stable_transitions_sum_the_released_prefixes_of_queried_trajectories():
    from dprl.experiments.sharma2025.release import stable_transitions

    prefix = np.array([[[3, 0, -1], [5, 5, 5]], [[-1, -1, -1], [0, 2, -1]]])  # (releases, cells, T)
    assert stable_transitions({"prefix_length": prefix}, 0).tolist() == [3, 0]
    assert stable_transitions({"prefix_length": prefix}, 1).tolist() == [15, 2]
