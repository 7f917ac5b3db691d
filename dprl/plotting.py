"""The book's figure style: one look for every figure, error bands as the papers draw them.

Every chapter calls :func:`use_book_style` once and shows every figure with :func:`show`, which
refuses a figure whose legend gives two entries of one axes the same colour and marker (issue 15,
section 5: a reader, colour-blind or printing in grey, must tell every curve apart). Curves over
independent trials are drawn with :func:`band`, whose ``spread`` is the standard deviation ('sd')
or the standard error of the mean ('se'); the caption of each figure says which.
"""

from __future__ import annotations

from typing import Literal

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from dprl.validation import require_array

Spread = Literal["sd", "se"]

#: One colour per method, shared by every chapter so a method looks the same everywhere.
COLOURS = {
    "non-private": "#222222", "exact": "#222222",
    "LSW": "#1f77b4", "DP-LSW": "#1f77b4",
    "LSL": "#ff7f0e", "DP-LSL": "#ff7f0e",
    "LSTD": "#2ca02c", "GPOPE": "#d62728", "GTD2": "#9467bd",
    "TD(0)": "#8c564b", "Monte Carlo": "#e377c2",
    "dprl RDP": "#1f77b4", "dp-accounting RDP": "#ff7f0e",
    "dp-accounting PLD": "#2ca02c", "moments accountant": "#d62728",
    "ours (selective DP-SGD)": "#d62728", "ours, visible coins": "#d62728",
    "DP-SGD (expert-level)": "#1f77b4", "random policy": "#7f7f7f",
    # Wang & Hegde (2019), Fig. 2 and its variants
    "ours (updates)": "#d62728", "ours (iterations)": "#d62728", "ours (C outside)": "#d62728",
    "ours (updates, exact)": "#9467bd", "Alg. 1 literal": "#8c564b",
    "Alg. 1 literal (exact)": "#8c564b", "input perturbation": "#1f77b4",
    "Gaussian Q-table (not private)": "#ff7f0e", "DP-SGD": "#2ca02c", "plain DQN": "#222222",
    # privacy audits (appendix)
    "empirical trade-off": "#222222", "claimed (eps, delta)": "#d62728",
    "accountant (eps, delta)": "#2ca02c", "mu-GDP": "#1f77b4",
}

#: Marker and line style of the methods that have them; variants of a method keep its colour
#: and change these.
MARKERS = {"ours (selective DP-SGD)": "o", "ours, visible coins": "D",
           "DP-SGD (expert-level)": "s", "non-private": "^"}
LINESTYLES = {"ours, visible coins": "--", "random policy": ":", "non-private": "-.",
              "ours (iterations)": "--", "ours (C outside)": ":",
              "Alg. 1 literal (exact)": "--",
              "claimed (eps, delta)": "--", "accountant (eps, delta)": ":", "mu-GDP": "-."}


def style(label: str) -> dict[str, str]:
    """Matplotlib keywords of a method (:data:`COLOURS`, :data:`MARKERS`,
    :data:`LINESTYLES`), keyed by its label, with the label itself."""
    keywords = {"label": label, "color": COLOURS.get(label), "marker": MARKERS.get(label),
                "linestyle": LINESTYLES.get(label, "-")}
    return {name: value for name, value in keywords.items() if value is not None}

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
         colour: str | None = None, **line_kwargs) -> None:
    """Plot the mean of ``values`` (trials x len(x)) with a shaded +/- spread band; the
    colour is ``colour``, else a ``color`` keyword (as :func:`style` gives), else the
    label's in :data:`COLOURS`."""
    x = require_array("x", x, ndim=1)
    if np.shape(values)[1:] != x.shape:
        raise ValueError(f"values must have shape (trials, {x.size}), got {np.shape(values)}")
    mean, width = mean_and_spread(values, spread)
    colour = colour or line_kwargs.pop("color", None) or COLOURS.get(label)
    (line,) = ax.plot(x, mean, label=label, color=colour, **line_kwargs)
    ax.fill_between(x, mean - width, mean + width, color=line.get_color(), alpha=0.2,
                    linewidth=0)


def _look(handle) -> tuple[str, str] | None:
    """(colour, marker) of a legend handle: a line, or the data line of an error bar; None
    for other artists (bands, bars), which the legend tells apart by their colour alone."""
    if isinstance(handle, ErrorbarContainer):
        handle = handle.lines[0]
    if not isinstance(handle, Line2D):
        return None
    marker = handle.get_marker()
    return to_hex(handle.get_color()), "none" if marker in (None, "", " ", "None") else str(marker)


def indistinct_entries(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of legend labels of one axes of ``fig`` drawn with the same colour and marker."""
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


def show(fig: Figure) -> None:
    """Show ``fig`` after checking that no two legend entries of one axes share colour and
    marker (:func:`indistinct_entries`); raises ValueError naming them otherwise."""
    pairs = indistinct_entries(fig)
    if pairs:
        raise ValueError(f"fig: legend entries drawn alike (same colour and marker): {pairs}")
    plt.show()
