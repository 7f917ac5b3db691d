"""Sphinx extension of the dprl book: MathJax 3 served from the built book itself.

The book's ``mathjax_path`` (in _config.yml) names a file under ``_static/mathjax/``; this
extension copies MathJax 3's ``es5`` bundle there from the pinned PyPI package
django-static-mathjax (MathJax 3.2.2, a dependency of the ``book`` extra), so that
``_build/html`` typesets every formula with no network. MathJax is loaded on every page, not
only on pages with equations, since the navigation sidebar of every page holds math.
"""

from __future__ import annotations

import shutil
from importlib.resources import files
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

TARGET = "mathjax"  # folder under _static/


def _es5_bundle() -> Path:
    """The ``es5`` folder of MathJax 3 as installed by django-static-mathjax."""
    return Path(str(files("mathjax"))) / "static" / "mathjax" / "es5"


def _check_path(app: Sphinx, config) -> None:
    """Refuse a ``mathjax_path`` that would load MathJax from anywhere but this build."""
    if not config.mathjax_path.startswith(f"{TARGET}/"):
        raise ExtensionError(f"mathjax_path must name a file under _static/{TARGET}/ "
                             f"(MathJax served by the book itself), got {config.mathjax_path!r}")


def _copy_bundle(app: Sphinx, exception: Exception | None) -> None:
    """Copy the bundle into the HTML build's _static/ and check ``mathjax_path`` is in it."""
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / TARGET
    shutil.copytree(_es5_bundle(), target, dirs_exist_ok=True)
    script = Path(app.outdir) / "_static" / app.config.mathjax_path
    if not script.is_file():
        raise ExtensionError(f"mathjax_path {app.config.mathjax_path!r} is not in MathJax's "
                             f"es5 bundle ({_es5_bundle()})")


def setup(app: Sphinx) -> dict[str, bool]:
    app.set_html_assets_policy("always")
    app.connect("config-inited", _check_path)
    app.connect("build-finished", _copy_bundle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
