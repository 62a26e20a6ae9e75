"""Graph time series by name or by folder: the one loader the traffic plans call.

``--dataset NAME`` reads ``<data dir>/NAME/`` in that dataset's own published layout, converted
to a :class:`~secure_fedgraph.data.graph_series.GraphSeries` (each source declares its raw
files; checksums are checked where the files are pinned). ``--dataset PATH`` reads a folder in
the graph-series format (data/graph_series.py), or a folder named like a dataset in that
dataset's layout. Converted series are cached per process and on disk (data/processed_cache.py).

| name | raw files (under ``<data dir>/NAME/``) | series |
|---|---|---|
| metr-la | ``los-loop/los_speed.csv``, ``sensor_graph/adj_mx.pkl`` (or the packaged week) | speed, 207 sensors, 5 min from 2012-03-01 |
| pems-bay | ``sensor_graph/adj_mx_bay.pkl`` (sha256 checked) and your ``speed.csv`` | speed, 325 sensors, 5 min from 2017-01-01 |
| hzmetro | PVCGN's ``val.pkl``, ``test.pkl``, ``graph_hz_*.pkl`` (sha256 checked) | inflow, outflow, 80 stations, 73 steps a day from 05:30 |
| nycbike1 | ST-SSL's ``val.npz``, ``test.npz``, ``adj_mx.npz`` (sha256 checked) | inflow, outflow, 128 regions, hourly |
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from secure_fedgraph.data import processed_cache
from secure_fedgraph.data.graph_series import SERIES_FILE, GraphSeries, SeriesLayout, folder_layout, read_folder, read_metadata
from secure_fedgraph.data.locate import ENV_VAR, data_root, require
from secure_fedgraph.errors import ConfigError, DataFormatError, DataNotFoundError

PEMS_BAY_GRAPH_SHA256 = "116275f5704d0d492018e14c047f7ae5004385b450aa907f88424055a4a97370"
NYCBIKE1_SHA256 = {
    "adj_mx.npz": "21e7556c2a05cbd41312154fc82ca07539b51be3299a9c53f5d19f676ba487ec",
    "val.npz": "5a01b775da98029da9e6db10932f85fa295c82d173602c8fe677956fd3a394ac",
    "test.npz": "076c2062e4fc8c8fd14a48262ded5aecb40704cf6969a5c6c7c358da34699378",
}
# ST-SSL's NYCBike1 is 4,392 hours (2014-04-01 00:00 .. 09-30 23:00, 73 + 1 lost to the windows, the rest 7:1:2):
# its val and test files end with the last hour; the files carry no timestamps
NYCBIKE1_LAST_HOUR = np.datetime64("2014-09-30T23:00", "m")


def _verified(path: Path, expected: str, dataset: str) -> None:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected:
        raise DataFormatError(f"{dataset}: {path} has sha256 {digest}, expected {expected} (../shared/data/{dataset}/SOURCE.md)")


def _read_metr_la(root: Path | None) -> GraphSeries:
    from secure_fedgraph.data.metr_la import MetrLA

    data = MetrLA.load(root)
    return GraphSeries("metr-la", data.speed[:, :, None], data.adjacency, np.datetime64("2012-03-01T00:00", "m"), 5, 288, ("speed",),
                       data.sensor_ids)


def _read_pems_bay(root: Path | None) -> GraphSeries:
    from secure_fedgraph.data.metr_la import read_speeds_and_graph

    paths = require(_root(root, "pems-bay"), "pems-bay", SOURCES["pems-bay"].raw_files)
    _verified(paths["sensor_graph/adj_mx_bay.pkl"], PEMS_BAY_GRAPH_SHA256, "pems-bay")
    speed, adjacency, ids = read_speeds_and_graph(paths["speed.csv"], paths["sensor_graph/adj_mx_bay.pkl"], dataset="pems-bay")
    return GraphSeries("pems-bay", speed[:, :, None], adjacency, np.datetime64("2017-01-01T00:00", "m"), 5, 288, ("speed",), ids)


def _read_hzmetro(root: Path | None) -> GraphSeries:
    from secure_fedgraph.data.hzmetro import CHANNELS, HZMetro

    data = HZMetro.load(_root(root, "hzmetro"))
    days, steps, n, c = data.flow.shape
    return GraphSeries("hzmetro", data.flow.reshape(days * steps, n, c), data.conn, data.times[0, 0].astype("datetime64[m]"), 15, steps,
                       CHANNELS, tuple(str(i) for i in range(n)))


def _read_nycbike1(root: Path | None) -> GraphSeries:
    paths = require(_root(root, "nycbike1"), "nycbike1", SOURCES["nycbike1"].raw_files)
    arrays = {}
    for name, path in paths.items():
        _verified(path, NYCBIKE1_SHA256[name], "nycbike1")
        with np.load(path, allow_pickle=False) as z:
            arrays[name] = dict(z)
    x = np.concatenate([arrays["val.npz"]["x"], arrays["test.npz"]["x"]])
    y = np.concatenate([arrays["val.npz"]["y"], arrays["test.npz"]["y"]])
    offsets = np.concatenate([arrays["val.npz"]["x_offsets"].ravel(), arrays["val.npz"]["y_offsets"].ravel()])
    signals = series_from_offsets(np.concatenate([x, y], axis=1), offsets, dataset="nycbike1")
    start = NYCBIKE1_LAST_HOUR - np.timedelta64(len(signals) - 1, "h")
    return GraphSeries("nycbike1", signals, arrays["adj_mx.npz"]["adj_mx"].astype(np.float32), start, 60, 24, ("inflow", "outflow"),
                       tuple(str(i) for i in range(signals.shape[1])))


def series_from_offsets(windows: np.ndarray, offsets: np.ndarray, *, dataset: str) -> np.ndarray:
    """The contiguous series behind windows that slide by one step: ``windows`` (S, K, N, C)
    holds, for sample s, the steps s + ``offsets[k]`` (ST-SSL's x_offsets then y_offsets).
    Every copy of a step must carry the same values, and every step in the span must appear.

    Raises:
        DataFormatError: windows that disagree about a step, or a step no window holds.
    """
    lowest = int(offsets.min())
    count = len(windows) + int(offsets.max()) - lowest
    series = np.zeros((count,) + windows.shape[2:], dtype=windows.dtype)
    seen = np.zeros(count, dtype=bool)
    for k, offset in enumerate(offsets.tolist()):
        index = np.arange(len(windows)) + offset - lowest
        fresh = ~seen[index]
        series[index[fresh]] = windows[fresh, k]
        if not np.array_equal(series[index[~fresh]], windows[~fresh, k]):
            raise DataFormatError(f"{dataset}: overlapping windows disagree about a step (offset {offset}); the files must be one sliding series")
        seen[index] = True
    if not seen.all():
        raise DataFormatError(f"{dataset}: the windows leave steps {np.flatnonzero(~seen)[:5].tolist()} of the series empty")
    return series


@dataclass(frozen=True)
class NamedSource:
    """A dataset read by name: its raw files and how to turn them into a GraphSeries. ``layout``
    is set where the raw files are pinned by checksums, so the sizes are known without reading."""

    name: str
    raw_files: tuple[str, ...]
    read: Callable[[Path | None], GraphSeries]
    nodes: int
    layout: SeriesLayout | None = None
    packaged: bool = False  # runs without a data directory
    note: str = ""


SOURCES = {
    "metr-la": NamedSource("metr-la", ("los-loop/los_speed.csv", "sensor_graph/adj_mx.pkl"), _read_metr_la, 207, packaged=True),
    "pems-bay": NamedSource("pems-bay", ("sensor_graph/adj_mx_bay.pkl", "speed.csv"), _read_pems_bay, 325,
                            note="the shared data hold PEMS-BAY's graph only: put your speeds in speed.csv (a header of the graph's 325 "
                                 "sensor ids in adj_mx_bay.pkl's order, then one row per 5-minute step from 2017-01-01 00:00), "
                                 "or use a graph-series folder (docs/data.md)"),
    "hzmetro": NamedSource("hzmetro", ("val.pkl", "test.pkl", "graph_hz_conn.pkl", "graph_hz_sml.pkl", "graph_hz_cor.pkl"), _read_hzmetro,
                           80, SeriesLayout(80, 2, 73, 7, 511, contiguous=False)),
    "nycbike1": NamedSource("nycbike1", ("val.npz", "test.npz", "adj_mx.npz"), _read_nycbike1, 128, SeriesLayout(128, 2, 24, 57, 1369)),
}
NAMES = tuple(SOURCES)


def _root(root: Path | None, name: str) -> Path:
    if root is None:
        raise DataNotFoundError(f"{name}: no data directory; pass --data-dir or set {ENV_VAR} to the folder holding {name}/, "
                                f"or pass --dataset PATH (see ../shared/data/{name}/SOURCE.md)")
    return root


def _is_path(dataset: str) -> bool:
    return os.sep in dataset or "/" in dataset or dataset.startswith((".", "~")) or dataset not in SOURCES and Path(dataset).is_dir()


@dataclass(frozen=True)
class Resolved:
    """Where a ``--dataset`` value points: a graph-series folder (``source`` None), or a named
    source and the data directory holding its folder (``root`` None: the packaged data)."""

    dataset: str
    folder: Path | None
    source: NamedSource | None
    root: Path | None


def resolve(dataset: str, data_dir: str | os.PathLike | None = None, *, option: str = "--dataset") -> Resolved:
    """What ``dataset`` (a name or a folder) means, reading nothing; errors name ``option``.

    Raises:
        ConfigError: an unknown name, or a path that is not a folder.
    """
    if not isinstance(dataset, str) or not dataset:
        raise ConfigError(f"{option} must be a dataset name ({', '.join(NAMES)}) or a folder, got {dataset!r}")
    if _is_path(dataset):
        folder = Path(dataset).expanduser()
        if not folder.is_dir():
            raise ConfigError(f"{option} {dataset}: no such folder")
        if (folder / SERIES_FILE).is_file() or folder.name not in SOURCES:
            return Resolved(dataset, folder, None, None)
        return Resolved(dataset, folder, SOURCES[folder.name], folder.parent)
    if dataset not in SOURCES:
        raise ConfigError(f"{option} {dataset!r}: unknown dataset; known names: {', '.join(NAMES)}, or a folder path (docs/data.md)")
    root = data_root(data_dir)
    return Resolved(dataset, None if root is None else root / dataset, SOURCES[dataset], root)


def check_files(dataset: str, data_dir: str | os.PathLike | None = None, *, option: str = "--dataset") -> None:
    """The command line's preflight: the files ``dataset`` needs are there (reads only series.json).

    Raises:
        ConfigError, DataNotFoundError, DataFormatError: one line naming the file or option.
    """
    where = resolve(dataset, data_dir, option=option)
    if where.source is None:
        read_metadata(where.folder)
    elif where.root is not None:
        try:
            require(where.root, where.source.name, where.source.raw_files)
        except DataNotFoundError as exc:
            raise DataNotFoundError(f"{exc}; {where.source.note}" if where.source.note else str(exc)) from None
    elif not where.source.packaged:
        _root(None, where.source.name)


def load_series(dataset: str, data_dir: str | os.PathLike | None = None) -> GraphSeries:
    """The series ``dataset`` names, read once per process (every hosted client reads it)."""
    return _load(dataset, None if data_dir is None else str(data_dir), os.environ.get(ENV_VAR))


@functools.lru_cache(maxsize=4)
def _load(dataset: str, data_dir: str | None, _env: str | None) -> GraphSeries:
    where = resolve(dataset, data_dir)
    if where.source is None:
        return read_folder(where.folder)
    if where.root is None:
        return where.source.read(None)
    check_files(dataset, data_dir)
    folder = where.root / where.source.name
    return processed_cache.cached(folder, where.source.raw_files, lambda: where.source.read(where.root))


def node_count(dataset: str) -> int:
    """How many nodes ``dataset`` has, from its name or its folder's signals header (no reading)."""
    where = resolve(dataset)
    if where.source is not None:
        return where.source.nodes
    return folder_layout(where.folder).nodes


def layout_of(dataset: str, data_dir: str | os.PathLike | None = None) -> SeriesLayout:
    """The sizes a plan takes from its data: pinned for checksummed named datasets, the header
    of a graph-series folder, else from the loaded series."""
    where = resolve(dataset, data_dir)
    if where.source is None:
        return folder_layout(where.folder)
    if where.source.layout is not None:
        return where.source.layout
    return load_series(dataset, data_dir).layout


def known_layout(dataset: str) -> SeriesLayout | None:
    """The sizes of ``dataset`` where they are known without reading its signals (a pinned named
    dataset, or a folder's series.json and signals header), else None (the server's preflight
    reads no data and checks what it can with these). A malformed folder raises DataFormatError."""
    try:
        where = resolve(dataset)
        return None if where.source is not None and where.source.layout is None else layout_of(dataset)
    except (ConfigError, OSError):  # an unknown name, a missing folder or file: said where the data are read
        return None


def validate(dataset: str, data_dir: str | os.PathLike | None = None, *, option: str = "--dataset") -> GraphSeries:
    """Read ``dataset`` fully, as a plan would, turning any reader's failure into one line
    naming the dataset (``secure-fedgraph data check``).

    Raises:
        ConfigError, DataNotFoundError, DataFormatError: what is wrong, in one line.
    """
    check_files(dataset, data_dir, option=option)
    try:
        return load_series(dataset, data_dir)
    except (ConfigError, DataNotFoundError, DataFormatError):
        raise
    except (ValueError, OSError, KeyError, EOFError, pickle.UnpicklingError) as exc:
        raise DataFormatError(f"{dataset}: cannot read it: {' '.join(str(exc).split())}") from None


def describe(series: GraphSeries) -> str:
    """One line: what a series holds (``secure-fedgraph data check``)."""
    layout = series.layout
    edges = int(np.count_nonzero(series.adjacency))
    day = "contiguous" if series.contiguous else f"{series.steps_per_day} steps a day"
    splits = "" if series.splits is None else f", splits {'/'.join(f'{f:g}' for f in series.splits)}"
    return (f"{series.name}: {layout.steps} steps x {layout.nodes} nodes x {layout.channels} channels ({', '.join(series.channels)}), "
            f"every {series.step_minutes} min from {series.start} ({day}, {layout.days} complete days), {edges} edges{splits}")
