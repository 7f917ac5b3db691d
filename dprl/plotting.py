"""The book's figure style: one look for every figure, error bands as the papers draw them.

Every chapter calls :func:`use_book_style` once and shows every figure with :func:`show`.
Each method has one look (:data:`STYLES`: colour, marker and line style, Okabe-Ito colours),
and :func:`show`, by :mod:`dprl.figure_layout`, refuses a figure whose legend gives two
entries of one axes the same colour and marker (a reader, colour-blind or printing in grey,
must tell every curve apart), moves a legend that covers plotted data off it and refuses a
figure legend that covers data, fits the figure to the book's column with no text shown
smaller than :data:`~dprl.figure_layout.MIN_TEXT_PX` CSS pixels, refuses texts drawn over
each other and records the figure's smallest text in its PNG, which ``make check-book``
reads. Curves over independent trials are drawn with :func:`band`, whose ``spread`` is the
standard deviation ('sd') or the standard error of the mean ('se'); the caption of each
figure says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.cbook import normalize_kwargs
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from dprl.figure_drawing import drawn_once_per_change
from dprl.figure_layout import (COLUMN_PX, colliding_text, covered_data, enlarge_small_text,
                                 fit_to_column, indistinct_entries, place_legends, png_width,
                                 record_text_sizes, small_text, wrap_long_labels)
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
    with drawn_once_per_change(fig):
        _fit(fig)
        record_text_sizes()
        plt.show()


def _fit(fig: Figure) -> None:
    """:func:`show`'s changes and checks of ``fig``."""
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
