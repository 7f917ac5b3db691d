"""The cost of the papers' own scale (dprl.experiments.paper_scale) from recorded CPU time."""

import json

import pytest

from dprl.experiments import get
from dprl.experiments.paper_scale import (paper_scale_table, sharma_cost, sharma_paper_steps,
                                          xie_cost)
from dprl.experiments.sharma2025.training import Run
from dprl.sharma2025.accounting import steps_for_budget


def test_a_private_run_trains_until_its_budget_is_spent_at_table3_noise():
    cql = Run("CQL", "dpsgd", 0.005, 256, eps=5.0)            # CartPole eps = 5: s = 20
    assert sharma_paper_steps("CartPole", cql) == steps_for_budget(5.0, 1 / 3000, 20.0,
                                                                   256 / 3000, "rdp")
    ours = Run("CQL", "ours", 1e-4, 128, eps=10.0, p=0.8)       # eps2 = 2.5, delta2 = delta/10
    assert sharma_paper_steps("CartPole", ours) == steps_for_budget(2.5, 1 / 30_000, 80.0,
                                                                    0.8 * 128 / 3000, "rdp")
    ablation = Run("BCQ", "ours", 0.005, 128, eps=2.5, split="three_quarters")
    assert sharma_paper_steps("CartPole", ablation) == steps_for_budget(
        2.5 / 4, 1 / 30_000, 10.0, 128 / 3000, "rdp")            # the eps = 5 BCQ row's s


def test_runs_with_nothing_to_spend_or_no_table3_noise_keep_the_cap():
    assert sharma_paper_steps("CartPole", Run("CQL", "nonprivate", 1e-4, 128)) is None
    assert sharma_paper_steps("Acrobot", Run("CQL", "ours", 1e-3, 128, eps=10.0, p=0.0)) is None
    # Acrobot's Table 3 rows have p = 0 and no s: its baseline has no paper length either
    assert sharma_paper_steps("Acrobot", Run("CQL", "dpsgd", 1e-3, 128, eps=10.0)) is None


def _sidecar(folder, experiment_id, cpu, n_trials):
    folder.mkdir(exist_ok=True)
    (folder / f"{experiment_id}.json").write_text(json.dumps(
        {"config": {}, "sha256": "", "cpu_time_s": cpu, "n_trials": n_trials}))


def test_costs_scale_the_recorded_cpu_time(tmp_path):
    _sidecar(tmp_path, "xie2019-hiv-large", 10.0, 2)
    cost = xie_cost("xie2019-hiv-large", 100, tmp_path)
    assert (cost.book_s, cost.paper_s, cost.longest_run_s, cost.factor) == (10.0, 500.0, 5.0, 50.0)
    config = get("sharma2025-hiv-training").config("paper")
    _sidecar(tmp_path, "sharma2025-hiv-training", 1.0 * config.n_trials * config.steps,
             config.n_trials)                                     # 1 CPU s per step
    cost = sharma_cost("sharma2025-hiv-training", tmp_path)
    lengths = [sharma_paper_steps("HIV", run) or config.steps for run in config.runs]
    assert cost.paper_s == sum(lengths) and cost.longest_run_s == max(lengths)
    assert max(lengths) > config.steps                              # the cap binds somewhere
    with pytest.raises(ValueError, match="no committed paper-scale result"):
        sharma_cost("sharma2025-acrobot-training", tmp_path)


def test_the_committed_table_has_a_row_per_result_and_a_total():
    table = paper_scale_table()
    rows = {row[0]: row for row in table.rows}
    assert rows["total"][2] == pytest.approx(sum(r[2] for k, r in rows.items() if k != "total"))
    assert rows["sharma2025-acrobot-training"][3] == 1.0          # no paper length: capped
    assert all(row[3] >= 1 for row in table.rows)


def test_the_paper_scale_graph_swaps_the_costs_and_keeps_the_dependencies():
    from dprl.experiments.paper_scale import SHARMA_RESULTS, XIE_RESULTS, paper_scale_graph
    from dprl.engine.scaling import task_graph

    book, paper = task_graph(), paper_scale_graph()
    swapped = set(SHARMA_RESULTS) | set(XIE_RESULTS)
    kept = [t for t in book.tasks if t.experiment not in swapped]
    assert [t for t in paper.tasks if t.experiment not in swapped] == kept
    table = {row[0]: row for row in paper_scale_table().rows}
    assert paper.total_s == pytest.approx(sum(t.cost_s for t in kept)
                                          + 3600 * sum(table[e][2] for e in swapped))
    assert sum(t.experiment == XIE_RESULTS[0] for t in paper.tasks) == 100

    def waits_for(graph, experiment):
        first = next(i for i, t in enumerate(graph.tasks) if t.experiment == experiment)
        return {graph.tasks[p].experiment for p in graph.after[first]}

    for experiment in {t.experiment for t in book.tasks}:
        assert waits_for(paper, experiment) == waits_for(book, experiment)


def test_each_cost_takes_only_its_papers_results():
    from dprl.experiments.paper_scale import sharma_cost, xie_cost
    with pytest.raises(ValueError, match="experiment_id"):
        xie_cost("sharma2025-cartpole-training")
    with pytest.raises(ValueError, match="experiment_id"):
        sharma_cost("xie2019-hiv-large")
    for cost, experiment_id in ((xie_cost, "xie2019-hiv-large"),
                                (sharma_cost, "sharma2025-cartpole-training")):
        for results_dir in (3, "no/such/folder"):
            with pytest.raises(ValueError, match="results_dir must be an existing folder"):
                cost(experiment_id, results_dir=results_dir)
