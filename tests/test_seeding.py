import numpy as np
import pytest

from dprl.seeding import trial_generator, trial_generators, trial_seed


def test_trial_stream_is_the_spawned_child_whatever_the_number_of_trials():
    children = np.random.SeedSequence(1234).spawn(7)
    for i, child in enumerate(children):
        expected = np.random.default_rng(child).standard_normal(5)
        np.testing.assert_array_equal(trial_generator(1234, i).standard_normal(5), expected)
    assert trial_seed(1234, 3).spawn_key == (3,)


def test_trials_are_independent_streams_and_reproducible():
    draws = np.array([g.standard_normal(2000) for g in trial_generators(7, 4)])
    again = np.array([g.standard_normal(2000) for g in trial_generators(7, [0, 1, 2, 3])])
    np.testing.assert_array_equal(draws, again)
    correlation = np.corrcoef(draws)[np.triu_indices(4, 1)]
    assert np.all(np.abs(correlation) < 4 / np.sqrt(2000))  # independent: |r| ~ 1/sqrt(n)
    assert not np.array_equal(draws, np.array([g.standard_normal(2000)
                                               for g in trial_generators(8, 4)]))


@pytest.mark.parametrize("root, index", [(-1, 0), (0, -1), (1.5, 0), (0, True)])
def test_bad_seeds_are_rejected(root, index):
    with pytest.raises(ValueError, match="must be"):
        trial_seed(root, index)


def test_named_streams_depend_on_the_name_only():
    from dprl.seeding import named_stream

    rng = trial_generator(7, 3)
    first = named_stream(rng, 2, 0, 5).standard_normal(4)
    rng.standard_normal(10)  # the parent's state does not matter
    assert np.array_equal(named_stream(rng, 2, 0, 5).standard_normal(4), first)
    assert np.array_equal(named_stream(trial_generator(7, 3), 2, 0, 5).standard_normal(4), first)
    others = [named_stream(rng, 2, 0, 6), named_stream(rng, 2, 5), named_stream(
        trial_generator(7, 4), 2, 0, 5), named_stream(trial_generator(8, 3), 2, 0, 5)]
    assert all(not np.array_equal(g.standard_normal(4), first) for g in others)
    with pytest.raises(ValueError, match="key"):
        named_stream(rng, -1)
    with pytest.raises(ValueError, match="Generator"):
        named_stream(np.random.RandomState(0), 1)
