import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dprl.figure_layout import indistinct_entries  # noqa: E402
from dprl.plotting import band, mean_and_spread, show, style, use_book_style  # noqa: E402


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


def _legend_over(ax_fill) -> plt.Figure:
    """A figure whose upper-right legend sits on data drawn by ``ax_fill(ax, x)``."""
    use_book_style()
    fig, ax = plt.subplots()
    x = np.linspace(0.0, 1.0, 50)
    ax_fill(ax, x)
    ax.plot(x, 0.5 * x, label="below")
    ax.set(xlim=(0.0, 1.0), ylim=(0.0, 1.0))
    ax.legend(loc="upper right")
    return fig


@pytest.mark.parametrize("draw", [
    lambda ax, x: ax.plot(x, np.full_like(x, 0.95), label="line"),
    lambda ax, x: ax.plot(x[::7], np.full(8, 0.95), "o", ls="none", label="markers"),
    lambda ax, x: ax.scatter([0.9], [0.95], label="scatter"),
    lambda ax, x: ax.fill_between(x, 0.9, 1.0, label="band"),
    lambda ax, x: ax.bar([0.9], [1.0], width=0.2, label="bar"),
])
def test_a_legend_over_data_is_found_and_moved_off_it(draw):
    from dprl.figure_layout import covered_data, place_legends
    fig = _legend_over(draw)
    assert covered_data(fig) == ["the legend of axes 0 (untitled)"]
    place_legends(fig)
    assert covered_data(fig) == []
    plt.close(fig)


def test_a_legend_clear_of_the_data_stays_where_it_is():
    from dprl.figure_layout import covered_data, place_legends
    fig = _legend_over(lambda ax, x: ax.plot(x, 0.2 * x, label="low"))
    place_legends(fig)
    assert covered_data(fig) == [] and fig.axes[0].get_legend()._loc == 1  # upper right
    plt.close(fig)


def test_a_legend_with_no_free_corner_goes_outside_the_axes():
    from dprl.figure_layout import covered_data, place_legends
    fig, ax = plt.subplots()
    ax.fill_between([0, 1], [0, 0], [1, 1], label="everywhere")  # the band's edges: the frame
    ax.plot([0, 1], [0, 1], label="diagonal")
    ax.plot([0, 1], [1, 0], label="anti-diagonal")
    ax.axhline(0.5, label="middle")
    ax.axvline(0.5, label="centre")
    ax.set(xlim=(0, 1), ylim=(0, 1))
    ax.legend()
    place_legends(fig)
    fig.draw_without_rendering()
    legend_box = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
    assert covered_data(fig) == [] and legend_box.x0 >= ax.bbox.x1
    plt.close(fig)


def test_show_refuses_a_figure_legend_over_data():
    fig, ax = plt.subplots()
    x = np.linspace(0.0, 1.0, 50)
    ax.plot(x, np.full_like(x, 0.5), label="flat")
    fig.legend(loc="center")
    with pytest.raises(ValueError, match="figure legend over axes 0"):
        show(fig)
    plt.close(fig)


#: The methods that share axes across the policy-evaluation chapters (primer, Balle, Xie).
ESTIMATORS = ("non-private", "LSW", "DP-LSW", "LSL", "DP-LSL", "LSTD", "WIS-LSTD", "GPOPE",
              "GTD2", "TD(0)", "Monte Carlo")


def _marker_look(method, variant=0):
    keywords = style(method, variant)
    return (keywords["color"], keywords.get("markerfacecolor", "filled"), keywords.get("marker"))


def _near(first, second):
    """Two looks a reader may confuse: one marker, filled alike, colours near or equal."""
    from dprl.plotting import NEAR_COLOURS, colour_distance
    return first[1:] == second[1:] and colour_distance(first[0], second[0]) < NEAR_COLOURS


def test_near_colours_of_the_palette_are_the_known_pairs():
    from dprl.plotting import BLUE, NEAR_COLOURS, ORANGE, PALETTE, SKY, VERMILLION, YELLOW
    from dprl.plotting import colour_distance
    near = {frozenset((a, b)) for i, a in enumerate(PALETTE) for b in PALETTE[i + 1:]
            if colour_distance(a, b) < NEAR_COLOURS}
    assert near == {frozenset(p) for p in ((SKY, BLUE), (ORANGE, VERMILLION), (ORANGE, YELLOW))}
    assert colour_distance("#ffffff", "#000000") == pytest.approx(100.0, abs=0.01)


def test_estimators_and_their_variants_are_never_drawn_near_alike():
    bases = {method: _marker_look(method) for method in ESTIMATORS}
    clashes = [(a, b) for i, a in enumerate(ESTIMATORS) for b in ESTIMATORS[i + 1:]
               if _near(bases[a], bases[b])]
    clashes += [(f"{a} variant {k}", b) for a in ESTIMATORS for k in range(1, 5)
                for b in ESTIMATORS if b != a and _near(_marker_look(a, k), bases[b])]
    assert clashes == []
    # the near-collision of issue 28: GPOPE's variant square against DP-LSL's square
    assert _near(("#D55E00", "filled", "s"), _marker_look("DP-LSL"))


def test_variants_are_hollow_and_told_apart_from_the_filled_look():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], **style("DP-LSL"))
    ax.plot([0, 1], [1, 0], **style("DP-LSL", 1, "DP-LSL, 10x"))  # the same "s", hollow
    assert style("GPOPE", 1)["markerfacecolor"] == "none" and "markerfacecolor" not in style(
        "GPOPE")
    assert indistinct_entries(fig) == []
    plt.close(fig)


def test_a_log_band_stays_positive_and_matches_the_linear_band_when_narrow():
    fig, ax = plt.subplots()
    wide = np.array([[-0.5, 1.0], [3.0, 1.001], [0.1, 0.999]])  # mean - se < 0 at x = 0
    band(ax, np.arange(2), wide, "LSTD", "se", log=True)
    band(ax, np.arange(2), wide, "TD(0)", "se")
    log_lower = ax.collections[0].get_paths()[0].vertices[:, 1].min()
    linear_lower = ax.collections[1].get_paths()[0].vertices[:, 1].min()
    mean, se = mean_and_spread(wide, "se")
    assert linear_lower == pytest.approx(mean[0] - se[0]) and linear_lower < 0
    assert log_lower == pytest.approx(mean[0] * np.exp(-se[0] / mean[0])) and log_lower > 0
    narrow = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert np.isclose(narrow, mean[1] - se[1], rtol=1e-6).any()  # ~ mean - se where se << mean
    with pytest.raises(ValueError, match="positive mean"):
        band(ax, np.arange(2), -wide, "LSTD", log=True)
    plt.close(fig)


def test_every_look_has_one_meaning_across_the_book():
    """Issue 28, item 4: no two labels of STYLES share colour and marker, nor, without a marker,
    colour and line style (variants are hollow, so apart from every filled look)."""
    from dprl.plotting import BLUE, STYLES, Look, shared_looks
    assert shared_looks(STYLES) == []
    bad = {"a": Look(BLUE, "o"), "b": Look(BLUE, "o", "--"), "c": Look(BLUE, "", "--"),
           "d": Look(BLUE, "", ":"), "e": Look(BLUE, "", "--"), "f": Look(BLUE, "s", "--")}
    assert shared_looks(bad) == [["a", "b"], ["c", "e"]]


def _wide_log_figure(width: float = 12.0, legend_size: float = 7.0) -> plt.Figure:
    """Two log-log panels ``width`` inches wide with a small legend: the book shrinks a wide
    image to its column, and the tick labels' exponents are drawn at 70 %."""
    use_book_style()
    fig, axes = plt.subplots(1, 2, figsize=(width, 3.6))
    for ax in axes:
        ax.plot([1, 10, 100], [1e-3, 1e-2, 1], **style("LSTD"))
        ax.set(xscale="log", yscale="log", title="a title", xlabel="states")
    axes[0].legend(fontsize=legend_size)
    return fig


def test_drawn_text_is_measured_in_image_pixels_with_exponents_at_their_own_size():
    from dprl.figure_drawing import drawn_text
    from dprl.figure_layout import smallest_text
    fig = _wide_log_figure()
    sizes = {drawn.text: drawn.px for drawn in drawn_text(fig)}
    assert sizes["a title"] == pytest.approx(11 * 100 / 72)  # axes.titlesize at figure.dpi
    assert sizes["LSTD"] == pytest.approx(7 * 100 / 72)
    assert sizes["$\\mathdefault{10^{-1}}$"] == pytest.approx(0.7 * 10 * 100 / 72)
    assert smallest_text(fig).px == pytest.approx(0.7 * 10 * 100 / 72)
    plt.close(fig)


def test_a_wide_figure_is_fitted_to_the_column_and_its_small_text_raised():
    from dprl.figure_drawing import drawn_text, png_width
    from dprl.figure_layout import COLUMN_PX, MIN_TEXT_PX, display_scale, fit_to_column, small_text
    fig = _wide_log_figure(legend_size=4.0)
    assert png_width(fig) > 1000 and display_scale(fig) < 0.6
    assert min(size for size, _ in small_text(fig)) < 0.6 * MIN_TEXT_PX
    fit_to_column(fig)
    assert png_width(fig) <= COLUMN_PX and display_scale(fig) == 1.0
    width, height = fig.get_size_inches()
    assert height / width > 3.6 / 12  # the height shrinks less than the width
    assert [text for _, text in small_text(fig)] == ["LSTD"]  # 4 pt: 5.6 px
    plt.close(fig)
    fig = _wide_log_figure(legend_size=4.0)
    show(fig)  # fits and raises
    assert small_text(fig) == [] and png_width(fig) <= COLUMN_PX
    legend_px = {d.text: d.px for d in drawn_text(fig)}["LSTD"]
    assert MIN_TEXT_PX <= legend_px < MIN_TEXT_PX + 0.25 * 100 / 72  # raised just enough
    assert {d.text: d.px for d in drawn_text(fig)}["a title"] == pytest.approx(11 * 100 / 72)
    plt.close(fig)


def test_a_figure_that_fits_keeps_its_size_and_readable_text():
    from dprl.figure_layout import enlarge_small_text, fit_to_column
    use_book_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], **style("LSTD"))
    ax.legend()
    fit_to_column(fig)
    enlarge_small_text(fig)
    assert tuple(fig.get_size_inches()) == (6.4, 4.0)
    assert ax.get_legend().get_texts()[0].get_fontsize() == 9  # legend.fontsize: 12.5 px
    plt.close(fig)


def test_small_tick_labels_are_raised_on_their_axis_for_later_ticks_too():
    from dprl.figure_layout import MIN_TEXT_PX, enlarge_small_text, small_text
    use_book_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=4)
    enlarge_small_text(fig)
    assert small_text(fig) == []
    ax.set_xlim(0, 7)  # new ticks
    assert small_text(fig) == [] and MIN_TEXT_PX * 72 / 100 <= ax.xaxis.get_ticklabels()[
        -1].get_fontsize() < 7
    plt.close(fig)


def test_the_png_records_its_smallest_text():
    import io
    import json

    from PIL import Image

    from dprl.figure_layout import TEXT_SIZE_KEY, figure_png
    fig = _wide_log_figure()
    image = Image.open(io.BytesIO(figure_png(fig, base64=False)))
    record = json.loads(image.text[TEXT_SIZE_KEY])
    assert record["px"] == round(0.7 * 10 * 100 / 72, 2)  # a tick label's exponent
    assert record["text"].startswith("$\\mathdefault{10^{")
    assert image.size[0] == 1211  # as IPython's inline backend shows it: 12 in at 100 dpi
    plt.close(fig)


def test_a_small_title_of_several_lines_is_raised_too():
    from dprl.figure_layout import enlarge_small_text, small_text
    use_book_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_title("a title\nof two lines, $\\sigma^2$", fontsize=5)
    assert len(small_text(fig)) == 2
    enlarge_small_text(fig)
    assert small_text(fig) == [] and ax.title.get_fontsize() > 5
    plt.close(fig)


def test_titles_and_labels_longer_than_their_axes_are_broken_into_lines():
    from dprl.figure_layout import _words, wrap_long_labels
    assert _words("a $x = y$ b") == ["a", "$x = y$", "b"]
    use_book_style()
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.0))
    for ax in axes:
        ax.plot([0, 1], [0, 1])
    axes[0].set(title="paper's calibration (Lemma 1, sensitivity $1/m$) of the noise",
                ylabel="best score over c (mean log10 RMSE), a long label")
    axes[1].set(title="short", xlabel="power q of lambda = c m^q, as a long label")
    wrap_long_labels(fig)
    assert axes[0].get_title().count("\n") >= 1 and "$1/m$" in axes[0].get_title()
    assert "\n" in axes[0].get_ylabel() and "\n" in axes[1].get_xlabel()
    assert axes[1].get_title() == "short"
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    assert axes[0].title.get_window_extent(renderer).width <= axes[0].bbox.width
    plt.close(fig)


def test_tick_labels_or_titles_drawn_over_each_other_are_refused():
    from dprl.figure_layout import colliding_text
    use_book_style()
    fig, axes = plt.subplots(1, 4, figsize=(6.4, 2.5))
    for ax in axes:
        ax.plot([5000, 20000], [0, 1])
        ax.set_xticks([5000, 10000, 15000, 20000])
    axes[0].set_title("a title far too long for its panel")
    axes[1].set_title("and its neighbour's")
    assert ("5000", "10000") in colliding_text(fig)
    assert ("a title far too long for its panel", "and its neighbour's") in colliding_text(fig)
    with pytest.raises(ValueError, match="text drawn over other text"):
        show(fig)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(1.2, 2.5))  # labels of two lines, as in Fig. 3's cells
    ax.plot([0, 3], [0, 1])
    ax.set_xticks(range(4), ["CQL\n7.5", "CQL\n10", "BCQ\n7.5", "BCQ\n10"])
    assert ("CQL\n7.5", "CQL\n10") in colliding_text(fig)
    plt.close(fig)
    fig, ax = plt.subplots()
    ax.plot([5000, 20000], [0, 1])
    ax.set_xticks(range(4), ["CQL\n7.5", "CQL\n10", "BCQ\n7.5", "BCQ\n10"])
    ax.set_xlim(-0.5, 3.5)
    ax.set_title("fits")
    assert colliding_text(fig) == []
    ax.set_xticks([-10, 1, 2, 30], ["outside", "in", "view", "outside"])
    ax.set_xlim(-0.5, 3.5)  # set_xticks widened the view to its ticks
    assert colliding_text(fig) == []  # ticks outside the view are not drawn
    plt.close(fig)


@pytest.mark.parametrize("layout", ["constrained", None])
@pytest.mark.parametrize("width", [3.3, 7.7, 12.9])
def test_png_width_is_the_width_of_the_image_ipython_makes(layout, width):
    """png_width finds the width without rendering: it must equal the PNG's own."""
    from IPython.core.pylabtools import print_figure
    from dprl.figure_drawing import png_width
    fig, axes = plt.subplots(1, 2, figsize=(width, 3.1), layout=layout)
    for ax in axes:
        ax.plot([1, 10, 1e5], [0, 1, 2])
        ax.set_title("a title of some length")
    fig.legend(["a line"], loc="outside lower center" if layout else "lower center")
    width = png_width(fig)  # measured before the PNG is made, as show() measures
    image = print_figure(fig, "png", bbox_inches="tight")
    assert width == int.from_bytes(image[16:20], "big")
    plt.close(fig)


def _counting_draws(monkeypatch) -> list:
    """Figure.draw patched to count its calls (one entry per draw)."""
    from matplotlib.figure import Figure
    draws, draw = [], Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda fig, renderer: draws.append(fig) or draw(
        fig, renderer))
    return draws


def test_an_unchanged_figure_is_drawn_once_for_all_its_measurements(monkeypatch):
    from dprl.figure_drawing import drawn_once_per_change, drawn_text, png_width
    from dprl.figure_layout import colliding_text, covered_data, place_legends, small_text
    draws = _counting_draws(monkeypatch)
    fig = _wide_log_figure()
    with drawn_once_per_change(fig):
        first = (png_width(fig), [d.text for d in drawn_text(fig)])
        for _ in range(3):
            place_legends(fig), covered_data(fig), colliding_text(fig), small_text(fig)
            assert (png_width(fig), [d.text for d in drawn_text(fig)]) == first
    assert len(draws) == 1
    png_width(fig), drawn_text(fig)  # outside: every measurement draws
    assert len(draws) == 3
    plt.close(fig)


_MATH_LABEL = r"$\alpha \|\mu_X - \mu_{X'}\|_2 / \sigma_X$ (needs $\leq 1$)"


def _needs_every_change() -> list[plt.Figure]:
    """Figures that show() must shrink, enlarge text in (an axis label with math among
    them: its font size does not mark the figure stale), wrap labels of and move legends
    in."""
    wide = _wide_log_figure(legend_size=4.0)
    wide.axes[1].set_xlabel("a long label of the right-hand panel that wraps once shrunk")
    math_label, ax = plt.subplots(figsize=(6, 3))
    ax.plot([0, 1], [0, 1], **style("LSTD"))
    ax.set_xlabel(_MATH_LABEL, fontsize=5)
    covering, ax = plt.subplots(figsize=(6, 3))
    ax.plot(np.linspace(0, 1, 50), np.linspace(1, 0, 50) ** 0.1, **style("LSTD"))
    ax.legend(loc="upper left")
    return [wide, math_label, covering]


def _state(fig: plt.Figure) -> tuple:
    """What show() may change in ``fig``, and the PNG IPython makes of it."""
    from IPython.core.pylabtools import print_figure
    from matplotlib.text import Text
    return (tuple(fig.get_size_inches()),
            [(t.get_text(), t.get_fontsize()) for t in fig.findobj(Text)],
            [(ax.get_legend()._loc if ax.get_legend() else None) for ax in fig.axes],
            print_figure(fig, "png", bbox_inches="tight"))


def test_show_makes_the_figures_it_made_drawing_anew_for_every_measurement(monkeypatch):
    """show() drawing once per change leaves each figure as show() drawing for every
    measurement leaves it: size, texts, font sizes, legend places, the PNG's bytes."""
    import contextlib

    import dprl.plotting
    use_book_style()
    monkeypatch.setattr(plt, "show", lambda: None)
    once = [show(fig) or _state(fig) for fig in _needs_every_change()]
    draws = _counting_draws(monkeypatch)
    monkeypatch.setattr(dprl.plotting, "drawn_once_per_change",
                        lambda fig: contextlib.nullcontext())
    anew = [show(fig) or _state(fig) for fig in _needs_every_change()]
    assert len(draws) > 30
    assert once == anew
    assert once[0][0][0] < 12  # shrunk
    assert dict(once[1][1])[_MATH_LABEL] > 5  # enlarged
    assert any("\n" in text for text, _ in once[0][1])  # wrapped
    assert once[2][2] != [2]  # the legend left the upper left corner
    plt.close("all")
