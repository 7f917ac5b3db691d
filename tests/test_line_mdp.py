"""The line MDP of Wang & Hegde (2019, Sec. 4; authors' code): the Gymnasium environment
against its vectorised twin, the reward bound, input checks and the dynamic-programming
optimum."""

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from dprl.envs.line_mdp import LineEnv, LineMDP
from dprl.seeding import trial_generator

LINE_ID = "dprl/Line-v0"
if LINE_ID not in gymnasium.registry:
    gymnasium.register(id=LINE_ID, entry_point="dprl.envs.line_mdp:LineEnv")

#: The optimal expected return of a 50-step episode from s0 ~ U[0, 1] (DP, n_cells = 25600).
OPTIMAL_RETURN = 20.70833


def test_env_and_twin_make_identical_transitions():
    mdp, actions_rng = LineMDP(), np.random.default_rng(1)
    env = LineEnv(mdp)
    env.np_random = trial_generator(2019, 3)
    twin_rng = trial_generator(2019, 3)
    observation, _ = env.reset()
    state = mdp.reset(1, twin_rng)
    assert observation.dtype == np.float64 and observation[0] == state[0]
    for t in range(mdp.horizon):
        action = int(actions_rng.integers(2))
        observation, reward, terminated, truncated, _ = env.step(action)
        state, twin_reward = mdp.step(state, np.array([action]), twin_rng)
        assert observation[0] == state[0] and reward == twin_reward[0]
        assert not terminated and truncated == (t == mdp.horizon - 1)
    with pytest.raises(RuntimeError):
        env.step(0)


def test_transition_given_uniforms():
    mdp = LineMDP()
    states = np.array([0.9, 0.9, 0.1, 0.1, 0.5])
    actions = np.array([0, 1, 1, 0, 0])
    uniforms = np.array([0.8, 0.8, 0.8, 0.4, 0.0])
    next_states, rewards = mdp.transition(states, actions, uniforms)
    np.testing.assert_allclose(next_states, [1.0, 0.7, 0.0, 0.2, 0.5])
    np.testing.assert_allclose(rewards, [0.0, 0.3, 0.0, 0.2, 0.5])
    assert next_states[0] == 1.0 and next_states[2] == 0.0  # capped exactly


def test_check_env_and_registration():
    check_env(gymnasium.make(LINE_ID).unwrapped)
    env = gymnasium.make(LINE_ID, horizon=5)
    env.reset(seed=0)
    lengths = [env.step(0)[3] for _ in range(5)]
    assert lengths == [False] * 4 + [True]


def test_reward_bound():
    mdp, rng = LineMDP(), np.random.default_rng(0)
    states = mdp.reset(100_000, rng)
    next_states, rewards = mdp.step(states, rng.integers(0, 2, states.size), rng)
    assert np.all((next_states >= 0) & (next_states <= 1))
    assert rewards.min() >= mdp.reward_range[0] and rewards.max() <= mdp.reward_range[1]
    np.testing.assert_array_equal(LineMDP.reward([0.0, 0.5, 1.0]), [0.0, 0.5, 0.0])


@pytest.mark.parametrize("call", [
    lambda m: LineMDP(horizon=0),
    lambda m: LineMDP(max_move=0.0),
    lambda m: LineMDP(max_move=1.5),
    lambda m: m.transition([0.5], [2], [0.1]),
    lambda m: m.transition([0.5], [0.0], [0.1]),
    lambda m: m.transition([1.5], [0], [0.1]),
    lambda m: m.transition([0.5], [0], [1.1]),
    lambda m: m.transition([0.5, 0.2], [0, 1], [0.1]),
    lambda m: m.transition([0.5], [0, 1], [0.1]),
    lambda m: m.reset(0, np.random.default_rng(0)),
    lambda m: m.reset(2, 0),
    lambda m: m.step([0.5], [0], np.random.RandomState(0)),
    lambda m: m.finite_horizon_values(n_cells=10),
    lambda m: m.finite_horizon_values(n_cells=0),
    lambda m: m.finite_horizon_values(n_cells=8, actions=[0] * 8),
    lambda m: LineEnv(m, horizon=3),
    lambda m: LineEnv().reset(options={"start": 0.5}),
])
def test_bad_inputs_raise(call):
    with pytest.raises(ValueError):
        call(LineMDP())


def test_env_rejects_bad_action():
    env = LineEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError):
        env.step(2)


def test_dynamic_programming_optimum():
    mdp = LineMDP()
    coarse, fine = mdp.finite_horizon_values(400), mdp.finite_horizon_values(6400)
    assert abs(coarse.expected_return - fine.expected_return) < 1e-3
    assert abs(fine.expected_return - OPTIMAL_RETURN) < 1e-5
    toward_centre = (fine.grid > 0.5).astype(int)  # up below 0.5, down above
    off = fine.actions != toward_centre
    assert np.all(fine.grid[off.any(axis=0)] == 0.5)  # a tie at 0.5 only
    policy = mdp.finite_horizon_values(6400, toward_centre)
    assert policy.expected_return == pytest.approx(fine.expected_return, abs=1e-12)


def test_monte_carlo_return_of_the_optimal_policy():
    mdp, rng, n = LineMDP(), trial_generator(2019, 0), 20_000
    states, total = mdp.reset(n, rng), np.zeros(n)
    for _ in range(mdp.horizon):
        states, rewards = mdp.step(states, (states > 0.5).astype(int), rng)
        total += rewards
    standard_error = total.std(ddof=1) / np.sqrt(n)
    assert abs(total.mean() - OPTIMAL_RETURN) < 4 * standard_error
