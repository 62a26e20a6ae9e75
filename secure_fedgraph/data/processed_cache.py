"""The processed cache of a converted dataset, in the style of PyG's ``processed/`` folder.

A named dataset's raw files (PVCGN pickles, ST-SSL windows, DCRNN CSV and pickle) are converted
once into a graph-series folder, ``<data dir>/NAME/processed/graph-series/``, beside a record
of the raw files' sha256 and the format version (``raw.json``, as PyG records its
``pre_transform``). A later read uses it only while the record matches the raw files; otherwise
it converts again. A read-only data folder (such as ../shared/data) is simply not cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from secure_fedgraph.data.graph_series import FORMAT, GraphSeries, read_folder, write_folder

PROCESSED = "processed"
SERIES_DIR = "graph-series"
RECORD = "raw.json"


def _record(folder: Path, raw_files: tuple[str, ...]) -> dict:
    return {"format": FORMAT, "raw": {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in raw_files}}


def cached(folder: Path, raw_files: tuple[str, ...], build: Callable[[], GraphSeries]) -> GraphSeries:
    """The series from ``folder/processed/`` when its record matches ``raw_files``, else
    ``build()`` (saved there when the folder is writable; concurrent writers each write a
    temporary folder and the first rename wins)."""
    record = _record(folder, raw_files)
    target = folder / PROCESSED / SERIES_DIR
    try:
        if json.loads((target / RECORD).read_text()) == record:
            return read_folder(target)
    except (OSError, ValueError):
        pass
    series = build()
    if not os.access(folder, os.W_OK):
        return series
    try:
        (folder / PROCESSED).mkdir(exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=folder / PROCESSED, prefix=".staging-"))
        write_folder(series, staging)
        (staging / RECORD).write_text(json.dumps(record, indent=1) + "\n")
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    except OSError:
        shutil.rmtree(locals().get("staging", folder / PROCESSED / ".none"), ignore_errors=True)
    return series
