"""Drawing a figure once per change while :func:`dprl.plotting.show` fits it to the page.

Fitting a figure measures it many times over (its PNG's width, the text it draws, where its
legends and labels lie), and every measurement needs the figure laid out by a draw
(constrained layout runs in the draw). A draw costs a tenth of a second to a second; drawing
anew for each measurement took about 60 % of the time of chapters with many figures. Within
:func:`drawn_once_per_change`, :func:`laid_out` draws a figure only when it changed since its
last draw: when :mod:`dprl.figure_layout` changed it (:func:`changed`) or matplotlib marked it
*stale* (not every artist tells its figure: an axis label's new font size does not); the
measurements of a layout (:func:`measured`) are kept until it changes. Elsewhere every
measurement draws anew. A second draw of an unchanged figure moves its constrained layout by
rounding noise (1e-16 of the figure) only.

The draw records the text it draws (:func:`drawn_text`) with a renderer that draws nothing
else. Measuring extents updates tick positions as a draw does, which marks the figure stale
without changing what it draws; :func:`measuring` keeps the figure's state across such
measurements.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import matplotlib as mpl
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure
from matplotlib.mathtext import MathTextParser
from matplotlib.text import Text

#: The figure attribute holding the measurements of its current layout.
_LAYOUT = "_dprl_layout"
_MATH = MathTextParser("path")
T = TypeVar("T")


@dataclass(frozen=True)
class DrawnText:
    """A line of text as a figure draws it: its font size in image pixels at the figure's dpi
    (the smallest glyph's, for math: a superscript is drawn at 70 %), the line and its artist."""

    px: float
    text: str
    artist: Text | None


def _smallest_points(text: str, prop, ismath) -> float:
    """The font size in points of the smallest glyph of ``text`` drawn with ``prop``."""
    size = prop.get_size_in_points()
    if ismath is True:
        glyphs = _MATH.parse(text, 72, prop).glyphs
        return min((glyph[1] for glyph in glyphs), default=size)
    return size


def _draw_nothing(*args, **kwargs) -> None:
    """A renderer method that draws nothing."""


class _TextRecorder(RendererAgg):
    """An Agg renderer that records every line of text it is given and draws nothing: the
    figure is laid out and its text measured as an Agg canvas would, without rasterising."""

    def __init__(self, width: int, height: int, dpi: float) -> None:
        super().__init__(width, height, dpi)
        self.drawn: list[tuple[DrawnText, float]] = []  # with the nominal size in points

    def _update_methods(self) -> None:
        super()._update_methods()
        for name in ("draw_gouraud_triangles", "draw_image", "draw_markers",
                     "draw_path_collection", "draw_quad_mesh"):
            setattr(self, name, _draw_nothing)

    def draw_path(self, gc, path, transform, rgbFace=None) -> None:
        """Draws nothing."""

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None) -> None:
        if s.strip():
            self.drawn.append((DrawnText(_smallest_points(s, prop, ismath) * self.dpi / 72, s,
                                         mtext), prop.get_size_in_points()))


def _draw(fig: Figure) -> list[DrawnText]:
    """Lay ``fig`` out by drawing it with a :class:`_TextRecorder`; the lines of text drawn."""
    recorder = _TextRecorder(max(1, int(fig.bbox.width)), max(1, int(fig.bbox.height)), fig.dpi)
    fig.draw(recorder)
    # a text of several lines draws each without naming itself: found by its lines and size
    lines: dict[tuple[str, float], Text] = {}
    for text in fig.findobj(Text):
        for line in text.get_text().split("\n"):
            lines.setdefault((line, round(text.get_fontsize(), 3)), text)
    return [drawn if drawn.artist is not None else DrawnText(
        drawn.px, drawn.text, lines.get((drawn.text, round(points, 3))))
        for drawn, points in recorder.drawn]


@contextmanager
def drawn_once_per_change(fig: Figure) -> Iterator[None]:
    """Within: measurements of ``fig`` share one draw until ``fig`` changes."""
    setattr(fig, _LAYOUT, None)
    try:
        yield
    finally:
        delattr(fig, _LAYOUT)


def changed(fig: Figure) -> None:
    """Tell :func:`laid_out` that ``fig`` changed (a size, font size, text or legend)."""
    if hasattr(fig, _LAYOUT):
        setattr(fig, _LAYOUT, None)


def laid_out(fig: Figure) -> dict:
    """The measurements of ``fig``'s current layout, drawing ``fig`` first unless, within
    :func:`drawn_once_per_change`, it is unchanged since its last draw here."""
    if not hasattr(fig, _LAYOUT):
        return {"text": _draw(fig)}
    layout = getattr(fig, _LAYOUT)
    if layout is None or fig.stale:
        layout = {"text": _draw(fig)}
        setattr(fig, _LAYOUT, layout)
    return layout


@contextmanager
def measuring(fig: Figure) -> Iterator[None]:
    """Measure extents of ``fig`` (which updates ticks, as a draw does) keeping whether it
    changed since its last draw."""
    stale = fig.stale
    try:
        yield
    finally:
        if fig.stale != stale:
            fig.stale = stale


def measured(fig: Figure, key: str, measure: Callable[[Figure], T]) -> T:
    """``measure(fig)`` on ``fig``'s current layout, computed once per layout."""
    layout = laid_out(fig)
    if key not in layout:
        with measuring(fig):
            layout[key] = measure(fig)
    return layout[key]


def drawn_text(fig: Figure) -> list[DrawnText]:
    """Every line of text that ``fig`` draws at its dpi (tick labels of the ticks in view,
    labels, titles, legends, annotations), with its size in image pixels."""
    return laid_out(fig)["text"]


def _png_width(fig: Figure) -> int:
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    return int(box.padded(mpl.rcParams["savefig.pad_inches"]).width * fig.dpi)


def png_width(fig: Figure) -> int:
    """The width in pixels of the PNG that IPython's inline backend makes of ``fig`` (at the
    figure's dpi, cropped to its drawn parts with ``bbox_inches="tight"``), found as
    matplotlib's ``print_figure`` finds it (a draw without rendering, the tight box padded by
    ``savefig.pad_inches``, truncated to whole pixels) without rendering or encoding the image.
    """
    return measured(fig, "png_width", _png_width)
