"""Claims evaluated in code: each chapter turns a statement into a printed verdict.

A verdict is printed as one line starting with ``CLAIM`` so that the appendix's scorecard can
collect every verdict from the chapters' stored outputs (:func:`collect`), without any chapter
writing files.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dprl.paths import BOOK_DIR

PREFIX = "CLAIM"
_LINE = re.compile(rf"^{PREFIX} \[(?P<source>[^\],]+)(?:, (?P<section>[^\]]+))?\] "
                   r"(?P<verdict>HOLDS|FAILS|PARTIAL): (?P<statement>.*?) \| (?P<numbers>.*)$")
VERDICTS = ("HOLDS", "FAILS", "PARTIAL")


@dataclass(frozen=True)
class Verdict:
    """A claim of ``source`` (a paper or 'book') made in ``section`` of it, its verdict and
    the numbers behind it; ``chapter`` is where the book evaluates it."""

    source: str
    statement: str
    verdict: str
    numbers: str
    chapter: str = ""
    section: str = ""

    def _ipython_display_(self) -> None:
        """Display nothing: :func:`claim` has printed the verdict line already."""

    def line(self) -> str:
        where = f"{self.source}, {self.section}" if self.section else self.source
        return f"{PREFIX} [{where}] {self.verdict}: {self.statement} | {self.numbers}"


def _fmt(value: object) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{value:.4g}"
    return str(value)


def _graded(holds: object, partly: object) -> str:
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
    verdict = _graded(holds, partly)
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


def collect(book_dir: Path | str = BOOK_DIR) -> list[Verdict]:
    """Every verdict printed in the stored outputs of the chapters under ``book_dir``."""
    verdicts = []
    for path in sorted(Path(book_dir).rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        chapter = str(path.relative_to(book_dir).with_suffix(""))
        for text in _stream_texts(json.loads(path.read_text())):
            for line in text.splitlines():
                match = _LINE.match(line)
                if match:
                    verdicts.append(Verdict(chapter=chapter, **match.groupdict()))
    return verdicts


def _stream_texts(notebook: dict) -> list[str]:
    return ["".join(output.get("text", "")) for cell in notebook.get("cells", [])
            for output in cell.get("outputs", []) if output.get("output_type") == "stream"]


def scorecard(verdicts: list[Verdict]) -> str:
    """A text table of ``verdicts`` grouped by source, with the count of each verdict."""
    lines = []
    for source in sorted({v.source for v in verdicts}):
        mine = [v for v in verdicts if v.source == source]
        counts = ", ".join(f"{sum(v.verdict == name for v in mine)} {name.lower()}"
                           for name in VERDICTS)
        lines.append(f"{source}: {len(mine)} claims ({counts})")
        lines += [f"  {v.verdict:7s} {v.section + ': ' if v.section else ''}{v.statement} "
                  f"[{v.chapter}] {v.numbers}" for v in mine]
    return "\n".join(lines) or "no claims evaluated yet"


def scorecard_table(verdicts: list[Verdict]) -> str:
    """The scorecard as one Markdown table: paper, section, claim, verdict, numbers, chapter."""
    if not verdicts:
        return "no claims evaluated yet"
    rows = ["| paper | section | claim | verdict | numbers | chapter |",
            "|---|---|---|---|---|---|"]
    rows += [f"| {v.source} | {v.section} | {v.statement} | **{v.verdict}** | {v.numbers} "
             f"| {v.chapter} |" for v in sorted(verdicts, key=lambda v: (v.source, v.chapter))]
    return "\n".join(rows)
