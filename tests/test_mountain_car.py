"""The vectorised Mountain Car twin against Gymnasium 1.4.0's MountainCar-v0 (bit for bit), its
batch simulator, the episode container and the Fourier feature map."""

import gymnasium
import numpy as np
import pytest
from scipy import stats

from dprl.envs.episodes import Episodes, UniformPolicy, sample_actions, taken_action_probabilities
from dprl.envs.mountain_car import GYMNASIUM_ID, MountainCar, mountain_car_features

N_EPISODES, H = 150, 200
EXPLORE = 0.25  # probability of a random action in the scripted driver


@pytest.fixture(scope="module")
def car() -> MountainCar:
    return MountainCar()


def scripted_inputs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per episode a mode (0: pump energy, 1: mostly push left, 2: uniform random), and per
    step a uniform and a random action, so that episodes reach the goal, hit the left wall
    and get truncated."""
    rng = np.random.default_rng(seed)
    return rng.integers(3, size=n), rng.random((n, H)), rng.integers(3, size=(n, H))


def scripted_actions(modes, uniforms, randoms, observations) -> np.ndarray:
    """The scripted driver's actions at one step, from float32 observations."""
    pump = np.where(observations[:, 1] >= 0, 2, 0)
    planned = np.select([modes == 0, modes == 1], [pump, 0], randoms)
    return np.where(uniforms < EXPLORE, randoms, planned).astype(np.int64)


def gymnasium_episode(seed: int, mode, uniforms, randoms, goal_velocity: float = 0.0):
    """One episode of gymnasium.make("MountainCar-v0") under the scripted driver: the
    observations, rewards, terminated and truncated flags of every step."""
    env = gymnasium.make(GYMNASIUM_ID, goal_velocity=goal_velocity)
    obs, _ = env.reset(seed=seed)
    record = {"obs": [obs], "rewards": [], "terminated": [], "truncated": []}
    for t in range(H):
        action = scripted_actions(np.array([mode]), uniforms[t:t + 1], randoms[t:t + 1],
                                  obs[None])[0]
        obs, reward, terminated, truncated, _ = env.step(int(action))
        for key, value in zip(record, (obs, reward, terminated, truncated)):
            record[key].append(value)
        if terminated or truncated:
            break
    return {key: np.array(value) for key, value in record.items()}


def twin_batch(car: MountainCar, seeds, modes, uniforms, randoms):
    """The same episodes, all cars stepped at once by the twin, started from the draws
    ``car.reset`` makes from each episode's seed; per-step arrays as (n, H [+1]) with padding."""
    n = len(seeds)
    states = np.concatenate([car.reset(1, np.random.default_rng(s)) for s in seeds])
    obs = np.full((n, H + 1, 2), np.nan, dtype=np.float32)
    rewards, terminated = np.zeros((n, H)), np.zeros((n, H), dtype=bool)
    obs[:, 0], live = car.observe(states), np.arange(n)
    for t in range(H):
        actions = scripted_actions(modes[live], uniforms[live, t], randoms[live, t],
                                   obs[live, t])
        states, rewards[live, t], terminated[live, t] = car.step(states, actions)
        obs[live, t + 1] = car.observe(states)
        live, states = live[~terminated[live, t]], states[~terminated[live, t]]
    return obs, rewards, terminated


@pytest.mark.parametrize("goal_velocity", [0.0, 0.02])
def test_twin_matches_gymnasium_bit_for_bit(goal_velocity):
    car, seeds = MountainCar(goal_velocity=goal_velocity), np.arange(N_EPISODES) + 1000
    modes, uniforms, randoms = scripted_inputs(N_EPISODES, int(goal_velocity * 100))
    obs, rewards, terminated = twin_batch(car, seeds, modes, uniforms, randoms)
    ends = {"terminated": 0, "truncated": 0, "wall": 0}
    for i, seed in enumerate(seeds):
        gym = gymnasium_episode(int(seed), modes[i], uniforms[i], randoms[i], goal_velocity)
        length = gym["rewards"].size
        assert gym["obs"].dtype == obs.dtype == np.float32
        assert np.array_equal(obs[i, :length + 1], gym["obs"])  # bit for bit
        assert np.array_equal(rewards[i, :length], gym["rewards"])
        assert np.array_equal(terminated[i, :length], gym["terminated"])
        assert np.array_equal(np.arange(1, length + 1) >= H, gym["truncated"])
        ends["terminated"] += gym["terminated"][-1]
        ends["truncated"] += gym["truncated"][-1] and not gym["terminated"][-1]
        ends["wall"] += np.any(gym["obs"][1:, 0] == np.float32(-1.2))
    assert min(ends.values()) >= 10, ends  # every kind of event is exercised


def test_step_is_bit_exact_from_arbitrary_states(car):
    """Gymnasium's step from states anywhere in the box (set through env.unwrapped.state)."""
    rng = np.random.default_rng(5)
    states = np.column_stack([rng.uniform(-1.2, 0.6, 500), rng.uniform(-0.07, 0.07, 500)])
    states[:20, 0], states[20:40, 1] = -1.2, -0.07  # at the walls and the speed limit
    actions = rng.integers(3, size=500)
    next_states, rewards, terminated = car.step(states, actions)
    env = gymnasium.make(GYMNASIUM_ID).unwrapped
    for i in range(500):
        env.state = np.array(states[i])
        obs, reward, term, _, _ = env.step(int(actions[i]))
        assert np.array_equal(np.asarray(env.state, dtype=float), next_states[i])
        assert np.array_equal(car.observe(next_states[i:i + 1])[0], obs)
        assert (reward, term) == (rewards[i], terminated[i])


def test_reset_makes_gymnasiums_draws(car):
    env = gymnasium.make(GYMNASIUM_ID)
    first, _ = env.reset(seed=42)
    positions = [first[0]] + [env.reset()[0][0] for _ in range(99)]
    states = car.reset(100, np.random.default_rng(42))
    assert np.array_equal(car.observe(states)[:, 0], np.array(positions, dtype=np.float32))
    assert np.all(states[:, 1] == 0)


def test_reset_is_uniform_on_the_start_interval(car):
    positions = car.reset(20_000, np.random.default_rng(0))[:, 0]
    assert stats.kstest(positions, stats.uniform(-0.6, 0.2).cdf).pvalue > 1e-3
    assert stats.kstest(positions, stats.uniform(-0.6, 0.21).cdf).pvalue < 1e-6


def pump(observations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Push in the direction of motion (a deterministic policy that reaches the goal)."""
    return np.where(observations[:, 1] >= 0, 2, 0)


def test_simulate_equals_stepping_and_gymnasium(car):
    episodes = car.simulate(30, pump, np.random.default_rng(3))
    states = car.reset(30, np.random.default_rng(3))
    assert np.array_equal(episodes.observations[:, 0], car.observe(states))
    for i in range(30):
        env = gymnasium.make(GYMNASIUM_ID)
        env.reset(options={"low": states[i, 0], "high": states[i, 0]})
        L = episodes.lengths[i]
        for t in range(L):
            assert episodes.actions[i, t] == pump(episodes.observations[i, t][None], None)[0]
            obs, _, terminated, truncated, _ = env.step(int(episodes.actions[i, t]))
            assert np.array_equal(obs, episodes.observations[i, t + 1])
        assert terminated == episodes.terminated[i] and (terminated or truncated)


def test_simulate_layout_and_probabilities(car):
    rng = np.random.default_rng(1)
    episodes = car.simulate((2, 50), UniformPolicy(3), rng)
    assert episodes.batch_shape == (2, 50) and episodes.horizon == H
    assert episodes.observations.shape == (2, 50, H + 1, 2)
    mask = episodes.transition_mask
    assert np.all(episodes.rewards[mask] == -1) and np.all(episodes.actions[~mask] == -1)
    assert np.allclose(episodes.behaviour_probabilities[mask], 1 / 3)
    assert np.array_equal(taken_action_probabilities(UniformPolicy(3), episodes),
                          episodes.behaviour_probabilities)
    assert not episodes.terminated.any()  # uniform random actions never reach the goal
    assert episodes.first(10).batch_shape == (2, 10)
    flat = episodes.reshape(100)
    assert np.array_equal(flat.observations[50:], episodes.observations[1], equal_nan=True)


def test_simulate_draws_as_calling_the_policy(car):
    """A stochastic policy inside simulate draws exactly the actions that calling it with the
    same generator would."""
    policy, rng = UniformPolicy(3), np.random.default_rng(9)
    episodes = car.simulate(5, policy, np.random.default_rng(9))
    states = car.reset(5, rng)
    for t in range(H):
        actions = policy(car.observe(states), rng)
        assert np.array_equal(actions, episodes.actions[:, t])
        states = car.step(states, actions)[0]


def test_features_count_and_scaling(car):
    phi = mountain_car_features()
    assert phi.n_features == 36 and mountain_car_features(3).n_features == 16
    corners = np.array([car.observation_low, car.observation_high], dtype=np.float32)
    values = phi(corners)
    c = phi.coefficients
    assert np.array_equal(values[0], np.ones(36))
    assert np.allclose(values[1], (-1.0) ** c.sum(axis=1))
    obs = car.observe(car.reset(100, np.random.default_rng(0)))
    scaled = (obs - np.array([-1.2, -0.07])) / np.array([1.8, 0.14])
    assert np.allclose(phi(obs), np.cos(np.pi * scaled @ c.T), atol=1e-6)
    with pytest.raises(ValueError):
        phi(np.array([[0.61, 0.0]]))


@pytest.mark.parametrize("actions", [[0, 3], [-1, 1], [1.0, 2.0], [[0, 1]], [0, 1, 2],
                                     np.array([True, False])])
def test_step_refuses_bad_actions(car, actions):
    with pytest.raises(ValueError):
        car.step(car.reset(2, np.random.default_rng(0)), actions)


@pytest.mark.parametrize("states", [np.zeros((2, 3)), np.zeros(2), [[-1.3, 0.0], [0.0, 0.0]],
                                    [[0.0, 0.08], [0.0, 0.0]], [[np.nan, 0.0], [0.0, 0.0]]])
def test_step_refuses_bad_states(car, states):
    with pytest.raises(ValueError):
        car.step(states, [1, 1])


def test_bad_arguments(car):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        car.reset(0, rng)
    with pytest.raises(ValueError):
        car.simulate(3, pump, rng, start_states=car.reset(2, rng))
    with pytest.raises(ValueError):
        car.simulate(3, pump, None)
    with pytest.raises(ValueError):
        car.simulate(3, lambda obs, rng: np.full(len(obs), 3), rng)
    with pytest.raises(ValueError):
        car.start_states([0.7])
    for kwargs in ({"horizon": 0}, {"goal_velocity": np.nan}, {"horizon": 2.5}):
        with pytest.raises(ValueError):
            MountainCar(**kwargs)
    with pytest.raises(ValueError):
        taken_action_probabilities(pump, car.simulate(2, pump, rng))


def test_episodes_refuse_inconsistent_data(car):
    good = car.simulate(4, UniformPolicy(3), np.random.default_rng(0))
    fields = {name: getattr(good, name) for name in ("observations", "actions", "rewards",
                                                       "lengths", "terminated", "reward_range",
                                                       "behaviour_probabilities")}
    lengths = good.lengths.copy()
    lengths[0] = 5  # a short episode that is not terminated
    actions = good.actions.copy()
    actions[0, -1] = -1
    observations = good.observations.copy()
    observations[0, 3, 0] = np.nan
    probs = good.behaviour_probabilities.copy()
    probs[0, 0] = 0.0
    for name, value in (("lengths", lengths), ("actions", actions),
                        ("observations", observations), ("behaviour_probabilities", probs),
                        ("rewards", good.rewards * 2), ("terminated", good.lengths),
                        ("observations", np.zeros(observations.shape, dtype=int)),
                        ("reward_range", (0, 1))):
        with pytest.raises(ValueError):
            Episodes(**{**fields, name: value})
    assert not Episodes(**fields).observations.flags.writeable


def test_sample_actions_frequencies():
    probs = np.array([[0.2, 0.0, 0.8], [0.5, 0.25, 0.25], [0.0, 0.0, 1.0]])
    rows = np.repeat(probs, 20_000, axis=0)
    actions = sample_actions(rows, np.random.default_rng(0)).reshape(3, -1)
    for p, a in zip(probs, actions):
        counts = np.bincount(a, minlength=3)
        assert np.all(counts[p == 0] == 0)
        support = p > 0
        if support.sum() > 1:
            assert stats.chisquare(counts[support], p[support] * a.size).pvalue > 1e-3
