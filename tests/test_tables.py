"""dprl.tables: aligned text for terminals and nbval, HTML for the book."""

import numpy as np
import pytest

from dprl.tables import Table, cell_text


def test_cells_print_integers_in_full_and_other_numbers_to_four_significant_digits():
    assert [cell_text(v) for v in (12345, np.int64(7), 3.14159, np.float64(1234567.0), None,
                                   "CQL", True)] == ["12345", "7", "3.142", "1.235e+06",
                                                     "\u2014", "CQL", "True"]


def test_text_is_aligned_and_html_is_a_table():
    table = Table(("env", "steps", "return"), [("CartPole", 20000, 321.456),
                                               ("HIV", 5000, None), ("a<b", 7, 0.5)])
    lines = table.text().splitlines()
    assert lines[0] == "env       steps  return"
    assert lines[1] == "CartPole  20000   321.5"
    assert lines[2] == "HIV        5000       \u2014"
    assert len({len(line) for line in lines}) == 1
    html = table._repr_html_()
    assert html.count("<tr>") == 4 and "a&lt;b" in html and html.startswith("<table")
    assert '<td style="text-align: right">321.5</td>' in html
    assert repr(table) == table.text()


def test_bad_tables_are_rejected():
    with pytest.raises(ValueError, match="columns"):
        Table((), [])
    with pytest.raises(ValueError, match="3 columns"):
        Table(("a", "b", "c"), [(1, 2)])


def test_an_inapplicable_entry_prints_as_a_dash_not_nan():
    import numpy as np

    from dprl.tables import cell_text

    assert cell_text(float("nan")) == cell_text(np.float32("nan")) == cell_text(None) == "\u2014"
    assert cell_text(np.inf) == "inf"


@pytest.mark.parametrize("columns, rows, message", [
    (("a", "b", "c"), ["xyz"], "rows must be sequences of cells"),      # split into 3 cells
    (("a", "b"), [{"a": 1, "b": 2}], "rows must be sequences of cells"),  # printed its keys
    (("a",), [1], "rows must be sequences of cells"),
    (b"abc", [(1, 2, 3)], "columns must be a sequence, got b'abc'"),
    (3, [], "columns must be a sequence, got 3"),
    ((1, None), [(1, 2)], "columns must be a non-empty sequence of str names")])
def test_a_table_refuses_what_is_not_a_sequence_of_names_and_rows(columns, rows, message):
    with pytest.raises(ValueError, match=message):
        Table(columns, rows)
