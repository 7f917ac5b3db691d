"""The HIV treatment simulator (Ernst et al. 2006, model of Adams et al. 2004): the model's
fixed points, the vectorised integrator against scipy's LSODA and BDF, the batch simulator,
the sanity returns and the Gymnasium environment."""

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from scipy.optimize import root

from dprl.envs.hiv import ERNST_ACTIONS, HIVEpisodes, HIVTreatmentEnv, HIVTreatmentMDP
from dprl.envs.benchmarks import _previous_invert, previous_hiv_integrator
from dprl.envs.hiv_model import (_NONZERO, HEALTHY_STEADY_STATE, UNHEALTHY_STEADY_STATE,
                                 HIVConstants, _invert, _log_jacobian, _rates, derivatives,
                                 fixed_point, integrate, integrate_reference, jacobian)

NO_DRUG = np.zeros((1, 2))
TEST_ID = "dprl-test/HIVTreatment-v0"


def uniform_policy(observations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(4, size=observations.shape[0])


@pytest.fixture(scope="module")
def random_episodes() -> HIVEpisodes:
    """64 patients, 200 steps of 5 days, uniformly random actions."""
    return HIVTreatmentMDP().simulate(uniform_policy, 64, np.random.default_rng(7))


def visited(episodes: HIVEpisodes, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` states drawn from the episodes, each with random efficacies of an action."""
    rng = np.random.default_rng(seed)
    states = episodes.states[:, :-1].reshape(-1, 6)
    return states[rng.choice(len(states), n, replace=False)], \
        np.array(ERNST_ACTIONS)[rng.integers(4, size=n)]


# --- the model ------------------------------------------------------------------------------

@pytest.mark.parametrize("published", [UNHEALTHY_STEADY_STATE, HEALTHY_STEADY_STATE])
@pytest.mark.parametrize("constants, is_fixed", [(HIVConstants(), True),
                                                 (HIVConstants(k1=8.4e-7), False)])
def test_published_steady_states_are_the_rounded_fixed_points(published, constants, is_fixed):
    """Newton from the published (rounded) state finds a drug-free fixed point that rounds to
    it, component by component; a 5% change of k1 moves the fixed points away."""
    def log_rhs(y):
        x = np.exp(y)[None]
        return derivatives(x, NO_DRUG, constants)[0] / x[0]

    def log_jacobian(y):
        x = np.exp(y)
        return (jacobian(x[None], NO_DRUG, constants)[0] * x[None, :] / x[:, None]
                - np.diag(log_rhs(y)))

    solution = root(log_rhs, np.log(published), jac=log_jacobian, tol=1e-14)
    rounds_to_published = solution.success and np.all(
        np.abs(np.exp(solution.x) - published) <= 0.5)
    assert rounds_to_published == is_fixed


@pytest.mark.parametrize("published", [UNHEALTHY_STEADY_STATE, HEALTHY_STEADY_STATE])
def test_steady_states_stay_put_without_drugs(published):
    """1000 days without drugs move no component by more than 2% (the published values are
    rounded, so they are not exact fixed points)."""
    x = np.array([published])
    assert np.all(np.abs(integrate(x, NO_DRUG, 1000.0) / x - 1) < 0.02)


def test_jacobian_matches_finite_differences(random_episodes):
    states, efficacies = visited(random_episodes, 20, seed=1)
    J = jacobian(states, efficacies)
    for j in range(6):
        step = np.zeros_like(states)
        step[:, j] = 1e-5 * states[:, j]
        difference = (derivatives(states + step, efficacies)
                      - derivatives(states - step, efficacies)) / (2 * step[:, j:j + 1])
        scale = np.abs(J).max(axis=2) + 1e-300
        assert np.all(np.abs(difference - J[:, :, j]) <= 1e-6 * scale)


def test_constants_are_validated():
    for bad in ({"k1": -1.0}, {"f": 1.5}, {"k_b": 0.0}, {"c": float("nan")}, {"delta": True},
                {"n_t": "100"}):
        with pytest.raises(ValueError):
            HIVConstants(**bad)


def test_inputs_are_validated():
    good = np.array([UNHEALTHY_STEADY_STATE])
    with pytest.raises(ValueError, match="states must be > 0"):
        integrate(good * np.array([1, 1, 1, 1, 0, 1]), NO_DRUG, 5.0)
    with pytest.raises(ValueError, match="efficacies must lie in"):
        integrate(good, np.array([[1.2, 0.0]]), 5.0)
    with pytest.raises(ValueError, match="shape"):
        integrate(good, np.zeros((2, 2)), 5.0)
    with pytest.raises(ValueError, match="days"):
        integrate(good, NO_DRUG, 0.0)


def _patterned(matrices: np.ndarray) -> np.ndarray:
    """``matrices`` ``(6, 6, N)`` with the entries outside the Jacobian's pattern zeroed."""
    mask = np.zeros((6, 6), dtype=bool)
    for i, j in _NONZERO:
        mask[i, j] = True
    return np.where(mask[:, :, None], matrices, 0.0)


def test_invert_pivots_where_the_diagonal_fails():
    """The diagonal Gauss-Jordan path and its LAPACK fallback (a zero pivot: rows 0 and 4
    swapped), and NaN for a singular matrix, on matrices with the Jacobian's pattern."""
    rng = np.random.default_rng(3)
    A = _patterned(np.eye(6)[:, :, None] + 0.1 * rng.normal(size=(6, 6, 5)))
    A[:, :, 1] = np.eye(6)
    A[[0, 4], [0, 4], 1], A[[0, 4], [4, 0], 1] = 0.0, 1.0
    inverse = _invert(A)
    assert np.allclose(np.einsum("ijn,jkn->ikn", A, inverse), np.eye(6)[:, :, None],
                       atol=1e-12)
    assert np.all(np.isnan(_invert(np.zeros((6, 6, 1)))))


def test_pattern_holds_every_nonzero_of_the_jacobian(random_episodes):
    """The structural zeros that the integrator skips are zeros of the Jacobian at every
    visited state and action; the pattern's entries are nonzero there."""
    states, efficacies = visited(random_episodes, 500, seed=4)
    J = jacobian(states, efficacies)
    nonzero = np.zeros((6, 6), dtype=bool)
    nonzero[tuple(np.array(_NONZERO).T)] = True
    assert np.all(J[:, ~nonzero] == 0)
    assert np.all(np.any(J != 0, axis=0)[nonzero])


def test_sparse_elimination_and_integrator_are_the_previous_ones_bit_for_bit(random_episodes):
    """Gauss-Jordan skipping the structural zeros gives the dense elimination's bits on the
    iteration matrices I - h J of visited states (several h, some past the pivot guard), and
    the integrator its previous implementation's (bench hiv-integrator-speed's reference)."""
    states, efficacies = visited(random_episodes, 200, seed=5)
    y = np.log(states).T
    rates = _rates(efficacies, HIVConstants())
    _, Jg = _log_jacobian(y, rates, HIVConstants())
    h = np.geomspace(1e-3, 50.0, 7)[:, None, None]
    W = np.moveaxis(np.eye(6)[None, :, :, None] - h[..., None] * Jg[None], 0, 2)
    W = W.reshape(6, 6, -1)
    assert np.array_equal(_invert(W).view(np.int64), _previous_invert(W).view(np.int64))
    plan = random_episodes.actions[:40, :3]
    current = HIVTreatmentMDP().simulate_actions(plan).observations
    with previous_hiv_integrator():
        previous = HIVTreatmentMDP().simulate_actions(plan).observations
    assert np.array_equal(current.view(np.int64), previous.view(np.int64))


# --- the integrator against scipy ----------------------------------------------------------

@pytest.mark.parametrize("method, days, n", [("LSODA", 5.0, 30), ("BDF", 5.0, 12),
                                             ("LSODA", 20.0, 12), ("BDF", 20.0, 6)])
def test_one_step_matches_scipy(random_episodes, method, days, n):
    """From states visited under random policies, one step agrees with solve_ivp (rtol 1e-10)
    to 1e-6 relative in every component (measured: about 1e-8)."""
    states, efficacies = visited(random_episodes, n, seed=int(days))
    ours = integrate(states, efficacies, days)
    reference = integrate_reference(states, efficacies, days, method=method)
    assert np.max(np.abs(ours / reference - 1)) <= 1e-6


def test_whole_episode_matches_lsoda(random_episodes):
    """A 200-step episode under random actions stays within 1e-4 (relative, every component
    and step) of the LSODA episode with the same actions (measured: about 5e-8)."""
    reference = HIVTreatmentMDP().simulate_actions_reference(random_episodes.actions[:1])
    assert np.max(np.abs(random_episodes.states[:1] / reference.states - 1)) <= 1e-4
    assert np.allclose(random_episodes.rewards[:1], reference.rewards, rtol=1e-4)


def test_random_policies_stay_finite(random_episodes):
    assert random_episodes.observations.shape == (64, 201, 6)
    assert np.all(np.isfinite(random_episodes.observations))
    assert np.all((random_episodes.observations > -5) & (random_episodes.observations < 8))


def test_twenty_day_steps_stay_finite():
    """Sharma et al. (2025)'s variant: 50 steps of 20 days under random actions."""
    mdp = HIVTreatmentMDP.sharma2025()
    episodes = mdp.simulate(uniform_policy, 32, np.random.default_rng(8))
    assert episodes.observations.shape == (32, 51, 6)
    assert np.all(np.isfinite(episodes.observations))
    assert np.all(np.isfinite(episodes.rewards))


# --- the MDP ---------------------------------------------------------------------------------

def test_sanity_returns():
    """Discounted returns of the four constant treatments over 200 steps of 5 days from the
    unhealthy steady state (reward at the post-step state, gamma^0 on the first): no drug
    about 8.4e5 and both drugs about 2.0e6, as in the independent re-implementation."""
    mdp = HIVTreatmentMDP()
    plan = np.repeat(np.arange(4)[:, None], mdp.horizon, axis=1)
    returns = mdp.simulate_actions(plan).discounted_returns(mdp.gamma)
    assert returns[0] == pytest.approx(8.4e5, rel=0.05)
    assert returns[3] == pytest.approx(2.0e6, rel=0.05)
    assert np.allclose(returns, [844_299.8, 984_064.4, 1_007_377.7, 2_003_788.5], rtol=1e-6)


def test_reward_is_taken_at_the_post_step_state():
    mdp = HIVTreatmentMDP(drug_penalties=(1.0, 2.0), virus_weight=3.0, effector_weight=4.0)
    states = np.array([[1.0, 1.0, 1.0, 1.0, 10.0, 100.0]] * 4)
    expected = -30.0 + 400.0 - np.array([0.0, 0.49, 0.18, 0.67])
    assert np.allclose(mdp.rewards(states, np.arange(4)), expected)
    next_states, rewards = mdp.step(mdp.initial_states(4), np.arange(4))
    assert np.allclose(rewards, mdp.rewards(next_states, np.arange(4)))


def test_simulate_is_deterministic_and_batch_independent():
    """Randomness comes only from the generator; a patient's trajectory does not depend on
    the other patients in the batch."""
    mdp = HIVTreatmentMDP(horizon=15)
    first = mdp.simulate(uniform_policy, 6, np.random.default_rng(5))
    second = mdp.simulate(uniform_policy, 6, np.random.default_rng(5))
    assert np.array_equal(first.observations, second.observations)
    assert np.array_equal(first.actions, second.actions)
    alone = mdp.simulate_actions(first.actions[2:3])
    assert np.allclose(alone.observations[0], first.observations[2], rtol=0, atol=1e-9)


def test_policy_outputs_are_checked():
    mdp = HIVTreatmentMDP(horizon=2)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="actions"):
        mdp.simulate(lambda obs, _: np.zeros(obs.shape[0] + 1, dtype=int), 3, rng)
    with pytest.raises(ValueError, match="actions must lie"):
        mdp.simulate(lambda obs, _: np.full(obs.shape[0], 4), 3, rng)
    with pytest.raises(ValueError, match="integer"):
        mdp.simulate(lambda obs, _: np.zeros(obs.shape[0]), 3, rng)
    with pytest.raises(ValueError, match="Generator"):
        mdp.simulate(uniform_policy, 3, np.random.RandomState(0))


@pytest.mark.parametrize("bad", [
    {"step_days": 0.0}, {"horizon": 0}, {"horizon": 2.0}, {"gamma": 1.5},
    {"drug_penalties": (-1.0, 0.0)}, {"drug_penalties": (1.0,)}, {"virus_weight": -0.1},
    {"actions": ((0.0, 1.2),)}, {"actions": (0.0, 0.3)}, {"initial_state": (1.0,) * 5},
    {"initial_state": (1.0, 1.0, 0.0, 1.0, 1.0, 1.0)}, {"tol": 0.0}, {"tol": 0.01},
    {"constants": {"k1": 1e-6}}])
def test_mdp_fields_are_validated(bad):
    with pytest.raises(ValueError):
        HIVTreatmentMDP(**bad)


def test_sharma_variant():
    mdp = HIVTreatmentMDP.sharma2025(drug_penalties=(18750.0, 2150.0))
    assert (mdp.step_days, mdp.horizon, mdp.drug_penalties) == (20.0, 50, (18750.0, 2150.0))


def test_episodes_are_validated_and_read_only():
    episodes = HIVEpisodes(np.zeros((2, 3, 6)), np.zeros((2, 2), dtype=int), np.ones((2, 2)))
    assert np.allclose(episodes.discounted_returns(0.5), 1.5)
    with pytest.raises(ValueError):
        episodes.rewards[0, 0] = 1.0
    with pytest.raises(ValueError):
        HIVEpisodes(np.zeros((2, 3, 6)), np.zeros((2, 2)), np.ones((2, 2)))


# --- the Gymnasium environment ---------------------------------------------------------------

def test_env_passes_the_checker_directly_and_registered():
    check_env(HIVTreatmentEnv(horizon=5), skip_render_check=True)
    if TEST_ID not in gymnasium.registry:
        gymnasium.register(id=TEST_ID, entry_point="dprl.envs.hiv:HIVTreatmentEnv")
    env = gymnasium.make(TEST_ID, step_days=20.0, horizon=5)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.unwrapped.mdp == HIVTreatmentMDP(step_days=20.0, horizon=5)


def test_env_matches_the_batch_simulator_and_truncates():
    env = HIVTreatmentEnv(HIVTreatmentMDP(horizon=4))
    observation, info = env.reset(seed=0)
    assert np.allclose(observation, np.log10(UNHEALTHY_STEADY_STATE))
    plan = [3, 0, 1, 2]
    steps = [env.step(a) for a in plan]
    assert [s[3] for s in steps] == [False, False, False, True]
    assert not any(s[2] for s in steps)
    episodes = env.mdp.simulate_actions(np.array([plan]))
    assert np.allclose([s[0] for s in steps], episodes.observations[0, 1:], rtol=0, atol=1e-9)
    assert np.allclose([s[1] for s in steps], episodes.rewards[0], rtol=1e-9)
    with pytest.raises(RuntimeError):
        env.step(0)


def test_env_rejects_bad_arguments():
    with pytest.raises(ValueError):
        HIVTreatmentEnv(HIVTreatmentMDP(), horizon=3)
    with pytest.raises(ValueError):
        HIVTreatmentEnv(mdp="default")
    env = HIVTreatmentEnv()
    env.reset()
    with pytest.raises(ValueError):
        env.step(4)
    with pytest.raises(ValueError):
        env.reset(options={"state": UNHEALTHY_STEADY_STATE})


@pytest.mark.parametrize("published", [UNHEALTHY_STEADY_STATE, HEALTHY_STEADY_STATE])
def test_fixed_point_rounds_to_the_published_steady_state_and_zeroes_the_derivatives(published):
    x = fixed_point(published)
    assert np.all(np.abs(x - published) <= 0.5)
    assert np.all(np.abs(derivatives(x[None], NO_DRUG)[0]) <= 1e-9 * x)
    with pytest.raises(ValueError, match="> 0"):
        fixed_point([1.0, 1.0, 1.0, 1.0, 1.0, 0.0])
