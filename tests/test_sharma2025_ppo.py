"""Batched PPO experts (dprl.sharma2025.ppo) and the PPO-vs-CEM agreement comparison
(dprl.experiments.sharma2025.ppo)."""

import numpy as np
import pytest
import torch

from dprl.determinism import deterministic_torch
from dprl.envs.cartpole import CartPoleVariants
from dprl.engine.batches import compute_trials
from dprl.experiments.sharma2025.ppo import (ACROBOT_EXPERTS_PPO, ACROBOT_PPO_AGREEMENT,
                                             CARTPOLE_EXPERTS_PPO, CARTPOLE_PPO_AGREEMENT,
                                             PPOComparisonConfig, agreement_comparison,
                                             cem_experts_of, demonstrations,
                                             replicated_release)
from dprl.seeding import trial_generators
from dprl.sharma2025.experts import ExpertPopulation
from dprl.sharma2025.ppo import (MLPPolicies, PPOSettings, gae, mlp_forward, n_parameters,
                                 ppo_loss, train_ppo_experts, unflatten)
from dprl.sharma2025.variants import DEFAULTS, variant_grid

deterministic_torch()


def test_gae_matches_the_discounted_sum_of_td_errors():
    """A_t = sum_l (gamma lam)^l delta_{t+l}, summed up to the end of the episode."""
    rng = np.random.default_rng(0)
    T, gamma, lam = 12, 0.9, 0.7
    rewards, values = rng.normal(size=(T, 3)), rng.normal(size=(T, 3))
    dones, last = rng.random((T, 3)) < 0.25, rng.normal(size=3)
    got = gae(rewards, values, dones, last, gamma, lam)
    following = np.vstack([values[1:], last])
    delta = rewards + gamma * (1 - dones) * following - values
    for j in range(3):
        for t in range(T):
            want, factor = 0.0, 1.0
            for s in range(t, T):
                want += factor * delta[s, j]
                if dones[s, j]:
                    break
                factor *= gamma * lam
            assert got[t, j] == pytest.approx(want, abs=1e-5)


def test_ppo_loss_matches_the_clipped_surrogate_per_agent():
    """Eq. 9 of Schulman et al. (2017) computed by hand in float64, agent by agent."""
    rng = np.random.default_rng(1)
    E, B, A, clip = 2, 16, 3, 0.2
    logits, values = rng.normal(size=(E, B, A)), rng.normal(size=(E, B))
    actions, old = rng.integers(0, A, (E, B)), rng.normal(-1.0, 0.3, (E, B))
    advantages, returns = rng.normal(size=(E, B)), rng.normal(size=(E, B))
    got = ppo_loss(*(torch.tensor(x) for x in (logits, values, actions, old, advantages,
                                               returns)), clip, 0.5, 0.01).numpy()
    for e in range(E):
        log_p = logits[e] - np.log(np.exp(logits[e]).sum(axis=1, keepdims=True))
        ratio = np.exp(log_p[np.arange(B), actions[e]] - old[e])
        adv = (advantages[e] - advantages[e].mean()) / (advantages[e].std(ddof=1) + 1e-8)
        surrogate = np.minimum(ratio * adv, np.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
        entropy = -(np.exp(log_p) * log_p).sum(axis=1).mean()
        want = -surrogate + 0.5 * ((returns[e] - values[e]) ** 2).mean() - 0.01 * entropy
        assert got[e] == pytest.approx(want, rel=1e-10)


def test_stacked_networks_have_torch_gradients_and_do_not_mix():
    """The portable stacked products differentiate as torch's own; agent 1's data do not
    reach agent 0's gradient."""
    rng = np.random.default_rng(2)
    sizes = [4, 5, 3, 2]
    params = rng.normal(size=(2, n_parameters(4, (5, 3), 2)))
    layers = [tuple(torch.tensor(t.numpy(), dtype=torch.float64, requires_grad=True)
                    for t in layer) for layer in unflatten(params, sizes)]
    x = torch.tensor(rng.normal(size=(2, 6, 4)))
    assert torch.autograd.gradcheck(lambda *flat: mlp_forward(
        list(zip(flat[0::2], flat[1::2])), x), [t for layer in layers for t in layer])
    first = torch.autograd.grad(mlp_forward(layers, x)[0].sum(), layers[0][0])[0]
    x2 = x.clone()
    x2[1] += 1.0
    second = torch.autograd.grad(mlp_forward(layers, x2)[0].sum(), layers[0][0])[0]
    assert torch.equal(first, second) and not first[1].any()


def _train(settings_index, ppo, seed=3):
    grid = {"gravity": np.array([9.8, 10.5]), "force_mag": np.array([10.0, 9.5]),
            "masscart": np.array([1.0, 1.2])}
    settings = {name: values[settings_index] for name, values in grid.items()}
    return train_ppo_experts(CartPoleVariants, 4, 2, settings,
                             trial_generators(seed, list(settings_index)), ppo,
                             DEFAULTS["CartPole"])


def test_ppo_reaches_the_cap():
    """RL Zoo's CartPole hyperparameters, 2 variants x 2 runs, 12 288 steps each: every kept
    expert balances the pole for 200 steps on its own variant and on the default one, from
    returns of about 20 at the start (the bits repeat: the smoke experiment's test)."""
    ppo = PPOSettings(runs=2, keep=1, timesteps=12_288, eval_episodes=5)
    out = _train([0, 1], ppo)
    assert out["parameters"].shape == (2, 1, n_parameters(4, ppo.hidden, 2))
    assert np.all(out["own_returns"] == 200) and np.all(out["default_returns"] == 200)
    assert np.nanmean(out["curves"][..., 0]) < 30


def test_a_setting_trains_to_the_same_bits_alone_and_in_a_batch():
    ppo = PPOSettings(hidden=(16, 16), runs=2, keep=1, timesteps=1024, n_epochs=2,
                      eval_episodes=2)
    both, alone = _train([0, 1], ppo), _train([1], ppo)
    for name, array in alone.items():
        np.testing.assert_array_equal(array[0], both[name][1], err_msg=name)


def test_smoke_experiment_repeats_its_bits_and_experts_plug_into_the_population_protocol():
    config = CARTPOLE_EXPERTS_PPO.config("smoke")
    first = compute_trials(CARTPOLE_EXPERTS_PPO, config, range(config.n_trials))
    second = compute_trials(CARTPOLE_EXPERTS_PPO, config, range(config.n_trials))
    for name, array in first.items():
        np.testing.assert_array_equal(array, second[name], err_msg=name)
    np.testing.assert_array_equal(first["setting_index"], [0, 500])
    experts = MLPPolicies(first["parameters"].reshape(6, -1), 4, config.ppo.hidden, 2)
    assert isinstance(experts, ExpertPopulation)
    obs = np.random.default_rng(4).normal(size=(1, 7, 4))
    greedy = experts.greedy_actions(obs)
    assert greedy.shape == (6, 7) and greedy.dtype == np.int64
    np.testing.assert_array_equal(experts.select([5, 0]).greedy_actions(obs),
                                  greedy[[5, 0]])


def test_acrobot_experts_train_on_their_own_variants_within_the_return_range():
    """The Acrobot population at smoke scale: 3 of 4 agents kept per setting, networks for 6
    observations and 3 actions, the grid's parameter values of settings 0 and 500, and
    returns of -1 per step until the goal, so in [-eval_horizon, 0]."""
    config = ACROBOT_EXPERTS_PPO.config("smoke")
    out = compute_trials(ACROBOT_EXPERTS_PPO, config, range(config.n_trials))
    assert out["parameters"].shape == (2, 3, n_parameters(6, config.ppo.hidden, 3))
    np.testing.assert_array_equal(out["setting_index"], [0, 500])
    for name, values in variant_grid("Acrobot").items():
        np.testing.assert_array_equal(out[f"setting_{name}"], values[[0, 500]])
    horizon = config.ppo.eval_horizon
    for name in ("own_returns", "default_returns", "candidate_returns"):
        assert np.all((out[name] >= -horizon) & (out[name] <= 0)), name
    kept = np.sort(out["candidate_returns"], axis=1)[:, ::-1][:, :3]
    np.testing.assert_array_equal(np.sort(out["own_returns"], axis=1)[:, ::-1], kept)


def _constant(actions):
    """Experts whose greedy action is fixed: zero weights, output biases one-hot."""
    size = n_parameters(4, (3,), 2)
    params = np.zeros((len(actions), size))
    params[np.arange(len(actions)), size - 2 + np.asarray(actions)] = 1.0
    return MLPPolicies(params, 4, (3,), 2)


def test_agreement_comparison_on_experts_with_known_agreement():
    """Unanimous experts agree everywhere (share 1); half always push left and half right:
    with p_min ~ 0 each trajectory follows its expert's action, so half agree (0.5)."""
    rng = np.random.default_rng(np.random.SeedSequence(5))
    out = agreement_comparison({"same": _constant([1] * 4), "split": _constant([0, 1] * 3)},
                               12, rng, lengths=(1, 5, 40), per_expert=3, p_min=1e-12)
    np.testing.assert_array_equal(out["same"], np.ones((12, 3)))
    np.testing.assert_array_equal(out["split"], np.full((12, 3), 0.5))


@pytest.mark.parametrize("experiment", [CARTPOLE_PPO_AGREEMENT, ACROBOT_PPO_AGREEMENT],
                         ids=lambda experiment: experiment.id)
def test_the_comparison_at_smoke_scale_measures_each_population_alone(experiment):
    """Trial 0 is PPO's, trial 1 CEM's; either recomputed alone gives the same bits."""
    config = experiment.config("smoke")
    both = compute_trials(experiment, config, range(2))
    assert both["agreement"].shape == (2, 8, 3) and both["stable"].shape == (2, 1, 1)
    assert np.all((both["agreement"] >= 0) & (both["agreement"] <= 1))
    alone = compute_trials(experiment, config, [1])
    for name, array in alone.items():
        np.testing.assert_array_equal(array[0], both[name][1], err_msg=name)
    assert cem_experts_of(np.array([0, 500]), scale="smoke", env=config.env).n_experts == 6


def test_the_demonstrations_are_recorded_on_the_populations_default_environment():
    """An Acrobot population's data come from the default Acrobot (6 observations, 3
    actions), CartPole's from CartPole (4, 2)."""
    rng = np.random.default_rng(np.random.SeedSequence(7))
    for env, (obs_dim, n_actions) in {"CartPole": (4, 2), "Acrobot": (6, 3)}.items():
        experts = cem_experts_of(np.array([0]), scale="smoke", env=env)
        observations, actions = demonstrations(experts, 2, 0.02, 30, rng, env).trajectory(0)
        assert observations.shape[1] == obs_dim and 0 <= actions.min() <= actions.max() < n_actions


def test_replicated_release_keeps_more_of_unanimous_experts():
    """3000 copies of one constant expert pass their prefixes up to the first p_min
    deviation (m h^k is above the threshold for k <= 39 at eps 10; the trajectories last
    ~10 steps); split half and half, (m / 2) h^k is above it only for k <= 4."""
    rng = np.random.default_rng(np.random.SeedSequence(6))
    same = replicated_release(_constant([1, 1, 1]), 1000, 10.0, 3, rng)
    split = replicated_release(_constant([0, 1]), 1500, 10.0, 3, rng)
    assert np.all(same > 25 * 6) and np.all(split <= 25 * 5) and np.all(split > 0)


@pytest.mark.parametrize("make, name", [
    (lambda: PPOSettings(minibatch=100), "minibatch"),
    (lambda: PPOSettings(keep=5), "keep"),
    (lambda: PPOSettings(gamma=1.5), "gamma"),
    (lambda: PPOSettings(hidden=(64, 0)), "hidden"),
    (lambda: PPOSettings(timesteps=100), "timesteps"),
    (lambda: MLPPolicies(np.zeros((2, 5)), 4, (3,), 2), "parameters"),
    (lambda: _constant([0, 1]).greedy_actions(np.zeros((3, 2, 4))), "observations"),
    (lambda: gae(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros(2), 0.9, 0.9),
     "dones"),
    (lambda: agreement_comparison({"a": _constant([0])}, 0,
                                  np.random.default_rng(np.random.SeedSequence(0))),
     "n_trajectories"),
    (lambda: agreement_comparison({"a": _constant([0])}, 1, np.random.RandomState(0)), "rng"),
    (lambda: agreement_comparison({}, 1, np.random.default_rng(0)), "populations"),
    (lambda: cem_experts_of(np.array([5]), scale="smoke"), "settings"),
    (lambda: PPOComparisonConfig(n_trials=3, root_seed=0, env="CartPole",
                                 experts_scale="smoke", n_trajectories=8), "n_trials"),
    (lambda: PPOComparisonConfig(n_trials=2, root_seed=0, env="CartPole", experts_scale="big",
                                 n_trajectories=8), "experts_scale"),
    (lambda: PPOComparisonConfig(n_trials=2, root_seed=0, env="HIV", experts_scale="smoke",
                                 n_trajectories=8), "env"),
    (lambda: cem_experts_of(np.array([0]), scale="smoke", env="HIV"), "env"),
    (lambda: replicated_release(_constant([0]), 10, 5.0, 1,
                                np.random.default_rng(np.random.SeedSequence(0))), "eps"),
    (lambda: replicated_release(_constant([0]), 0, 10.0, 1,
                                np.random.default_rng(np.random.SeedSequence(0))), "replicas"),
])
def test_bad_arguments_are_refused_by_name(make, name):
    with pytest.raises(ValueError, match=name):
        make()
