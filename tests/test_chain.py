"""The chain of Balle et al. (2016): exact solutions, the vectorised sampler and the Gymnasium
environment. Statistical tests use fixed seeds, a strict level (p > 1e-3) and are checked for
power against slightly wrong models (p < 1e-6)."""

import importlib

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from scipy import stats

import dprl.envs
from dprl.envs import CHAIN_ID, ChainEnv, ChainMDP, Trajectories
from dprl.policy_evaluation import first_visit_returns
from dprl.seeding import trial_generator

N_SAMPLE = 20_000
LEVEL, POWER_LEVEL = 1e-3, 1e-6


@pytest.fixture(scope="module")
def chain() -> ChainMDP:
    return ChainMDP()


@pytest.fixture(scope="module")
def sample(chain):
    return chain.sample(N_SAMPLE, trial_generator(2016, 0))


def merged_bins(probs: np.ndarray, n: int) -> np.ndarray:
    """Bin index of each category: adjacent categories merged until each bin expects >= 5."""
    bins, current, mass = np.empty(probs.size, dtype=int), 0, 0.0
    for i, p in enumerate(probs):
        bins[i], mass = current, mass + p
        if mass * n >= 5:
            current, mass = current + 1, 0.0
    if mass > 0 and current > 0:  # fold a light last bin into the previous one
        bins[bins == current] = current - 1
    return bins


def gof_pvalue(observed: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square goodness of fit of category counts to probabilities (bins merged)."""
    n = observed.sum()
    bins = merged_bins(probs, n)
    expected = np.bincount(bins, probs)
    return stats.chisquare(np.bincount(bins, observed), expected / expected.sum() * n).pvalue


def two_sample_pvalue(values_a: np.ndarray, values_b: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square test that two samples of categories ``0..K-1`` share one distribution."""
    bins = merged_bins(probs, min(values_a.size, values_b.size))
    table = [np.bincount(bins[v], minlength=bins.max() + 1) for v in (values_a, values_b)]
    return stats.chi2_contingency(table).pvalue


def reward_time_probabilities(mdp: ChainMDP) -> np.ndarray:
    """Pr(the reward is received on transition t), t = 0..H-1, then Pr(no reward)."""
    per_step = mdp.time_state_probabilities() @ mdp.expected_rewards()
    return np.append(per_step, 1.0 - per_step.sum())


def reward_times(rewards: np.ndarray) -> np.ndarray:
    """Index of the (only) rewarded transition of each episode, H if there is none."""
    assert np.all(rewards.sum(axis=-1) <= 1) and np.all(np.isin(rewards, (0.0, 1.0)))
    return np.where(rewards.any(axis=-1), rewards.argmax(axis=-1), rewards.shape[-1])


def closed_form_values(mdp: ChainMDP) -> np.ndarray:
    """V(s) = E[gamma^(T-1)], T the steps to enter the goal,
    = gamma^-1 ((1-p) gamma / (1-p gamma))^(goal-s)."""
    p, g, goal = mdp.stay_prob, mdp.gamma, mdp.goal
    s = np.arange(mdp.n_states)
    return np.where(s < goal, ((1 - p) * g / (1 - p * g)) ** (goal - s) / g, 0.0)


# --- model --------------------------------------------------------------------------------

def test_defaults_follow_the_paper(chain):
    assert (chain.n_states, chain.stay_prob, chain.goal, chain.horizon, chain.gamma) == (
        40, 0.5, 38, 200, 0.99)
    np.testing.assert_allclose(chain.start_probabilities, np.full(40, 1 / 40))


def test_transition_matrix_matches_the_dynamics(chain):
    P = chain.transition_matrix()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    for s in range(39):
        expected = np.zeros(40)
        expected[s], expected[s + 1] = 0.5, 0.5
        np.testing.assert_array_equal(P[s], expected)
    assert P[39, 39] == 1.0


@pytest.mark.parametrize("goal", [None, 9, 5])
def test_rewards_are_paid_on_entering_the_goal(goal):
    mdp = ChainMDP(n_states=10, stay_prob=0.3, goal=goal)
    R = mdp.reward_matrix()
    assert R.sum() == 9 and R[mdp.goal, mdp.goal] == 0
    assert np.all(R[np.arange(10) != mdp.goal, mdp.goal] == 1)
    expected = np.zeros(10)
    expected[mdp.goal - 1] = 0.7
    np.testing.assert_allclose(mdp.expected_rewards(), expected)


@pytest.mark.parametrize("kwargs", [{}, {"goal": 39}, {"stay_prob": 0.8, "gamma": 0.9},
                                    {"n_states": 7, "goal": 6, "stay_prob": 0.0}])
def test_exact_values_agree_with_three_other_solutions(kwargs):
    mdp = ChainMDP(**kwargs)
    V = mdp.value_function()
    full = np.linalg.solve(np.eye(mdp.n_states) - mdp.gamma * mdp.transition_matrix(),
                           mdp.expected_rewards())  # absorbing self-loop pays 0, so V(A) = 0
    np.testing.assert_allclose(V, full, atol=1e-10)
    np.testing.assert_allclose(V, closed_form_values(mdp), atol=1e-10)
    np.testing.assert_allclose(mdp.finite_horizon_values(10_000), V, atol=1e-10)
    assert V[-1] == 0


def test_finite_horizon_values_converge_within_gamma_to_the_horizon():
    mdp = ChainMDP(stay_prob=0.9, goal=39, gamma=0.95)
    V = mdp.value_function()
    gaps = [np.abs(V - mdp.finite_horizon_values(h)).max() for h in (0, 10, 50, 100, 200, 400)]
    assert np.all(np.diff(gaps) <= 0) and gaps[0] > 0.1
    for h, gap in zip((0, 10, 50, 100, 200, 400), gaps):
        assert gap <= mdp.gamma ** h * V.max() + 1e-15
    np.testing.assert_array_equal(mdp.finite_horizon_values(), mdp.finite_horizon_values(200))


def test_visit_probabilities_and_counts(chain):
    p = chain.state_visit_probabilities()
    # a state s < A is reached by the starts <= s (truncation at 200 steps is negligible)
    np.testing.assert_allclose(p[:-1], np.arange(1, 40) / 40, atol=1e-12)
    assert p[-1] == pytest.approx(1 / 40)  # A is visited only as a start
    counts = chain.expected_visit_counts()
    np.testing.assert_allclose(counts[:-1], p[:-1] / (1 - chain.stay_prob), atol=1e-12)
    np.testing.assert_allclose(chain.on_policy_distribution(), counts / counts.sum())
    lengths = chain.length_distribution()
    assert lengths[0] == 0 and lengths.sum() == pytest.approx(1.0)
    assert lengths @ np.arange(201) == pytest.approx(counts.sum())
    assert chain.expected_transition_counts(per_trajectory=True).sum() == pytest.approx(1.0)


def test_visit_probabilities_with_truncation_match_the_sampler():
    mdp = ChainMDP(n_states=12, stay_prob=0.7, horizon=15, start_distribution=np.eye(12)[0])
    p = mdp.state_visit_probabilities()
    sample = mdp.sample(N_SAMPLE, trial_generator(7, 0))
    _, visited = first_visit_returns(sample, mdp.gamma, 12)
    z = (visited.mean(axis=0) - p) / np.sqrt(np.maximum(p * (1 - p), 1e-300) / N_SAMPLE)
    assert 0.05 < p[5] < 0.95 and np.abs(z).max() < 4.5  # truncation matters here
    np.testing.assert_allclose(sample.lengths.mean(), mdp.length_distribution() @ np.arange(16),
                               atol=4 * sample.lengths.std() / np.sqrt(N_SAMPLE))


# --- sampler against the exact model ------------------------------------------------------

def test_sampler_layout(sample):
    assert sample.states.shape == (N_SAMPLE, 201) and sample.states.dtype == np.int64
    assert sample.rewards.shape == (N_SAMPLE, 200) and sample.lengths.shape == (N_SAMPLE,)
    last = sample.states[np.arange(N_SAMPLE), sample.lengths]
    np.testing.assert_array_equal(last[sample.terminated], 39)
    assert sample.reward_range == (0.0, 1.0)


def test_sampler_batch_shape(chain):
    batch = chain.sample((3, 5), np.random.default_rng(0))
    assert batch.batch_shape == (3, 5) and batch.states.shape == (3, 5, 201)


def test_sampler_start_frequencies(chain, sample):
    starts = np.bincount(sample.states[:, 0], minlength=40)
    assert gof_pvalue(starts, chain.start_probabilities) > LEVEL
    tilted = 1 + 0.2 * (np.arange(40) - 19.5) / 19.5
    assert gof_pvalue(starts, tilted / tilted.sum()) < POWER_LEVEL


def stay_pvalue(sources: np.ndarray, stays: np.ndarray, stay_prob: float) -> float:
    """Pooled chi-square (one degree of freedom per source state) for Pr(stay) = stay_prob."""
    n = np.bincount(sources, minlength=39)
    k = np.bincount(sources, stays, minlength=39)
    return stats.chi2.sf(((k - n * stay_prob) ** 2 / (n * stay_prob * (1 - stay_prob))).sum(), 39)


def test_sampler_one_step_transitions(sample):
    mask = sample.transition_mask
    sources, nexts = sample.states[:, :-1][mask], sample.states[:, 1:][mask]
    from_absorbing = sources == 39
    np.testing.assert_array_equal(nexts[from_absorbing], 39)
    steps = nexts[~from_absorbing] - sources[~from_absorbing]
    assert set(np.unique(steps)) == {0, 1}
    assert stay_pvalue(sources[~from_absorbing], steps == 0, 0.5) > LEVEL
    assert stay_pvalue(sources[~from_absorbing], steps == 0, 0.49) < POWER_LEVEL


def test_sampler_length_distribution(chain, sample):
    observed = np.bincount(sample.lengths, minlength=201)
    assert gof_pvalue(observed, chain.length_distribution()) > LEVEL
    assert gof_pvalue(observed, ChainMDP(stay_prob=0.48).length_distribution()) < POWER_LEVEL


def test_sampler_return_distribution(chain, sample):
    observed = np.bincount(reward_times(sample.rewards), minlength=201)
    assert gof_pvalue(observed, reward_time_probabilities(chain)) > LEVEL
    assert gof_pvalue(observed, reward_time_probabilities(ChainMDP(stay_prob=0.48))) < POWER_LEVEL
    times, returns = reward_times(sample.rewards), first_visit_returns(sample, chain.gamma, 40)[0]
    first = np.take_along_axis(returns, sample.states[:, :1], axis=1)[:, 0]
    np.testing.assert_allclose(first, np.where(times < 200, chain.gamma ** times, 0.0))


def test_monte_carlo_returns_estimate_the_exact_values(chain, sample):
    F, visited = first_visit_returns(sample, chain.gamma, 40)
    counts = visited.sum(axis=0)
    means = F.sum(axis=0) / counts
    errors = np.sqrt(((F - means) ** 2 * visited).sum(axis=0) / (counts - 1) / counts)
    V = chain.value_function()
    assert np.all(np.abs(means - V) <= 4 * errors + 1e-12)
    assert np.abs(means - V).max() > 0  # the check is not vacuous


def test_sampler_from_the_absorbing_state_and_to_an_absorbing_goal():
    mdp = ChainMDP(n_states=5, goal=4, start_distribution=np.eye(5)[4])
    sample = mdp.sample(10, np.random.default_rng(0))
    np.testing.assert_array_equal(sample.lengths, 1)
    np.testing.assert_array_equal(sample.states[:, :2], 4)
    assert sample.terminated.all() and not sample.rewards.any()
    paid = ChainMDP(n_states=5, goal=4, start_distribution=np.eye(5)[3]).sample(
        50, np.random.default_rng(1))
    np.testing.assert_array_equal(paid.rewards.sum(axis=1), 1.0)


def test_truncation():
    mdp = ChainMDP(n_states=30, stay_prob=0.9, horizon=5, start_distribution=np.eye(30)[0])
    sample = mdp.sample(100, np.random.default_rng(0))
    assert not sample.terminated.any() and np.all(sample.lengths == 5)
    assert np.all(sample.states >= 0)


def test_seeding(chain):
    a, b = (chain.sample(500, trial_generator(3, 0)) for _ in range(2))
    c = chain.sample(500, trial_generator(3, 1))
    for name in ("states", "rewards", "lengths", "terminated"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.states, c.states)


# --- Gymnasium environment ----------------------------------------------------------------

def rollouts(env: gymnasium.Env, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    lengths, times = np.empty(n, dtype=int), np.empty(n, dtype=int)
    for i in range(n):
        env.reset(seed=seed if i == 0 else None)
        t, times[i], done = 0, env.unwrapped.mdp.horizon, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(0)
            if reward:
                times[i] = t
            t, done = t + 1, terminated or truncated
        lengths[i] = t
    return lengths, times


def test_check_env():
    check_env(gymnasium.make(CHAIN_ID).unwrapped)
    check_env(ChainMDP(n_states=6, goal=5, horizon=4).as_env(), skip_render_check=True)


def test_registration_is_idempotent_and_takes_mdp_fields():
    importlib.reload(dprl.envs)
    env = gymnasium.make(CHAIN_ID, n_states=10, stay_prob=0.2)
    assert env.unwrapped.mdp == ChainMDP(n_states=10, stay_prob=0.2)
    assert env.observation_space == gymnasium.spaces.Discrete(10)
    assert env.action_space == gymnasium.spaces.Discrete(1)
    mdp = ChainMDP(n_states=4)
    assert gymnasium.make(CHAIN_ID, mdp=mdp).unwrapped.mdp is mdp


def test_env_matches_sampler_and_exact_model(chain, sample):
    lengths, times = rollouts(gymnasium.make(CHAIN_ID), 2000, seed=11)
    assert two_sample_pvalue(lengths, sample.lengths, chain.length_distribution()) > LEVEL
    time_probs = reward_time_probabilities(chain)
    assert two_sample_pvalue(times, reward_times(sample.rewards), time_probs) > LEVEL
    assert gof_pvalue(np.bincount(lengths, minlength=201), chain.length_distribution()) > LEVEL
    assert gof_pvalue(np.bincount(times, minlength=201), time_probs) > LEVEL
    slow_lengths, _ = rollouts(gymnasium.make(CHAIN_ID, stay_prob=0.6), 500, seed=12)
    slow_p = two_sample_pvalue(slow_lengths, sample.lengths, chain.length_distribution())
    assert slow_p < POWER_LEVEL


def test_env_truncates_and_terminates():
    env = ChainMDP(n_states=30, stay_prob=0.9, horizon=3).as_env()
    env.reset(seed=0, options={"start_state": 0})
    outcomes = [env.step(0) for _ in range(3)]
    assert [o[3] for o in outcomes] == [False, False, True] and not any(o[2] for o in outcomes)
    env.reset(options={"start_state": 29})
    assert env.step(0) == (29, 0.0, True, False, {})
    with pytest.raises(RuntimeError):
        env.step(0)
    env = ChainMDP(n_states=3, stay_prob=0.0, goal=2).as_env()
    env.reset(options={"start_state": 1})
    assert env.step(0) == (2, 1.0, True, False, {})


def test_env_seeding():
    env = gymnasium.make(CHAIN_ID)
    assert rollouts(env, 20, seed=5)[0].tolist() == rollouts(env, 20, seed=5)[0].tolist()


# --- bad inputs ---------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {"n_states": 1}, {"n_states": 40.0}, {"n_states": True}, {"stay_prob": 1.5},
    {"stay_prob": -0.1}, {"stay_prob": float("nan")}, {"gamma": 1.0}, {"gamma": -0.1},
    {"goal": 40}, {"goal": -1}, {"goal": 3.0}, {"horizon": 0}, {"horizon": 2.5},
    {"start_distribution": np.full(39, 1 / 39)}, {"start_distribution": np.full(40, 0.03)},
    {"start_distribution": np.r_[-0.1, 1.1, np.zeros(38)]},
])
def test_bad_chain_parameters(kwargs):
    with pytest.raises(ValueError):
        ChainMDP(**kwargs)


@pytest.mark.parametrize("shape", [0, -1, 2.5, (), (3, 0), True])
def test_bad_sample_sizes(chain, shape):
    with pytest.raises(ValueError):
        chain.sample(shape, np.random.default_rng(0))


def test_sampler_needs_a_generator(chain):
    with pytest.raises(ValueError, match="Generator"):
        chain.sample(5, 0)
    with pytest.raises(ValueError, match="horizon"):
        chain.finite_horizon_values(-1)
    with pytest.raises(ValueError, match="per_trajectory"):
        chain.expected_transition_counts("yes")


def test_bad_env_use():
    env = ChainEnv(n_states=5)
    with pytest.raises(RuntimeError):
        env.step(0)
    env.reset(seed=0)
    for action in (1, -1, 0.5):
        with pytest.raises(ValueError):
            env.step(action)
    for options in ({"start": 0}, {"start_state": 5}, {"start_state": 1.0}):
        with pytest.raises(ValueError):
            env.reset(options=options)
    with pytest.raises(ValueError):
        ChainEnv(ChainMDP(), n_states=3)
    with pytest.raises(ValueError):
        ChainEnv("chain")


# --- Trajectories validation --------------------------------------------------------------

def tiny(**changes):
    fields = dict(states=[[0, 1, 2], [1, 2, -1]], rewards=[[0.0, 1.0], [1.0, 0.0]],
                  lengths=[2, 1], terminated=[True, True], reward_range=(0.0, 1.0))
    fields.update(changes)
    fields["terminated"] = np.asarray(fields["terminated"])
    return Trajectories(**fields)


def test_trajectories_are_read_only_and_reshape():
    t = tiny()
    with pytest.raises(ValueError):
        t.states[0, 0] = 3
    assert t.reshape(2, 1).batch_shape == (2, 1) and t.horizon == 2
    np.testing.assert_array_equal(t.transition_mask, [[True, True], [True, False]])


@pytest.mark.parametrize("changes", [
    {"states": [[0.0, 1.0, 2.0], [1.0, 2.0, -1.0]]},  # floats are not silently truncated
    {"states": [[0, 1, -1], [1, 2, -1]]},  # -1 inside the trajectory
    {"states": [[0, 1, 2], [1, 2, 2]]},  # padding is not -1
    {"rewards": [[0.0, 1.5], [1.0, 0.0]]},  # outside the declared bound
    {"rewards": [[0.0, 1.0], [1.0, 0.5]]},  # padding is not 0
    {"rewards": [[0.0, np.nan], [1.0, 0.0]]},
    {"lengths": [2, 0]}, {"lengths": [3, 1]}, {"lengths": [2.0, 1.0]}, {"lengths": [2]},
    {"terminated": [1, 1]}, {"terminated": [True, False]},  # truncated before H
    {"reward_range": (1.0, 0.0)},
    {"states": np.zeros((0, 3), dtype=int), "rewards": np.zeros((0, 2)),
     "lengths": np.zeros(0, dtype=int), "terminated": np.zeros(0, dtype=bool)},
])
def test_bad_trajectories(changes):
    with pytest.raises(ValueError):
        tiny(**changes)


@pytest.mark.parametrize("kwargs", [{}, {"goal": 39}, {"n_states": 2},
                                    {"n_states": 12, "goal": 0, "stay_prob": 0.3, "gamma": 0.7},
                                    {"n_states": 9, "stay_prob": 1.0}, {"gamma": 0.0}])
def test_bidiagonal_solve_is_the_dense_solve_bit_for_bit(kwargs):
    """value_function's O(N) banded solve and expected_rewards' O(N) vector are the dense
    formulas' exact bits (committed results use these values as the truth)."""
    mdp = ChainMDP(**kwargs)
    rewards = (mdp.transition_matrix() * mdp.reward_matrix()).sum(axis=1)
    np.testing.assert_array_equal(mdp.expected_rewards(), rewards)
    dense = np.linalg.solve(np.eye(mdp.n_states) - mdp.gamma * mdp.live_matrix(), rewards)
    np.testing.assert_array_equal(mdp.value_function(), dense)


def test_value_function_of_a_long_chain_solves_its_recurrence():
    """N = 20000 (a dense solve would need a 3 GB matrix): V(s) = r(s) + gamma (p V(s) +
    (1 - p) V(s + 1)) on the live states, V(A) = 0, and the closed form."""
    mdp = ChainMDP(n_states=20_000, stay_prob=0.3, gamma=0.999)
    V, r, p, g = mdp.value_function(), mdp.expected_rewards(), mdp.stay_prob, mdp.gamma
    assert V.shape == (20_000,) and np.all(np.isfinite(V)) and V[-1] == 0
    live = np.arange(mdp.n_states - 2)
    np.testing.assert_allclose(V[live], r[live] + g * (p * V[live] + (1 - p) * V[live + 1]),
                               rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(V, closed_form_values(mdp), rtol=1e-9, atol=1e-300)


def _dense_time_state_probabilities(mdp: ChainMDP) -> np.ndarray:
    """The recursion M[t] = M[t - 1] @ P_live with the dense matrix (the committed bits)."""
    P = mdp.live_matrix()
    M = np.empty((mdp.horizon, mdp.n_states))
    M[0] = mdp.start_probabilities
    for t in range(1, mdp.horizon):
        M[t] = M[t - 1] @ P
    return M


def _random_chains(count: int, seed: int = 30):
    """Chains of 2 .. 70 states (every residue of N mod 4 and 8), random p, gamma, goals,
    horizons and start distributions, plus the defaults."""
    rng = np.random.default_rng(seed)
    yield ChainMDP()
    for n in rng.permutation(np.arange(2, 71))[:count]:
        n = int(n)
        yield ChainMDP(n_states=n, stay_prob=float(rng.choice([0.0, 1.0, 0.5, rng.random()])),
                       goal=int(rng.integers(0, n)), horizon=int(rng.integers(1, 80)),
                       gamma=float(rng.random()),
                       start_distribution=tuple(rng.dirichlet(np.ones(n))) if n % 2 else None)


def test_banded_recursions_are_the_dense_products_bit_for_bit():
    """time_state_probabilities, expected_visit_counts and length_distribution run in O(N H)
    on the bidiagonal chain, and give the dense products' exact bits (committed results
    use them); finite_horizon_values keeps the dense product (a banded one rounds
    differently) but forms gamma P once."""
    for mdp in _random_chains(40):
        M = _dense_time_state_probabilities(mdp)
        np.testing.assert_array_equal(mdp.time_state_probabilities(), M)
        np.testing.assert_array_equal(mdp.expected_visit_counts(), M.sum(axis=0))
        lengths = np.zeros(mdp.horizon + 1)
        lengths[1:] = M @ mdp.transition_matrix()[:, -1]
        lengths[-1] += (M[-1] @ mdp.live_matrix()).sum()
        np.testing.assert_array_equal(mdp.length_distribution(), lengths)
        V, r, P = np.zeros(mdp.n_states), mdp.expected_rewards(), mdp.live_matrix()
        for _ in range(mdp.horizon):
            V = r + mdp.gamma * P @ V
        np.testing.assert_array_equal(mdp.finite_horizon_values(), V)


def test_long_chain_costs_are_bounded():
    """N = 20000: the visit counts, on-policy distribution and length distribution are
    O(N H) (milliseconds; the dense recursions took minutes and gigabytes); the dense
    finite_horizon_values and state_visit_probabilities refuse sizes beyond their stated
    work, naming n_states, before allocating anything."""
    import time

    from dprl.envs.chain import MAX_VISIT_WORK

    mdp = ChainMDP(n_states=20_000, stay_prob=0.3)
    started = time.perf_counter()
    counts, on_policy = mdp.expected_visit_counts(), mdp.on_policy_distribution()
    lengths = mdp.length_distribution()
    assert time.perf_counter() - started < 10  # generous guard
    assert counts.shape == on_policy.shape == (20_000,) and on_policy.sum() == pytest.approx(1)
    assert lengths.shape == (201,) and lengths.sum() == pytest.approx(1) and lengths[0] == 0
    for method in ("finite_horizon_values", "state_visit_probabilities"):
        with pytest.raises(ValueError, match="n_states = 20000"):
            getattr(mdp, method)()
    with pytest.raises(ValueError, match="n_states = 800 with horizon = 200"):
        ChainMDP(n_states=800).state_visit_probabilities()   # 800^3 * 200 > MAX_VISIT_WORK
    assert 800**3 * 200 > MAX_VISIT_WORK >= 790**3 * 200
    with pytest.raises(ValueError, match="horizon = 1000000000"):
        ChainMDP(n_states=40, horizon=10**9).state_visit_probabilities()
    with pytest.raises(ValueError, match="n_states = 100 with horizon = 10000000"):
        ChainMDP(n_states=100).finite_horizon_values(10**7)
    with pytest.raises(ValueError, match="n_states = 9000"):
        ChainMDP(n_states=9000).finite_horizon_values(1)
