"""Results on disk, written atomically: text and JSON files, a result's arrays with their
provenance sidecar, and the SHA-256 that ties the two together (a sidecar records the
checksum of its arrays file; :func:`dprl.engine.results.status` reports a mismatch).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np


def write_result(arrays_path: Path, sidecar_path: Path, arrays: dict[str, np.ndarray],
                 record: dict[str, Any]) -> None:
    """Write the arrays, then the sidecar holding their checksum, each atomically: an
    interruption in between leaves a result that :func:`~dprl.engine.results.status`
    reports as corrupt."""
    arrays_path.parent.mkdir(parents=True, exist_ok=True)
    temporary = arrays_path.with_name(arrays_path.stem + ".tmp.npz")
    np.savez_compressed(temporary, **arrays)
    os.replace(temporary, arrays_path)
    record = dict(record, sha256=sha256(arrays_path))
    write_sidecar(sidecar_path, record)


def write_sidecar(path: Path, record: dict[str, Any]) -> None:
    """Write a result's provenance record as its JSON sidecar (sorted keys, atomically)."""
    write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` atomically (through a temporary file and a rename)."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def read_json(path: Path) -> Any:
    """The JSON in ``path``, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_sidecar(path: Path) -> dict[str, Any] | None:
    """A result's provenance record, or None when it is unreadable, truncated or lacks the
    config and checksum every sidecar holds."""
    record = read_json(path)
    if not isinstance(record, dict) or not {"config", "sha256"} <= record.keys():
        return None
    return record


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
