"""The vectorised CartPole-v1 and Acrobot-v1 twins (Sharma et al. 2025, App. B.1 variants)
against Gymnasium 1.4.0, bit for bit: every step of many episodes (random actions, from
Gymnasium's resets and from random states up to the termination boundaries), on the default
parameters and on grid variants whose Gymnasium attributes are set by hand here.

States are compared as float64 (Gymnasium's internal ``env.unwrapped.state``; Acrobot's reset
state is float32 there, converted exactly); observations after a step as Gymnasium's float32
casts of the twin's float64 observations."""

from types import SimpleNamespace

import numpy as np
import pytest
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.utils import seeding

import dprl.envs.acrobot as acrobot_module
from dprl.envs.acrobot import AcrobotVariants
from dprl.envs.cartpole import CartPoleVariants
from dprl.envs.episodes import UniformPolicy, simulate
from dprl.sharma2025.variants import DEFAULTS, variant_grid

PI = np.pi
THETA_MAX = 12 * 2 * PI / 360


def configure_cartpole(env: CartPoleEnv, gravity, force_mag, masscart) -> CartPoleEnv:
    """Gymnasium's CartPole with App. B.1's parameters, derived masses recomputed."""
    env.gravity, env.force_mag, env.masscart = float(gravity), float(force_mag), float(masscart)
    env.total_mass = env.masspole + env.masscart
    env.polemass_length = env.masspole * env.length
    return env


def configure_acrobot(env: AcrobotEnv, link_length, link_mass_1, link_mass_2) -> AcrobotEnv:
    """Gymnasium's Acrobot with both links of length L, centres of mass at L / 2, LINK_MOI 1."""
    length = float(link_length)
    env.LINK_LENGTH_1 = env.LINK_LENGTH_2 = length
    env.LINK_COM_POS_1 = env.LINK_COM_POS_2 = length / 2
    env.LINK_MASS_1, env.LINK_MASS_2 = float(link_mass_1), float(link_mass_2)
    return env


def cartpole_region(rng: np.random.Generator, n: int) -> np.ndarray:
    """States anywhere up to CartPole's termination boundaries, with brisk velocities."""
    high = np.array([2.4, 2.0, THETA_MAX, 3.0])
    return rng.uniform(-high, high, size=(n, 4))


def acrobot_region(rng: np.random.Generator, n: int) -> np.ndarray:
    """States anywhere: angles in [-pi, pi], velocities up to their bounds (4 pi, 9 pi)."""
    high = np.array([PI, PI, 4 * PI, 9 * PI])
    return rng.uniform(-high, high, size=(n, 4))


CARTPOLE = SimpleNamespace(twin=CartPoleVariants, env=CartPoleEnv, configure=configure_cartpole,
                           region=cartpole_region, name="CartPole")
ACROBOT = SimpleNamespace(twin=AcrobotVariants, env=AcrobotEnv, configure=configure_acrobot,
                          region=acrobot_region, name="Acrobot")


def lockstep(twin, envs, n_steps: int, rng: np.random.Generator, restart_region):
    """Step the Gymnasium ``envs`` one by one and the twin on all of them at once under the
    same random actions for ``n_steps``; a terminated copy restarts from Gymnasium's reset
    (``restart_region`` None) or from a random region state given to both. Returns the
    number of copies that differ in state, observation, reward or termination, and the
    visited ``(states, actions, next_states, terminated)``, stacked."""
    n = len(envs)
    states = restart_region(rng, n) if restart_region is not None else np.zeros((n, 4))
    for i, env in enumerate(envs):
        env.reset(seed=int(rng.integers(2**31)))
        if restart_region is None:
            states[i] = np.asarray(env.state, dtype=np.float64)
        else:
            env.state = states[i].copy()
    mismatches, record = 0, []
    for _ in range(n_steps):
        actions = rng.integers(twin.n_actions, size=n)
        next_states, rewards, terminated = twin.step(states, actions)
        seen = twin.observe(next_states).astype(np.float32)
        record.append((states, actions, next_states, terminated))
        restarts = restart_region(rng, n) if restart_region is not None else None
        next_states = next_states.copy()
        for i, env in enumerate(envs):
            obs, reward, done, _, _ = env.step(int(actions[i]))
            mismatches += not (np.array_equal(np.asarray(env.state, dtype=np.float64),
                                              next_states[i])
                               and np.array_equal(obs, seen[i])
                               and reward == rewards[i] and done == terminated[i])
            if done:
                env.reset()  # also clears CartPole's record of the termination
                if restarts is not None:
                    env.state = restarts[i].copy()
                next_states[i] = np.asarray(env.state, dtype=np.float64)
        states = next_states
    return mismatches, [np.concatenate(parts) for parts in zip(*record)]


def test_float_power_is_gymnasiums_scalar_square():
    x = np.random.default_rng(0).uniform(-40, 40, 100_000)
    scalar = np.array([np.float64(v) ** 2 for v in x])
    assert np.array_equal(acrobot_module._pow2(x), scalar)
    assert np.array_equal(scalar, np.array([float(v) ** 2 for v in x]))
    assert 0 < np.count_nonzero(x * x != scalar) < 0.005 * x.size  # why x * x would not do


@pytest.mark.parametrize("kind", [CARTPOLE, ACROBOT], ids=lambda k: k.name)
@pytest.mark.parametrize("start, seed", [("reset", 1), ("region", 2)])
def test_default_twin_matches_gymnasium_step_by_step(kind, start, seed):
    twin, rng = kind.twin(), np.random.default_rng(seed)
    envs = [kind.env() for _ in range(40)]
    mismatches, (states, actions, next_states, terminated) = lockstep(
        twin, envs, 250, rng, None if start == "reset" else kind.region)
    assert mismatches == 0 and len(states) == 10_000
    if start == "region" or kind is CARTPOLE:  # a random Acrobot seldom ends from rest
        assert terminated.sum() >= 100
    if kind is ACROBOT and start == "region":
        wrapped = np.abs(next_states[:, :2] - states[:, :2]) > PI
        bounded = np.abs(next_states[:, 2:]) == [4 * PI, 9 * PI]
        assert wrapped.sum() > 100 and bounded[:, 0].any() and bounded[:, 1].any()
        # with an exact x * x for Gymnasium's pow, some of these very steps would differ
        acrobot_module._pow2, saved = (lambda v: v * v), acrobot_module._pow2
        try:
            naive = twin.step(states, actions)[0]
        finally:
            acrobot_module._pow2 = saved
        assert not np.array_equal(naive, next_states)


@pytest.mark.parametrize("kind", [CARTPOLE, ACROBOT], ids=lambda k: k.name)
def test_grid_variants_match_gymnasium_copy_by_copy(kind):
    grid, rng = variant_grid(kind.name), np.random.default_rng(7)
    picks = np.concatenate([[0, 999], rng.choice(np.arange(1, 999), 6, replace=False)])
    params = {name: values[picks] for name, values in grid.items()}
    twin = kind.twin(**params)
    envs = [kind.configure(kind.env(), *(values[i] for values in params.values()))
            for i in range(len(picks))]
    for i, env in enumerate(envs):
        assert all(getattr(env, name) == value
                   for name, value in twin.gymnasium_attributes(i).items())
    mismatches, (states, actions, next_states, terminated) = lockstep(
        twin, envs, 400, rng, kind.region)
    assert mismatches == 0 and terminated.sum() >= 100
    default = kind.twin().step(states, actions)[0]  # every variant really acts
    differs = (default != next_states).reshape(-1, len(picks), 4).any(axis=(0, 2))
    assert differs.all()


@pytest.mark.parametrize("kind", [CARTPOLE, ACROBOT], ids=lambda k: k.name)
def test_variant_i_steps_copy_i_as_a_scalar_twin(kind):
    grid, rng = variant_grid(kind.name), np.random.default_rng(3)
    picks = rng.choice(1000, 50, replace=False)
    params = {name: values[picks] for name, values in grid.items()}
    states, actions = kind.region(rng, 50), rng.integers(kind.twin.n_actions, size=50)
    batch = kind.twin(**params).step(states, actions)
    for i in range(50):
        one = kind.twin(**{name: values[i] for name, values in params.items()}).step(
            states[i:i + 1], actions[i:i + 1])
        assert all(np.array_equal(b[i:i + 1], o) for b, o in zip(batch, one))


@pytest.mark.parametrize("kind", [CARTPOLE, ACROBOT], ids=lambda k: k.name)
def test_reset_draws_gymnasiums_start_states(kind):
    env, twin = kind.env(), kind.twin()
    first = env.reset(seed=11)[0]
    gym_states = [np.asarray(env.state, dtype=np.float64)]
    gym_obs = [first] + [env.reset()[0] for _ in range(199)]
    gym_states += [np.asarray(env.state, dtype=np.float64)]  # after the last reset
    states = twin.reset(200, seeding.np_random(11)[0])
    assert np.array_equal(states[0], gym_states[0]) and np.array_equal(states[-1], gym_states[1])
    seen = twin.observe(states).astype(np.float32)
    if kind is CARTPOLE:
        assert np.array_equal(seen, np.array(gym_obs))
        assert np.all(np.abs(states) < 0.05)
    else:  # Gymnasium takes cos/sin of its float32 reset state in float32: 1 ulp apart
        np.testing.assert_array_max_ulp(seen, np.array(gym_obs), maxulp=1)
        assert np.array_equal(states, states.astype(np.float32)) and np.all(np.abs(states) < 0.1)


@pytest.mark.parametrize("kind", [CARTPOLE, ACROBOT], ids=lambda k: k.name)
def test_simulated_episodes_have_gymnasium_rewards(kind):
    twin, rng = kind.twin(horizon=30), np.random.default_rng(5)
    episodes = simulate(twin, UniformPolicy(twin.n_actions), 300, rng,
                        kind.region(rng, 300) * 0.5)
    mask, ends = episodes.transition_mask, episodes.terminated
    final = episodes.rewards[np.arange(300), episodes.lengths - 1]
    assert 0 < ends.sum() < 300 and episodes.observations.shape[-1] == twin.observe(
        np.zeros((1, 4))).shape[1]
    if kind is CARTPOLE:  # +1 on every step; ends exactly when the cart or pole leaves
        assert np.all(episodes.rewards[mask] == 1.0)
        last = episodes.observations[np.arange(300), episodes.lengths]
        outside = (np.abs(last[:, 0]) > 2.4) | (np.abs(last[:, 2]) > THETA_MAX)
        assert np.array_equal(outside, ends)
    else:  # -1 per step, 0 on the terminating one only
        assert np.array_equal(final == 0.0, ends)
        assert np.sum(episodes.rewards[mask] == 0.0) == ends.sum()
        assert np.all(episodes.rewards[mask] <= 0.0)


def test_defaults_and_declared_ranges():
    assert {name: getattr(CartPoleVariants(), name) for name in DEFAULTS["CartPole"]} == \
        DEFAULTS["CartPole"]
    assert {name: getattr(AcrobotVariants(), name) for name in DEFAULTS["Acrobot"]} == \
        DEFAULTS["Acrobot"]
    cart = CartPoleVariants(masscart=np.array([0.8, 1.25]))
    assert np.array_equal(cart.total_mass, [0.1 + 0.8, 0.1 + 1.25])
    assert cart.polemass_length == 0.1 * 0.5 and cart.n_variants == 2
    assert CartPoleVariants().reward_range == (1.0, 1.0)
    assert AcrobotVariants().reward_range == (-1.0, 0.0)


@pytest.mark.parametrize("make, match", [
    (lambda: CartPoleVariants(masscart=0.0), "masscart"),
    (lambda: CartPoleVariants(gravity=np.array([9.8, -1.0])), "gravity"),
    (lambda: CartPoleVariants(force_mag=np.nan), "force_mag"),
    (lambda: CartPoleVariants(gravity=np.ones((2, 2))), "gravity"),
    (lambda: CartPoleVariants(gravity=np.ones(3), masscart=np.ones(2)), "same length"),
    (lambda: CartPoleVariants(horizon=0), "horizon"),
    (lambda: AcrobotVariants(link_length=-0.5), "link_length"),
    (lambda: AcrobotVariants(link_mass_2=np.array([1.0, 0.0])), "link_mass_2"),
    (lambda: AcrobotVariants(link_mass_1="1.0"), "link_mass_1"),
    (lambda: CartPoleVariants().step(np.zeros((3, 3)), np.zeros(3, dtype=int)), "states"),
    (lambda: CartPoleVariants().step(np.zeros((3, 4)), np.array([0, 1, 2])), "actions"),
    (lambda: AcrobotVariants().step(np.zeros((2, 4)), np.array([0.0, 1.0])), "actions"),
    (lambda: AcrobotVariants().step(np.zeros((2, 4)), np.array([0, -1])), "actions"),
    (lambda: AcrobotVariants().step(np.zeros((2, 4)), np.array([0])), "actions"),
    (lambda: AcrobotVariants(link_length=np.ones(3)).step(np.zeros((2, 4)), np.zeros(2, int)),
     "one row per variant"),
    (lambda: AcrobotVariants().observe(np.zeros(4)), "states"),
    (lambda: AcrobotVariants().reset(0, np.random.default_rng(0)), "n"),
    (lambda: CartPoleVariants(gravity=np.ones(2)).gymnasium_attributes(2), "copy"),
])
def test_bad_input_is_rejected(make, match):
    with pytest.raises(ValueError, match=match):
        make()
