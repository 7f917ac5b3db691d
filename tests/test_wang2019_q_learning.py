"""Algorithm 1 of Wang & Hegde (2019) (dprl.wang2019.q_learning): the batched numpy
implementation against a plain one-run PyTorch DQN that adds the noise where Alg. 1 says,
acting on network + path, the reset schedule, batch invariance, determinism, tabular
Q-learning reaching the dynamic-programming optimum, and input checks."""

import copy
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional

import dprl.wang2019.q_learning as ql
from dprl.envs.line_mdp import LineMDP
from dprl.seeding import trial_generator, trial_generators
from dprl.wang2019.q_functions import MLPQ, LinearQ, tabular_q
from dprl.wang2019.q_learning import (AUTHORS_DQN, QLearningConfig, evaluate_greedy, sweep,
                                      train)
from dprl.wang2019 import run_paths
from dprl.wang2019.run_paths import RunPaths

#: Optimal expected return of a 50-step episode (tests/test_line_mdp.py).
OPTIMAL_RETURN = 20.70833
SHORT = LineMDP(horizon=10)
SMALL = QLearningConfig(n_episodes=8, batch_size=16, replay_capacity=40, epsilon_decay=20.0,
                        target_update_episodes=3, reset_period=15)
STREAMS = ("init", "env", "explore", "replay", "noise", "target_noise")


class FakePaths:
    """A deterministic stand-in for RunPaths: g_a(x) = sigma sin(7 x + 2 a + phase + 1.3 k),
    k the number of refreshes, phase one draw from the run's noise stream. Its values do not
    depend on the order of queries, so any implementation of Alg. 1 must reproduce them."""

    def __init__(self, sigmas, beta, rngs, n_paths):
        self.sigmas, self.n_paths, self.k = np.asarray(sigmas), n_paths, -1
        self.phase = np.array([rng.random() for rng in rngs])

    def value(self, points):
        points = np.asarray(points)
        extra = (1,) * (points.ndim - 1)
        angle = (7 * points[..., None] + 2 * np.arange(self.n_paths)
                 + self.phase.reshape((-1,) + extra + (1,)) + 1.3 * self.k)
        return self.sigmas.reshape((-1,) + extra + (1,)) * np.sin(angle)

    def refresh(self, points):
        self.k += 1
        return self.value(points)

    extend = __call__ = value
    n_points = property(lambda self: np.zeros(self.sigmas.size, dtype=np.int64))


def reference_dqn(config, sigma, rng, mdp):
    """Algorithm 1 with the authors' DQN, one run, in plain PyTorch (float64): the noise
    g (FakePaths) added to Q for acting, the target and the residual."""
    streams = dict(zip(STREAMS, rng.spawn(len(STREAMS))))
    params = MLPQ().init(streams["init"])
    net = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                        nn.Linear(16, 2)).double()
    with torch.no_grad():
        for layer, weight, bias in zip(net[::2], params[::2], params[1::2]):
            layer.weight.copy_(torch.from_numpy(weight))
            layer.bias.copy_(torch.from_numpy(bias))
    target = copy.deepcopy(net) if config.target_update_episodes else net
    optimizer = (torch.optim.RMSprop(net.parameters(), lr=config.learning_rate,
                                     alpha=config.rmsprop_alpha, eps=config.rmsprop_eps)
                 if config.optimizer == "rmsprop"
                 else torch.optim.SGD(net.parameters(), lr=config.learning_rate))
    noise = FakePaths([sigma], 1.0, [streams["noise"]], 2) if sigma > 0 else None
    target_noise = noise if config.target_noise == "shared" or noise is None else FakePaths(
        [sigma], 1.0, [streams["target_noise"]], 2)

    def g(path, states):
        return np.zeros((len(states), 2)) if path is None else path.value([states])[0]

    memory, returns, step = [], [], 0
    for episode in range(config.n_episodes):
        uniforms = streams["env"].random(mdp.horizon + 1)
        explore_u = streams["explore"].random(mdp.horizon)
        explore_a = streams["explore"].integers(0, 2, mdp.horizon)
        state, total = uniforms[0], 0.0
        for t in range(mdp.horizon):
            if step % config.reset_period == 0:
                for path in {id(p): p for p in (noise, target_noise) if p}.values():
                    path.refresh(np.zeros((1, 0)))
            with torch.no_grad():
                q = net(torch.tensor([[state]], dtype=torch.float64))[0].numpy() + g(noise, [state])[0]
            action = (int(explore_a[t]) if explore_u[t] < config.epsilon(step)
                      else int(np.argmax(q)))
            next_state, reward = mdp.transition(np.array(state), np.array(action),
                                                np.array(uniforms[t + 1]))
            done = t == mdp.horizon - 1 and not config.bootstrap_truncation
            memory.append((state, action, float(reward), float(next_state), done))
            total += float(reward)
            if len(memory) >= config.batch_size:
                window = memory[-config.replay_capacity:]
                rows = streams["replay"].choice(len(window), config.batch_size, replace=False)
                sgd_step(config, net, target, optimizer, [window[i] for i in rows],
                         lambda x: g(noise, x), lambda x: g(target_noise, x))
            state, step = float(next_state), step + 1
        returns.append(total)
        if config.target_update_episodes and episode % config.target_update_episodes == 0:
            target.load_state_dict(net.state_dict())
    return np.array(returns), [p.detach().numpy() for p in net.parameters()]


def sgd_step(config, net, target, optimizer, batch, g, g_target):
    """Alg. 1 lines 19-22 on a replay batch, as in the authors' optimize_model()."""
    s, a, r, s_next, done = (np.array(column) for column in zip(*batch))
    rows = np.arange(len(batch))
    q = net(torch.from_numpy(s)[:, None]).gather(1, torch.from_numpy(a)[:, None])[:, 0]
    q = q + torch.from_numpy(g(s)[rows, a])
    with torch.no_grad():
        q_next = target(torch.from_numpy(s_next)[:, None]) + torch.from_numpy(g_target(s_next))
        y = torch.from_numpy(r) + config.gamma * torch.where(
            torch.from_numpy(done), 0.0, q_next.max(dim=1).values)
    loss = (functional.smooth_l1_loss(q, y) if config.loss == "huber"
            else 0.5 * ((q - y) ** 2).mean())
    optimizer.zero_grad()
    loss.backward()
    if config.grad_clip is not None:
        for parameter in net.parameters():
            parameter.grad.clamp_(-config.grad_clip, config.grad_clip)
    optimizer.step()


@pytest.mark.parametrize("config", [
    SMALL,
    QLearningConfig(n_episodes=8, batch_size=16, replay_capacity=40, epsilon_decay=20.0,
                    target_update_episodes=None, reset_period=7, target_noise="separate",
                    loss="squared", optimizer="sgd", learning_rate=0.05, grad_clip=None,
                    bootstrap_truncation=True, gamma=0.9),
])
def test_matches_a_plain_pytorch_dqn_with_noise_where_algorithm_1_adds_it(monkeypatch, config):
    monkeypatch.setattr(run_paths, "RunPaths", FakePaths)
    sigmas = [0.0, 0.7]
    result = train(MLPQ(), config, sigmas, trial_generators(11, 2), SHORT)
    for run, sigma in enumerate(sigmas):
        returns, params = reference_dqn(config, sigma, trial_generator(11, run), SHORT)
        np.testing.assert_allclose(result.returns[run], returns, rtol=0, atol=1e-9)
        for ours, theirs in zip(result.released.params, params):
            np.testing.assert_allclose(ours[run], theirs, rtol=0, atol=1e-9)
    assert result.n_updates == 8 * 10 - 15
    assert not np.allclose(result.released_q[1], result.network_q[1])
    np.testing.assert_array_equal(result.released_q[0], result.network_q[0])


def test_acting_is_greedy_in_network_plus_path():
    config = QLearningConfig(n_episodes=4, batch_size=64, replay_capacity=64,
                             epsilon_start=0.0, epsilon_end=0.0, reset_period=40)
    result = train(MLPQ(), config, [3.0, 0.0], trial_generators(4, 2), SHORT)
    states = result.states[:, :, :-1].reshape(2, -1)
    network = MLPQ().forward(result.released.params, states)[0]  # no update was made
    noisy = result.released(states)  # the path (never reset) returns its stored values
    np.testing.assert_array_equal(result.actions.reshape(2, -1), np.argmax(noisy, axis=2))
    assert np.any(np.argmax(network[0], axis=1) != result.actions[0].ravel())
    np.testing.assert_array_equal(noisy[1], network[1])


class CountingPaths(RunPaths):
    """RunPaths recording its refreshes (number of points) and extensions in order."""

    calls: list = []

    def refresh(self, points):
        CountingPaths.calls.append(np.shape(points)[1])
        return super().refresh(points)

    def extend(self, points):
        CountingPaths.calls.append("extend")
        return super().extend(points)


def test_fresh_paths_every_reset_period(monkeypatch):
    monkeypatch.setattr(run_paths, "RunPaths", CountingPaths)
    CountingPaths.calls = []
    config = QLearningConfig(n_episodes=5, batch_size=8, replay_capacity=20, reset_period=12)
    result = train(MLPQ(), config, [0.5], trial_generators(2, 1), SHORT, grid=[0.5])
    calls = CountingPaths.calls[1:]  # after the refresh of the constructor
    refreshes = [i for i, call in enumerate(calls) if call != "extend"]
    assert result.n_resets == len(refreshes) == math.ceil(50 / 12)
    # steps 0, 12, 24, 36, 48: every state the buffer (last 20 transitions) can return
    assert [calls[i] for i in refreshes] == [0, 24, 38, 38, 38]
    # two extensions a step (the state acted in, the next state), one for the grid point
    assert np.diff(refreshes + [len(calls)]).tolist() == [25, 25, 25, 25, 2 * 2 + 1 + 1]


def test_noise_points_count_the_states_of_the_current_paths():
    """After a reset the paths hold every state the buffer can return; then each step adds
    the state acted in and the next state (Alg. 1 lines 7-8 and 14-18)."""
    config = QLearningConfig(n_episodes=6, batch_size=8, replay_capacity=20, reset_period=12)
    result = train(MLPQ(), config, [0.0, 0.5], trial_generators(4, 2), SHORT)
    steps = config.n_episodes * SHORT.horizon
    states = result.states[:, :, :-1].reshape(2, steps)
    following = result.states[:, :, 1:].reshape(2, steps)
    assert np.all(result.noise_points[0] == 0)
    for step in range(steps):
        reset = step - step % config.reset_period
        first = max(0, reset + 1 - config.replay_capacity)  # what a batch can return
        held = np.concatenate([states[1, first:step + 1], following[1, first:step + 1]])
        assert result.noise_points[1, step] == np.unique(held).size


def test_separate_target_paths_reset_together(monkeypatch):
    monkeypatch.setattr(run_paths, "RunPaths", CountingPaths)
    CountingPaths.calls = []
    config = QLearningConfig(n_episodes=2, batch_size=8, reset_period=10,
                             target_noise="separate")
    result = train(MLPQ(), config, [0.5, 1.0], trial_generators(2, 2), SHORT)
    assert result.n_resets == 2
    assert sum(call != "extend" for call in CountingPaths.calls) == 2 * (1 + 2)


def test_runs_do_not_depend_on_the_batch():
    batch = train(MLPQ(), SMALL, [0.5, 0.0, 1.0], trial_generators(3, 3), SHORT)
    for run in (0, 2):
        alone = train(MLPQ(), SMALL, [batch.sigmas[run]], [trial_generator(3, run)], SHORT)
        for field in ("returns", "states", "actions", "released_q", "network_q"):
            np.testing.assert_array_equal(getattr(alone, field)[0], getattr(batch, field)[run])


def test_same_seed_same_result():
    first = sweep(MLPQ(), SMALL, [0.0, 0.4], [0, 5], 7, SHORT)
    second = sweep(MLPQ(), SMALL, [0.0, 0.4], [0, 5], 7, SHORT)
    np.testing.assert_array_equal(first.returns, second.returns)
    np.testing.assert_array_equal(first.released_q, second.released_q)
    np.testing.assert_array_equal(first.sigmas, [0.0, 0.0, 0.4, 0.4])
    assert first.states[0, 0, 0] == first.states[2, 0, 0]  # common random numbers


def test_tabular_q_learning_reaches_the_optimum():
    config = QLearningConfig(n_episodes=40, batch_size=32, gamma=0.9, optimizer="sgd",
                             learning_rate=0.5, loss="squared", grad_clip=None,
                             target_update_episodes=None)
    result = train(tabular_q(10), config, np.zeros(2), trial_generators(1, 2))
    greedy = np.argmax(result.released_q, axis=2)
    toward_centre = (result.grid > 0.5).astype(int)
    assert np.all(greedy[:, result.grid != 0.5] == toward_centre[result.grid != 0.5])
    returns = evaluate_greedy(result.released, 400, trial_generators(2, 2))
    np.testing.assert_allclose(returns, OPTIMAL_RETURN, atol=0.15)


def test_linear_features_and_noisy_evaluation():
    features = LinearQ(lambda s: np.stack([np.ones_like(s), s, s * s], axis=-1), 3)
    config = QLearningConfig(n_episodes=3, batch_size=16)
    result = train(features, config, [0.0, 0.3], trial_generators(6, 2))
    assert result.released_q.shape == (2, 101, 2) and result.returns.shape == (2, 3)
    first = evaluate_greedy(result.released, 20, trial_generators(8, 2))
    second = evaluate_greedy(result.released, 20, trial_generators(8, 2))
    np.testing.assert_array_equal(first, second)
    grid = np.broadcast_to(result.grid, (2, result.grid.size))
    np.testing.assert_array_equal(result.released(grid), result.released_q)


def test_authors_setting():
    assert (AUTHORS_DQN.n_episodes, AUTHORS_DQN.batch_size, AUTHORS_DQN.gamma,
            AUTHORS_DQN.replay_capacity, AUTHORS_DQN.target_update_episodes,
            AUTHORS_DQN.reset_period) == (100, 128, 0.999, 10_000, 10, 50)
    assert AUTHORS_DQN.epsilon(0) == pytest.approx(0.9)
    assert AUTHORS_DQN.epsilon(200) == pytest.approx(0.05 + 0.85 / math.e)


@pytest.mark.parametrize("call", [
    lambda: QLearningConfig(batch_size=0),
    lambda: QLearningConfig(batch_size=200, replay_capacity=100),
    lambda: QLearningConfig(gamma=1.5),
    lambda: QLearningConfig(learning_rate=0.0),
    lambda: QLearningConfig(loss="l1"),
    lambda: QLearningConfig(optimizer="adam"),
    lambda: QLearningConfig(target_noise="none"),
    lambda: QLearningConfig(grad_clip=-1.0),
    lambda: QLearningConfig(reset_period=0),
    lambda: QLearningConfig(target_update_episodes=0),
    lambda: QLearningConfig(bootstrap_truncation=1),
    lambda: MLPQ(hidden=(0,)),
    lambda: tabular_q(0),
    lambda: LinearQ("features", 3),
    lambda: train(MLPQ(), SMALL, [-0.1], trial_generators(0, 1), SHORT),
    lambda: train(MLPQ(), SMALL, [0.1, 0.2], trial_generators(0, 1), SHORT),
    lambda: train(MLPQ(), SMALL, [0.1], [np.random.RandomState(0)], SHORT),
    lambda: train("mlp", SMALL, [0.1], trial_generators(0, 1), SHORT),
    lambda: train(MLPQ(), {}, [0.1], trial_generators(0, 1), SHORT),
    lambda: train(MLPQ(), SMALL, [0.1], trial_generators(0, 1), SHORT, grid=[1.5]),
    lambda: sweep(MLPQ(), SMALL, [0.1], [], 0, SHORT),
    lambda: sweep(MLPQ(), SMALL, [0.1], [-1], 0, SHORT),
])
def test_bad_inputs_raise(call):
    with pytest.raises(ValueError):
        call()


def test_bad_evaluation_inputs_raise():
    config = QLearningConfig(n_episodes=1, batch_size=8)
    released = train(MLPQ(), config, [0.2], trial_generators(0, 1), SHORT).released
    with pytest.raises(ValueError):
        evaluate_greedy(released, 0, trial_generators(0, 1))
    with pytest.raises(ValueError):
        evaluate_greedy(released, 5, trial_generators(0, 2))
    with pytest.raises(ValueError):
        released(np.full((1, 3), 2.0))
    with pytest.raises(ValueError):
        released(np.full((2, 3), 0.5))


def test_algorithm1_schedule_updates_once_per_b_transitions_on_those_transitions(monkeypatch):
    config = ql.QLearningConfig(n_episodes=4, batch_size=16, replay_capacity=40,
                                epsilon_start=0.0, epsilon_end=0.0, target_update_episodes=None,
                                optimizer="sgd", loss="squared", grad_clip=None, reset_period=16,
                                bootstrap_truncation=True, schedule="iterations")
    seen = []
    update = ql._update

    def spy(learner, config, state, batch):
        seen.append(batch[0].copy())
        update(learner, config, state, batch)

    monkeypatch.setattr(ql, "_update", spy)
    checkpoints = []
    result = train(MLPQ(), config, [0.5], [trial_generator(0, 3)], SHORT,
                   on_episode=lambda e, params: checkpoints.append((e, params)))
    steps = config.n_episodes * SHORT.horizon
    assert result.n_updates == len(seen) == steps // 16
    states = result.states[0, :, :-1].ravel()
    for j, batch in enumerate(seen):  # the B transitions of iteration j, in order
        np.testing.assert_array_equal(batch[0], states[16 * j:16 * (j + 1)])
    assert [e for e, _ in checkpoints] == list(range(-1, config.n_episodes))
    assert all(np.array_equal(a, b) for a, b in zip(checkpoints[-1][1], result.released.params))
    assert ql.ALGORITHM1.schedule == "iterations" and ql.ALGORITHM1.reset_period == 128
