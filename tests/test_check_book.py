"""The browser check of the built book (.ci/check_book.py): what it calls a problem, on small
hand-written pages (the browser itself runs in `make check-book`, after `make book`)."""

import importlib.util
import json
import shutil
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


PROSE = "<article><h1>T</h1>{}</article>"


@pytest.mark.parametrize("body", [
    "<p>its delta is far above</p><ol><li><p>This is why the paper</p></li></ol>",
    "<p>the sum of a</p><ul><li>b is c</li></ul>",
])
def test_a_one_item_list_splitting_a_sentence_is_a_problem(body):
    found = check_book.list_problems(PROSE.format(body), "p.html")
    assert len(found) == 1 and "one-item" in found[0], found


@pytest.mark.parametrize("body", [
    "<p>Two data sets are</p><ul><li><p>a;</p></li><li><p>b.</p></li></ul>",  # a run-in list
    "<p>One thing to note:</p><ol><li>x</li></ol>",
    "<p>far above</p> text <ol><li>x</li></ol>",  # text between: not right after the paragraph
    "<div><p>far above</p></div><ol><li>x</li></ol>",
])
def test_run_in_lists_and_lists_after_a_colon_pass(body):
    assert check_book.list_problems(PROSE.format(body), "p.html") == []


def test_lists_outside_the_article_are_not_read():
    page = "<nav><p>Part</p><ul><li>one chapter</li></ul></nav>" + PROSE.format("")
    assert check_book.list_problems(page, "p.html") == []


def test_outputs_wider_than_the_allowed_columns_are_problems():
    limit = check_book.OUTPUT_COLUMNS_ALLOWED * 600
    meta = f'[[{limit + 1}, 600, "long"], [{limit}, 600, "at the limit"]]'
    rendered = check_book.parse(f"<meta name='check-book-wide-outputs' content='{meta}'>")
    assert check_book.wide_output_problems(rendered, "p.html") == [
        f"p.html: a text output is {limit + 1} px wide in a 600 px column (print it as a "
        f"dprl.tables.Table or in shorter lines): 'long'"]
    assert check_book.wide_output_problems(check_book.parse("<p>x</p>"), "p.html") == [
        "p.html: the output-width script did not run"]


def test_the_measuring_script_goes_into_the_head():
    page = check_book.with_measurement("<html><head><title>t</title></head><body></body>")
    assert page.index(check_book.MEASURE_SCRIPT) < page.index("</head>")


BROWSER = next(filter(None, map(shutil.which, check_book.BROWSERS)), None)


@pytest.mark.skipif(BROWSER is None, reason="no Chromium (make check-book installs it)")
def test_the_browser_measures_a_long_output_line_and_not_code_or_claims(tmp_path):
    long_line = "x = 1; " * 400
    claim = "CLAIM [a] HOLDS: s | " + "y=2, " * 400
    page = (f"<html><head><style>pre {{ overflow-x: auto }}</style></head><body><article>"
            f"<div class='cell_input'><pre>{long_line}</pre>"
            f"</div><div class='cell_output'><pre>short\n{claim}</pre></div>"
            f"<div class='cell_output'><pre style='white-space: pre-wrap'>{long_line}</pre>"
            f"</div></article></body></html>")
    (tmp_path / "p.html").write_text(page)
    server = check_book.serve(tmp_path)
    try:
        found = check_book.check_page("p.html", tmp_path,
                                      f"http://127.0.0.1:{server.server_address[1]}/",
                                      BROWSER, tmp_path)
    finally:
        server.shutdown()
    assert len(found) == 1 and "a text output is" in found[0] and "'x = 1;" in found[0], found


@pytest.mark.parametrize(("page", "problem"), [
    ("<p>118 claims</p>", "no <table>"),
    ("<table><tr><td>HOLDS</td></tr></table><a href='../x/c.html'>c</a>", "no link from its tables"),
    ("<table><tr><td><a href='../x/c.html'>HOLDS</a></td></tr></table>",
     "../x/c.html links to a chapter but to none of its sections"),
])
def test_a_scorecard_without_section_links_is_a_problem(page, problem):
    found = check_book.scorecard_problems(check_book.parse(page), "s.html")
    assert len(found) == 1 and problem in found[0], found


def test_a_scorecard_linking_every_verdict_to_a_section_passes(tmp_path):
    page = ("<table><tr><td><a href='../x/c.html#sec'>HOLDS</a></td></tr></table>"
            "<a href='../index.html'>home</a>")
    assert check_book.scorecard_problems(check_book.parse(page), "s.html") == []
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "c.html").write_text('<section id="other"></section>')
    (tmp_path / "s").mkdir()
    (tmp_path / "index.html").write_text("")
    assert check_book.reference_problems(check_book.parse(page), "s/s.html", tmp_path,
                                         check_book.page_ids) == [
        "s/s.html: ../x/c.html#sec points at no anchor #sec"]


def test_touching_cells_and_unframed_wide_tables_are_problems():
    meta = ('[[[0, "0.001128|0.9"], false, 500, 700, "Table 3"], [null, true, 900, 700, "wide"],'
            ' [null, false, 900, 700, "framed"]]')
    rendered = check_book.parse(f"<meta name='check-book-tables' content='{meta}'>")
    assert check_book.table_problems(rendered, "p.html") == [
        "p.html: a table's cells touch (0 px between '0.001128|0.9'): 'Table 3'",
        "p.html: a table is 900 px wide in a 700 px column with no scroll frame: 'wide'"]
    assert check_book.table_problems(check_book.parse("<p>x</p>"), "p.html") == [
        "p.html: the table-measuring script did not run"]


def test_references_to_the_project_s_issues_are_problems():
    rendered = check_book.parse("<p>The criteria were made stricter (issue 28 of the project)</p>"
                                "<p>no issue here; tissue 3 is fine</p>")
    assert check_book.issue_problems(rendered, "p.html") == [
        "p.html: refers to 'issue 28', which readers cannot see"]


@pytest.mark.skipif(BROWSER is None, reason="no Chromium (make check-book installs it)")
def test_the_browser_finds_unpadded_and_unframed_tables_and_the_book_s_style_fixes_them(tmp_path):
    row = "".join(f"<td>{x:.6g}</td>" for x in (0.001128, 0.9, 7.5)) + "<td>" + "w" * 300 + "</td>"
    table = f"<table class='dprl-table'><tr>{row}</tr></table>"
    body = (f"<article style='max-width: 700px'><div class='cell_output'><div class='output "
            f"text_html'>{table}</div></div></article>")
    style = (ROOT / "book" / "_static" / "dprl-tables.css").read_text()
    server = check_book.serve(tmp_path)
    try:
        found = {}
        for name, head in (("plain", ""), ("styled", f"<style>{style}</style>")):
            (tmp_path / f"{name}.html").write_text(f"<html><head>{head}</head><body>{body}</body>"
                                                   "</html>")
            found[name] = check_book.check_page(f"{name}.html", tmp_path,
                                                f"http://127.0.0.1:{server.server_address[1]}/",
                                                BROWSER, tmp_path)
    finally:
        server.shutdown()
    assert any("cells touch" in p for p in found["plain"]), found
    assert any("no scroll frame" in p for p in found["plain"]), found
    assert found["styled"] == [], found


def _png(path: Path, width: int, record: dict | None) -> None:
    """A white PNG ``width`` px wide that records ``record`` as dprl.figure_layout.figure_png does."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    if record is not None:
        info.add_text(check_book.FIGURE_TEXT_KEY, json.dumps(record))
    Image.new("RGB", (width, 40), "white").save(path, pnginfo=info)


def test_the_figure_text_limits_are_those_of_the_book_s_figures():
    from dprl import figure_layout

    assert check_book.MIN_FIGURE_TEXT_PX == figure_layout.MIN_TEXT_PX
    assert check_book.FIGURE_TEXT_KEY == figure_layout.TEXT_SIZE_KEY


def test_figures_whose_text_is_shown_too_small_or_not_recorded_are_problems(tmp_path):
    (tmp_path / "_images").mkdir()
    _png(tmp_path / "_images" / "wide.png", 1200, {"px": 12.0, "text": "10^-3"})
    _png(tmp_path / "_images" / "fits.png", 600, {"px": 9.0, "text": "x"})
    _png(tmp_path / "_images" / "bare.png", 600, None)
    (tmp_path / "_images" / "logo.svg").write_text("<svg/>")
    meta = json.dumps([["/_images/wide.png", 1200, 600, "fig-wide"],
                       ["/_images/fits.png", 600, 600, "fig-fits"],
                       ["/_images/bare.png", 600, 600, "fig-bare"],
                       ["/_images/logo.svg", 50, 50, ""], ["/_images/gone.png", 0, 0, ""]])
    rendered = check_book.parse(f"<meta name='check-book-images' content='{meta}'>")
    assert check_book.figure_text_problems(rendered, "p.html", tmp_path) == [
        "p.html: figure fig-wide: its smallest text ('10^-3') is 6.0 px as shown (12.0 px in a "
        "1200 px wide image shown 600 px wide), under 9 px",
        "p.html: figure fig-bare records no text size (shown without dprl.plotting.show, or "
        "stored before it measured text: re-execute its chapter)"]
    assert check_book.figure_text_problems(check_book.parse("<p>x</p>"), "p.html", tmp_path) == [
        "p.html: the image-measuring script did not run"]


def test_pages_that_scroll_sideways_or_cut_off_content_are_problems():
    wide = ('[400, 612, [["code.docutils.literal", 612, "a_long_identifier"]], '
            '[["span.math", 581, 368, "Q(s,a)"]]]')
    fits = '[400, 0, [], []]'
    assert check_book.overflow_problems(check_book.parse(
        f"<meta name='check-book-overflow' content='{wide}'>"), "p.html") == [
        "p.html: in a 400 px wide window the page scrolls sideways (612 px of content): "
        "<code.docutils.literal> 'a_long_identifier' reaches 612 px",
        "p.html: in a 400 px wide window <span.math> 'Q(s,a)' is cut off (581 px of content in "
        "368 px, overflow hidden)"]
    assert check_book.overflow_problems(check_book.parse(
        f"<meta name='check-book-overflow' content='{fits}'>"), "p.html") == []
    assert check_book.overflow_problems(check_book.parse("<p>x</p>"), "p.html") == [
        "p.html: the overflow-measuring script did not run"]


def test_tall_outputs_not_folded_are_problems():
    limit = check_book.TALL_OUTPUT_PX
    rendered = check_book.parse(
        f"<meta name='check-book-tall-outputs' content='[[{limit + 1}, \"configs\"]]'>")
    assert check_book.tall_output_problems(rendered, "p.html") == [
        f"p.html: a text output is {limit + 1} px tall, over {limit} px, and not folded (tag "
        f"its cell hide-output, or show it in a <details>): 'configs'"]
    assert check_book.tall_output_problems(check_book.parse(
        "<meta name='check-book-tall-outputs' content='[]'>"), "p.html") == []
    assert check_book.tall_output_problems(check_book.parse("<p>x</p>"), "p.html") == [
        "p.html: the output-height script did not run"]


def _check(tmp_path: Path, pages: dict[str, str]) -> dict[str, list[str]]:
    """check_page's problems of each of ``pages`` (name: HTML) served from ``tmp_path``."""
    server = check_book.serve(tmp_path)
    try:
        found = {}
        for name, page in pages.items():
            (tmp_path / f"{name}.html").write_text(page)
            found[name] = check_book.check_page(f"{name}.html", tmp_path,
                                                f"http://127.0.0.1:{server.server_address[1]}/",
                                                BROWSER, tmp_path)
    finally:
        server.shutdown()
    return found


@pytest.mark.skipif(BROWSER is None, reason="no Chromium (make check-book installs it)")
def test_the_browser_measures_figure_text_as_the_page_shows_it(tmp_path):
    _png(tmp_path / "fig-wide.png", 1200, {"px": 12.0, "text": "tick"})  # shown 600 px: 6 px
    _png(tmp_path / "fig-fits.png", 500, {"px": 12.0, "text": "tick"})  # shown as it is: 12 px
    figure = ("<div class='cell_output'><figure id='fig-{0}'><img src='fig-{0}.png' "
              "style='max-width: 100%' alt='a figure'></figure></div>")
    head = "<head><style>body, figure { margin: 0 }</style></head>"
    found = _check(tmp_path, {
        "wide": f"<html>{head}<body><article style='max-width: 600px'>"
                f"{figure.format('wide')}</article></body></html>",
        "fits": f"<html>{head}<body><article style='max-width: 600px'>"
                f"{figure.format('fits')}</article></body></html>"})
    assert found["wide"] == [
        "wide.html: figure fig-wide: its smallest text ('tick') is 6.0 px as shown (12.0 px in a "
        "1200 px wide image shown 600 px wide), under 9 px"], found
    assert found["fits"] == [], found


THEME = "<style>span.math { display: inline-flex; max-width: 100%; overflow: hidden }</style>"


@pytest.mark.skipif(BROWSER is None, reason="no Chromium (make check-book installs it)")
def test_the_browser_finds_what_a_phone_must_scroll_or_loses_and_the_book_s_style_fixes_it(
        tmp_path):
    body = ("<body><article><p>Call <code class='docutils literal'><span class='pre'>"
            + "a_long_identifier_" * 3 + "</span></code> with</p><p><span class='math'>"
            "<mjx-container><span style='display: inline-block; width: 600px'>Q(s,a)</span>"
            "</mjx-container></span></p></article></body>")
    style = (ROOT / "book" / "_static" / "fit-width.css").read_text()
    found = _check(tmp_path, {
        "plain": f"<html><head>{THEME}</head>{body}</html>",
        "styled": f"<html><head>{THEME}<style>{style}</style></head>{body}</html>"})
    assert len(found["plain"]) == 2, found
    assert found["plain"][0].startswith(
        "plain.html: in a 400 px wide window the page scrolls sideways"), found
    assert "<code.docutils.literal> 'a_long_identifier_a_long_identifier_a" in found["plain"][0]
    assert found["plain"][1].startswith(
        "plain.html: in a 400 px wide window <span.math> 'Q(s,a)' is cut off (600 px"), found
    assert found["styled"] == [], found


@pytest.mark.skipif(BROWSER is None, reason="no Chromium (make check-book installs it)")
def test_the_browser_finds_a_tall_output_unless_it_is_folded(tmp_path):
    lines = "\n".join(f"config {i}" for i in range(300))
    output = f"<div class='cell_output'><pre>{lines}</pre></div>"
    found = _check(tmp_path, {
        "open": f"<html><head></head><body><article>{output}</article></body></html>",
        "folded": f"<html><head></head><body><article><details><summary>Show the configs"
                  f"</summary>{output}</details></article></body></html>"})
    assert len(found["open"]) == 1 and "a text output is" in found["open"][0] \
        and "px tall, over 2500 px, and not folded" in found["open"][0], found
    assert found["folded"] == [], found
