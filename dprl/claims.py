"""Claims evaluated in code: each chapter turns a statement into a printed verdict.

A verdict is printed as one line starting with ``CLAIM`` so that the appendix's scorecard can
collect every verdict from the chapters' stored outputs (:func:`collect`), without any chapter
writing files. The scorecard shows the counts (:func:`scorecard`, :func:`scorecard_figure`) and
one table per paper (:func:`verdict_table`) whose rows link to the chapter section that
computes each verdict.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from dprl.paths import BOOK_DIR
from dprl.plotting import GREEN, VERMILLION, YELLOW
from dprl.tables import Table

PREFIX = "CLAIM"
_LINE = re.compile(rf"^{PREFIX} \[(?P<source>[^\],]+)(?:, (?P<section>[^\]]+))?\] "
                   r"(?P<verdict>HOLDS|FAILS|PARTIAL): (?P<statement>.*?) \| (?P<numbers>.*)$")
VERDICTS = ("HOLDS", "FAILS", "PARTIAL")
#: The colour of each verdict in the scorecard's figure (Okabe-Ito, from dprl.plotting).
VERDICT_COLOURS = {"HOLDS": GREEN, "FAILS": VERMILLION, "PARTIAL": YELLOW}


@dataclass(frozen=True)
class Verdict:
    """A claim of ``source`` (a paper or 'book') made in ``section`` of it, its verdict and
    the numbers behind it; ``chapter`` is where the book evaluates it, ``anchor`` the id of the
    chapter's section that does."""

    source: str
    statement: str
    verdict: str
    numbers: str
    chapter: str = ""
    section: str = ""
    anchor: str = ""

    def _ipython_display_(self) -> None:
        """Display nothing: :func:`claim` has printed the verdict line already."""

    def line(self) -> str:
        where = f"{self.source}, {self.section}" if self.section else self.source
        return f"{PREFIX} [{where}] {self.verdict}: {self.statement} | {self.numbers}"


def _fmt(value: object) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{value:.4g}"
    return str(value)


def graded(holds: object, partly: object) -> str:
    """HOLDS when ``holds``, PARTIAL when only ``partly``, FAILS otherwise; both must be bools
    (Python or numpy) computed from results."""
    for name, value in (("holds", holds), ("partly", partly)):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be a bool computed from results, got {value!r}")
    return "HOLDS" if holds else "PARTIAL" if partly else "FAILS"


def claim(source: str, statement: str, holds: bool, section: str = "", *,
          partly: bool = False, **numbers: object) -> Verdict:
    """Print and return the verdict on ``statement`` of ``source`` (e.g. 'Balle 2016') made in
    ``section`` (e.g. 'Sec. 6'): HOLDS when the criterion ``holds`` is true, PARTIAL when only
    the weaker criterion ``partly`` is, FAILS otherwise.

    Both are bools evaluated on results; a verdict cannot be named directly, so every outcome
    stays reachable. The numbers (rounded to 4 significant digits) are the evidence printed
    with it, the criterion's thresholds among them.
    """
    verdict = graded(holds, partly)
    if not source or any(c in source for c in "[],\n"):
        raise ValueError(f"source must be non-empty, on one line, without brackets or commas, "
                         f"got {source!r}")
    if any(c in section for c in "[]\n"):
        raise ValueError(f"section must be on one line and without brackets, got {section!r}")
    if not statement or "|" in statement or "\n" in statement:
        raise ValueError("statement must be non-empty, on one line and must not contain '|'")
    evidence = ", ".join(f"{key}={_fmt(value)}" for key, value in numbers.items())
    if "\n" in evidence:
        raise ValueError("every number must print on one line (pass scalars, not arrays)")
    result = Verdict(source, statement, verdict, evidence, section=section)
    print(result.line())
    return result


_HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")


def section_anchor(title: str) -> str:
    """The HTML id Sphinx gives a section titled ``title`` (a Markdown heading): docutils'
    ``make_id`` of its text without the Markdown emphasis, code and math marks."""
    from docutils.nodes import make_id

    return make_id(re.sub(r"[*_`$]", "", title))


def _verdicts_of(notebook: dict, chapter: str) -> list[Verdict]:
    """The verdicts in the stored stream outputs of ``notebook``, each with the anchor of the
    last heading above its cell."""
    verdicts, anchor = [], ""
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            titles = [m["title"] for m in map(_HEADING.match,
                                                "".join(cell.get("source", "")).splitlines()) if m]
            anchor = section_anchor(titles[-1]) if titles else anchor
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") != "stream":
                continue
            for line in "".join(output.get("text", "")).splitlines():
                match = _LINE.match(line)
                if match:
                    verdicts.append(Verdict(chapter=chapter, anchor=anchor, **match.groupdict()
                                            | {"section": match["section"] or ""}))
    return verdicts


def collect(book_dir: Path | str = BOOK_DIR) -> list[Verdict]:
    """Every verdict printed in the stored outputs of the chapters under ``book_dir``."""
    return [verdict for path in sorted(Path(book_dir).rglob("*.ipynb"))
            if ".ipynb_checkpoints" not in path.parts
            for verdict in _verdicts_of(json.loads(path.read_text()),
                                        str(path.relative_to(book_dir).with_suffix("")))]


def scorecard(verdicts: list[Verdict]) -> Table:
    """The count of each verdict by source (a paper or 'book'), and the total."""
    sources = sorted({v.source for v in verdicts})
    rows = [(source, *(sum(v.source == source and v.verdict == name for v in verdicts)
                       for name in VERDICTS), sum(v.source == source for v in verdicts))
            for source in sources]
    rows.append(("all", *(sum(v.verdict == name for v in verdicts) for name in VERDICTS),
                 len(verdicts)))
    return Table(("source", *(name.lower() for name in VERDICTS), "claims"), rows)


def scorecard_figure(verdicts: list[Verdict]) -> Figure:
    """The counts of :func:`scorecard` as one horizontal stacked bar per source, the verdicts
    in :data:`VERDICT_COLOURS`, each segment labelled with its count."""
    import matplotlib.pyplot as plt

    table = scorecard(verdicts)
    sources = [row[0] for row in table.rows[:-1]]
    fig, ax = plt.subplots(figsize=(6.4, 0.5 * len(sources) + 1.2))
    left = np.zeros(len(sources))
    for j, name in enumerate(VERDICTS, start=1):
        counts = np.array([row[j] for row in table.rows[:-1]], dtype=float)
        bars = ax.barh(sources, counts, left=left, color=VERDICT_COLOURS[name],
                       label=name.lower())
        ax.bar_label(bars, labels=[f"{c:.0f}" if c else "" for c in counts], label_type="center")
        left += counts
    ax.invert_yaxis()
    ax.set(xlabel="claims", xlim=(0, max(left.max(), 1) * 1.02))
    ax.grid(axis="y", visible=False)
    fig.legend(loc="outside upper center", ncol=len(VERDICTS))
    return fig


@dataclass(frozen=True)
class VerdictTable:
    """The verdicts of one source, one row per claim: in HTML with each verdict linked to the
    chapter section that computes it and its numbers behind a disclosure (``<details>``), in
    text as a :class:`~dprl.tables.Table` without the numbers."""

    verdicts: tuple[Verdict, ...]
    relative_to: str = "../"

    def _href(self, v: Verdict) -> str:
        return f"{self.relative_to}{v.chapter}.html" + (f"#{v.anchor}" if v.anchor else "")

    def _row(self, v: Verdict) -> str:
        cells = [f'<a href="{html.escape(self._href(v))}"><strong>{v.verdict}</strong></a>',
                 html.escape(v.section), html.escape(v.statement),
                 f"<details><summary>{html.escape(v.chapter)}</summary>"
                 f"{html.escape(v.numbers)}</details>"]
        return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{name}</th>" for name in ("verdict", "section", "claim",
                                                        "chapter: numbers"))
        body = "".join(self._row(v) for v in self.verdicts)
        return (f'<table class="dprl-table"><thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>")

    def __repr__(self) -> str:
        return Table(("verdict", "section", "claim", "chapter"),
                     [(v.verdict, v.section, v.statement, v.chapter)
                      for v in self.verdicts]).text()


def verdict_table(verdicts: list[Verdict], source: str, relative_to: str = "../"
                  ) -> VerdictTable:
    """The verdicts of ``source`` (by chapter, in the chapter's order), linked to their
    sections ``relative_to`` the page showing the table."""
    chosen = [v for v in verdicts if v.source == source]
    if not chosen:
        raise ValueError(f"source {source!r} has no verdicts")
    return VerdictTable(tuple(sorted(chosen, key=lambda v: v.chapter)), relative_to)


def save_verdicts(verdicts: list[Verdict], path: Path | str, commit: str) -> None:
    """Store ``verdicts`` (as collected from the book at ``commit``) as JSON, so that a later
    book can list what changed (:func:`changes`)."""
    records = [dict(vars(v)) for v in verdicts]
    Path(path).write_text(json.dumps({"commit": commit, "verdicts": records}, indent=1) + "\n")


def load_verdicts(path: Path | str) -> tuple[str, list[Verdict]]:
    """The commit and the verdicts stored by :func:`save_verdicts`."""
    stored = json.loads(Path(path).read_text())
    return stored["commit"], [Verdict(**record) for record in stored["verdicts"]]


def changes(before: list[Verdict], after: list[Verdict]
            ) -> list[tuple[Verdict | None, Verdict | None]]:
    """The claims, matched by source and statement, whose verdict differs between ``before``
    and ``after``: ``(old, new)``, with None for a claim only one of them has."""
    def keyed(verdicts: list[Verdict]) -> dict[tuple[str, str], Verdict]:
        found = {(v.source, v.statement): v for v in verdicts}
        if len(found) != len(verdicts):
            raise ValueError("two verdicts share a source and statement")
        return found

    old, new = keyed(before), keyed(after)
    return [(old.get(key), new.get(key)) for key in sorted(old.keys() | new.keys())
            if key not in old or key not in new or old[key].verdict != new[key].verdict]


# --- criteria that chance cannot pass -------------------------------------------------------

#: The level below which a criterion's PARTIAL (and so HOLDS) must be improbable under "no
#: effect".
NULL_LEVEL = 0.05


def cell_test_rate(n_seeds: int, margin_se: float = 2.0) -> float:
    """The probability that a cell's paired gap over ``n_seeds`` seeds is "significant" in a
    given direction (mean >= ``margin_se`` standard errors) when it has no effect: the
    Student-t tail ``P(t_{n-1} >= margin_se)`` (per-seed gaps independent and normal)."""
    from scipy.stats import t

    if int(n_seeds) != n_seeds or n_seeds < 2:
        raise ValueError(f"n_seeds must be an integer >= 2, got {n_seeds!r}")
    if not margin_se > 0:
        raise ValueError(f"margin_se must be > 0, got {margin_se!r}")
    return float(t.sf(margin_se, n_seeds - 1))


def net_count_tail(n_cells: int, rate: float, k: int) -> float:
    """``P(W - L >= k)`` when each of ``n_cells`` independent cells is a win with
    probability ``rate``, a loss with probability ``rate`` and neither otherwise (the null
    of no effect for a two-sided per-cell test)."""
    from scipy.stats import multinomial

    if int(n_cells) != n_cells or n_cells < 0:
        raise ValueError(f"n_cells must be an integer >= 0, got {n_cells!r}")
    if not 0 <= rate <= 0.5:
        raise ValueError(f"rate must be in [0, 0.5], got {rate!r}")
    probabilities = [rate, rate, 1 - 2 * rate]
    return float(sum(multinomial.pmf([wins, losses, n_cells - wins - losses], n_cells,
                                     probabilities)
                     for wins in range(n_cells + 1) for losses in range(n_cells + 1 - wins)
                     if wins - losses >= k))


def agreement_tail(chances: list[float], k: int) -> float:
    """``P(A >= k)`` for the number ``A`` of agreements among independent cells that agree by
    chance with the probabilities ``chances`` (a Poisson binomial: e.g. a choice among
    ``n_i`` options made at random agrees with probability ``1 / n_i``)."""
    if any(not 0 <= c <= 1 for c in chances):
        raise ValueError("chances must lie in [0, 1]")
    pmf = np.array([1.0])
    for c in chances:
        pmf = np.convolve(pmf, [1 - c, c])
    return float(pmf[max(k, 0):].sum()) if k <= len(chances) else 0.0


@dataclass(frozen=True)
class CountRule:
    """A verdict over independent cells from significant wins and losses (a significant
    loss counts against the claim): PARTIAL needs ``wins - losses >= threshold``, the
    smallest net count whose probability under "no effect" is at most ``level``; HOLDS also
    needs no loss and wins in at least ``share`` of the cells. ``null_probability`` is the
    chance of PARTIAL or better under no effect (at most ``level``; 0 where no count
    reaches it: then only FAILS is possible, which the rule states)."""

    wins: int
    losses: int
    cells: int
    rate: float
    share: float = 0.75
    level: float = NULL_LEVEL

    @property
    def threshold(self) -> int | None:
        return next((k for k in range(1, self.cells + 1)
                     if net_count_tail(self.cells, self.rate, k) <= self.level), None)

    @property
    def null_probability(self) -> float:
        k = self.threshold
        return 0.0 if k is None else net_count_tail(self.cells, self.rate, k)

    @property
    def partly(self) -> bool:
        k = self.threshold
        return k is not None and self.wins - self.losses >= k

    @property
    def holds(self) -> bool:
        return self.partly and self.losses == 0 and self.wins >= self.share * self.cells

    @property
    def verdict(self) -> str:
        """HOLDS, PARTIAL or FAILS, as :func:`claim` grades the rule."""
        return graded(self.holds, self.partly)

    def numbers(self) -> dict[str, object]:
        """The evidence for :func:`claim`: counts, threshold, null probability."""
        return dict(cells=self.cells, significant_wins=self.wins,
                    significant_losses=self.losses, per_cell_null_rate=self.rate,
                    net_needed=self.threshold if self.threshold is not None else "unreachable",
                    null_probability=self.null_probability)

    def criterion(self, cell: str) -> str:
        """The rule in words, ``cell`` saying what a significant win is."""
        return (f"per {cell}; PARTIAL if significant wins - significant losses >= "
                f"{self.threshold} (the smallest net count with P <= {self.level:g} under no "
                f"effect, each cell winning or losing by chance with probability "
                f"{self.rate:.3g}), HOLDS if also no significant loss and wins in >= "
                f"{self.share:.0%} of the {self.cells} cells, FAILS otherwise")
