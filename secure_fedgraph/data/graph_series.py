"""One on-disk format for graph time series, and the one in-memory form every traffic plan reads.

A graph-series folder (docs/data.md, "Your own data") holds:

- ``series.json``: ``{"format": "graph-series/1", "start": "2017-01-01T00:00", "step_minutes": 5}``
  plus optional ``name``, ``steps_per_day`` (default a whole day of steps; fewer means each day
  holds only that many steps from ``start``'s time of day, e.g. a metro's service hours),
  ``channels`` (names, one per channel), ``nodes`` (ids, one per node), ``signals`` and
  ``graph`` (file names), ``splits`` (train, val, test fractions) and ``sha256`` (file -> hex
  digest, checked before reading).
- ``signals.npy``: the signals, a numeric array [time, nodes, channels] (torch-spatiotemporal's
  "t n f" layout of a dataset's target; a step with no reading is NaN only if the plans never see
  it: NaN is refused).
- ``adjacency.npy`` ([nodes, nodes], weight of edge i -> j at [i, j]) or ``edges.csv``
  (``source,target[,weight]`` rows of node indices, a header line first: PyG's ``edge_index``
  and ``edge_weight`` as text).

Conventions follow torch-spatiotemporal (tsl): the [time, nodes, channels] layout, connectivity as
an adjacency or an edge list, windows of ``steps_in`` ("window") and ``steps_out`` ("horizon")
steps, and temporal splits by fractions (its ``TemporalSplitter``); PyG Temporal's
``StaticGraphTemporalSignal`` is the same static graph with a signal per step. Neither is a
dependency: the plans need numpy arrays, not their ``Dataset`` objects.

:class:`GraphSeries` is that content in memory; named datasets (data/sources.py) convert their
own raw files into it, so every plan reads one form.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from secure_fedgraph.errors import DataFormatError, DataNotFoundError

FORMAT = "graph-series/1"
SERIES_FILE = "series.json"
SIGNALS_FILE = "signals.npy"
ADJACENCY_FILE = "adjacency.npy"
EDGES_FILE = "edges.csv"
_KEYS = {"format", "name", "start", "step_minutes", "steps_per_day", "channels", "nodes", "signals", "graph", "splits", "sha256"}
_MINUTES_PER_DAY = 1440


@dataclass(frozen=True)
class SeriesLayout:
    """What a plan's sizes depend on (public: the server needs it for the shapes of the sums)."""

    nodes: int
    channels: int
    steps_per_day: int
    days: int  # complete days (GraphSeries.daily)
    steps: int
    splits: tuple[float, float, float] | None = None  # the data's own train/val/test fractions, if it declares them
    contiguous: bool = True  # whole days of steps, without gaps (else each day's block is a stretch of its own: GraphSeries.segments)


@dataclass(frozen=True)
class DailySeries:
    """Complete days: ``flow`` (days, steps_per_day, N, C), ``times`` (days, steps_per_day)
    datetime64[ns]; a day's step k is at ``slot_origin + k * slot_step`` after midnight."""

    flow: np.ndarray
    times: np.ndarray
    slot_origin: np.timedelta64
    slot_step: np.timedelta64

    @property
    def dates(self) -> np.ndarray:
        return self.times[:, 0].astype("datetime64[D]")


@dataclass(frozen=True)
class GraphSeries:
    """Signals (T, N, C) on a static graph (N, N), step t at :meth:`times` ``[t]``.

    Contiguous series (``steps_per_day`` a whole day of steps) run on without gaps; otherwise
    the series is one block of ``steps_per_day`` steps per day, each from ``start``'s time of
    day, and windows never cross from one day to the next (:meth:`segments`)."""

    name: str
    signals: np.ndarray
    adjacency: np.ndarray
    start: np.datetime64
    step_minutes: int
    steps_per_day: int
    channels: tuple[str, ...]
    node_ids: tuple[str, ...]
    splits: tuple[float, float, float] | None = None

    def __post_init__(self) -> None:
        _check_series(self)

    @property
    def n_nodes(self) -> int:
        return self.signals.shape[1]

    @property
    def contiguous(self) -> bool:
        return self.steps_per_day == _MINUTES_PER_DAY // self.step_minutes

    @property
    def layout(self) -> SeriesLayout:
        return SeriesLayout(self.n_nodes, self.signals.shape[2], self.steps_per_day, len(self._day_starts()), self.signals.shape[0], self.splits,
                            self.contiguous)

    def _minutes(self) -> np.ndarray:
        """(T,) minutes since midnight of the first day, int64."""
        t = np.arange(self.signals.shape[0], dtype=np.int64)
        first = _minute_of_day(self.start)
        if self.contiguous:
            return first + t * self.step_minutes
        return (t // self.steps_per_day) * _MINUTES_PER_DAY + first + (t % self.steps_per_day) * self.step_minutes

    def times(self) -> np.ndarray:
        """(T,) datetime64[ns] of every step."""
        midnight = self.start.astype("datetime64[D]").astype("datetime64[ns]")
        return midnight + self._minutes().astype("timedelta64[m]")

    def time_of_day(self) -> np.ndarray:
        """(T,) float64 fraction of the day (DCRNN's time-of-day feature)."""
        return (self._minutes() % _MINUTES_PER_DAY) / _MINUTES_PER_DAY

    def segments(self) -> np.ndarray:
        """(T,) the contiguous stretch each step belongs to (all 0 for a contiguous series)."""
        t = np.arange(self.signals.shape[0])
        return np.zeros_like(t) if self.contiguous else t // self.steps_per_day

    def _day_starts(self) -> np.ndarray:
        return day_starts(first_minute=_minute_of_day(self.start), steps=self.signals.shape[0], step_minutes=self.step_minutes,
                          steps_per_day=self.steps_per_day)

    def daily(self) -> DailySeries:
        """The complete days, for plans whose windows stay inside a day (FedSTGD, as PVCGN)."""
        starts = self._day_starts()
        if len(starts) == 0:
            raise DataFormatError(f"{self.name}: the series holds no complete day of {self.steps_per_day} steps")
        index = starts[:, None] + np.arange(self.steps_per_day)
        times = self.times()[index]
        origin = times[0, 0] - times[0, 0].astype("datetime64[D]")
        return DailySeries(self.signals[index], times, origin, np.timedelta64(self.step_minutes, "m").astype("timedelta64[ns]"))

    def first_nodes(self, count: int) -> GraphSeries:
        """The first ``count`` nodes and the graph among them."""
        return GraphSeries(self.name, self.signals[:, :count], self.adjacency[:count, :count], self.start, self.step_minutes,
                           self.steps_per_day, self.channels, self.node_ids[:count], self.splits)


def _minute_of_day(start: np.datetime64) -> int:
    return int((start - start.astype("datetime64[D]")) / np.timedelta64(1, "m"))


def day_starts(*, first_minute: int, steps: int, step_minutes: int, steps_per_day: int) -> np.ndarray:
    """Indices of the first step of every complete day: every block of a series of daily blocks;
    in a contiguous series, every midnight with a whole day after it (a partial first and last
    day are dropped)."""
    if steps_per_day < _MINUTES_PER_DAY // step_minutes:
        return np.arange(0, steps, steps_per_day)
    to_midnight = (_MINUTES_PER_DAY - first_minute) % _MINUTES_PER_DAY
    if to_midnight % step_minutes:
        return np.arange(0)  # no step falls on midnight
    return np.arange(to_midnight // step_minutes, steps - steps_per_day + 1, steps_per_day)


def day_split(days: int, given: tuple[int | None, int | None, int | None], fractions: tuple[float, float, float] | None = None) -> tuple[int, int, int]:
    """Train, val and test days: those ``given``, the others from ``fractions`` (the data's
    own, else 0.7/0.1/0.2 as DCRNN and tsl split; at least one day each).

    Raises:
        ConfigError: they do not add up to ``days``.
    """
    from secure_fedgraph.errors import ConfigError

    _, val_share, test_share = fractions or (0.7, 0.1, 0.2)
    train, val, test = given
    test = test if test is not None else max(1, round(days * test_share))
    val = val if val is not None else max(1, round(days * val_share))
    train = train if train is not None else days - val - test
    if min(train, val, test) < 1 or train + val + test != days:
        raise ConfigError(f"train_days + val_days + test_days must be the dataset's {days} available days, each at least 1; "
                          f"got {train} + {val} + {test}")
    return train, val, test


def _check_series(s: GraphSeries) -> None:
    """DataFormatError naming the dataset and what is wrong."""
    name = s.name
    if s.signals.ndim != 3 or min(s.signals.shape) < 1:
        raise DataFormatError(f"{name}: signals must be [time, nodes, channels], got shape {s.signals.shape}")
    if not np.issubdtype(s.signals.dtype, np.number) or not np.isfinite(s.signals).all():
        raise DataFormatError(f"{name}: signals must be finite numbers (dtype {s.signals.dtype}; NaN or inf refused)")
    n = s.signals.shape[1]
    if s.adjacency.shape != (n, n):
        raise DataFormatError(f"{name}: the graph has shape {s.adjacency.shape}, expected ({n}, {n}) for the signals' {n} nodes")
    if not np.isfinite(s.adjacency).all():
        raise DataFormatError(f"{name}: the graph holds NaN or inf weights")
    if isinstance(s.step_minutes, bool) or not isinstance(s.step_minutes, int) or s.step_minutes < 1 or _MINUTES_PER_DAY % s.step_minutes:
        raise DataFormatError(f"{name}: step_minutes must be a whole number of minutes dividing a day (1440), got {s.step_minutes!r}")
    whole = _MINUTES_PER_DAY // s.step_minutes
    if isinstance(s.steps_per_day, bool) or not isinstance(s.steps_per_day, int) or not 1 <= s.steps_per_day <= whole:
        raise DataFormatError(f"{name}: steps_per_day must be an integer in [1, {whole}] for {s.step_minutes}-minute steps, got {s.steps_per_day!r}")
    first = _minute_of_day(s.start)
    if s.steps_per_day < whole:
        if first + (s.steps_per_day - 1) * s.step_minutes >= _MINUTES_PER_DAY:
            raise DataFormatError(f"{name}: {s.steps_per_day} steps of {s.step_minutes} min from {s.start} run past midnight")
        if s.signals.shape[0] % s.steps_per_day:
            raise DataFormatError(f"{name}: {s.signals.shape[0]} steps are not whole days of steps_per_day={s.steps_per_day}")
    if len(s.channels) != s.signals.shape[2] or len(s.node_ids) != n:
        raise DataFormatError(f"{name}: {len(s.channels)} channel names and {len(s.node_ids)} node ids for signals of shape {s.signals.shape}")
    if s.splits is not None and (len(s.splits) != 3 or min(s.splits) <= 0 or abs(sum(s.splits) - 1) > 1e-9):
        raise DataFormatError(f"{name}: splits must be three positive fractions (train, val, test) adding up to 1, got {s.splits!r}")


# -- the folder format -----------------------------------------------------------------------


def read_folder(folder: str | os.PathLike) -> GraphSeries:
    """Read and check a graph-series folder (module docstring).

    Raises:
        DataNotFoundError: no series.json, or a file it names is missing.
        DataFormatError: anything else, one line naming the file and the fault.
    """
    folder = Path(folder).expanduser()
    meta = read_metadata(folder)
    signals_path = folder / meta["signals"]
    _verify(signals_path, meta)
    try:
        signals = np.load(signals_path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise DataFormatError(f"{signals_path}: not a numpy .npy array ({exc})") from None
    if signals.ndim != 3:
        raise DataFormatError(f"{signals_path}: signals must be [time, nodes, channels], got shape {signals.shape}")
    adjacency = _read_graph(folder / meta["graph"], meta, signals.shape[1])
    n, c = signals.shape[1], signals.shape[2]
    try:
        start = np.datetime64(meta["start"], "m")
    except ValueError:
        raise DataFormatError(f"{folder / SERIES_FILE}: start must be an ISO date and time such as 2017-01-01T00:00, got {meta['start']!r}") from None
    step = meta["step_minutes"]
    whole = _MINUTES_PER_DAY // step if isinstance(step, int) and step > 0 else 1
    try:
        return GraphSeries(
            name=str(meta.get("name", folder.name)), signals=signals, adjacency=adjacency.astype(np.float32), start=start, step_minutes=step,
            steps_per_day=meta.get("steps_per_day", whole), channels=tuple(meta.get("channels", [f"channel{i}" for i in range(c)])),
            node_ids=tuple(str(v) for v in meta.get("nodes", range(n))), splits=tuple(meta["splits"]) if "splits" in meta else None,
        )
    except DataFormatError as exc:
        raise DataFormatError(f"{folder}: {exc}") from None


def read_metadata(folder: Path) -> dict:
    """series.json with its defaults filled in; checks its keys and that the files it names exist."""
    path = folder / SERIES_FILE
    if not folder.is_dir():
        raise DataNotFoundError(f"{folder}: no such folder")
    if not path.is_file():
        raise DataNotFoundError(f"{path}: missing; a graph-series folder needs series.json, signals.npy and adjacency.npy or edges.csv (docs/data.md)")
    try:
        meta = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise DataFormatError(f"{path}: must hold a JSON object")
    unknown = set(meta) - _KEYS
    if unknown:
        raise DataFormatError(f"{path}: unknown keys {sorted(unknown)}; known: {', '.join(sorted(_KEYS))}")
    if meta.get("format") != FORMAT:
        raise DataFormatError(f"{path}: format must be {FORMAT!r}, got {meta.get('format')!r}")
    for key in ("start", "step_minutes"):
        if key not in meta:
            raise DataFormatError(f"{path}: missing key {key!r} (the time of the first step and the step in minutes)")
    meta.setdefault("signals", SIGNALS_FILE)
    if "graph" not in meta:
        meta["graph"] = ADJACENCY_FILE if (folder / ADJACENCY_FILE).is_file() else EDGES_FILE
    for key in ("signals", "graph"):
        if not (folder / meta[key]).is_file():
            raise DataNotFoundError(f"{folder / meta[key]}: missing (series.json's {key!r})")
    return meta


def _verify(path: Path, meta: dict) -> None:
    expected = meta.get("sha256", {}).get(path.name)
    if expected is not None:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != expected:
            raise DataFormatError(f"{path}: sha256 {digest}, but series.json records {expected}")


def _read_graph(path: Path, meta: dict, nodes: int) -> np.ndarray:
    _verify(path, meta)
    if path.suffix == ".npy":
        try:
            adjacency = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise DataFormatError(f"{path}: not a numpy .npy array ({exc})") from None
        if adjacency.shape != (nodes, nodes) or not np.issubdtype(adjacency.dtype, np.number):
            raise DataFormatError(f"{path}: expected a numeric ({nodes}, {nodes}) adjacency for the signals' {nodes} nodes, got {adjacency.dtype} {adjacency.shape}")
        return adjacency
    adjacency = np.zeros((nodes, nodes), dtype=np.float32)
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    for line, row in enumerate(rows[1:], start=2):
        try:
            source, target, weight = int(row[0]), int(row[1]), float(row[2]) if len(row) > 2 else 1.0
        except (ValueError, IndexError):
            raise DataFormatError(f"{path}:{line}: expected source,target[,weight] with integer node indices, got {','.join(row)!r}") from None
        if not (0 <= source < nodes and 0 <= target < nodes):
            raise DataFormatError(f"{path}:{line}: node index out of [0, {nodes}): {source},{target}")
        adjacency[source, target] = weight
    return adjacency


def write_folder(series: GraphSeries, folder: str | os.PathLike, *, edges: bool = False) -> Path:
    """Write ``series`` as a graph-series folder (signals.npy, adjacency.npy or edges.csv,
    series.json with every file's sha256); returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / SIGNALS_FILE, series.signals)
    if edges:
        sources, targets = np.nonzero(series.adjacency)
        with open(folder / EDGES_FILE, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["source", "target", "weight"])
            writer.writerows(zip(sources.tolist(), targets.tolist(), series.adjacency[sources, targets].tolist(), strict=True))
    else:
        np.save(folder / ADJACENCY_FILE, series.adjacency)
    graph = EDGES_FILE if edges else ADJACENCY_FILE
    meta = {"format": FORMAT, "name": series.name, "start": str(series.start), "step_minutes": series.step_minutes,
            "steps_per_day": series.steps_per_day, "channels": list(series.channels), "nodes": list(series.node_ids),
            "signals": SIGNALS_FILE, "graph": graph,
            "sha256": {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in (SIGNALS_FILE, graph)}}
    if series.splits is not None:
        meta["splits"] = list(series.splits)
    (folder / SERIES_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    return folder


def folder_layout(folder: Path) -> SeriesLayout:
    """The layout from series.json and the signals' header, without reading the signals."""
    meta = read_metadata(folder)
    try:
        shape = np.load(folder / meta["signals"], mmap_mode="r", allow_pickle=False).shape
    except (ValueError, OSError) as exc:
        raise DataFormatError(f"{folder / meta['signals']}: not a numpy .npy array ({exc})") from None
    if len(shape) != 3:
        raise DataFormatError(f"{folder / meta['signals']}: signals must be [time, nodes, channels], got shape {shape}")
    step = meta["step_minutes"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 1 or _MINUTES_PER_DAY % step:
        raise DataFormatError(f"{folder / SERIES_FILE}: step_minutes must be a whole number of minutes dividing a day (1440), got {step!r}")
    per_day = meta.get("steps_per_day", _MINUTES_PER_DAY // step)
    try:
        first = _minute_of_day(np.datetime64(meta["start"], "m"))
    except ValueError:
        raise DataFormatError(f"{folder / SERIES_FILE}: start must be an ISO date and time such as 2017-01-01T00:00, got {meta['start']!r}") from None
    days = day_starts(first_minute=first, steps=shape[0], step_minutes=step, steps_per_day=per_day) if isinstance(per_day, int) and per_day > 0 else ()
    return SeriesLayout(shape[1], shape[2], per_day, len(days), shape[0], tuple(meta["splits"]) if "splits" in meta else None,
                        per_day == _MINUTES_PER_DAY // step)
