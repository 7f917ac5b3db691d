"""The registered audits at smoke scale: each samples through the package function it names,
each has its own root seed, no calibrated pair shows a violation, the pilot alone chooses the
test, and an audit row reads a bound against the pair's exact eps and the design's reach. The
audits of each paper have their own test files (test_audits_<paper>.py)."""

import dataclasses
import importlib

import numpy as np
import pytest

from dprl.audit import Bound, held_out_lower_bound, trade_off_from_histograms
from dprl.balle2016 import smoothing_constants
from dprl.balle2016.calibration import smooth_gaussian_delta
from dprl.experiments import all_experiments, get, load
from dprl.experiments.audits.common import (SAMPLED, AuditRow, accountant_epsilon, audit_row,
                                            audited_bound, pair_epsilon)
from dprl.engine.batches import compute_trials

AUDITS = [e.id for e in all_experiments() if e.id in SAMPLED]


def _smoke(experiment_id: str, trials=None) -> tuple:
    experiment = get(experiment_id)
    config = experiment.config("smoke")
    trials = range(config.n_trials) if trials is None else trials
    return config, compute_trials(experiment, config, trials)


def test_every_audit_is_in_the_sampled_table_and_has_its_own_root_seed():
    audits = [e for e in all_experiments() if e.id.startswith("audit-")]
    assert {e.id for e in audits} >= set(SAMPLED) and len(SAMPLED) >= 15
    seeds = [e.config("paper").root_seed for e in audits]
    assert len(set(seeds)) == len(seeds), sorted(seeds)
    for e in audits:
        assert e.config("smoke").root_seed == e.config("paper").root_seed


@pytest.mark.parametrize("experiment_id", AUDITS)
def test_audit_samples_through_the_package_function_it_names(experiment_id, monkeypatch):
    calls = {}
    assert SAMPLED[experiment_id], f"{experiment_id} names no package function"
    for name in SAMPLED[experiment_id]:
        module_name, function_name = name.rsplit(".", 1)
        module = importlib.import_module(module_name)
        original = getattr(module, function_name)

        def counting(*args, _original=original, _name=name, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, function_name, counting)
    _smoke(experiment_id, trials=[0])
    assert set(calls) == set(SAMPLED[experiment_id]) and min(calls.values()) >= 1


@pytest.mark.parametrize("experiment_id", AUDITS)
def test_audit_bound_stays_below_the_pairs_exact_eps(experiment_id):
    config, arrays = _smoke(experiment_id)
    row = audit_row(experiment_id, config, arrays)
    assert 0 <= row.bound.eps <= row.pair_eps + 1e-9  # a lower bound: never above the truth
    assert row.reachable <= row.pair_eps + 1e-9 and row.reachable <= row.reachable_if_doubled
    if row.pair_eps <= config.eps * (1 + 1e-6):
        assert row.outcome != "violation shown"


def test_pilot_alone_chooses_the_test():
    config, arrays = _smoke("audit-gaussian")
    pilot = slice(None, config.pilot_trials)
    bound = audited_bound(config, arrays)
    rest = slice(config.pilot_trials, None)
    curves = [trade_off_from_histograms(arrays["null_counts"][part],
                                        arrays["alternative_counts"][part], config.edges)
              for part in (pilot, rest)]
    assert bound == held_out_lower_bound(*curves, config.delta)
    shuffled = {name: np.concatenate([value[pilot], value[rest][::-1]])
                for name, value in arrays.items()}
    assert audited_bound(config, shuffled) == bound  # evaluation order is irrelevant
    swapped = {name: np.roll(value, -config.pilot_trials, axis=0)
               for name, value in arrays.items()}
    assert audited_bound(config, swapped).threshold != bound.threshold


def _row(bound: float, claimed: float, doubled: float) -> AuditRow:
    return AuditRow("x", ("f",), claimed, 1e-5, 0.5, 0.5, 0.4, doubled,
                    Bound(bound, 1e-5, 0.95, 0.0, 0, 0.1, 0.1, 0.1, 0.1))


@pytest.mark.parametrize("bound, doubled, outcome", [
    (1.5, 0.3, "violation shown"), (0.4, 1.2, "consistent"), (0.4, 0.9, "not informative")])
def test_audit_row_outcomes(bound, doubled, outcome):
    assert _row(bound, 1.0, doubled).outcome == outcome


def test_committed_gaussian_audit_certifies_nine_tenths_of_its_exact_eps():
    """The design can (reachable >= 0.9 eps at typical luck) and the committed runs did."""
    config = get("audit-gaussian").config("paper")
    row = audit_row("audit-gaussian", config, load("audit-gaussian").arrays)
    assert row.reachable >= 0.9 * row.pair_eps and row.bound.eps >= 0.9 * row.pair_eps


def test_balle_accountant_meets_delta_at_its_eps_and_the_pair_is_replace_one():
    balle = get("audit-balle2016-lsw").config("paper")
    alpha, beta = smoothing_constants(balle.eps, balle.delta, balle.n_states)
    eps = accountant_epsilon(balle)
    assert smooth_gaussian_delta(eps, alpha, beta, balle.n_states) <= balle.delta
    assert smooth_gaussian_delta(eps * 0.99, alpha, beta, balle.n_states) > balle.delta
    lsl = get("audit-balle2016-lsl").config("smoke")
    x, neighbour = lsl.pair()
    assert np.abs(x.counts - neighbour.counts).max() == 1  # one trajectory replaced
    (mean, sigma), (mean_neighbour, sigma_neighbour) = lsl.releases()
    assert sigma != sigma_neighbour  # DP-LSL's noise scale depends on the data set
    assert np.all(mean > mean_neighbour)


def test_balle_pair_eps_is_where_a_monte_carlo_hockey_stick_meets_delta():
    """The exact eps of the DP-LSL pair against the hockey-stick divergence estimated from
    1e6 draws of the release (the larger of both orders, a few standard errors)."""
    from dprl.experiments.audits.balle2016 import gaussian_log_likelihood_ratio
    config = dataclasses.replace(get("audit-balle2016-lsl").config("smoke"), delta=1e-2)
    eps = pair_epsilon(config)
    (null, alternative), rng = config.releases(), np.random.default_rng(3)
    deltas = []
    for (mean, sigma), sign in ((alternative, 1), (null, -1)):
        draws = mean + sigma * rng.standard_normal((1_000_000, config.n_states))
        loss = sign * gaussian_log_likelihood_ratio(draws, null, alternative)
        deltas.append(np.mean(np.maximum(-np.expm1(eps - loss), 0.0)))
    assert max(deltas) == pytest.approx(config.delta, rel=0.05)


def test_gaussian_log_likelihood_ratio_is_the_exact_privacy_loss():
    from dprl.experiments.audits.balle2016 import gaussian_log_likelihood_ratio
    outputs = np.random.default_rng(0).normal(size=(7, 3))
    null, alternative = (np.zeros(3), 2.0), (np.ones(3), 2.0)
    expected = ((outputs - 0.5) * 1.0).sum(axis=-1) / 4.0
    assert np.allclose(gaussian_log_likelihood_ratio(outputs, null, alternative), expected)
