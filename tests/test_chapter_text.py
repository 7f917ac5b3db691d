"""Chapter markdown is free of the control characters a non-raw Python string leaves when it
eats a LaTeX backslash (``\\frac`` -> form feed, ``\\theta`` -> tab, ``\\varepsilon`` ->
vertical tab), and of tabs."""

import json

import pytest

from dprl.paths import BOOK_DIR

CHAPTERS = sorted(p for p in BOOK_DIR.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
FORBIDDEN = "\t\x0b\x0c\x08\x07"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: str(p.relative_to(BOOK_DIR)))
def test_markdown_has_no_control_characters(chapter):
    cells = json.loads(chapter.read_text())["cells"]
    bad = [i for i, cell in enumerate(cells) if cell["cell_type"] == "markdown"
           and any(c in "".join(cell["source"]) for c in FORBIDDEN)]
    assert bad == [], f"markdown cells {bad} hold control characters or tabs"


def test_a_line_split_by_an_eaten_backslash_is_caught():
    """``nbformat`` splits a form feed into a new line: what is left is ``$`` at a line end
    followed by ``rac``; that shape is checked too."""
    for chapter in CHAPTERS:
        for cell in json.loads(chapter.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"])
                assert "$\nrac" not in text and "$\narepsilon" not in text, chapter.name
