import numpy as np
import pytest
import torch

from dprl.determinism import deterministic_torch, torch_generator
from dprl.seeding import trial_generator


def _train(generator: torch.Generator) -> torch.Tensor:
    weights = torch.randn(8, 3, generator=generator)
    data = torch.randn(64, 8, generator=generator)
    for _ in range(20):
        weights.requires_grad_(True)
        loss = (data @ weights).square().mean()
        (grad,) = torch.autograd.grad(loss, weights)
        weights = (weights - 0.1 * grad).detach()
    return weights


def test_torch_runs_are_reproducible_from_the_trial_stream():
    deterministic_torch(threads=1)
    assert torch.get_num_threads() == 1 and torch.are_deterministic_algorithms_enabled()
    first = _train(torch_generator(trial_generator(3, 0)))
    again = _train(torch_generator(trial_generator(3, 0)))
    other = _train(torch_generator(trial_generator(3, 1)))
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_bad_arguments():
    with pytest.raises(ValueError, match="numpy.random.Generator"):
        torch_generator(np.random.RandomState(0))
    with pytest.raises(ValueError, match="threads must be >= 1"):
        deterministic_torch(0)
