import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dprl.plotting import (band, indistinct_entries, mean_and_spread, show,  # noqa: E402
                           use_book_style)


def test_spread_is_sample_sd_or_standard_error():
    values = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 10.0]])
    mean, sd = mean_and_spread(values, "sd")
    np.testing.assert_allclose(mean, [3.0, 6.0])
    np.testing.assert_allclose(sd, [2.0, 4.0])
    _, se = mean_and_spread(values, "se")
    np.testing.assert_allclose(se, np.array([2.0, 4.0]) / np.sqrt(3))


def test_band_draws_mean_line_and_shaded_band():
    use_book_style()
    fig, ax = plt.subplots()
    band(ax, np.arange(2), np.array([[1.0, 2.0], [3.0, 4.0]]), "LSTD", "sd")
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [2.0, 3.0])
    assert len(ax.collections) == 1
    plt.close(fig)


@pytest.mark.parametrize("values, spread", [(np.ones((1, 3)), "se"), (np.ones((3, 3)), "iqr"),
                                            (np.full((2, 2), np.nan), "sd")])
def test_bad_inputs(values, spread):
    with pytest.raises(ValueError):
        mean_and_spread(values, spread)


def test_show_refuses_two_legend_entries_drawn_alike():
    fig, (left, right) = plt.subplots(1, 2)
    left.plot([0, 1], [0, 1], label="GPOPE", color="#d62728")
    left.plot([0, 1], [1, 0], label="GPOPE 10x", color="#d62728", linestyle="--")
    right.plot([0, 1], [0, 1], label="LSTD", color="#2ca02c")
    assert indistinct_entries(fig) == [("GPOPE", "GPOPE 10x")]
    with pytest.raises(ValueError, match="GPOPE 10x"):
        show(fig)
    plt.close(fig)


def test_show_accepts_a_variant_with_its_own_marker_and_errorbars():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="GPOPE", color="#d62728")
    ax.plot([0, 1], [1, 0], label="GPOPE 10x", color="#d62728", marker="s")
    ax.errorbar([0, 1], [0, 1], yerr=[0.1, 0.1], label="LSTD", color="#d62728", marker="o")
    ax.axhline(1.0, color="#d62728")  # unlabelled reference lines are not legend entries
    assert indistinct_entries(fig) == []
    show(fig)
    plt.close(fig)


def test_error_bar_entries_are_compared_by_their_data_line():
    fig, ax = plt.subplots()
    ax.errorbar([0], [0], yerr=[1], label="a", color="k", marker="o")
    ax.errorbar([0], [1], yerr=[1], label="b", color="k", marker="o")
    assert indistinct_entries(fig) == [("a", "b")]
    plt.close(fig)


def test_the_mapping_is_colour_blind_safe_and_variants_keep_the_colour():
    from dprl.plotting import PALETTE, STYLES, style
    assert {look.colour for look in STYLES.values()} <= set(PALETTE)
    base, first, second = style("GPOPE"), style("GPOPE", 1, "GPOPE, 10x"), style("GPOPE", 2)
    assert base["color"] == first["color"] == second["color"]
    assert len({(s.get("marker"), str(s["linestyle"])) for s in (base, first, second)}) == 3
    assert first["label"] == "GPOPE, 10x"
    with pytest.raises(ValueError, match="method"):
        style("no such method")


def test_band_takes_the_label_look_and_lets_keywords_override_it():
    fig, ax = plt.subplots()
    band(ax, np.arange(3), np.ones((2, 3)), "GPOPE")
    band(ax, np.arange(3), np.ones((2, 3)), "LSTD", ls="--")
    assert ax.lines[0].get_marker() == "D" and ax.lines[1].get_linestyle() == "--"
    plt.close(fig)


def test_no_method_is_given_two_looks():
    """A key written twice in the STYLES literal would silently keep the last look."""
    import ast
    import inspect

    import dprl.plotting
    tree = ast.parse(inspect.getsource(dprl.plotting))
    literal = next(node.value for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)
                   and getattr(node.target, "id", None) == "STYLES")
    keys = [key.value for key in literal.keys]
    assert sorted({k for k in keys if keys.count(k) > 1}) == []
