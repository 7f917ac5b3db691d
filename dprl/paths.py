"""Where the repository keeps the book's chapters and committed results."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BOOK_DIR = REPO_ROOT / "book"
RESULTS_DIR = REPO_ROOT / "data" / "results"
