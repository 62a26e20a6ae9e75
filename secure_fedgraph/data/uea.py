"""UEA multivariate time-series classification archives (BasicMotions, JapaneseVowels), FedRel's
stand-ins for SHL_Small and ISRUC_S3: channels are graph nodes, a case is one sequence of graphs.

Raw files (under ``<data dir>/uea-basicmotions/`` and ``<data dir>/uea-japanesevowels/``, see
the folders' SOURCE.md): the archive's ``.ts`` text files as aeon ships them. Every file's
SHA-256 is checked before it is parsed. The parser (:func:`parse_ts`) is written here rather
than taken from aeon/sktime (a heavy dependency for one text format): header lines start with
``@`` (``#`` lines are comments), then ``@data``, then one case per line: its dimensions
separated by ``:``, each a comma-separated series, and the class label last. It accepts only
what these files need (equal length, no timestamps, no missing values) and names the file and
line of anything else.

Each dataset's shape (channels, length, class labels) is declared in :data:`UEA` so a server
can build a model without reading any client's data; the loader checks the files against it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from secure_fedgraph.data.locate import ENV_VAR, data_root, require
from secure_fedgraph.errors import DataNotFoundError


@dataclass(frozen=True)
class UEAShape:
    """What a model needs to know of a dataset: ``channels`` (nodes N), ``length`` (time steps
    per case) and the class labels in the archive's order."""

    folder: str
    stem: str
    channels: int
    length: int
    classes: tuple[str, ...]
    sha256: dict[str, str]

    @property
    def raw_files(self) -> tuple[str, str]:
        return (f"{self.stem}_TRAIN.ts", f"{self.stem}_TEST.ts")


UEA = {
    # ../shared/data/uea-basicmotions/SOURCE.md lists these digests
    "basicmotions": UEAShape("uea-basicmotions", "BasicMotions", 6, 100, ("Standing", "Running", "Walking", "Badminton"), {
        "BasicMotions_TRAIN.ts": "8dc43cc6306cb679c888c01e26f91772ac4441a916da43bac8b79734a538b9d6",
        "BasicMotions_TEST.ts": "79213102bc6fca1a398ad98ce1185dff0208fa3d1465e687f48288946b0ff8dc",
    }),
    # ../shared/data/uea-japanesevowels/SOURCE.md says "verify with sha256sum" without listing them:
    # these are the shared files' digests, recorded when this loader was written
    "japanesevowels": UEAShape("uea-japanesevowels", "JapaneseVowels_eq", 12, 25, tuple(str(i) for i in range(1, 10)), {
        "JapaneseVowels_eq_TRAIN.ts": "8958279c6296b97c8e34038346407935222db171492b84dffa3b930d087bc2d6",
        "JapaneseVowels_eq_TEST.ts": "bb83bb1aa6bfb17faae269f6829b7cac71de36fdd3264ee34137fe90270d5895",
    }),
}


@dataclass(frozen=True)
class TsFile:
    """A parsed ``.ts`` file: ``series`` (cases, channels, length) float32, ``labels`` (cases,)
    int64 indices into ``classes`` (the ``@classLabel`` header's order)."""

    series: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]


def parse_ts(text: str, *, source: str = "<text>") -> TsFile:
    """Parse the text of an equal-length, labelled ``.ts`` file.

    Raises:
        DataNotFoundError: naming ``source`` and the line of a malformed header, a case with the
            wrong number of dimensions or values, a value that is not a finite number, or a label
            the header does not declare.
    """
    def fail(line_no: int, what: str) -> DataNotFoundError:
        return DataNotFoundError(f"{source}, line {line_no}: {what}")

    header: dict[str, str] = {}
    lines = text.splitlines()
    start = None
    for i, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not line.startswith("@"):
            raise fail(i, f"expected a header line starting with '@' before @data, got {line[:40]!r}")
        key, _, value = line[1:].partition(" ")
        if key.lower() == "data":
            start = i
            break
        header[key.lower()] = value.strip()
    if start is None:
        raise DataNotFoundError(f"{source}: no @data line")
    label_spec = header.get("classlabel", "").split()
    if not label_spec or label_spec[0].lower() != "true" or len(label_spec) < 2:
        raise DataNotFoundError(f"{source}: expected '@classLabel true <labels...>', got {header.get('classlabel')!r}")
    for key in ("timestamps", "missing"):
        if header.get(key, "false").lower() != "false":
            raise DataNotFoundError(f"{source}: @{key} {header[key]} is not supported (equal-length cases without timestamps or gaps only)")
    classes = tuple(label_spec[1:])
    index = {c: k for k, c in enumerate(classes)}
    series, labels = [], []
    for i, raw in enumerate(lines[start:], start + 1):
        line = raw.strip()
        if not line:
            continue
        *dims, label = line.split(":")
        if label not in index:
            raise fail(i, f"label {label!r} is not one of the declared classes {classes}")
        try:
            case = [np.array(d.split(","), dtype=np.float64) for d in dims]
        except ValueError as exc:
            raise fail(i, f"a value is not a number ({exc})") from None
        if series and (len(case) != len(series[0]) or any(len(c) != len(series[0][0]) for c in case)):
            raise fail(i, f"{len(case)} dimensions of lengths {sorted({len(c) for c in case})}, expected {len(series[0])} of {len(series[0][0])}")
        if not all(np.isfinite(c).all() for c in case):
            raise fail(i, "a value is NaN or infinite")
        series.append(case)
        labels.append(index[label])
    if not series:
        raise DataNotFoundError(f"{source}: no cases after @data")
    return TsFile(np.asarray(series, dtype=np.float32), np.asarray(labels, dtype=np.int64), classes)


@dataclass(frozen=True)
class UEASplits:
    """The archive's own train and test cases: ``x`` (cases, channels, length) float32, ``y``
    (cases,) class indices into ``shape.classes``."""

    shape: UEAShape
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray


def uea_shape(name: str) -> UEAShape:
    """The declared shape of dataset ``name`` ("basicmotions" or "japanesevowels")."""
    if name not in UEA:
        raise DataNotFoundError(f"unknown UEA dataset {name!r}; one of {', '.join(sorted(UEA))}")
    return UEA[name]


def _paths(shape: UEAShape, data_dir: str | os.PathLike | None) -> dict[str, Path]:
    root = data_root(data_dir)
    if root is None:
        raise DataNotFoundError(f"{shape.folder}: no data directory; pass --data-dir or set {ENV_VAR} to the folder holding "
                                f"{shape.folder}/ (see ../shared/data/{shape.folder}/SOURCE.md)")
    return require(root, shape.folder, shape.raw_files)


def check_files(name: str, data_dir: str | os.PathLike | None) -> None:
    """DataNotFoundError unless both raw files of ``name`` are there (reads neither)."""
    _paths(uea_shape(name), data_dir)


def load_uea(name: str, data_dir: str | os.PathLike | None = None) -> UEASplits:
    """Read and verify dataset ``name``'s train and test files.

    Raises:
        DataNotFoundError: no data directory or a missing file (named, with the path looked for),
            a checksum mismatch (found before parsing), a malformed file, or a file whose
            channels, length or classes differ from :data:`UEA`'s declaration.
    """
    shape = uea_shape(name)
    parts = []
    for filename, path in _paths(shape, data_dir).items():
        blob = path.read_bytes()
        digest = hashlib.sha256(blob).hexdigest()
        if digest != shape.sha256[filename]:
            raise DataNotFoundError(f"{shape.folder}: {path} has sha256 {digest}, expected {shape.sha256[filename]} "
                                    f"(../shared/data/{shape.folder}/SOURCE.md); replace it with the recorded file")
        parsed = parse_ts(blob.decode("utf-8"), source=str(path))
        if parsed.series.shape[1:] != (shape.channels, shape.length) or parsed.classes != shape.classes:
            raise DataNotFoundError(f"{path}: cases of shape {parsed.series.shape[1:]} with classes {parsed.classes}, expected "
                                    f"{(shape.channels, shape.length)} with {shape.classes}")
        parts.append(parsed)
    return UEASplits(shape, parts[0].series, parts[0].labels, parts[1].series, parts[1].labels)
