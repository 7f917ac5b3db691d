"""Sharma et al. (2025) training runs: the data split of Sec. 4, the cache, Alg. 3's loop with
public coins, the noise calibration under both readings, Sec. 6's evaluation, the run lists."""

import dataclasses
from functools import lru_cache

import numpy as np
import pytest
import torch

from dprl.determinism import deterministic_torch, torch_generator
from dprl.envs.acrobot import AcrobotVariants
from dprl.envs.episodes import simulate
from dprl.envs.lunar_lander import DEFAULT_VARIANT, run_episodes
from dprl.engine.registry import get
from dprl.experiments.sharma2025.release import members, population
from dprl.experiments.sharma2025 import runs as sr
from dprl.experiments.sharma2025 import training as st
from dprl.sharma2025.accounting import dp_sgd_epsilon, selective_epsilon
from dprl.sharma2025.dp_sgd import DPSGDConfig
from dprl.sharma2025.evaluation import episode_returns, uniform_act
from dprl.sharma2025.offline_rl import expert_transitions, sample_uniform
from dprl.sharma2025.qnetworks import frozen_copy
from dprl.sharma2025.training import Schedule, calibrated_noise, draw_coins, make_learner, train
from dprl.sharma2025.training_data import (cached_training_data, record_training_data,
                                           split_by_release)


@lru_cache(maxsize=1)
def _cartpole():
    config = get("sharma2025-cartpole-release").config("smoke")
    experts, recorder = population(config)
    chosen = members(experts.n_experts, 12, config.data_seed)
    data = record_training_data(experts, chosen, 3, recorder, chunk=5)
    return experts, recorder, chosen, data


def test_training_data_is_every_trajectory_grouped_by_expert_in_order():
    experts, recorder, chosen, data = _cartpole()
    whole = expert_transitions(recorder(experts.select(chosen), chosen, 3))
    assert torch.equal(data.pool.counts, whole.counts)
    for name in ("observations", "actions", "rewards", "next_observations", "terminals"):
        assert torch.equal(getattr(data.pool.transitions, name),
                           getattr(whole.transitions, name))
    first = data.first(5)
    alone = record_training_data(experts, chosen[:5], 3, recorder)
    assert torch.equal(first.pool.transitions.observations, alone.pool.transitions.observations)
    assert np.array_equal(first.step, alone.step) and np.array_equal(first.members, chosen[:5])


def test_split_by_release_keeps_prefixes_stable_and_the_rest_unstable():
    _, _, chosen, data = _cartpole()
    released = np.array([chosen[0], chosen[3], chosen[3]])
    trajectories, prefixes = np.array([1, 0, 2]), np.array([4, 0, 7])
    stable, unstable = split_by_release(data, released, trajectories, prefixes)
    member = data.member_of
    expected = (((member == 0) & (data.trajectory == 1) & (data.step < 4))
                | ((member == 3) & (data.trajectory == 2) & (data.step < 7)))
    assert len(stable) == expected.sum() == 11
    assert torch.equal(stable.observations, data.pool.transitions.observations[expected])
    assert len(unstable.transitions) + len(stable) == len(data.pool.transitions)
    assert np.array_equal(unstable.counts.numpy(),
                          np.bincount(member[~expected], minlength=len(chosen)))
    with pytest.raises(ValueError, match="member"):
        split_by_release(data, np.array([10**6]), np.array([0]), np.array([1]))
    with pytest.raises(ValueError, match="one length"):
        split_by_release(data, released, trajectories[:2], prefixes)


def test_the_cache_returns_the_same_bits_and_recomputes_on_a_new_key(tmp_path):
    _, _, _, data = _cartpole()
    calls = []

    def compute():
        calls.append(1)
        return data

    path = tmp_path / "data.npz"
    for key in ({"a": 1}, {"a": 1}, {"a": 2}):
        loaded = cached_training_data(path, key, compute)
        assert torch.equal(loaded.pool.transitions.next_observations,
                           data.pool.transitions.next_observations)
        assert np.array_equal(loaded.trajectory, data.trajectory)
    assert len(calls) == 2


def test_workers_that_miss_the_cache_together_compute_it_once(tmp_path):
    import threading
    import time

    _, _, _, data = _cartpole()
    calls, start = [], threading.Barrier(3)

    def compute():
        calls.append(1)
        time.sleep(0.5)  # long enough for every other worker to miss the cache too
        return data

    def worker(loaded):
        start.wait()
        loaded.append(cached_training_data(tmp_path / "data.npz", {"a": 1}, compute))

    loaded = []
    threads = [threading.Thread(target=worker, args=(loaded,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len(loaded) == 3
    assert all(torch.equal(d.pool.transitions.observations, data.pool.transitions.observations)
               for d in loaded)


def test_coins_are_bernoulli_p():
    coins = draw_coins(100_000, 0.8, np.random.default_rng(0))
    assert coins.dtype == np.bool_ and abs(coins.mean() - 0.8) < 4 * np.sqrt(0.16 / 1e5)
    assert not draw_coins(10, 0.0, np.random.default_rng(0)).any()
    with pytest.raises(ValueError, match="p"):
        draw_coins(10, 1.5, np.random.default_rng(0))


@pytest.mark.parametrize("reading", ["paper", "visible_coins"])
def test_calibrated_noise_spends_the_budget_exactly(reading):
    eps2, delta2, b, m, p, steps, dp_steps = 2.5, 1 / 30_000, 128, 3000, 0.8, 2000, 1590
    s = calibrated_noise(eps2, delta2, b, m, p, steps, dp_steps, reading, "rdp")
    spent = selective_epsilon(s, b, m, p, steps, delta2, reading, dp_steps, "rdp")
    assert eps2 * (1 - 1e-3) < spent <= eps2
    assert dp_sgd_epsilon(s * 0.99, p * b / m if reading == "paper" else b / m,
                          steps if reading == "paper" else dp_steps, delta2, "rdp") > eps2
    assert np.isnan(calibrated_noise(eps2, delta2, b, m, p, steps, 0, reading))
    with pytest.raises(ValueError, match="reading"):
        calibrated_noise(eps2, delta2, b, m, p, steps, 5, "hidden")


def _run(coins, stable, unstable, seed=3):
    deterministic_torch(1)
    generator = torch_generator(np.random.default_rng(seed))
    learner = make_learner("CartPole", "CQL", generator)
    outcome = train(learner, stable, unstable, coins, DPSGDConfig(4, 1.0), 1e-3,
                    Schedule(len(coins), target_every=5, checkpoints=2, eval_episodes=2),
                    "CartPole", generator, np.random.default_rng(4))
    return learner, outcome


def test_training_counts_its_steps_skips_an_empty_stable_set_and_is_deterministic():
    _, _, _, data = _cartpole()
    coins = draw_coins(20, 0.5, np.random.default_rng(1))
    empty = data.pool.transitions.take(torch.zeros(0, dtype=torch.int64))
    learner, outcome = _run(coins, data.pool.transitions, data.pool)
    assert (outcome.dp_steps, outcome.stable_steps, outcome.skipped_steps) == (
        coins.sum(), 20 - coins.sum(), 0)
    assert outcome.returns.shape == (2, 2)
    again, repeat = _run(coins, data.pool.transitions, data.pool)
    assert all(torch.equal(a, b) for a, b in zip(learner.parameters(), again.parameters()))
    assert np.array_equal(outcome.returns, repeat.returns)
    untouched, skipped = _run(np.zeros(20, dtype=bool), empty, data.pool)
    init = make_learner("CartPole", "CQL", torch_generator(np.random.default_rng(3)))
    assert skipped.skipped_steps == 20
    assert all(torch.equal(a, b) for a, b in zip(untouched.parameters(), init.parameters()))


def test_evaluation_matches_the_environments_own_episodes():
    rng = np.random.default_rng(5)
    returns = episode_returns("Acrobot", uniform_act("Acrobot", np.random.default_rng(6)), 4,
                              rng)
    actions = np.random.default_rng(6)
    twin = simulate(AcrobotVariants(horizon=200),
                    lambda o, _: actions.integers(3, size=len(o)), 4, np.random.default_rng(5))
    assert np.array_equal(returns, twin.rewards.sum(axis=-1)) and returns.shape == (4,)
    seeds = np.random.default_rng(7).integers(0, 2**31 - 1, size=(1, 2))
    lander = episode_returns("LunarLander", lambda o: np.zeros(len(o), dtype=np.int64), 2,
                             np.random.default_rng(7))
    reference = run_episodes(DEFAULT_VARIANT, lambda o, live, t: np.zeros(len(live),
                                                                            dtype=np.int64),
                             seeds, 1000).returns[0]
    assert np.array_equal(lander, reference)
    hiv = episode_returns("HIV", lambda o: np.zeros(len(o), dtype=np.int64), 3, rng)
    assert hiv[0] == hiv[1] == hiv[2] > 0
    with pytest.raises(ValueError, match="env"):
        episode_returns("Pong", lambda o: o, 1, rng)


def test_run_lists_follow_table3_and_skip_runs_identical_to_the_baseline():
    cartpole = sr.figure3_runs("CartPole")
    ours = [r for r in cartpole if r.method == "ours"]
    assert {r.eps for r in ours} == {7.5, 10.0}   # eps = 5: eps1 = 0 and p = 1, the baseline
    visible = [r for r in ours if r.reading == "visible_coins"]
    assert len(visible) == 12 and all(0 < r.p < 1 for r in visible)
    assert sum(r.method == "dpsgd" for r in cartpole) == 18
    acrobot = [r for r in sr.figure3_runs("Acrobot") if r.method == "ours"]
    assert {r.p for r in acrobot} == {0.0} and len(acrobot) == 18
    hiv = [r for r in sr.figure3_runs("HIV") if r.method == "ours" and r.algorithm == "CQL"]
    assert {(r.eps, r.split) for r in hiv} == {(7.5, "section6"), (10.0, "section6")}
    assert sr.p_sweep_runs("Acrobot") == []
    assert {r.p for r in sr.p_sweep_runs("CartPole")} == {0.0, 0.5, 0.8, 0.9, 1.0}
    for experiment in ("cartpole", "acrobot", "lunarlander", "hiv"):
        runs = get(f"sharma2025-{experiment}-training").config("paper").runs
        assert len(set(runs)) == len(runs)


def test_sgd_runs_take_algorithm_4s_plain_step():
    """optimizer="sgd" is Alg. 4, line 9: phi <- phi - eta g, g the gradient of the batch's
    mean loss against the initial target (computed here by autograd on a twin learner)."""
    _, _, _, data = _cartpole()
    deterministic_torch(1)

    def fresh():
        generator = torch_generator(np.random.default_rng(3))
        return make_learner("CartPole", "CQL", generator), generator

    after = {}
    for name in ("sgd", "adam"):
        learner, generator = fresh()
        train(learner, data.pool.transitions, data.pool, np.zeros(1, dtype=bool),
              DPSGDConfig(4, 1.0), 0.05, Schedule(1, checkpoints=1, eval_episodes=1),
              "CartPole", generator, np.random.default_rng(4), optimizer=name)
        after[name] = [p.detach().clone() for p in learner.parameters()]
    twin, generator = fresh()
    batch = sample_uniform(data.pool.transitions, 4, generator)
    loss = twin.per_example_losses(batch, frozen_copy(twin.q)).mean()
    grads = torch.autograd.grad(loss, list(twin.parameters()))
    for new, old, grad in zip(after["sgd"], twin.parameters(), grads):
        torch.testing.assert_close(new, old.detach() - 0.05 * grad, rtol=1e-6, atol=1e-7)
    assert not all(torch.equal(a, b) for a, b in zip(after["sgd"], after["adam"]))
    with pytest.raises(ValueError, match="optimizer"):
        st.Run("CQL", "dpsgd", 1e-3, 64, optimizer="rmsprop")


def test_sgd_experiments_pair_adams_runs():
    """sharma2025-<env>-sgd: Fig. 3's non-private runs and the anchor cell of -long, each
    with SGD and otherwise the same run."""
    for env in ("CartPole", "Acrobot", "LunarLander", "HIV"):
        runs = get(f"sharma2025-{env.lower()}-sgd").config("paper").runs
        assert {run.optimizer for run in runs} == {"sgd"}
        adam = [dataclasses.replace(run, optimizer="adam") for run in runs]
        long = get(f"sharma2025-{env.lower()}-long").config("paper").runs
        assert [r for r in adam if r.method == "nonprivate"] == sr.nonprivate_runs(env)
        assert [r for r in adam if r.method != "nonprivate"] == [
            r for r in long if r.algorithm == sr.ANCHORS.get(env) and r.noise_multiplier]
    assert len(get("sharma2025-cartpole-sgd").config("paper").runs) == 9


def test_run_and_config_reject_bad_input():
    with pytest.raises(ValueError, match="method"):
        st.Run("CQL", "dp", 1e-3, 64)
    with pytest.raises(ValueError, match="split"):
        st.Run("CQL", "ours", 1e-3, 64, split="half")
    with pytest.raises(ValueError, match="p = 1"):
        st.Run("CQL", "ours", 1e-3, 64, split="three_quarters", p=0.5)
    with pytest.raises(ValueError, match="n_trials"):
        st.TrainingConfig(n_trials=2, root_seed=0, env="CartPole", runs=(), steps=10)
    with pytest.raises(ValueError, match="accountant"):
        st.TrainingConfig(n_trials=1, root_seed=0, env="CartPole",
                          runs=(st.Run("CQL", "dpsgd", 1e-3, 4),), steps=10, accountant="x")
    with pytest.raises(ValueError, match="algorithm"):
        make_learner("CartPole", "DQN", torch_generator(np.random.default_rng(0)))
    with pytest.raises(ValueError, match="checkpoints"):
        Schedule(steps=7, checkpoints=2)


def test_budgets_of_the_runs():
    ours = st.Run("CQL", "ours", 1e-3, 128, eps=10.0, p=0.8)
    eps2, delta2, cell = st.run_budget("CartPole", ours)
    assert (eps2, delta2) == (2.5, 1 / 30_000) and cell is not None
    assert get("sharma2025-cartpole-release").config("paper").cells[cell][:2] == (10.0, 3000)
    assert st.run_budget("CartPole", st.Run("CQL", "dpsgd", 1e-3, 128, eps=10.0)) == (
        10.0, 1 / 3000, None)
    assert st.run_budget("CartPole", st.Run("BCQ", "ours", 1e-3, 128, eps=2.5,
                                            split="three_quarters")) == (2.5 / 4, 1 / 30_000,
                                                                         None)


def test_a_schedule_window_spreads_the_checkpoints_over_the_last_steps():
    assert Schedule(99_608, checkpoints=10, eval_window=10_000).evaluated_at.tolist() == [
        89_608 + 1000 * k for k in range(1, 11)]
    assert Schedule(100, checkpoints=5).evaluated_at.tolist() == [20, 40, 60, 80, 100]
    with pytest.raises(ValueError, match="eval_window must be <= steps"):
        Schedule(100, checkpoints=2, eval_window=200)
    with pytest.raises(ValueError, match="eval_window must be a multiple"):
        Schedule(101, checkpoints=2, eval_window=51)


def test_long_runs_bad_input_is_refused():
    with pytest.raises(ValueError, match="steps"):
        st.Run("CQL", "dpsgd", 1e-3, 64, eps=5.0, steps=0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        st.Run("CQL", "dpsgd", 1e-3, 64, eps=5.0, noise_multiplier=-1.0)
    with pytest.raises(ValueError, match="noise_multiplier is given only"):
        st.Run("CQL", "nonprivate", 1e-3, 64, noise_multiplier=10.0)
    with pytest.raises(ValueError, match="noise_multiplier is given only"):
        st.Run("CQL", "dpsgd", 1e-3, 64, eps=5.0, noise_multiplier=10.0, steps=100)


def test_paper_noise_runs_are_the_cells_whose_pld_step_count_is_at_most_1e5():
    """The registry picks the cells by the RDP count; the PLD count (the paper's "until the
    budget is spent") must pick the same ones, and the run's N is that PLD count."""
    from dprl.sharma2025.accounting import TABLE3, steps_for_budget

    chosen = {(env, r.algorithm) for env in sr.LONG_FACTORS for r in sr.paper_noise_runs(env)}
    assert chosen == {("CartPole", "CQL"), ("CartPole", "BCQ"), ("HIV", "CQL")}
    for row in TABLE3:
        if row.eps == 5.0 and row.p == 1.0:
            pld = steps_for_budget(5.0, 1 / 3000, row.noise_multiplier, row.batch_size / 3000)
            assert (pld <= 100_000) == ((row.env, row.algorithm) in chosen), row
    config = get("sharma2025-hiv-long").config("paper")
    run = next(r for r in config.runs if r.noise_multiplier is not None)
    assert st.run_steps(run, config, 5.0, 1 / 3000, 1.0) == steps_for_budget(
        5.0, 1 / 3000, 10.0, 256 / 3000)


def test_long_cap_runs_train_four_to_five_times_the_cap():
    for env in ("Acrobot", "LunarLander", "HIV"):
        runs = sr.long_cap_runs(env)
        assert {r.method for r in runs} == {"dpsgd", "ours"}
        assert all(4 * sr.STEPS[env] <= r.steps <= 5 * sr.STEPS[env] for r in runs)
    config = get("sharma2025-acrobot-long").config("paper")
    assert config.schedule(80_000).evaluated_at[0] == 80_000 - 9000


def test_the_converged_pipeline_reads_the_converged_population():
    """sharma2025-cartpole-curves-converged: Fig. 3's non-private runs with SGD on the
    population trained to convergence (its experts first); no converged HIV config."""
    experiment = get("sharma2025-cartpole-curves-converged")
    config = experiment.config("paper")
    assert config.converged and experiment.after == ("sharma2025-cartpole-experts-converged",)
    assert [dataclasses.replace(r, optimizer="adam") for r in config.runs] == \
        sr.nonprivate_runs("CartPole")
    assert {r.optimizer for r in config.runs} == {"sgd"}
    with pytest.raises(ValueError, match="converged"):
        st.TrainingConfig(n_trials=1, root_seed=0, env="HIV", converged=True, steps=10,
                          runs=(st.Run("CQL", "nonprivate", 1e-3, 4),))


@pytest.mark.parametrize("env", sorted(sr.STEPS_CONVERGED))
def test_the_converged_cap_is_the_one_the_converged_curves_choose(env):
    """STEPS_CONVERGED holds what step_cap chooses from the committed converged curves, and
    the converged training runs are the first population's runs with the environment's
    optimiser."""
    from dprl.experiments import load
    from dprl.sharma2025 import scores as sc

    result = load(f"sharma2025-{env.lower()}-curves-converged")
    config = result.config
    at = Schedule(config["steps"], config["target_every"], config["checkpoints"],
                  config["eval_episodes"], config.get("eval_window")).evaluated_at
    curves = sc.learning_curves(sc.score_runs(config["runs"], result.arrays), at)
    assert sc.step_cap(curves, sr.CAP_CANDIDATES) == sr.STEPS_CONVERGED[env]
    runs = get(f"sharma2025-{env.lower()}-training-converged").config("paper").runs
    first = get(f"sharma2025-{env.lower()}-training").config("paper").runs
    assert {r.optimizer for r in runs} == {sr.OPTIMIZER_CONVERGED[env]}
    assert [dataclasses.replace(r, optimizer="adam") for r in runs] == list(first)
