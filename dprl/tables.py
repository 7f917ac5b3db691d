"""Tables that read as tables everywhere: aligned text in a terminal, JupyterLab's text view
and nbval's comparison, an HTML table in the built book (which renders a cell's richest
output). Numbers are printed to 4 significant digits."""

from __future__ import annotations

import html
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


def cell_text(value: object) -> str:
    """A cell as printed: integers in full, other numbers to 4 significant digits, None and
    NaN (an inapplicable entry) as an em dash, anything else by ``str``."""
    if value is None or (isinstance(value, numbers.Real) and value != value):
        return "\u2014"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return f"{float(value):.4g}"
    return str(value)


def _numeric(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Table:
    """``rows`` under ``columns``; numeric columns right-aligned."""

    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        for name, value in (("columns", columns), ("rows", rows)):
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                raise ValueError(f"{name} must be a sequence, got {value!r}")
        columns, rows = tuple(columns), tuple(rows)
        if not columns or not all(isinstance(name, str) for name in columns):
            raise ValueError(f"columns must be a non-empty sequence of str names, got {columns!r}")
        if any(isinstance(row, (str, bytes, Mapping)) or not isinstance(row, Iterable)
               for row in rows):
            raise ValueError("rows must be sequences of cells (not a str or a mapping)")
        rows = tuple(tuple(row) for row in rows)
        if any(len(row) != len(columns) for row in rows):
            raise ValueError(f"every row must have the {len(columns)} columns")
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "rows", rows)

    def _right(self, j: int) -> bool:
        values = [row[j] for row in self.rows if row[j] is not None]
        return bool(values) and all(_numeric(v) for v in values)

    def _alignment(self) -> list[bool]:
        """Whether each column is right-aligned (once per table: linear in the rows)."""
        return [self._right(j) for j in range(len(self.columns))]

    def text(self) -> str:
        """Aligned plain text, one line per row under a header line."""
        cells = [list(self.columns)] + [[cell_text(v) for v in row] for row in self.rows]
        widths = [max(len(line[j]) for line in cells) for j in range(len(self.columns))]
        right = self._alignment()
        lines = ["  ".join(c.rjust(w) if right[j] else c.ljust(w)
                           for j, (c, w) in enumerate(zip(line, widths))).rstrip()
                 for line in cells]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        right = self._alignment()

        def cell(tag: str, j: int, value: str) -> str:
            align = ' style="text-align: right"' if right[j] else ""
            return f"<{tag}{align}>{html.escape(value)}</{tag}>"

        head = "".join(cell("th", j, c) for j, c in enumerate(self.columns))
        body = "".join("<tr>" + "".join(cell("td", j, cell_text(v)) for j, v in enumerate(row))
                       + "</tr>" for row in self.rows)
        return (f'<table class="dprl-table"><thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>")
