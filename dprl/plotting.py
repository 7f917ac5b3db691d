"""The book's figure style: one look for every figure, error bands as the papers draw them.

Every chapter calls :func:`use_book_style` once and shows every figure with :func:`show`, which
refuses a figure whose legend gives two entries of one axes the same colour and marker (issue 15,
section 5: a reader, colour-blind or printing in grey, must tell every curve apart), moves a
legend that covers plotted data to a free corner of its axes or outside them
(:func:`place_legends`) and refuses a figure legend that covers data (issue 30, item 5). So that
no figure text is shown smaller than :data:`MIN_TEXT_PX` CSS pixels (issue 42, item 1), it shrinks
a figure wider than the book's column to the column (:func:`fit_to_column`: the page would shrink
its image, text included), breaks the titles and labels it made too long into lines
(:func:`wrap_long_labels`), raises any text still too small (:func:`enlarge_small_text`), refuses
texts drawn over each other (:func:`colliding_text`) and records the figure's smallest text in its
PNG (:func:`figure_png`), which ``make check-book`` reads. Curves over
independent trials are drawn with :func:`band`, whose ``spread`` is the standard deviation ('sd')
or the standard error of the mean ('se'); the caption of each figure says which.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Literal

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.cbook import normalize_kwargs
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex, to_rgb
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.mathtext import MathTextParser
from matplotlib.path import Path
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from dprl.validation import require_array

Spread = Literal["sd", "se"]

#: The Okabe-Ito palette (Okabe & Ito 2008), distinguishable with every common colour-vision
#: deficiency; black, orange, sky blue, bluish green, yellow, blue, vermillion, reddish purple,
#: grey.
PALETTE = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00",
           "#CC79A7", "#999999")
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE, GREY = PALETTE


@dataclass(frozen=True)
class Look:
    """How a method is drawn: colour, marker ("" for none) and line style."""

    colour: str
    marker: str = ""
    linestyle: str = "-"


#: Dash patterns beyond matplotlib's four named line styles, for line-only looks that share a
#: colour (each pattern scales with the line width, as the named ones do).
DENSE_DASH_DOT = (0, (5, 1, 1, 1))
DASH_DOT_DOT = (0, (3, 1, 1, 1, 1, 1))
LONG_DASHES = (0, (8, 3))
LOOSE_DOTS = (0, (1, 3))
LOOSE_DASH_DOT = (0, (3, 4, 1, 4))

#: The one mapping from method (and variant) to its look, shared by every figure of the book so a
#: method looks the same everywhere, and a look means one label only (:func:`shared_looks`);
#: variants of a method keep its colour and change marker or line style (:func:`style` with
#: ``variant``).
STYLES: dict[str, Look] = {
    "non-private": Look(BLACK, "^", "-."), "exact": Look(BLACK, "", "-"),
    "LSW": Look(BLUE, "^", ":"), "DP-LSW": Look(BLUE, "o"),
    "LSL": Look(ORANGE, "^", ":"), "DP-LSL": Look(ORANGE, "s"),
    "LSTD": Look(GREEN, "^"), "WIS-LSTD": Look(GREEN, "v"), "GPOPE": Look(VERMILLION, "D"),
    "GTD2": Look(PURPLE, "v"), "TD(0)": Look(SKY, "<"), "Monte Carlo": Look(GREY, ">"),
    "theta = 0": Look(GREY, "", LOOSE_DOTS),
    "dprl RDP": Look(BLUE, "h"), "dp-accounting RDP": Look(ORANGE, "d", "--"),
    "dp-accounting PLD": Look(GREEN, "p"), "moments accountant": Look(VERMILLION, "d", ":"),
    # GPOPE's symmetrised replace-one PLD, and Poisson's orders composed apart (not sound there)
    "symmetrised PLD": Look(PURPLE, "*"), "Poisson PLD, orders apart": Look(SKY, "P", "--"),
    # Sharma's first expert populations, each run stopped at a random budget (issue 40)
    "experts, random budgets": Look(BLUE, "", "--"),
    # Sec. 6's comparison on each population (experiments chapter, the regenerated runs)
    "first populations (random budgets)": Look(GREY, "s", "none"),
    "experts trained longer": Look(GREEN, "D", "none"),
    # Xie et al. (2019), Sec. 6: step-size schedules of the exact recursion
    "constant step": Look(VERMILLION, "^"), "diminishing step": Look(BLUE, "p"),
    # Sharma et al. (2025)
    "ours (selective DP-SGD)": Look(VERMILLION, "o"),
    "ours, visible coins": Look(VERMILLION, "p", "--"),
    "DP-SGD (expert-level)": Look(BLUE, "s"), "random policy": Look(GREY, "", ":"),
    # Wang & Hegde (2019), Fig. 2 and its variants
    "ours (updates)": Look(VERMILLION, "h"), "ours (iterations)": Look(VERMILLION, "s", "--"),
    "ours (C outside)": Look(VERMILLION, "x", ":"), "ours (updates, exact)": Look(PURPLE, "D"),
    "Alg. 1 literal": Look(YELLOW, "v"), "Alg. 1 literal (exact)": Look(YELLOW, "^", "--"),
    "input perturbation": Look(BLUE, "<"), "Gaussian Q-table (not private)": Look(ORANGE, ">"),
    "DP-SGD": Look(GREEN, "P"), "plain DQN": Look(BLACK, "", DENSE_DASH_DOT),
    # audits
    "empirical trade-off": Look(BLACK, "v"), "claimed (eps, delta)": Look(VERMILLION, "", "--"),
    "accountant (eps, delta)": Look(GREEN, "", ":"), "mu-GDP": Look(BLUE, "", "-."),
    "random guess": Look(GREY, "", "-."),
    # Wang & Hegde (2019), the part's figures (book/wang2019)
    # thin reference lines: optimum, bounds, targets (every wang2019 figure that has one); an
    # assumed value where "plain DQN" (black, no marker) shares the axes (fig-wang-lipschitz)
    "reference line": Look(BLACK, "", "--"), "assumed value": Look(GREY, "", "--"),
    # algorithm: fig-wang-ou-paths (three draws of one path), fig-wang-noise-list (variant 1:
    # Alg. 1 as printed; base markers other than variant 1's "s"), fig-wang-released-q
    # (variant 1: the other action)
    "OU path 1": Look(BLUE, "", LONG_DASHES), "OU path 2": Look(ORANGE, "", "--"),
    "OU path 3": Look(GREEN, "", DENSE_DASH_DOT),
    "points queried first": Look(BLACK, "s", "none"),
    "reset every 50 steps": Look(BLUE, "d"), "reset every 500 steps": Look(ORANGE, "X"),
    "reset every 5000 steps": Look(GREEN, "d"),
    "network Q_theta": Look(BLUE, "H"), "released Q_theta + g": Look(VERMILLION, "v"),
    # efficiency: fig-wang-query-cost, fig-wang-conditioning
    "batches of 1000": Look(SKY, "D"), "one query per call": Look(ORANGE, "p", "--"),
    "nearest-neighbour bridges": Look(VERMILLION, "H"),
    "dense conditioning (Cholesky)": Look(PURPLE, "s", "--"),
    # experiments: fig-wang-figure1, one method at six noise levels (sigma = 0: "non-private"),
    # each level its own colour, marker and line style, so that the level is read at a glance
    "ours, sigma = 0.2": Look(SKY, "o"), "ours, sigma = 0.4": Look(BLUE, "D", "--"),
    "ours, sigma = 0.6": Look(GREEN, "h", ":"), "ours, sigma = 0.8": Look(ORANGE, "v", "-."),
    "ours, sigma = 1": Look(VERMILLION, "X", DENSE_DASH_DOT),
    # function-valued-mechanisms: fig-wang-queries-eps, fig-wang-lemma6
    "independent noise per state (Prop. 3)": Look(BLUE, "8", "--"),
    "Gaussian-process noise (Prop. 4)": Look(VERMILLION, "8"),
    "random ReLU network": Look(BLUE, ".", "none"),
    # privacy-analysis: fig-wang-path-bound, fig-wang-lemma8-tail (variants: (sigma, beta)),
    # fig-wang-composition
    "solved path bound k": Look(BLACK, "D", "none"), "simulated OU maxima": Look(BLUE, "*"),
    "Theorem 5 (proof)": Look(VERMILLION, "<"), "as quoted from KOV13": Look(SKY, "s", "--"),
    "advanced composition": Look(ORANGE, "<", "-."), "RDP (Mironov 2017)": Look(BLUE, "v", ":"),
    # utility: fig-wang-prop10
    "released max_a (Q + g)": Look(VERMILLION, ">"), "table alone, max_a Q": Look(BLUE, "x", "--"),
    # primer and Balle et al. (2016) (book/primer, book/balle2016)
    "classic Gaussian": Look(VERMILLION),  # DP primer, sigma
    "analytic Gaussian": Look(BLUE),
    "simulation": Look(SKY),  # DP primer, privacy-loss distributions
    "basic composition": Look(PURPLE, "<", ":"),
    "Gaussian, no sampling": Look(BLACK, "", DASH_DOT_DOT),  # DP primer, RDP
    "Poisson sampling": Look(BLUE, "", DENSE_DASH_DOT), "WOR, Theorem 9": Look(ORANGE, "o", "none"),
    "WOR, dp-accounting": Look(GREEN, "", LONG_DASHES),
    "WOR, leading term": Look(VERMILLION, "", LONG_DASHES),
    "projection": Look(GREY, "x", "--"),  # policy evaluation, best D-weighted fit
    "reference": Look(BLACK, "", LOOSE_DOTS),  # slope guides, constant ratios (primer, privacy)
    "maximum over k": Look(BLACK, "o", "none"),  # Balle algorithms, smooth bound's maximiser
    "expected signature": Look(SKY, "", "--"),
    "Theorem 11 bound": Look(VERMILLION, "", DENSE_DASH_DOT),
    "corrected bound": Look(GREEN, "", LOOSE_DOTS),  # Balle utility, DP-LSW excess risk
    "lambda = m": Look(ORANGE, "P"), "lambda = sqrt(m)": Look(PURPLE, "h"),
    "lambda = m^0.4": Look(SKY, "v"),  # Balle utility, DP-LSL ridge schedules
    # Xie et al. (2019): Mountain Car, the evaluated policy's training (fig-xie-mc-training)
    "Q(lambda) training": Look(PURPLE), "greedy policy": Look(BLACK, "", LONG_DASHES),
    # Xie et al. (2019): HIV, the evaluated policy's episode (fig-xie-hiv-episode)
    "log10 T1": Look(BLUE, "", DASH_DOT_DOT), "log10 V": Look(VERMILLION, "", "-."),
    "log10 E": Look(GREEN, "", "-."),
    "e1 (RTI)": Look(ORANGE), "e2 (PI)": Look(PURPLE, "", "--"),
    # Sharma et al. (2025), the part's figures (book/sharma2025)
    # environments (data-release: fig-sharma-unanimous-k, fig-sharma-stable-size); base markers
    # other than variant 1's "s" keep an environment's variants apart
    "CartPole": Look(BLUE, ">"), "Acrobot": Look(ORANGE, "D"), "LunarLander": Look(GREEN, "<"),
    "HIV": Look(PURPLE, "P"),
    # the experts' returns (experts: fig-sharma-fig2; offline-rl: fig-sharma-offline-learning)
    "experts": Look(GREEN),
    # setting: fig-sharma-group-privacy
    "expert-level eps, lower bound": Look(VERMILLION, "P"),
    "group privacy": Look(ORANGE, "h", "--"),
    "trajectory-level certificate": Look(GREY, "", DASH_DOT_DOT),
    "expert-level DP-SGD, same noise": Look(BLUE, "", ":"),
    # privacy-analysis: fig-sharma-lemma51, fig-sharma-lemma52, fig-sharma-theorem53: the
    # paper's bounds and the book's closed forms against the exact values ("exact"), the
    # thresholds of Algorithm 2
    "paper's bound": Look(VERMILLION, "", DASH_DOT_DOT),
    "closed form": Look(SKY, "h", "none"),
    "paper's point": Look(VERMILLION, "*", "none"), "privacy target": Look(GREY),
    "threshold c_min": Look(GREEN, "", "--"), "threshold theta": Look(BLUE, "", LOOSE_DOTS),
    "threshold theta + offset": Look(PURPLE, "", "-."),
    # privacy-analysis: fig-sharma-theorem55 (variants: the number of rounds T)
    "KOV composition": Look(BLUE, "P"), "Thm. 3.20 composition": Look(ORANGE, "H", "--"),
    # selective-dp-sgd: fig-sharma-visible-coins (one point per step)
    "DP-SGD step (coin = 1)": Look(BLUE, "X", "none"),
    "stable-set step (coin = 0)": Look(GREEN, "o", "none"),
    # experiments: fig-sharma-nonprivate-curves, fig-sharma-figure3 (levels drawn across a panel)
    "step cap": Look(BLACK, "", ":"), "non-private (reference)": Look(BLACK, "", "-."),
    # privacy-analysis: fig-sharma-theorem55 (where a cited result stops applying)
    "validity limit": Look(BLACK, "", LOOSE_DASH_DOT),
}


def look_identity(look: Look) -> tuple[str, ...]:
    """What tells a look apart in a legend: (colour, marker) when it has a marker (the line
    style may then be "none" or vary with the plot), else (colour, "", line style)."""
    return (look.colour, look.marker) if look.marker else (look.colour, "", str(look.linestyle))


def shared_looks(styles: dict[str, Look]) -> list[list[str]]:
    """Groups of two or more labels of ``styles`` with one :func:`look_identity`: for a book
    with one meaning per look, the empty list (issue 28, item 4)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for label, look in styles.items():
        groups.setdefault(look_identity(look), []).append(label)
    return [labels for labels in groups.values() if len(labels) > 1]


#: The colours alone, for artists without markers (bars, bands); derived from :data:`STYLES`.
COLOURS = {label: look.colour for label, look in STYLES.items()}
#: Markers and line styles of a method's variants 1, 2, ... (variant 0 is the method's own look).
VARIANT_MARKERS = ("s", "^", "v", "x", "P", "<", ">", "*")
VARIANT_LINESTYLES = ("--", ":", "-.", DENSE_DASH_DOT)


def style(method: str, variant: int = 0, label: str | None = None) -> dict:
    """Matplotlib keywords of ``method``'s look in :data:`STYLES` with ``label`` (default: the
    method's name); ``variant`` k >= 1 keeps the colour and takes the k-th variant marker,
    hollow, and line style, so that variants of one method stay apart in one axes and apart
    from the filled markers of other methods (a hollow vermillion square is no orange one).
    A variant marker may equal the method's own (e.g. "s" of LSL): :func:`show` refuses such
    a pair, and the figure then takes another variant."""
    if method not in STYLES:
        raise ValueError(f"method {method!r} has no look in dprl.plotting.STYLES")
    if variant < 0:
        raise ValueError(f"variant must be >= 0, got {variant}")
    look = STYLES[method]
    marker, linestyle = look.marker, look.linestyle
    if variant:
        marker = VARIANT_MARKERS[(variant - 1) % len(VARIANT_MARKERS)]
        linestyle = VARIANT_LINESTYLES[(variant - 1) % len(VARIANT_LINESTYLES)]
    keywords = {"label": label or method, "color": look.colour, "linestyle": linestyle}
    hollow = {"markerfacecolor": "none"} if variant else {}
    return keywords | ({"marker": marker} | hollow if marker else {})


def colour_distance(first: str, second: str) -> float:
    """The CIE 1976 colour difference (Delta E*ab) of two matplotlib colours, under D65: about
    2.3 is just noticeable; pairs of the palette below :data:`NEAR_COLOURS` are told apart by
    hue alone in a small marker only with effort."""
    return float(np.linalg.norm(_lab(first) - _lab(second)))


def _lab(colour: str) -> np.ndarray:
    """CIELAB coordinates of an sRGB colour (D65 white)."""
    rgb = np.array(to_rgb(colour))
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ linear / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


#: Colour differences (:func:`colour_distance`) below which two markers of one shape are a
#: near-collision: sky blue and blue (26), orange and vermillion (33), orange and yellow (35).
NEAR_COLOURS = 36.0


STYLE = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 4,
    "figure.constrained_layout.use": True,
}


def use_book_style() -> None:
    """Apply the book's matplotlib settings (sizes, fonts, grid) to every later figure."""
    mpl.rcParams.update(STYLE)


def mean_and_spread(values: np.ndarray, spread: Spread = "se",
                    axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean over trials and its spread: sample standard deviation (ddof=1) or standard error."""
    values = require_array("values", values)
    if not -values.ndim <= axis < values.ndim:
        raise ValueError(f"axis {axis} is out of range for values of shape {values.shape}")
    n = values.shape[axis]
    if n < 2:
        raise ValueError(f"a spread needs at least 2 trials along axis {axis}, got {n}")
    sd = values.std(axis=axis, ddof=1)
    if spread == "sd":
        return values.mean(axis=axis), sd
    if spread == "se":
        return values.mean(axis=axis), sd / np.sqrt(n)
    raise ValueError(f"spread must be 'sd' or 'se', got {spread!r}")


def band(ax: Axes, x: np.ndarray, values: np.ndarray, label: str, spread: Spread = "se",
         colour: str | None = None, log: bool = False, **line_kwargs) -> None:
    """Plot the mean of ``values`` (trials x len(x)) with a shaded +/- spread band, drawn with
    the label's look in :data:`STYLES` (when it has one), overridden by ``line_kwargs`` (e.g.
    :func:`style` of a variant) and ``colour``.

    ``log`` (for a logarithmic y axis) draws the band of the mean's logarithm instead (delta
    method): mean x/÷ exp(spread / mean), equal to mean +/- spread while the spread is small
    against the mean, and positive where mean - spread <= 0, which would send the band's
    lower end to the axis bottom; the mean must then be positive."""
    x = require_array("x", x, ndim=1)
    if np.shape(values)[1:] != x.shape:
        raise ValueError(f"values must have shape (trials, {x.size}), got {np.shape(values)}")
    mean, width = mean_and_spread(values, spread)
    if log and not np.all(mean > 0):
        raise ValueError("values must have a positive mean at every x for a band with log=True")
    lower, upper = (mean * np.exp(-width / mean), mean * np.exp(width / mean)) if log else (
        mean - width, mean + width)
    keywords = (style(label) if label in STYLES else {"label": label}) | normalize_kwargs(
        line_kwargs, Line2D)
    if colour:
        keywords["color"] = colour
    (line,) = ax.plot(x, mean, **keywords)
    ax.fill_between(x, lower, upper, color=line.get_color(), alpha=0.2, linewidth=0)


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
    return covers_data(legend.get_window_extent(legend.figure.canvas.get_renderer()), ax)


def covered_data(fig: Figure) -> list[str]:
    """The legends of ``fig`` that cover data (:func:`covers_data`): an axes legend over its
    own axes, a figure legend over any axes; one description per legend and axes."""
    fig.draw_without_rendering()
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
    fig.draw_without_rendering()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not _legend_covers(legend, ax):
            continue
        for location in LEGEND_LOCATIONS:
            legend.set_loc(location)
            if not _legend_covers(legend, ax):
                break
        else:
            legend.set_loc("upper left")
            legend.set_bbox_to_anchor((1.02, 1.0), transform=ax.transAxes)
            fig.draw_without_rendering()


#: The smallest text a reader may be given in a figure: a font size, in CSS pixels, as the book
#: shows the figure in a 1280 px wide window (``make check-book`` checks it in Chromium).
MIN_TEXT_PX = 9.0
#: The width in CSS pixels that the book gives a figure in a 1280 px wide window (the figure box
#: of sphinx-book-theme's text column): a wider image is shrunk to it, and its text with it.
COLUMN_PX = 672
#: The PNG text chunk (tEXt) where :func:`figure_png` records the smallest text of the image as
#: JSON ``{"px": its font size in image pixels, "text": its first characters}``.
TEXT_SIZE_KEY = "dprl:smallest-text"
_MATH = MathTextParser("path")


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


class _TextRecorder(RendererAgg):
    """An Agg renderer that records, instead of drawing, every line of text it is given."""

    def __init__(self, width: int, height: int, dpi: float) -> None:
        super().__init__(width, height, dpi)
        self.drawn: list[tuple[DrawnText, float]] = []  # with the nominal size in points

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None) -> None:
        if s.strip():
            self.drawn.append((DrawnText(_smallest_points(s, prop, ismath) * self.dpi / 72, s,
                                         mtext), prop.get_size_in_points()))


def drawn_text(fig: Figure) -> list[DrawnText]:
    """Every line of text that ``fig`` draws at its dpi (tick labels of the ticks in view,
    labels, titles, legends, annotations), with its size in image pixels."""
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


def png_width(fig: Figure) -> int:
    """The width in pixels of the PNG that IPython's inline backend makes of ``fig`` (at the
    figure's dpi, cropped to its drawn parts with ``bbox_inches="tight"``), found as
    matplotlib's ``print_figure`` finds it (a draw without rendering, the tight box padded by
    ``savefig.pad_inches``, truncated to whole pixels) without rendering or encoding the image.
    """
    fig.draw_without_rendering()
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    return int(box.padded(mpl.rcParams["savefig.pad_inches"]).width * fig.dpi)


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
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        changed = False
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
                    changed = True
                    if getattr(text.get_window_extent(renderer), size) <= room:
                        break
        if not changed:
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
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
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


def _record_text_sizes() -> None:
    """Make IPython (when running) show figures through :func:`figure_png`."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["image/png"].for_type(Figure, figure_png)


def show(fig: Figure) -> None:
    """Show ``fig`` after checking that no two legend entries of one axes share colour and
    marker (:func:`indistinct_entries`), shrinking it to the book's column when wider
    (:func:`fit_to_column`), enlarging text the book would still show too small
    (:func:`enlarge_small_text`), breaking the titles and labels of a shrunk figure that are
    longer than their axes into lines (:func:`wrap_long_labels`) and moving legends off the data
    (:func:`place_legends`);
    raises ValueError naming the entries, a figure legend that covers data or texts drawn over
    each other (:func:`colliding_text`) otherwise. In IPython the image records its smallest
    text (:func:`figure_png`)."""
    pairs = indistinct_entries(fig)
    if pairs:
        raise ValueError(f"fig: legend entries drawn alike (same colour and marker): {pairs}")
    shrunk = False
    for _ in range(2):  # again when a legend moved outside its axes widened the image
        shrunk = fit_to_column(fig) or shrunk
        enlarge_small_text(fig)
        if shrunk:  # labels written for the wider figure
            wrap_long_labels(fig)
        place_legends(fig)
        if png_width(fig) <= COLUMN_PX and not small_text(fig):
            break
    covered = covered_data(fig)
    if covered:
        raise ValueError(f"fig: legends cover plotted data: {covered}")
    colliding = colliding_text(fig)
    if colliding:
        raise ValueError(f"fig: text drawn over other text: {colliding[:3]} (fewer panels per "
                         f"row, fewer tick labels or shorter titles)")
    _record_text_sizes()
    plt.show()
