"""No chapter types a verdict in: every ``claim(...)`` takes its ``holds`` and ``partly``
from expressions evaluated on results, never from a literal (``True``, ``"PARTIAL"``) or an
expression with a literal branch (``x or "PARTIAL"``, ``True if c else False``)."""

import ast
import json

import pytest

from dprl.paths import BOOK_DIR

CHAPTERS = sorted(p for p in BOOK_DIR.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def _branches(node: ast.expr):
    """The expressions ``node`` may evaluate to: through conditional expressions, ``and`` /
    ``or`` and ``bool(...)``."""
    if isinstance(node, ast.IfExp):
        yield from _branches(node.body)
        yield from _branches(node.orelse)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _branches(value)
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
          and node.func.id == "bool" and node.args):
        yield from _branches(node.args[0])
    else:
        yield node


def _literal(node: ast.expr, assigned: dict[str, list[ast.expr]]) -> bool:
    """Whether ``node`` may evaluate to a literal, following names assigned in the cell."""
    for branch in _branches(node):
        if isinstance(branch, ast.Constant):
            return True
        if isinstance(branch, ast.Name) and any(_literal(value, {})
                                                for value in assigned.get(branch.id, [])):
            return True
    return False


def literal_verdicts(source: str) -> list[str]:
    """The ``holds`` / ``partly`` arguments of the ``claim`` calls in ``source`` that can
    evaluate to a literal, directly or through a name assigned in the same source."""
    tree = ast.parse(source)
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "claim"):
            continue
        criteria = node.args[2:3] + [k.value for k in node.keywords
                                     if k.arg in ("holds", "partly")]
        found += [ast.unparse(c) for c in criteria if _literal(c, assigned)]
    return found


@pytest.mark.parametrize("source, literal", [
    ('claim("A", "s", True)', True), ('claim("A", "s", x, partly=True)', True),
    ('claim("A", "s", x or "PARTIAL")', True), ('claim("A", "s", True if a else b)', True),
    ('claim("A", "s", bool(False))', True), ('claim("A", "s", holds=a and not b)', False),
    ('claim("A", "s", x < 1.5, partly=y is not None)', False),
    ('v = "HOLDS" if a else "FAILS"\nclaim("A", "s", v)', True),
    ('v = a and b\nclaim("A", "s", v)', False)])
def test_literal_verdicts_are_found(source, literal):
    assert bool(literal_verdicts(source)) == literal


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: str(p.relative_to(BOOK_DIR)))
def test_no_chapter_types_a_verdict_in(chapter):
    cells = json.loads(chapter.read_text())["cells"]
    bad = {i: found for i, cell in enumerate(cells) if cell["cell_type"] == "code"
           and (found := literal_verdicts("".join(cell["source"])))}
    assert bad == {}, f"cells with a literal verdict: {bad}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: str(p.relative_to(BOOK_DIR)))
def test_no_verdict_is_echoed_under_a_cell(chapter):
    cells = json.loads(chapter.read_text())["cells"]
    echoed = [i for i, cell in enumerate(cells) for output in cell.get("outputs", [])
              if "".join(output.get("data", {}).get("text/plain", "")).startswith("Verdict(")]
    assert echoed == [], f"cells {echoed} echo a Verdict"
