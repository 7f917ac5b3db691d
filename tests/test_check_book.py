"""The browser check of the built book (.ci/check_book.py): what it calls a problem, on small
hand-written pages (the browser itself runs in `make check-book`, after `make book`)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_book", ROOT / ".ci" / "check_book.py")
check_book = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_book)

STATIC = '<p>Let <span class="math notranslate nohighlight">\\(x\\)</span> be</p>'


def _math(rendered: str, static: str = STATIC) -> list[str]:
    return check_book.math_problems(check_book.parse(static), check_book.parse(rendered), "p.html")


@pytest.mark.parametrize("rendered", [
    "<p>Let <mjx-container><mjx-c></mjx-c></mjx-container> be</p>",
    "<p>Let <mjx-container></mjx-container></p><pre>$$ echo \\(x\\) $$</pre><code>\\[</code>",
    "<p>It costs $5 and $6 a day</p><mjx-container></mjx-container>",
    "<title>On \\(N\\) queries</title><p><mjx-container></mjx-container></p>",
])
def test_typeset_pages_and_dollars_in_prose_or_code_pass(rendered):
    assert _math(rendered) == []


@pytest.mark.parametrize(("rendered", "problem"), [
    ("<p>Let \\(x\\) be</p>", "raw math left in the text: ...Let \\(x\\) be"),
    ("<p>so $\\varphi_k(v) = 1$ holds</p><mjx-container></mjx-container>", "raw math left"),
    ("<div>$$a$$</div><mjx-container></mjx-container>", "raw math left"),
    ("<p>Let <mjx-container><mjx-merror>x</mjx-merror></mjx-container></p>",
     "MathJax could not typeset 1 formula(s)"),
    ("<p>Let be</p>", "1 formula(s) and no mjx-container"),
])
def test_untypeset_math_is_a_problem(rendered, problem):
    assert any(problem in line for line in _math(rendered)), _math(rendered)


def test_references_to_missing_files_anchors_or_other_hosts_are_problems(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b.html").write_text('<h1 id="sec">B</h1>')
    (tmp_path / "a" / "fig.png").write_bytes(b"png")
    (tmp_path / "index.html").write_text("")
    page = """<a href="b.html#sec">ok</a> <a href="../index.html">up</a> <a href="#top">top</a>
    <a href="https://doi.org/10.1/x">doi</a> <a href="mailto:a@b.c">mail</a> <span id="top"></span>
    <img src="fig.png"> <a href="b.html#nope">x</a> <a href="c.html">y</a> <img src="gone.png">
    <script src="https://cdn.example/m.js"></script> <link rel="stylesheet" href="../s.css">"""
    (tmp_path / "a" / "p.html").write_text(page)
    found = check_book.reference_problems(check_book.parse(page), "a/p.html", tmp_path,
                                          check_book.page_ids)
    assert found == [
        "a/p.html: loads https://cdn.example/m.js from another host (not self-contained)",
        "a/p.html: b.html#nope points at no anchor #nope",
        "a/p.html: c.html points at no file (a/c.html)",
        "a/p.html: gone.png points at no file (a/gone.png)",
        "a/p.html: ../s.css points at no file (s.css)"]
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "x.html").write_text("")
    assert check_book.pages_of(tmp_path) == ["a/b.html", "a/p.html", "index.html"]


def test_ci_runs_the_browser_check_after_the_build():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make check-book" in ci and ci.index("make book") < ci.index("make check-book")
    assert "check-book:" in (ROOT / "Makefile").read_text()
