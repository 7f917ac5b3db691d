"""Calls of the API sweep that answered silently wrong (NaN, a wrapped value, a split string)
or exhausted memory: each now refuses with a ValueError naming its argument, and the
rendering of a table is linear in its rows."""

import numpy as np
import pytest

from dprl.accounting.pld import PLDOutOfReachError, poisson_gaussian_or_idle_epsilon
from dprl.one_run_audit import correct_guesses
from dprl.sharma2025.scores import step_cap, t_interval, window_return
from dprl.tables import Table


@pytest.mark.parametrize("call, argument", [
    (lambda: correct_guesses(np.array([257, 0]), np.array([True, False])), "guessed"),
    (lambda: t_interval([1.0, np.nan, 2.0]), "values"),
    (lambda: t_interval([1.0, np.inf]), "values"),
    (lambda: window_return(np.ones(3), np.array([10, 20, 30]), window=0), "window"),
    (lambda: window_return(np.ones(3), np.array([30, 10, 20]), window=10), "evaluated_at"),
    (lambda: step_cap([], []), "candidates"),
    (lambda: Table("abc", [("x", "y", "z")]), "columns"),
    (lambda: poisson_gaussian_or_idle_epsilon(1.0, 0.1, 10, 0.5, float("nan")), "delta"),
    (lambda: poisson_gaussian_or_idle_epsilon(1.0, 0.1, 10, 0.5, 2.0), "delta"),
    (lambda: poisson_gaussian_or_idle_epsilon(1.0, 0.1, 10, 0.5, 0.0), "delta"),
])
def test_a_call_that_answered_wrongly_is_refused(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


@pytest.mark.parametrize("arguments, argument", [((1e-3, 0.1, 10), "noise_multiplier"),
                                                 ((1.0, 0.1, 10**12), "steps")])
def test_an_idle_step_pld_beyond_the_limits_is_refused_before_it_is_built(arguments, argument):
    """(38 GiB and 1.1 TiB of PLD before the guards.)"""
    with pytest.raises(PLDOutOfReachError, match=argument):
        poisson_gaussian_or_idle_epsilon(*arguments, 0.5, 1e-5)


def test_the_idle_step_epsilon_is_unchanged_within_the_limits():
    """p = 1 is Alg. 4 itself; a mixture with idle steps spends less."""
    from dprl.accounting.pld import poisson_gaussian_epsilon

    full = poisson_gaussian_or_idle_epsilon(1.0, 0.05, 100, 1.0, 1e-5)
    assert full == pytest.approx(poisson_gaussian_epsilon(1.0, 0.05, 100, 1e-5), rel=1e-3)
    assert poisson_gaussian_or_idle_epsilon(1.0, 0.05, 100, 0.5, 1e-5) < full


def test_a_table_decides_each_column_s_alignment_once_per_rendering(monkeypatch):
    """Linear in the rows: it used to decide it again for every cell (8000 rows: 40 s)."""
    calls = []
    decide = Table._right
    monkeypatch.setattr(Table, "_right", lambda self, j: calls.append(j) or decide(self, j))
    table = Table(("a", "b"), [(i, f"row {i}") for i in range(500)])
    table.text()
    table._repr_html_()
    assert calls == [0, 1, 0, 1]


def test_pmf_pair_epsilon_refuses_what_it_cannot_do_and_keeps_its_bits():
    """Log-PMFs that are not distributions, a discretization <= 0, one too fine or too many
    compositions are refused at once (they answered 9.16, 0, hung or asked for 28 GiB); the
    answers otherwise equal dp-accounting's own composition of the two orders bit for bit."""
    import math

    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    from dprl.accounting.pld import PLDOutOfReachError, pmf_pair_epsilon

    a, b = {0: math.log(0.6), 1: math.log(0.4)}, {0: math.log(0.3), 1: math.log(0.7)}
    with pytest.raises(ValueError, match="log_pmf_a"):
        pmf_pair_epsilon({0: 0.0, 1: 0.0}, b, 10, 1e-5)
    with pytest.raises(ValueError, match="log_pmf_b"):
        pmf_pair_epsilon(a, {}, 10, 1e-5)
    with pytest.raises(ValueError, match="discretization"):
        pmf_pair_epsilon(a, b, 10, 1e-5, discretization=-1)
    with pytest.raises(PLDOutOfReachError, match="discretization"):
        pmf_pair_epsilon(a, b, 10, 1e-5, discretization=1e-12)
    for compositions in (10**6, 10**12):
        with pytest.raises(PLDOutOfReachError, match="compositions"):
            pmf_pair_epsilon(a, b, compositions, 1e-5)
    for n, pessimistic in ((1, True), (30, True), (30, False)):
        direct = max(float(pld_lib.from_two_probability_mass_functions(
            lower, upper, pessimistic_estimate=pessimistic, symmetric=False)
            .self_compose(n).get_epsilon_for_delta(1e-5)) for lower, upper in ((a, b), (b, a)))
        assert pmf_pair_epsilon(a, b, n, 1e-5, pessimistic=pessimistic) == direct


def test_pmf_pair_epsilon_names_a_pmf_that_is_not_a_dict_and_answers_disjoint_supports():
    """A list raised an AttributeError, str values a float-conversion error; PMFs with no
    common outcome (every loss infinite) raised an IndexError from two compositions on."""
    import math

    from dprl.accounting.pld import pmf_pair_epsilon

    b = {0: math.log(0.3), 1: math.log(0.7)}
    for bad in ([0.0], {0: "0"}, {0: True}):
        with pytest.raises(ValueError, match="log_pmf_a must be a non-empty dict"):
            pmf_pair_epsilon(bad, b, 2, 1e-5)
    for compositions in (1, 2, 1000):
        assert pmf_pair_epsilon({0: 0.0}, {1: 0.0}, compositions, 1e-5) == math.inf
