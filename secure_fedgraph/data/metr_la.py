"""METR-LA traffic speeds and DCRNN's preprocessing, as CNFGNN uses them.

Raw files (under ``<data dir>/metr-la/``): ``los-loop/los_speed.csv`` (the real first week of
METR-LA, 2,016 five-minute steps x 207 sensors) and ``sensor_graph/adj_mx.pkl`` (DCRNN's
directed graph, same sensor order). Without a data directory, the same week is read from the
copy shipped in the package (``files/metr_la_week1.npz``, see its SOURCE.md).

Preprocessing (DCRNN ``generate_training_data.py``, CNFGNN ``st_datasets.py``): inputs are
[speed, time-of-day] (time-of-day as a fraction of the day, unscaled); windows of 12 steps in
and 12 out; a chronological 70/10/20 split by sample count; speed z-scored with the mean and
standard deviation of the training inputs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from secure_fedgraph.data.locate import data_root, require
from secure_fedgraph.data.safe_pickle import load_arrays
from secure_fedgraph.data.windows import MIN_SLIDING_WINDOWS
from secure_fedgraph.errors import ConfigError, DataFormatError, DataNotFoundError

PACKAGED = Path(__file__).with_name("files") / "metr_la_week1.npz"
SPEED_SHA256 = "aa5479b18b634a4a2905bdf7f37abc85bfe4b71d8f4c70de53689ed8389c54b5"
ADJACENCY_SHA256 = "dda879e31ba37b9f5b351639546197ab57c98812478895a496ef7fdb9004b698"
STEPS_PER_DAY = 288  # five-minute steps
METR_LA_SENSORS = 207


def _sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


@dataclass(frozen=True)
class MetrLA:
    """Speeds (time x sensor, mph), the directed sensor graph, and the sensor ids."""

    speed: np.ndarray
    adjacency: np.ndarray
    sensor_ids: tuple[str, ...]

    raw_files = ("los-loop/los_speed.csv", "sensor_graph/adj_mx.pkl")

    @classmethod
    def check_files(cls, data_dir: str | os.PathLike | None) -> None:
        """DataNotFoundError unless every raw file is there (reads none of them); without a data
        directory the packaged week is used, which is always there."""
        root = data_root(data_dir)
        if root is not None:
            require(root, "metr-la", cls.raw_files)

    @classmethod
    def load(cls, data_dir: str | os.PathLike | None = None) -> MetrLA:
        """Read the raw files from the data directory, or the packaged week if none is set.

        Raises:
            DataNotFoundError: a raw file is missing (the message names it and the folder).
        """
        root = data_root(data_dir)
        if root is None:
            return cls._packaged()
        paths = require(root, "metr-la", cls.raw_files)
        return cls(*read_speeds_and_graph(paths["los-loop/los_speed.csv"], paths["sensor_graph/adj_mx.pkl"], dataset="metr-la"))

    @classmethod
    def _packaged(cls) -> MetrLA:
        if not PACKAGED.is_file():
            raise DataNotFoundError(f"metr-la: the packaged week {PACKAGED} is missing from the installation")
        with np.load(PACKAGED) as z:
            speed, adjacency, ids = z["speed"], z["adjacency"], tuple(str(s) for s in z["sensor_ids"])
        if _sha256(speed) != SPEED_SHA256 or _sha256(adjacency) != ADJACENCY_SHA256:
            raise DataNotFoundError(f"metr-la: {PACKAGED} does not match its recorded checksums (see files/SOURCE.md)")
        return cls(speed, adjacency, ids)

    @property
    def n_sensors(self) -> int:
        return self.speed.shape[1]


def read_speeds_and_graph(speed_csv: Path, graph_pickle: Path, *, dataset: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """A DCRNN-style pair: speeds as CSV (a header of sensor ids, then one row per step) and
    DCRNN's ``adj_mx.pkl`` (ids, id -> index, adjacency), the same sensors in the same order.

    Returns:
        speed (T, N) float64, adjacency (N, N) float32, the sensor ids.

    Raises:
        DataFormatError: unreadable numbers, or the two files list different sensors.
    """
    with open(speed_csv) as f:
        header = f.readline().strip().split(",")
    try:
        speed = np.loadtxt(speed_csv, delimiter=",", skiprows=1, ndmin=2)
    except ValueError as exc:
        raise DataFormatError(f"{speed_csv}: expected a header of sensor ids, then one row of numbers per time step ({exc})") from None
    try:
        ids, _, adjacency = load_arrays(graph_pickle.read_bytes(), encoding="latin1")  # DCRNN's Python 2 pickle
    except (pickle.UnpicklingError, ValueError, TypeError) as exc:
        raise DataFormatError(f"{graph_pickle}: not DCRNN's [sensor ids, id -> index, adjacency] pickle ({exc})") from None
    if list(ids) != header:
        raise DataFormatError(f"{dataset}: {speed_csv.name} and {graph_pickle.name} list the sensors in different orders "
                              f"({len(header)} columns, {len(ids)} sensors in the graph); the CSV header must be the graph's sensor ids, in order")
    if speed.shape[1] != len(header):
        raise DataFormatError(f"{speed_csv}: {speed.shape[1]} columns of numbers under a header of {len(header)} sensor ids")
    return speed, np.asarray(adjacency, dtype=np.float32), tuple(header)


@dataclass(frozen=True)
class TrafficSplits:
    """Windows per split ("train", "val", "test"): x (S, T_in, N, 2) = [speed, time-of-day],
    y (S, T_out, N) speed, y_tod (S, T_out, N) time-of-day of each target step. Speeds are in
    mph until :meth:`normalised` z-scores them."""

    x: dict[str, np.ndarray]
    y: dict[str, np.ndarray]
    y_tod: dict[str, np.ndarray]

    def training_moments(self) -> tuple[float, float]:
        """Mean and mean square of the training inputs' speeds (DCRNN's statistics are the
        mean and std of exactly these values)."""
        speeds = self.x["train"][..., 0].astype(np.float64)
        return float(speeds.mean()), float((speeds**2).mean())

    def normalised(self, mean: float, std: float) -> TrafficSplits:
        """z-score the speeds (inputs and targets) with the given training statistics."""
        if not std > 0:
            raise ValueError(f"std must be positive, got {std}")
        x = {k: v.copy() for k, v in self.x.items()}
        for v in x.values():
            v[..., 0] = (v[..., 0] - mean) / std
        y = {k: ((v - mean) / std).astype(np.float32) for k, v in self.y.items()}
        return TrafficSplits(x, y, self.y_tod)

    def sensor(self, split: str, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One sensor's windows of one split: x (S, T_in, 2), y (S, T_out), y_tod (S, T_out)."""
        return self.x[split][:, :, i, :], self.y[split][:, :, i], self.y_tod[split][:, :, i]


def dcrnn_windows(
    speed: np.ndarray, *, steps_in: int = 12, steps_out: int = 12, train: float = 0.7, test: float = 0.2, max_windows: int | None = None,
    stride: int = 1, time_of_day: np.ndarray | None = None, segments: np.ndarray | None = None,
) -> TrafficSplits:
    """DCRNN's sliding windows and chronological split (speeds left in mph).

    ``speed``: (T, N) with T in five-minute steps from midnight. ``max_windows`` keeps only the
    first windows of each split (for small, fast test runs). ``stride``: a window starts every
    ``stride`` steps (DCRNN's 1; ``steps_in`` makes the input windows disjoint, so a reading is
    in one window's input: the privacy unit "one reading" then costs what one window costs).
    ``time_of_day`` (T,): each step's fraction of the day (default: five-minute steps from
    midnight); ``segments`` (T,): the contiguous stretch of each step, and no window spans two
    (default: one stretch), both from :class:`~secure_fedgraph.data.graph_series.GraphSeries`.
    """
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride must be an integer >= 1, got {stride!r}")
    if speed.ndim != 2:
        raise ValueError(f"speed must be (time, sensors), got shape {speed.shape}")
    if time_of_day is None:
        time_of_day = (np.arange(speed.shape[0]) % STEPS_PER_DAY) / STEPS_PER_DAY
    features = np.stack([speed, np.broadcast_to(time_of_day[:, None], speed.shape)], axis=-1).astype(np.float32)
    starts = np.arange(0, speed.shape[0] - steps_in - steps_out + 1, stride)
    if segments is not None:
        starts = starts[segments[starts] == segments[starts + steps_in + steps_out - 1]]
    samples = len(starts)
    if samples < MIN_SLIDING_WINDOWS:
        raise ValueError(f"{speed.shape[0]} time steps make only {samples} windows of {steps_in} + {steps_out} (stride {stride})")
    x = features[starts[:, None] + np.arange(steps_in)]  # (S, in, N, 2)
    y = features[starts[:, None] + steps_in + np.arange(steps_out)]  # (S, out, N, 2)
    n_test, n_train = round(samples * test), round(samples * train)
    bounds = {"train": (0, n_train), "val": (n_train, samples - n_test), "test": (samples - n_test, samples)}
    cut = (lambda lo, hi: (lo, min(hi, lo + max_windows))) if max_windows else (lambda lo, hi: (lo, hi))
    xs, ys, tods = {}, {}, {}
    for split, (lo, hi) in bounds.items():
        lo, hi = cut(lo, hi)
        xs[split] = x[lo:hi].copy()
        ys[split] = y[lo:hi, ..., 0].copy()
        tods[split] = y[lo:hi, ..., 1].copy()
    return TrafficSplits(xs, ys, tods)


def check_sensors(sensors: int | None, limit: int | None = METR_LA_SENSORS) -> None:
    """A sensor count: None (all of them) or an int in [2, ``limit``] (None: no upper bound here,
    the plans check it against the dataset's nodes when they load it)."""
    if sensors is not None and (isinstance(sensors, bool) or not isinstance(sensors, int) or sensors < 2 or (limit is not None and sensors > limit)):
        raise ConfigError(f"sensors must be an int in [2, {limit if limit is not None else 'the dataset nodes'}], got {sensors!r}")


@functools.lru_cache(maxsize=4)
def load_cached(data_dir: str | None) -> MetrLA:
    """:meth:`MetrLA.load`, once per data directory and process (every hosted client reads it)."""
    return MetrLA.load(data_dir)
