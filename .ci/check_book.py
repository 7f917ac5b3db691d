"""The built book as a reader's browser shows it: `make check-book` (after `make book`).

Serves the HTML build from 127.0.0.1, loads every page in headless Chromium (installed from
Debian's packages when missing) with every other host unreachable, and fails on a page where
math did not typeset (raw ``\\(``, ``\\[``, ``$$`` or ``$..\\cmd..$`` left in its text, a MathJax
error, or math in the page and no ``mjx-container``), on a scorecard page with no table or
with a link from its tables to a chapter that names no section (every link's page and anchor
must exist, as on every page), on an internal link, image, script or stylesheet that points at no file (or a link at no anchor),
on a script, stylesheet or image loaded from another host, on a cell's text output wider than
the page's content column at 1280 px (measured by a script the server adds to every page, with
the book's wrapping of outputs turned off), on a table whose neighbouring cell texts touch (no
padding) or that is wider than its column with no scroll frame (an ``overflow-x`` box with a
background cue), on a reference to the project's issues ("issue 28"), which readers cannot
see, on a list that Markdown started in the middle of
a sentence (a one-item list right after a paragraph that does not end with a colon: a line of
prose that began with "1. " or "- "), on a figure whose smallest text the page shows below 9 px
at 1280 px (the size its PNG records, dprl.figure_layout.figure_png, times the image's shown/natural
width) or whose PNG records none, on a page that scrolls sideways in a 400 px wide window (or at
1280 px), naming what sticks out, or whose article has a box that cuts off its content (a
formula in the theme's ``overflow: hidden``), and on a cell's text output taller than 2500 px
that is not folded in a ``<details>``. Saves screenshots of each page (at 1280 px and, in a
400 px frame, ``*__400px.png``) under the screenshots folder for a human look.

usage: python .ci/check_book.py [HTML_DIR] [--screens DIR] [--jobs N]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from html import escape
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

TABLE_PAGES = ("book/appendix/claims.html",)  # pages whose content is a table
SKIPPED_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static"}
# text a reader does not see typeset: code, the tab title (MathJax never typesets <title>)
TEXT_SKIPPED = {"script", "style", "pre", "code", "textarea", "noscript", "title",
                "mjx-assistive-mml"}
RAW_MATH = re.compile(r"\\\(|\\\[|\$\$|\$[^$\n]{0,200}?\\[A-Za-z]+[^$\n]{0,200}?\$")
REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)
NOT_FILES = re.compile(r"^(?:mailto|data|javascript|tel):", re.IGNORECASE)
#: Cell texts of one table row closer than this are "touching" (no padding between them)
MIN_CELL_GAP_PX = 6
#: The smallest figure text a reader may be shown, in CSS px at a 1280 px window; the PNG text
#: chunk where dprl.figure_layout.figure_png records an image's smallest text (JSON: "px", its font
#: size in image pixels, and "text")
MIN_FIGURE_TEXT_PX = 9.0
FIGURE_TEXT_KEY = "dprl:smallest-text"
#: The narrow window (a phone's) in which no page may scroll sideways, and the path under which
#: the server wraps a page in a frame that wide
NARROW_PX = 400
NARROW_PREFIX = "check-book-narrow/"
#: A text output taller than this (CSS px at 1280 px) must be folded in a <details>
TALL_OUTPUT_PX = 2500
#: Content that a box with overflow hidden cuts off by at most this is an accent's overhang
#: (the bar of a typeset r-bar reaches 2 px past its box), not lost text
CUT_TOLERANCE_PX = 3
# Added to every served page: after the load and MathJax's typesetting, each text output of a
# cell (not its code) taller than TALL_OUTPUT_PX outside a <details>, as [its height, its first
# characters] in <meta name="check-book-tall-outputs">; then, with every <details> opened (what
# a reader may unfold is checked too): each text output laid out in one line per line, as the
# book's wrapping (wrap-outputs.css) would not, without the verdict lines of dprl.claims (a
# record the scorecard collects), as [its width, its column's width, its first characters] in
# <meta name="check-book-wide-outputs">; each table of the article as [its first touching cells
# or null, whether it is wider than its parent with no scroll frame, its width, the article's
# width, its first characters] in <meta name="check-book-tables">; each image of a cell's output
# as [its path, its natural width, its shown width, the id of its figure] in <meta
# name="check-book-images">; and whether the page scrolls sideways, as [the window's width,
# the width of the content that scrolls (0: none), up to 3 elements that stick out as [tag and
# classes, their right edge, their first characters], up to 3 boxes of the article that cut off
# their content as [tag and classes, the content's width, the box's width, its first
# characters]] in <meta name="check-book-overflow">: in the page's own document, or, for a page
# in the server's narrow frame, in the frame's parent.
MEASURE_SCRIPT = """<script>window.addEventListener("load", () => setTimeout(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise)
    await MathJax.startup.promise.catch(() => null);
  const note = (name, value, doc = document) => {
    const meta = doc.createElement("meta");
    meta.name = name;
    meta.content = JSON.stringify(value);
    doc.head.appendChild(meta);
  };
  const tall = [];
  for (const pre of document.querySelectorAll("div.cell_output pre, div.output pre")) {
    const height = pre.getBoundingClientRect().height;
    if (height > TALL_OUTPUT_PX && !pre.closest("details"))
      tall.push([Math.round(height), pre.textContent.trim().slice(0, 50)]);
  }
  note("check-book-tall-outputs", tall);
  const folded = [...document.querySelectorAll("details:not([open])")];
  folded.forEach(details => { details.open = true; });
  const wide = [];
  for (const pre of document.querySelectorAll("div.cell_output pre, div.output pre")) {
    const copy = pre.cloneNode(false);
    copy.textContent = pre.textContent.split("\\n")
      .filter(line => !line.startsWith("CLAIM [")).join("\\n");
    copy.style.whiteSpace = "pre";
    copy.style.overflowWrap = "normal";
    pre.after(copy);
    if (copy.scrollWidth > pre.clientWidth + 1)
      wide.push([copy.scrollWidth, pre.clientWidth, copy.textContent.trim().slice(0, 50)]);
    copy.remove();
  }
  note("check-book-wide-outputs", wide);
  const textBox = cell => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    return range.getBoundingClientRect();
  };
  const framed = table => {
    for (let box = table.parentElement; box && box.tagName !== "ARTICLE"; box = box.parentElement) {
      const style = getComputedStyle(box);
      if (["auto", "scroll"].includes(style.overflowX) && style.backgroundImage !== "none")
        return true;
    }
    return false;
  };
  const tables = [];
  for (const table of document.querySelectorAll("article table")) {
    let touching = null;
    for (const row of table.rows) {
      const cells = [...row.cells];
      for (let j = 1; j < cells.length && !touching; j++) {
        if (!cells[j - 1].textContent.trim() || !cells[j].textContent.trim()) continue;
        const gap = textBox(cells[j]).left - textBox(cells[j - 1]).right;
        if (gap < MIN_CELL_GAP_PX) touching = [Math.round(gap), cells[j - 1].textContent.trim().slice(-20)
                                 + "|" + cells[j].textContent.trim().slice(0, 20)];
      }
    }
    const column = table.closest("article").clientWidth;
    tables.push([touching, table.scrollWidth > table.parentElement.clientWidth + 1
                 && !framed(table), table.scrollWidth, column,
                 table.textContent.trim().slice(0, 40)]);
  }
  note("check-book-tables", tables);
  const images = [];
  for (const img of document.querySelectorAll("div.cell_output img")) {
    const named = img.closest("figure[id]") || img.closest("[id]");
    images.push([new URL(img.currentSrc || img.src).pathname, img.naturalWidth,
                 Math.round(img.getBoundingClientRect().width * 10) / 10,
                 named ? named.id : (img.alt || "").slice(0, 40)]);
  }
  note("check-book-images", images);
  // the page scrolls sideways when the root, or a box holding the article (a theme may let
  // its article container scroll), has more content than width
  const describe = el =>
    el.tagName.toLowerCase() + [...el.classList].slice(0, 2).map(c => "." + c).join("");
  const page = new Set([document.documentElement, document.body]);
  for (let box = document.querySelector("article"); box; box = box.parentElement) page.add(box);
  const scrolling = [...page].find(box => box.scrollWidth > box.clientWidth + 1);
  const found = [];
  if (scrolling) {
    const edge = scrolling === document.documentElement ? scrolling.clientWidth
      : scrolling.getBoundingClientRect().left + scrolling.clientLeft + scrolling.clientWidth;
    const framedBy = el => {  // inside a box that scrolls or clips on its own (not the page's)
      for (let box = el.parentElement; box; box = box.parentElement) {
        const style = getComputedStyle(box);
        if (style.position === "fixed" || (!page.has(box) && style.overflowX !== "visible"))
          return true;
      }
      return false;
    };
    const outside = el => !page.has(el) && getComputedStyle(el).position !== "fixed"
      && !framedBy(el);
    const boxRight = el => {
      const box = el.getBoundingClientRect();
      return box.width || box.height ? box.right : -Infinity;
    };
    // what sticks out: the outermost elements whose own box does (a code span, a formula),
    // else the innermost whose text does (a long word in a paragraph)
    let over = [...document.body.querySelectorAll("*")].filter(
      el => boxRight(el) > edge + 1 && outside(el));
    const overSet = new Set(over);
    over = over.filter(el => !overSet.has(el.parentElement));
    if (!over.length) {
      const textRight = el => boxRight(el) === -Infinity ? -Infinity
        : el.getBoundingClientRect().left + el.scrollWidth;
      const sticks = el => textRight(el) > edge + 1 && outside(el);
      over = [...document.body.querySelectorAll("*")].filter(
        el => sticks(el) && ![...el.children].some(sticks));
    }
    for (const el of over.slice(0, 3)) {
      const named = el.closest("mjx-container") || el;
      const reach = Math.max(boxRight(el), el.getBoundingClientRect().left + el.scrollWidth);
      found.push([describe(el), Math.round(reach), named.textContent.trim().slice(0, 40)]);
    }
  }
  // boxes of the article that cut off what does not fit them (overflow: hidden): their
  // content in the flow (not what is positioned apart, as MathJax's hidden MathML) reaches
  // past their right edge
  const flowRight = el => {
    let right = -Infinity;
    for (const child of el.childNodes) {
      if (child.nodeType === Node.TEXT_NODE && child.textContent.trim()) {
        const range = document.createRange();
        range.selectNodeContents(child);
        right = Math.max(right, range.getBoundingClientRect().right);
      } else if (child.nodeType === Node.ELEMENT_NODE
                 && !["absolute", "fixed"].includes(getComputedStyle(child).position)) {
        const box = child.getBoundingClientRect();
        if (box.width || box.height) right = Math.max(right, box.right);
        right = Math.max(right, flowRight(child));
      }
    }
    return right;
  };
  const apart = el => {  // positioned out of the flow, as a visually hidden copy
    for (let box = el; box && box.tagName !== "ARTICLE"; box = box.parentElement)
      if (["absolute", "fixed"].includes(getComputedStyle(box).position)) return true;
    return false;
  };
  const cut = [];
  for (const el of document.querySelectorAll("article *")) {
    if (cut.length === 3) break;
    if (!["hidden", "clip"].includes(getComputedStyle(el).overflowX) || !el.clientWidth
        || el.scrollWidth <= el.clientWidth + 1 || apart(el)) continue;
    const left = el.getBoundingClientRect().left + el.clientLeft;
    const content = flowRight(el) - left;
    if (content > el.clientWidth + CUT_TOLERANCE_PX)
      cut.push([describe(el), Math.round(content), el.clientWidth,
                el.textContent.trim().slice(0, 40)]);
  }
  note("check-book-overflow",
       [window.innerWidth, scrolling ? scrolling.scrollWidth : 0, found, cut],
       window.parent === window ? document : window.parent.document);
  folded.forEach(details => { details.open = false; });
}, 0));</script>""".replace("MIN_CELL_GAP_PX", str(MIN_CELL_GAP_PX)).replace(
    "TALL_OUTPUT_PX", str(TALL_OUTPUT_PX)).replace("CUT_TOLERANCE_PX", str(CUT_TOLERANCE_PX))
#: A reference a reader cannot follow: the project's issue tracker
ISSUE_REFERENCE = re.compile(r"\bissues? \d+\b", re.IGNORECASE)
# How many widths of its column an output's longest line may take (1: none wraps)
OUTPUT_COLUMNS_ALLOWED = 1
PAGE_TIMEOUT_S = 180  # seconds for one page (a few on an idle 2-core machine)
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                 "--window-size=1280,2400", "--virtual-time-budget=20000")


class PageParts(HTMLParser):
    """What the checks read from one page: visible text, ids, references and tag counts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.ids: set[str] = set()
        self.links: list[str] = []  # <a href>: files and anchors
        self.table_links: list[str] = []  # the hrefs of links inside a <table>
        self.assets: list[str] = []  # src and stylesheet href: what the page loads
        self.tags: dict[str, int] = {}
        self.meta: dict[str, str] = {}  # <meta name content>
        self._skipping: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if "math" in values.get("class", "").split():
            self.tags["class=math"] = self.tags.get("class=math", 0) + 1
        for name in ("id", "name") if tag == "a" else ("id",):
            if values.get(name):
                self.ids.add(values[name])
        if tag == "a" and "href" in values:
            self.links.append(values["href"])
            if self.tags.get("table", 0) > self.tags.get("/table", 0):
                self.table_links.append(values["href"])
        elif "src" in values and tag in {"img", "script", "iframe", "source", "video"}:
            self.assets.append(values["src"])
        elif tag == "link" and "stylesheet" in values.get("rel", "") and "href" in values:
            self.assets.append(values["href"])
        elif tag == "meta" and "name" in values:
            self.meta[values["name"]] = values.get("content", "")
        if tag in TEXT_SKIPPED:
            self._skipping.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.tags["/table"] = self.tags.get("/table", 0) + 1
        if tag in self._skipping:
            del self._skipping[self._skipping.index(tag):]

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.text.append(data)


def parse(html: str) -> PageParts:
    parts = PageParts()
    parts.feed(html)
    parts.close()
    return parts


def math_problems(static: PageParts, rendered: PageParts, page: str) -> list[str]:
    """Raw TeX left in the rendered text, MathJax errors, or math never typeset."""
    problems = []
    text = " ".join(" ".join(rendered.text).split())
    for match in list(RAW_MATH.finditer(text))[:3]:
        context = text[max(0, match.start() - 40):match.end() + 40]
        problems.append(f"{page}: raw math left in the text: ...{context}...")
    errors = rendered.tags.get("mjx-merror", 0)
    if errors:
        problems.append(f"{page}: MathJax could not typeset {errors} formula(s)")
    if static.tags.get("class=math") and not rendered.tags.get("mjx-container"):
        problems.append(f"{page}: {static.tags['class=math']} formula(s) and no mjx-container "
                        f"(MathJax did not run)")
    return problems


def reference_problems(static: PageParts, page: str, root: Path,
                       ids_of: Callable[[Path], frozenset[str]]) -> list[str]:
    """Internal links, images, scripts and stylesheets that point at no file or anchor, and
    assets loaded from another host."""
    problems = []
    for ref in static.assets:
        if REMOTE.match(ref):
            problems.append(f"{page}: loads {ref} from another host (not self-contained)")
    for ref in static.links + static.assets:
        if REMOTE.match(ref) or NOT_FILES.match(ref):
            continue
        url = urlsplit(urljoin(f"/{page}", ref))
        target = root / unquote(url.path).lstrip("/")
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            problems.append(f"{page}: {ref} points at no file ({target.relative_to(root)})")
        elif url.fragment and ref in static.links and target.suffix == ".html" and \
                unquote(url.fragment) not in ids_of(target):
            problems.append(f"{page}: {ref} points at no anchor #{url.fragment}")
    return problems


def scorecard_problems(static: PageParts, page: str) -> list[str]:
    """A scorecard page must show a table whose links to chapters each name a section (an
    anchor; :func:`reference_problems` checks that the page and the anchor exist)."""
    if not static.tags.get("table"):
        return [f"{page}: no <table> (the scorecard rendered as text)"]
    chapters = [ref for ref in static.table_links if not REMOTE.match(ref)
                and not NOT_FILES.match(ref) and not ref.startswith("#")]
    if not chapters:
        return [f"{page}: no link from its tables to a chapter"]
    return [f"{page}: {ref} links to a chapter but to none of its sections (no #anchor)"
            for ref in chapters if "#" not in ref]


def wide_output_problems(rendered: PageParts, page: str) -> list[str]:
    """Text outputs that the injected :data:`MEASURE_SCRIPT` found more than
    :data:`OUTPUT_COLUMNS_ALLOWED` times as wide as their column; a problem too when the
    script left no measurement."""
    if "check-book-wide-outputs" not in rendered.meta:
        return [f"{page}: the output-width script did not run"]
    return [f"{page}: a text output is {natural} px wide in a {column} px column (print it as "
            f"a dprl.tables.Table or in shorter lines): {start!r}"
            for natural, column, start in json.loads(rendered.meta["check-book-wide-outputs"])
            if natural > OUTPUT_COLUMNS_ALLOWED * column]


def table_problems(rendered: PageParts, page: str) -> list[str]:
    """Tables whose neighbouring cell texts touch (no padding: "0.0011280.9") or that are
    wider than their column without a scroll frame showing it, from the injected
    :data:`MEASURE_SCRIPT`; a problem too when the script left no measurement."""
    if "check-book-tables" not in rendered.meta:
        return [f"{page}: the table-measuring script did not run"]
    problems = []
    for touching, unframed, width, column, start in json.loads(rendered.meta["check-book-tables"]):
        if touching:
            problems.append(f"{page}: a table's cells touch ({touching[0]} px between "
                            f"{touching[1]!r}): {start!r}")
        if unframed:
            problems.append(f"{page}: a table is {width} px wide in a {column} px column with no "
                            f"scroll frame: {start!r}")
    return problems


def png_texts(path: Path) -> dict[str, str] | None:
    """The text chunks (tEXt, and uncompressed iTXt) of the PNG at ``path``; None when it is no
    PNG."""
    data = path.read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    texts, at = {}, 8
    while at + 8 <= len(data):
        length, kind = int.from_bytes(data[at:at + 4], "big"), data[at + 4:at + 8]
        body = data[at + 8:at + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            texts[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"iTXt":
            key, _, rest = body.partition(b"\0")
            if rest[:1] == b"\0":  # not compressed: flags, language and translated keyword
                texts[key.decode("latin-1")] = rest[2:].split(b"\0", 2)[-1].decode("utf-8")
        elif kind == b"IEND":
            break
        at += 12 + length
    return texts


def figure_text_problems(rendered: PageParts, page: str, root: Path) -> list[str]:
    """Figures (images of cell outputs) whose smallest text, as their PNG records it
    (:data:`FIGURE_TEXT_KEY`) times the image's shown/natural width, is below
    :data:`MIN_FIGURE_TEXT_PX`, or whose PNG records none; a problem too when the measuring
    script left no measurement."""
    if "check-book-images" not in rendered.meta:
        return [f"{page}: the image-measuring script did not run"]
    problems = []
    for path, natural, shown, name in json.loads(rendered.meta["check-book-images"]):
        file = root / unquote(path).lstrip("/")
        texts = png_texts(file) if file.is_file() and natural and shown else None
        if texts is None:  # no PNG (reference_problems reports a missing file), or not shown
            continue
        if FIGURE_TEXT_KEY not in texts:
            problems.append(f"{page}: figure {name or path} records no text size (shown "
                            f"without dprl.plotting.show, or stored before it measured "
                            f"text: re-execute its chapter)")
            continue
        record = json.loads(texts[FIGURE_TEXT_KEY] or "{}")
        if not record:
            continue  # a figure without text
        size = record["px"] * shown / natural
        if size < MIN_FIGURE_TEXT_PX:
            problems.append(f"{page}: figure {name or path}: its smallest text "
                            f"({record['text']!r}) is {size:.1f} px as shown ({record['px']} px "
                            f"in a {natural} px wide image shown {shown:g} px wide), under "
                            f"{MIN_FIGURE_TEXT_PX:g} px")
    return problems


def overflow_problems(rendered: PageParts, page: str) -> list[str]:
    """A page that scrolls sideways in its window, with what sticks out, and boxes of its
    article that cut off content wider than them (the theme's formulas: ``overflow: hidden``),
    from the injected :data:`MEASURE_SCRIPT`; a problem too when the script left no
    measurement."""
    if "check-book-overflow" not in rendered.meta:
        return [f"{page}: the overflow-measuring script did not run"]
    window, content, found, cut = json.loads(rendered.meta["check-book-overflow"])
    problems = [f"{page}: in a {window} px wide window <{tag}> {text!r} is cut off ({inside} px "
                f"of content in {width} px, overflow hidden)" for tag, inside, width, text in cut]
    if content:
        sticking = "; ".join(f"<{tag}> {text!r} reaches {right} px" for tag, right, text in found)
        problems.insert(0, f"{page}: in a {window} px wide window the page scrolls sideways "
                           f"({content} px of content): {sticking or 'no element found'}")
    return problems


def tall_output_problems(rendered: PageParts, page: str) -> list[str]:
    """Text outputs taller than :data:`TALL_OUTPUT_PX` not folded in a ``<details>`` (from the
    injected :data:`MEASURE_SCRIPT`); a problem too when the script left no measurement."""
    if "check-book-tall-outputs" not in rendered.meta:
        return [f"{page}: the output-height script did not run"]
    return [f"{page}: a text output is {height} px tall, over {TALL_OUTPUT_PX} px, and not "
            f"folded (tag its cell hide-output, or show it in a <details>): {start!r}"
            for height, start in json.loads(rendered.meta["check-book-tall-outputs"])]


def issue_problems(rendered: PageParts, page: str) -> list[str]:
    """References to the project's issues, which a reader cannot see."""
    text = " ".join(rendered.text)
    return [f"{page}: refers to {match.group(0)!r}, which readers cannot see"
            for match in ISSUE_REFERENCE.finditer(text)]


VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
             "source", "track", "wbr"}


class ListsAfterProse(HTMLParser):
    """Lists of a page's article (``<article>``) with the paragraph right before them (same
    parent, no text between), as (paragraph text, list tag, number of items)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, str, int]] = []
        self._open: list[str] = []  # the tags open now
        self._before: dict[int, str | None] = {}  # depth -> the text of a paragraph just closed
        self._paragraph: list[str] | None = None
        self._lists: list[tuple[int, str, str]] = []  # open lists: depth, tag, paragraph before

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID_TAGS or (not self._open and tag != "article"):
            return
        depth = len(self._open)
        if tag in ("ol", "ul") and self._before.get(depth) is not None:
            self._lists.append((depth, tag, self._before[depth]))
            self.found.append((self._before[depth], tag, 0))
        elif tag == "li" and self._lists and self._lists[-1][0] == depth - 1:
            text, kind, items = self.found[-1]
            self.found[-1] = (text, kind, items + 1)
        self._before[depth] = None
        self._open.append(tag)
        if tag == "p":
            self._paragraph = []

    def handle_endtag(self, tag: str) -> None:
        if tag not in self._open:
            return
        del self._open[len(self._open) - 1 - self._open[::-1].index(tag):]
        depth = len(self._open)
        self._before = {d: text for d, text in self._before.items() if d <= depth}
        self._before[depth] = " ".join("".join(self._paragraph or []).split()) \
            if tag == "p" else None
        if tag == "p":
            self._paragraph = None

    def handle_data(self, data: str) -> None:
        if self._paragraph is not None:
            self._paragraph.append(data)
        elif data.strip():
            self._before[len(self._open)] = None


def list_problems(static_html: str, page: str) -> list[str]:
    """One-item lists right after a paragraph that does not end with a colon: Markdown's
    reading of a prose line that began with "1. ", "- " or "+ " (say a wrapped number or
    formula), which splits a sentence into a paragraph and a list."""
    lists = ListsAfterProse()
    lists.feed(static_html)
    return [f"{page}: a one-item <{tag}> right after a paragraph that ends "
            f"...{text[-50:]!r} (a prose line starting with '1. ' or '- ' became a list)"
            for text, tag, items in lists.found if items == 1 and not text.endswith(":")]


@functools.lru_cache(maxsize=None)
def page_ids(path: Path) -> frozenset[str]:
    return frozenset(parse(path.read_text(encoding="utf-8")).ids)


def find_browser() -> str:
    """The Chromium binary; installed from Debian's packages (as root) when missing."""
    for name in BROWSERS:
        if shutil.which(name):
            return shutil.which(name)
    if os.geteuid() != 0:
        sys.exit("check-book: no Chromium found; install Debian's package: "
                 "sudo apt-get install chromium")
    print("check-book: installing Chromium from Debian's packages", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    if not shutil.which("chromium"):
        sys.exit("check-book: apt-get install chromium left no chromium on the PATH")
    return shutil.which("chromium")


def render(browser: str, url: str, screenshot: Path, window: tuple[int, int] = (1280, 2400)
           ) -> str:
    """The DOM of ``url`` after its scripts ran, in a window of ``window`` CSS px; saves its
    screenshot on the way. The browser runs in its own session, so that a timeout ends all
    its processes."""
    flags = [flag for flag in BROWSER_FLAGS if not flag.startswith("--window-size=")]
    with tempfile.TemporaryDirectory(prefix="check-book-", ignore_cleanup_errors=True) as profile:
        command = [browser, *flags, f"--window-size={window[0]},{window[1]}",
                   f"--user-data-dir={profile}", "--dump-dom", f"--screenshot={screenshot}", url]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True, start_new_session=True)
        try:
            dom, _ = process.communicate(timeout=PAGE_TIMEOUT_S)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command)
    return dom


def check_page(page: str, root: Path, base_url: str, browser: str, screens: Path) -> list[str]:
    """Every problem of one page (an empty list when it renders as it should): loaded at
    1280 px, then in a frame :data:`NARROW_PX` wide."""
    html = (root / page).read_text(encoding="utf-8")
    static = parse(html)
    screenshot = screens / (page.removesuffix(".html").replace("/", "__") + ".png")
    narrow_shot = screenshot.with_name(screenshot.stem + f"__{NARROW_PX}px.png")
    loads = {"": (base_url + page, screenshot, (1280, 2400)),
             f" in a {NARROW_PX} px frame": (base_url + NARROW_PREFIX + page, narrow_shot,
                                             (max(NARROW_PX, 500), 2400))}
    doms = {}
    for how, (url, shot, window) in loads.items():  # (headless Chromium's windows: >= 500 px)
        try:
            doms[how] = parse(render(browser, url, shot, window=window))
        except subprocess.TimeoutExpired:
            return [f"{page}: the browser did not finish loading it{how} in {PAGE_TIMEOUT_S} s"]
        except subprocess.CalledProcessError as failed:
            return [f"{page}: the browser exited with status {failed.returncode}{how}"]
    rendered, narrow = doms.values()
    problems = math_problems(static, rendered, page)
    if page in TABLE_PAGES:
        problems += scorecard_problems(rendered, page)
    if not rendered.text or not screenshot.is_file():
        problems.append(f"{page}: the browser returned no page or no screenshot")
    return (problems + wide_output_problems(rendered, page) + table_problems(rendered, page)
            + tall_output_problems(rendered, page) + figure_text_problems(rendered, page, root)
            + overflow_problems(rendered, page) + overflow_problems(narrow, page)
            + issue_problems(rendered, page) + list_problems(html, page)
            + reference_problems(static, page, root, page_ids))


def with_measurement(html: str) -> str:
    """``html`` with :data:`MEASURE_SCRIPT` at the end of its head (or its start)."""
    at = html.find("</head>")
    return html[:at] + MEASURE_SCRIPT + html[at:] if at >= 0 else MEASURE_SCRIPT + html


def narrow_frame(page: str) -> str:
    """A page showing ``page`` (a path from the server's root) in a frame :data:`NARROW_PX`
    wide, whose document the measuring script reports its overflow to."""
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{NARROW_PX} px</title>'
            f'<style>body {{ margin: 0 }} iframe {{ border: 0; display: block }}</style></head>'
            f'<body><iframe src="/{escape(page)}" width="{NARROW_PX}" height="2400">'
            f'</iframe></body></html>')


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        """No access log."""

    def do_GET(self) -> None:
        """Files as they are, except HTML pages, which get :data:`MEASURE_SCRIPT`, and
        :data:`NARROW_PREFIX` + a page, which shows the page in a narrow frame."""
        if self.path.startswith("/" + NARROW_PREFIX):
            body = narrow_frame(self.path.removeprefix("/" + NARROW_PREFIX)).encode("utf-8")
        else:
            path = Path(self.translate_path(self.path))
            if path.suffix != ".html" or not path.is_file():
                super().do_GET()
                return
            body = with_measurement(path.read_text(encoding="utf-8")).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        """No traceback when the browser drops a connection (a page that timed out)."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def serve(root: Path) -> ThreadingHTTPServer:
    """An HTTP server of ``root`` on 127.0.0.1 (a free port), running in a thread."""
    handler = functools.partial(QuietHandler, directory=str(root))
    server = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def pages_of(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*.html")
                  if not SKIPPED_DIRS & set(path.relative_to(root).parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", nargs="?", default="_build/html", type=Path,
                        help="the HTML build (default: _build/html)")
    parser.add_argument("--screens", default="_build/screens", type=Path,
                        help="where the screenshots go (default: _build/screens)")
    parser.add_argument("--jobs", default=2, type=int, help="pages loaded at once (default: 2)")
    args = parser.parse_args(argv)
    root = args.html.resolve()
    pages = pages_of(root) if root.is_dir() else []
    if not pages:
        sys.exit(f"check-book: no HTML pages in {args.html}; build the book first: make book")
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    browser = find_browser()
    shutil.rmtree(args.screens, ignore_errors=True)
    args.screens.mkdir(parents=True)
    started, server = time.perf_counter(), serve(root)
    base_url = f"http://127.0.0.1:{server.server_address[1]}/"
    check = functools.partial(check_page, root=root, base_url=base_url, browser=browser,
                              screens=args.screens.resolve())
    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            problems = [line for found in pool.map(check, pages) for line in found]
    finally:
        server.shutdown()
    print("\n".join(problems))
    print(f"check-book: {len(pages)} pages loaded in Chromium in "
          f"{time.perf_counter() - started:.0f} s, {len(problems)} problem(s); "
          f"screenshots in {args.screens}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
