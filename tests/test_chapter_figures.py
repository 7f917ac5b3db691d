"""Every figure of the book is a captioned, labelled figure with alt text, shown through
:func:`dprl.plotting.show` (which refuses legend entries drawn alike, issue 15, section 5, and a
figure legend over plotted data, and moves an axes legend off the data, issue 30, item 5: so
nbval's re-execution of a chapter checks its legends).

MyST-NB renders a code cell's image as a numbered figure from the cell's metadata
``{"mystnb": {"figure": {"caption": ..., "name": "fig-..."}, "image": {"alt": ...}}}``; it wraps
every display output of that cell, so a figure cell displays the figure and nothing else.
"""

import json
import re

import pytest

from dprl.paths import BOOK_DIR

CHAPTERS = sorted(p for p in BOOK_DIR.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def _cells(chapter):
    return [c for c in json.loads(chapter.read_text())["cells"] if c["cell_type"] == "code"]


def _displays(cell):
    return [o for o in cell.get("outputs", []) if o["output_type"] in ("display_data",
                                                                         "execute_result")]


def _figure_cells(chapter):
    return [c for c in _cells(chapter)
            if any("image/png" in o.get("data", {}) for o in _displays(c))]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: str(p.relative_to(BOOK_DIR)))
def test_every_figure_has_caption_name_alt_text_and_the_checked_show(chapter):
    problems = []
    for cell in _figure_cells(chapter):
        head = "".join(cell["source"])[:60].replace("\n", " ")
        meta = cell["metadata"].get("mystnb", {})
        figure, image = meta.get("figure", {}), meta.get("image", {})
        if len(figure.get("caption", "").split()) < 8:
            problems.append(f"{head!r}: no caption of a sentence or more")
        if not re.fullmatch(r"fig-[a-z0-9-]+", figure.get("name", "")):
            problems.append(f"{head!r}: no figure name fig-...")
        if len(image.get("alt", "").split()) < 5:
            problems.append(f"{head!r}: no alt text")
        if len(_displays(cell)) != 1:
            problems.append(f"{head!r}: {len(_displays(cell))} displays (the figure only)")
        if not re.search(r"\bshow\(", "".join(cell["source"])):
            problems.append(f"{head!r}: not shown with dprl.plotting.show")
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: str(p.relative_to(BOOK_DIR)))
def test_no_figure_bypasses_the_style_check(chapter):
    bare = [i for i, c in enumerate(_cells(chapter))
            if re.search(r"\b(plt|fig|figure)\.show\(", "".join(c["source"]))]
    assert bare == [], f"code cells {bare} call plt.show()/fig.show() instead of show(fig)"


def test_figure_names_are_unique_across_the_book():
    names = [c["metadata"]["mystnb"]["figure"]["name"] for chapter in CHAPTERS
             for c in _figure_cells(chapter)
             if "name" in c["metadata"].get("mystnb", {}).get("figure", {})]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
