"""How a figure is made to fit the book's page, for :func:`dprl.plotting.show`: legends kept
off the data (:func:`place_legends`, :func:`covered_data`) and told apart
(:func:`indistinct_entries`); no text shown below :data:`MIN_TEXT_PX` CSS pixels in the
:data:`COLUMN_PX` column (:func:`fit_to_column`, :func:`wrap_long_labels`,
:func:`enlarge_small_text`, measured by :mod:`dprl.figure_drawing`, which draws a figure once
per change); no texts drawn over each other (:func:`colliding_text`); and the smallest text
recorded in the PNG (:func:`figure_png`), which ``make check-book`` reads.
"""

from __future__ import annotations

import json
import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.path import Path
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from dprl.figure_drawing import DrawnText, changed, drawn_text, laid_out, measuring, png_width

_NO_MARKER = (None, "", " ", "None", "none")
_NO_LINE = ("", " ", "None", "none")


def _look(handle) -> tuple[str, str] | None:
    """(colour, marker) of a legend handle: a line, or the data line of an error bar, its
    marker prefixed "hollow " when unfilled; None for other artists (bands, bars), which the
    legend tells apart by their colour alone."""
    if isinstance(handle, ErrorbarContainer):
        handle = handle.lines[0]
    if not isinstance(handle, Line2D):
        return None
    marker = handle.get_marker()
    if marker in _NO_MARKER:
        return to_hex(handle.get_color()), "none"
    hollow = "hollow " if str(handle.get_markerfacecolor()).lower() == "none" else ""
    return to_hex(handle.get_color()), hollow + str(marker)


def indistinct_entries(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of legend labels of one axes of ``fig`` drawn with the same colour and marker
    (filled or hollow)."""
    pairs = []
    for ax in fig.axes:
        seen: dict[tuple[str, str], str] = {}
        for handle, label in zip(*ax.get_legend_handles_labels()):
            look = _look(handle)
            if look is None:
                continue
            if look in seen and seen[look] != label:
                pairs.append((seen[look], label))
            seen.setdefault(look, label)
    return pairs


#: Where :func:`place_legends` tries a legend that covers data, in this order, before it moves
#: the legend outside its axes (to the right of the upper corner).
LEGEND_LOCATIONS = ("upper right", "upper left", "lower left", "lower right", "center right",
                    "center left", "upper center", "lower center")


def _display_path(artist, path: Path) -> Path:
    return artist.get_transform().transform_path(path)


def _line_covered(line: Line2D, box: Bbox) -> bool:
    """Whether a segment of ``line`` crosses ``box`` or a marker of it lies in ``box``."""
    path = _display_path(line, line.get_path())
    finite = path.vertices[np.isfinite(path.vertices).all(axis=1)]
    if line.get_linestyle() not in _NO_LINE and path.intersects_bbox(box, filled=False):
        return True
    return line.get_marker() not in _NO_MARKER and bool(box.count_contains(finite))


def _collection_covered(collection, box: Bbox) -> bool:
    """Whether a point of a scatter, or an edge of a band or of error bars, is in ``box``."""
    if isinstance(collection, PathCollection):
        points = collection.get_offset_transform().transform(collection.get_offsets())
        return bool(box.count_contains(points[np.isfinite(points).all(axis=1)]))
    return any(_display_path(collection, path).intersects_bbox(box, filled=False)
               for path in collection.get_paths())


def covers_data(box: Bbox, ax: Axes) -> bool:
    """Whether the display-coordinate ``box`` hides data of ``ax`` inside the axes: a line's
    segment or marker, a scatter point, the edge of a band or error bar, or part of a bar."""
    box = Bbox.intersection(box, ax.bbox)
    if box is None or box.width <= 0 or box.height <= 0:
        return False
    return (any(_line_covered(line, box) for line in ax.lines if line.get_visible())
            or any(_collection_covered(c, box) for c in ax.collections if c.get_visible())
            or any(_display_path(p, p.get_path()).intersects_bbox(box)
                   for p in ax.patches if p.get_visible()))


def _legend_covers(legend: Legend, ax: Axes) -> bool:
    with measuring(legend.figure):
        return covers_data(legend.get_window_extent(legend.figure.canvas.get_renderer()), ax)


def covered_data(fig: Figure) -> list[str]:
    """The legends of ``fig`` that cover data (:func:`covers_data`): an axes legend over its
    own axes, a figure legend over any axes; one description per legend and axes."""
    laid_out(fig)
    found = [f"the legend of axes {i} ({ax.get_title() or 'untitled'})"
             for i, ax in enumerate(fig.axes) if ax.get_legend() and _legend_covers(
                 ax.get_legend(), ax)]
    return found + [f"a figure legend over axes {i} ({ax.get_title() or 'untitled'})"
                    for legend in fig.legends for i, ax in enumerate(fig.axes)
                    if _legend_covers(legend, ax)]


def place_legends(fig: Figure) -> None:
    """Move each axes legend of ``fig`` that covers data of its axes to the first location of
    :data:`LEGEND_LOCATIONS` where it covers none, else outside the axes, right of their upper
    corner (constrained layout makes room for it)."""
    laid_out(fig)
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not _legend_covers(legend, ax):
            continue
        changed(fig)
        for location in LEGEND_LOCATIONS:
            legend.set_loc(location)
            if not _legend_covers(legend, ax):
                break
        else:
            legend.set_loc("upper left")
            legend.set_bbox_to_anchor((1.02, 1.0), transform=ax.transAxes)
            laid_out(fig)


#: The smallest text a reader may be given in a figure: a font size, in CSS pixels, as the book
#: shows the figure in a 1280 px wide window (``make check-book`` checks it in Chromium).
MIN_TEXT_PX = 9.0
#: The width in CSS pixels that the book gives a figure in a 1280 px wide window (the figure box
#: of sphinx-book-theme's text column): a wider image is shrunk to it, and its text with it.
COLUMN_PX = 672
#: The PNG text chunk (tEXt) where :func:`figure_png` records the smallest text of the image as
#: JSON ``{"px": its font size in image pixels, "text": its first characters}``.
TEXT_SIZE_KEY = "dprl:smallest-text"
def display_scale(fig: Figure, column_px: float = COLUMN_PX) -> float:
    """The factor by which the book shrinks ``fig``'s image: 1 when it fits the column."""
    return min(1.0, column_px / png_width(fig))


def small_text(fig: Figure, min_px: float = MIN_TEXT_PX,
               column_px: float = COLUMN_PX) -> list[tuple[float, str]]:
    """The lines of text of ``fig`` that the book shows below ``min_px`` CSS pixels, as (their
    size as shown, the line)."""
    scale = display_scale(fig, column_px)
    return [(drawn.px * scale, drawn.text) for drawn in drawn_text(fig)
            if drawn.px * scale < min_px]


def _tick_label_axes(fig: Figure) -> dict[int, tuple]:
    """id of each tick label of ``fig`` -> (its axis, "major" or "minor")."""
    found = {}
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for which, ticks in (("major", axis.majorTicks), ("minor", axis.minorTicks)):
                for tick in ticks:
                    found[id(tick.label1)] = found[id(tick.label2)] = (axis, which)
    return found


def fit_to_column(fig: Figure, column_px: float = COLUMN_PX, rounds: int = 8) -> bool:
    """Shrink ``fig``, when its image is wider than the book's column, until the image is as
    wide as the column (the book would shrink the image, and its text with it): its width by
    the factor c that fits and its height by sqrt(c), so that its panels keep room for the text,
    which keeps its size in points, and so grows against them. Repeats while parts that keep
    their size (a legend outside the axes) keep the image too wide; raises ValueError when it
    stays too wide after ``rounds`` rounds. Returns whether it shrank ``fig``."""
    for round_ in range(rounds):
        width = png_width(fig)
        if width <= column_px:
            return round_ > 0
        c = column_px / width
        inches = fig.get_size_inches()
        changed(fig)
        fig.set_size_inches(math.floor(inches[0] * c * 100) / 100,
                            math.floor(inches[1] * math.sqrt(c) * 100) / 100)
    width = png_width(fig)
    if width > column_px:
        raise ValueError(f"fig: its image stays wider than {column_px} px ({width} px): "
                         f"a title, label or legend wider than its panel (shorten or wrap it)")
    return True


def _words(text: str) -> list[str]:
    """``text`` split at the spaces outside its math ($...$), which a line may break at."""
    words, inside = [""], False
    for char in text:
        if char == "$":
            inside = not inside
        if char == " " and not inside:
            words.append("")
        else:
            words[-1] += char
    return [word for word in words if word]


def _wrapped(words: list[str], lines: int) -> str:
    """``words`` in ``lines`` lines of about equal length (greedy, by characters)."""
    target = sum(len(word) + 1 for word in words) / lines
    out, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) / 2 > target and len(out) < lines - 1:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*out, line])


def wrap_long_labels(fig: Figure, most_lines: int = 3, rounds: int = 3) -> None:
    """Break each axes title wider than its axes, x label wider than its axes and y label
    taller than its axes into as few lines (at most ``most_lines``) as make it fit, at spaces
    outside math; a figure shrunk to the column keeps its labels' size in points, and labels
    written for a wider figure would run into their neighbours'. Repeats while the layout,
    redone around the broken labels, leaves one too long."""
    originals: dict[int, list[str]] = {}
    for _ in range(rounds):
        laid_out(fig)
        renderer = fig.canvas.get_renderer()
        wrapped = False
        for ax in fig.axes:
            titles = [getattr(ax, name, None) for name in ("title", "_left_title", "_right_title")]
            for text, room, size in (
                    *((title, ax.bbox.width, "width") for title in titles if title is not None),
                    (ax.xaxis.label, ax.bbox.width, "width"),
                    (ax.yaxis.label, ax.bbox.height, "height")):
                shown = text.get_text()
                if not shown or not text.get_visible() or (
                        "\n" in shown and id(text) not in originals):
                    continue  # broken into lines by the chapter itself
                if getattr(text.get_window_extent(renderer), size) <= room:
                    continue
                words = originals.setdefault(id(text), _words(shown))
                for lines in range(shown.count("\n") + 2, min(most_lines, len(words)) + 1):
                    text.set_text(_wrapped(words, lines))
                    changed(fig)
                    wrapped = True
                    if getattr(text.get_window_extent(renderer), size) <= room:
                        break
        if not wrapped:
            return


def enlarge_small_text(fig: Figure, min_px: float = MIN_TEXT_PX, column_px: float = COLUMN_PX,
                       rounds: int = 5) -> None:
    """Raise the font size of every text of ``fig`` that the book would show below ``min_px``
    CSS pixels (a figure wider than ``column_px`` is shown shrunk to it) just enough that it
    reaches ``min_px``; text large enough is left as it is. A tick label raises its axis's
    tick labels, so that ticks made later match. Repeats while the layout's new size changes
    the scale, and raises ValueError when text stays too small after ``rounds`` rounds."""
    for _ in range(rounds):
        scale = display_scale(fig, column_px)
        needed: dict[int, tuple[Text, float]] = {}
        for drawn in drawn_text(fig):
            shown = drawn.px * scale
            if shown >= min_px or drawn.artist is None:
                continue
            size = drawn.artist.get_fontsize() * min_px / shown
            size = math.ceil(size * 4 - 1e-9) / 4  # quarter points, at least min_px shown
            key = id(drawn.artist)
            needed[key] = (drawn.artist, max(size, needed.get(key, (None, 0.0))[1]))
        if not needed:
            return
        changed(fig)
        ticks = _tick_label_axes(fig)
        axes_sizes: dict[tuple, float] = {}
        for key, (artist, size) in needed.items():
            if key in ticks:
                axes_sizes[ticks[key]] = max(size, axes_sizes.get(ticks[key], 0.0))
            else:
                artist.set_fontsize(size)
        for (axis, which), size in axes_sizes.items():
            axis.set_tick_params(which=which, labelsize=size)
    left = small_text(fig, min_px, column_px)
    if left:
        raise ValueError(f"fig: text still smaller than {min_px} px as shown: {left[:3]}")


def _overlap(first: Bbox, second: Bbox, tolerance: float = 1.0) -> bool:
    """Whether two boxes share more than ``tolerance`` pixels each way (below 0: come closer
    than ``-tolerance``)."""
    return (min(first.x1, second.x1) - max(first.x0, second.x0) > tolerance
            and min(first.y1, second.y1) - max(first.y0, second.y0) > tolerance)


def _shown_tick_labels(axis) -> list[Text]:
    """The tick labels that ``axis`` draws: those of visible ticks inside its view, with text."""
    low, high = sorted(axis.get_view_interval())
    slack = 1e-9 * max(1.0, abs(high - low))
    return [label for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks())
            if tick.get_visible() and low - slack <= tick.get_loc() <= high + slack
            for label in (tick.label1, tick.label2)
            if label.get_visible() and label.get_text()]


def colliding_text(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of texts of ``fig`` drawn over each other: neighbouring tick labels of one axis
    ("10000" over "20000" in a narrow panel, labels of several lines included) or the titles
    of two axes."""
    laid_out(fig)
    with measuring(fig):
        return _colliding_text(fig, fig.canvas.get_renderer())


def _colliding_text(fig: Figure, renderer) -> list[tuple[str, str]]:
    pairs = []
    for ax in fig.axes:
        for axis, along in ((ax.xaxis, 0), (ax.yaxis, 1)):
            boxes = sorted(((label.get_window_extent(renderer), label)
                            for label in _shown_tick_labels(axis)),
                           key=lambda pair: pair[0].get_points()[0][along])
            pairs += [(first.get_text(), second.get_text())
                      for (box, first), (next_box, second) in zip(boxes, boxes[1:])
                      if _overlap(box, next_box, tolerance=-1.0)]  # touching counts
    titles = [ax.title for ax in fig.axes if ax.get_visible() and ax.title.get_text()]
    boxes = [title.get_window_extent(renderer) for title in titles]
    pairs += [(titles[i].get_text(), titles[j].get_text()) for i in range(len(titles))
              for j in range(i + 1, len(titles)) if _overlap(boxes[i], boxes[j])]
    return pairs


def smallest_text(fig: Figure) -> DrawnText | None:
    """The smallest line of text that ``fig`` draws (None when it draws none)."""
    return min(drawn_text(fig), key=lambda drawn: drawn.px, default=None)


def figure_png(fig: Figure, base64: bool = True) -> str | bytes | None:
    """``fig`` as IPython's inline backend shows it (a PNG at the figure's dpi, cropped with
    ``bbox_inches="tight"``; base64 text, or bytes), with its smallest text recorded under
    :data:`TEXT_SIZE_KEY`; None for a figure without axes, as IPython's."""
    from IPython.core.pylabtools import print_figure

    smallest = smallest_text(fig)
    record = {"px": round(smallest.px, 2), "text": smallest.text[:40]} if smallest else {}
    return print_figure(fig, "png", bbox_inches="tight", base64=base64,
                        metadata={TEXT_SIZE_KEY: json.dumps(record)})


def record_text_sizes() -> None:
    """Make IPython (when running) show figures through :func:`figure_png`."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["image/png"].for_type(Figure, figure_png)
