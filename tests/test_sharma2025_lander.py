"""LunarLander experts of Sharma et al. (2025, App. B.1) (dprl.envs.lunar_lander,
dprl.sharma2025.lander_experts): the parameterised heuristic against Gymnasium's own, the
lockstep episode runner against plain Gymnasium loops, CEM training, evaluation on the
default environment and the p_min-modified demonstrations."""

import Box2D
import gymnasium
import numpy as np
import pytest
from gymnasium.envs.box2d.lunar_lander import heuristic

from dprl.envs.lunar_lander import (DEFAULT_VARIANT, LanderVariant, box2d_version,
                                    run_episodes)
from dprl.seeding import named_stream
from dprl.sharma2025.experts import ExpertPopulation, pmin_levels
from dprl.sharma2025.lander_experts import (HEURISTIC_PARAMETERS, N_PARAMETERS, CEMConfig,
                                            LanderControllers, controller_episodes,
                                            evaluate_on_default, heuristic_actions,
                                            record_trajectories, train_setting)
from dprl.sharma2025.variants import variant_grid

TINY = CEMConfig(population=5, n_elite=2, iterations=2, episodes=1, max_steps=40, keep=3,
                 eval_episodes=1)
WINDY = LanderVariant.sharma2025(-10.5, 3.0, 0.3)


def gymnasium_episode(variant: LanderVariant, seed: int, policy, max_steps: int = 1000):
    """A plain Gymnasium loop: observations (L + 1, 8), actions (L,), rewards (L,), ended."""
    env = variant.make()
    s, _ = env.reset(seed=seed)
    observations, actions, rewards = [s], [], []
    for _ in range(max_steps):
        a = int(policy(env, s))
        s, r, ended, truncated, _ = env.step(a)
        observations.append(s), actions.append(a), rewards.append(r)
        if ended or truncated:
            break
    return np.array(observations), np.array(actions), np.array(rewards), ended


def parameterised(parameters):
    """The single-observation rule of ``parameters`` as a Gymnasium-style policy."""
    return lambda env, s: heuristic_actions(parameters, s)


@pytest.fixture(scope="module")
def visited() -> np.ndarray:
    """Observations of heuristic episodes plus random ones (contact flags on and off, values
    near the heuristic's thresholds)."""
    rng = np.random.default_rng(3)
    seen = [gymnasium_episode(DEFAULT_VARIANT, seed, heuristic)[0] for seed in range(3)]
    noise = (rng.normal(size=(6000, 8)) * rng.choice([0.05, 0.3, 1.0], (6000, 1)))
    noise[:, 6:] = rng.integers(0, 2, (6000, 2))
    return np.concatenate([*seen, noise.astype(np.float32)])


# --- environment ----------------------------------------------------------------------------

def test_variant_makes_gymnasium_env_with_its_parameters():
    env = WINDY.make().unwrapped
    assert (env.gravity, env.enable_wind, env.wind_power, env.turbulence_power) == \
        (-10.5, True, 3.0, 0.3)
    default = DEFAULT_VARIANT.make()
    assert default.spec.id == "LunarLander-v3" and default.spec.max_episode_steps == 1000
    assert (default.unwrapped.gravity, default.unwrapped.enable_wind) == (-10.0, False)
    grid = variant_grid("LunarLander")
    assert LanderVariant.sharma2025(grid["gravity"][-1], grid["wind_power"][-1],
                                    grid["turbulence_power"][-1]) == \
        LanderVariant(-11.0, 5.0, 0.5, enable_wind=True)


@pytest.mark.parametrize("kwargs", [dict(gravity=0.0), dict(gravity=-12.0),
                                    dict(gravity=float("nan")), dict(wind_power=-1.0),
                                    dict(wind_power=1.0), dict(turbulence_power=3.0,
                                                               enable_wind=True),
                                    dict(enable_wind=1)])
def test_variant_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        LanderVariant(**kwargs)


def test_zero_wind_only_shifts_the_random_stream():
    """enable_wind=True at zero powers applies exactly zero forces (switching the wind off
    after reset changes nothing), but its reset draws two more numbers, so a seed gives the
    same first observation as the default env and then other engine noise."""
    calm = LanderVariant.sharma2025(-10.0, 0.0, 0.0)
    windy = gymnasium_episode(calm, 0, heuristic)[0]

    def switched_off(env, s):
        env.unwrapped.enable_wind = False
        return heuristic(env, s)
    assert np.array_equal(windy, gymnasium_episode(calm, 0, switched_off)[0])
    default = gymnasium_episode(DEFAULT_VARIANT, 0, heuristic)[0]
    assert np.array_equal(windy[0], default[0])
    assert windy.shape != default.shape or not np.array_equal(windy, default)


def test_box2d_version_is_the_imported_build():
    assert box2d_version() == Box2D.__version__ and box2d_version().count(".") >= 1


def test_run_episodes_matches_plain_gymnasium_loops():
    params = np.stack([HEURISTIC_PARAMETERS, HEURISTIC_PARAMETERS * [1, 1, 1, 1, 1, 1, 0.5,
                                                                       0.5, 1]])
    seeds = np.array([[4, 5], [6, 7]])
    episodes = controller_episodes(params, WINDY, seeds, max_steps=300)
    for i in range(2):
        for j in range(2):
            obs, actions, rewards, ended = gymnasium_episode(
                WINDY, int(seeds[i, j]), parameterised(params[i]), 300)
            L = len(actions)
            assert episodes.lengths[i, j] == L and episodes.terminated[i, j] == ended
            assert np.array_equal(episodes.observations[i, j, :L + 1], obs)
            assert np.array_equal(episodes.actions[i, j, :L], actions)
            assert np.array_equal(episodes.rewards[i, j, :L], rewards)
            assert np.isnan(episodes.observations[i, j, L + 1:]).all()
            assert (episodes.actions[i, j, L:] == -1).all()
            assert (episodes.rewards[i, j, L:] == 0).all()
    assert np.array_equal(episodes.returns, episodes.rewards.sum(axis=-1))
    assert np.array_equal(episodes.seeds, seeds)


def test_run_episodes_cuts_at_max_steps():
    """Firing the main engine throughout lifts the lander off: cut after 25 steps."""
    episodes = run_episodes(DEFAULT_VARIANT, lambda obs, e, t: np.full(len(e), 2),
                            np.array([[1]]), 25)
    assert episodes.lengths[0, 0] == 25 and not episodes.terminated[0, 0]
    assert np.isfinite(episodes.observations).all() and (episodes.actions == 2).all()


@pytest.mark.parametrize("seeds, max_steps", [(np.array([[-1]]), 10), (np.array([1]), 10),
                                              (np.array([[1.0]]), 10),
                                              (np.array([[1]]), 1001), (np.array([[1]]), 0)])
def test_run_episodes_rejects_bad_input(seeds, max_steps):
    with pytest.raises(ValueError):
        run_episodes(DEFAULT_VARIANT, lambda obs, e, t: np.zeros(len(e), dtype=np.int64),
                     seeds, max_steps)


@pytest.mark.parametrize("bad", [lambda obs, e, t: np.full(len(e), 4),
                                 lambda obs, e, t: np.zeros(len(e)),
                                 lambda obs, e, t: np.zeros(len(e) + 1, dtype=np.int64)])
def test_run_episodes_rejects_bad_controller_actions(bad):
    with pytest.raises(ValueError, match="action"):
        run_episodes(DEFAULT_VARIANT, bad, np.array([[1]]), 5)


# --- controllers ------------------------------------------------------------------------------

def test_hand_tuned_parameters_are_gymnasiums_heuristic(visited):
    env = gymnasium.make("LunarLander-v3")
    expected = np.array([heuristic(env, s) for s in visited])
    controllers = LanderControllers(HEURISTIC_PARAMETERS[None])
    assert np.array_equal(controllers.greedy_actions(visited[None])[0], expected)
    assert set(expected) == {0, 1, 2, 3}


def test_greedy_actions_per_expert_do_not_depend_on_the_batch(visited):
    rng = np.random.default_rng(0)
    controllers = LanderControllers(rng.standard_normal((5, N_PARAMETERS)))
    obs = visited[:600].reshape(5, 120, 8)
    together = controllers.greedy_actions(obs)
    shared = controllers.greedy_actions(obs[:1])
    for i in range(5):
        alone = LanderControllers(controllers.parameters[i:i + 1])
        assert np.array_equal(together[i], alone.greedy_actions(obs[i:i + 1])[0])
        assert np.array_equal(shared[i], alone.greedy_actions(obs[:1])[0])
    experts = rng.integers(0, 5, 600)
    assert np.array_equal(controllers.actions_of(visited[:600], experts),
                          controllers.greedy_actions(visited[None, :600])[experts,
                                                                          np.arange(600)])
    assert isinstance(controllers, ExpertPopulation) and controllers.n_experts == 5
    assert together.dtype == np.int64


def test_select_picks_experts_in_order():
    params = np.random.default_rng(1).standard_normal((4, N_PARAMETERS))
    chosen = LanderControllers(params).select(np.array([3, 1, 3]))
    assert np.array_equal(chosen.parameters, params[[3, 1, 3]])
    for bad in (np.array([4]), np.array([-1]), np.array([0.0]), np.array([[0]])):
        with pytest.raises(ValueError, match="index"):
            LanderControllers(params).select(bad)


@pytest.mark.parametrize("call", [
    lambda c: c.greedy_actions(np.zeros((2, 3, 8))),          # 2 rows for 3 experts
    lambda c: c.greedy_actions(np.zeros((3, 8))),
    lambda c: c.greedy_actions(np.zeros((1, 3, 7))),
    lambda c: c.greedy_actions(np.full((1, 3, 8), np.nan)),
    lambda c: c.actions_of(np.zeros((3, 8)), np.zeros(2, dtype=int)),
    lambda c: c.actions_of(np.zeros((3, 8)), np.zeros(3)),
    lambda c: c.actions_of(np.zeros((2, 8)), np.array([0, 3])),
    lambda c: c.actions_of(np.zeros((2, 8)), np.array([0, -1])),
])
def test_controllers_reject_bad_observations(call):
    with pytest.raises(ValueError):
        call(LanderControllers(np.ones((3, N_PARAMETERS))))


@pytest.mark.parametrize("parameters", [np.ones((2, N_PARAMETERS + 1)), np.ones(N_PARAMETERS),
                                        np.full((1, N_PARAMETERS), np.inf)])
def test_controllers_reject_bad_parameters(parameters):
    with pytest.raises(ValueError, match="parameters"):
        LanderControllers(parameters)


# --- training and evaluation ------------------------------------------------------------------

def test_train_setting_keeps_the_best_of_its_round_and_is_deterministic():
    """One CEM round: the experts are the top 3 of the prior's candidates by their score on
    the shared training episodes (recomputed here with plain Gymnasium loops), and their
    returns are those of fresh full episodes drawn next from the same generator."""
    config = CEMConfig(population=5, n_elite=2, iterations=1, episodes=1, max_steps=40,
                       keep=3, eval_episodes=1, truncation_penalty=100.0)
    best, returns = train_setting(WINDY, np.random.default_rng(11), config)
    rng = np.random.default_rng(11)
    seed = int(rng.integers(0, 2**31))
    drawn = rng.standard_normal((5, N_PARAMETERS))
    scores = []
    for p in drawn:
        _, _, rewards, ended = gymnasium_episode(WINDY, seed, parameterised(p), 40)
        scores.append(rewards.sum() - (0 if ended else 100.0))
    top = drawn[np.argsort(-np.array(scores), kind="stable")[:3]]
    assert np.array_equal(best, top)
    fresh = int(rng.integers(0, 2**31))
    expected = [gymnasium_episode(WINDY, fresh, parameterised(p))[2].sum() for p in top]
    np.testing.assert_array_equal(returns, expected)
    again = train_setting(WINDY, np.random.default_rng(11), config)
    assert np.array_equal(again[0], best) and np.array_equal(again[1], returns)


def test_train_setting_runs_several_rounds():
    best, returns = train_setting(WINDY, np.random.default_rng(2), TINY)
    assert best.shape == (3, N_PARAMETERS) and returns.shape == (3,)
    assert np.isfinite(returns).all()
    other = train_setting(WINDY, np.random.default_rng(3), TINY)[0]
    assert not np.array_equal(best, other)


@pytest.mark.parametrize("kwargs", [dict(population=0), dict(n_elite=30), dict(keep=30),
                                    dict(max_steps=1001), dict(prior_std=0.0),
                                    dict(smoothing=0.0), dict(smoothing=1.5),
                                    dict(truncation_penalty=-1.0), dict(episodes=1.5)])
def test_cem_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        CEMConfig(**kwargs)


def test_train_setting_rejects_bad_input():
    with pytest.raises(ValueError, match="rng"):
        train_setting(WINDY, 1, TINY)
    with pytest.raises(ValueError, match="config"):
        train_setting(WINDY, np.random.default_rng(0), dict(population=3))


def test_evaluate_on_default_uses_shared_episodes_of_the_default_env():
    params = np.stack([HEURISTIC_PARAMETERS, np.zeros(N_PARAMETERS)])
    returns = evaluate_on_default(params, 2, np.random.default_rng(5))
    seeds = np.random.default_rng(5).integers(0, 2**31, 2)
    for i, p in enumerate(params):
        expected = np.mean([gymnasium_episode(DEFAULT_VARIANT, int(s), parameterised(p))[2]
                            .sum() for s in seeds])
        assert returns[i] == pytest.approx(expected, rel=1e-12, abs=1e-9)
    alone = evaluate_on_default(params[1:], 2, np.random.default_rng(5))
    assert alone[0] == returns[1]
    assert returns[0] > 100 > returns[1]          # the heuristic lands; doing nothing crashes
    with pytest.raises(ValueError):
        evaluate_on_default(params, 0, np.random.default_rng(5))
    with pytest.raises(ValueError):
        evaluate_on_default(params[:, :5], 1, np.random.default_rng(5))


# --- demonstrations -----------------------------------------------------------------------------

DATA_SEED = 9


@pytest.fixture(scope="module")
def recorded():
    """Experts 4 and 7 (global indices) x 6 demonstrations of at most 120 steps, and expert
    7's alone."""
    params = np.stack([HEURISTIC_PARAMETERS, HEURISTIC_PARAMETERS * [1, 1, 1, 1, 1, 1, 1, 2, 1]])
    experts = LanderControllers(params)
    both = record_trajectories(experts, [4, 7], 6, 120, 0.02, np.random.default_rng(DATA_SEED))
    alone = record_trajectories(experts.select(np.array([1])), [7], 6, 120, 0.02,
                                np.random.default_rng(DATA_SEED))
    return experts, both, alone


def test_recorded_demonstrations_have_the_padded_layout(recorded):
    """ExpertData's layout: after the last transition, o_L repeated, actions and rewards 0."""
    _, data, _ = recorded
    assert data.observations.shape == (2, 6, 121, 8)
    assert data.actions.shape == data.rewards.shape == (2, 6, 120)
    assert data.lengths.shape == data.terminated.shape == (2, 6)
    assert data.lengths.max() <= 120 and np.isfinite(data.observations).all()
    for i, j in np.ndindex(2, 6):
        L = data.lengths[i, j]
        assert (data.observations[i, j, L + 1:] == data.observations[i, j, L]).all()
        assert (data.actions[i, j, L:] == 0).all() and (data.rewards[i, j, L:] == 0).all()
        assert data.terminated[i, j] or L == 120


def test_recorded_demonstrations_replay_in_gymnasium(recorded):
    """Each trajectory is Gymnasium's default env from the seed its expert's stream gives."""
    _, data, _ = recorded
    for k, i in enumerate([4, 7]):
        seeds = named_stream(np.random.default_rng(DATA_SEED), i).integers(0, 2**31, 6)
        for j in (0, 5):
            L = data.lengths[k, j]
            actions = iter(data.actions[k, j, :L])
            obs, _, rewards, ended = gymnasium_episode(DEFAULT_VARIANT, int(seeds[j]),
                                                       lambda env, s: next(actions), L)
            assert np.array_equal(obs, data.observations[k, j, :L + 1])
            assert np.array_equal(rewards, data.rewards[k, j, :L])
            assert ended == data.terminated[k, j]


def test_recorded_actions_follow_the_pmin_experts(recorded):
    """The taken action is the expert's greedy one with probability 1 - 3 p_min = 0.94."""
    experts, data, _ = recorded
    mask = np.arange(120) < data.lengths[..., None]
    greedy = experts.actions_of(data.observations[:, :, :-1][mask], np.nonzero(mask)[0])
    agree = (greedy == data.actions[mask]).mean()
    high, _ = pmin_levels(4, 0.02)
    n = greedy.size
    assert n > 300 and abs(agree - high) < 4 * np.sqrt(high * (1 - high) / n)


def test_an_experts_demonstrations_do_not_depend_on_the_others(recorded):
    _, both, alone = recorded
    for name in ("observations", "actions", "rewards", "lengths", "terminated"):
        assert np.array_equal(getattr(both, name)[1:], getattr(alone, name))


@pytest.mark.parametrize("args", [([0], 6, 120, 0.02), ([0, 1], 0, 120, 0.02),
                                  ([0, 1], 6, 1001, 0.02), ([0, 1], 6, 120, 0.3),
                                  ([0.0, 1.0], 6, 120, 0.02), ([0, -1], 6, 120, 0.02)])
def test_record_trajectories_rejects_bad_input(args):
    experts = LanderControllers(np.ones((2, N_PARAMETERS)))
    with pytest.raises(ValueError):
        record_trajectories(experts, *args, np.random.default_rng(0))
    with pytest.raises(ValueError):
        record_trajectories(experts.parameters, [0, 1], 1, 5, 0.02, np.random.default_rng(0))
