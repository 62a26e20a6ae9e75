"""HZMetro (Hangzhou metro): 80 stations, inflow and outflow per 15 minutes, as FedSTGD uses it.

Raw files (under ``<data dir>/hzmetro/``, see ``../shared/data/hzmetro/SOURCE.md``): PVCGN's
``val.pkl`` and ``test.pkl`` (windows of 4 steps in and 4 out, 66 per day, sliding by 15 min)
and the graphs ``graph_hz_conn.pkl`` (physical connectivity), ``graph_hz_sml.pkl`` (DTW
similarity) and ``graph_hz_cor.pkl`` (OD correlation). PVCGN's ``train.pkl`` is not available,
so only 7 of the 25 days exist here: 2019-01-19 (Saturday) to 2019-01-25 (Friday). Nothing
is downloaded, and there is no packaged fallback: a data directory is required.

Every file's sha256 is checked against :data:`SHA256` before it is unpickled, and the
unpickler accepts nothing but numpy arrays (defence in depth: a pickle can run code).

Pipeline:

1. :meth:`HZMetro.load` rebuilds each day's contiguous series, 73 steps from 05:30 to 23:30,
   from its overlapping windows (:func:`series_from_windows`), checking that every time step
   has one value wherever it appears and that timestamps lie on the 15-minute grid.
2. :func:`metro_windows` splits the days chronologically (5 train, 1 val, 1 test by default)
   and cuts 4-in/4-out windows inside each day (66 per day, as PVCGN: none crosses midnight).
3. :meth:`MetroSplits.scaler` z-scores as TGCRN (FedSTGD's backbone) does: one mean and one
   standard deviation over the training inputs, both channels and all stations together
   (``per_channel=True`` gives one pair per channel). :meth:`MetroSplits.training_sums`
   returns the sums behind it, so clients can pool them with a secure sum.
4. :func:`partition_stations` gives M clients contiguous blocks of station indices.

The error metrics (TGCRN's masked RMSE, MAE and MAPE) are in training/metrics.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from secure_fedgraph.data.graph_series import DailySeries
from secure_fedgraph.data.locate import ENV_VAR, data_root, require
from secure_fedgraph.data.safe_pickle import load_arrays
from secure_fedgraph.errors import ConfigError, DataNotFoundError

DATASET = "hzmetro"
SHA256 = {
    "val.pkl": "e7dd8e5e08480e92a3f68389193726220664b84ab0a3932f84b59fa29392ce47",
    "test.pkl": "db6bcc2fa55fe0e6c9effe54df358fc424fa8ca679ad78f9305f3a6adef07491",
    "graph_hz_conn.pkl": "27ce96ba46dd820a048185ca7870f66d82868bb0b1d9806a94870668631a7c73",
    "graph_hz_sml.pkl": "f3da1a2226277654dd69e5572bfee58dd4f3e3ae3ff4484a061cfc47efe7a1f4",
    "graph_hz_cor.pkl": "88940de2a8520c4395803e79d74e0f0588799c6620c8c8c5b739c75e30595e9a",
}
N_STATIONS = 80
STEP = np.timedelta64(15, "m")
FIRST_STEP = np.timedelta64(5 * 60 + 30, "m")  # 05:30, the first step of every day
STEPS_PER_DAY = 73  # 05:30 .. 23:30
CHANNELS = ("inflow", "outflow")
_DAY = np.timedelta64(1, "D")

# -- reading -----------------------------------------------------------------------------------

def _read_verified(path: Path, name: str):
    """Unpickle ``path`` after checking its bytes against ``SHA256[name]`` (the bytes that are
    hashed are the bytes that are unpickled)."""
    blob = path.read_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != SHA256[name]:
        raise DataNotFoundError(
            f"{DATASET}: {path} has sha256 {digest}, expected {SHA256[name]} "
            f"(../shared/data/{DATASET}/SOURCE.md); not unpickling it. Replace it with the recorded file"
        )
    try:
        return load_arrays(blob)
    except pickle.UnpicklingError as e:
        raise DataNotFoundError(f"{DATASET}: {path}: {e}") from None


# -- time features ---------------------------------------------------------------------------


def time_of_day(times: np.ndarray) -> np.ndarray:
    """Time of day as a fraction of 24 h (05:30 is 0.2292), float32, same shape as ``times``."""
    times = np.asarray(times, dtype="datetime64[ns]")
    return ((times - times.astype("datetime64[D]")) / _DAY).astype(np.float32)


def day_of_week(times: np.ndarray) -> np.ndarray:
    """Day of the week, Monday 0 .. Sunday 6, int64, same shape as ``times``."""
    days = np.asarray(times, dtype="datetime64[ns]").astype("datetime64[D]").astype(np.int64)
    return (days + 3) % 7  # 1970-01-01 was a Thursday


def time_slot(times: np.ndarray, origin: np.timedelta64 = FIRST_STEP, step: np.timedelta64 = STEP) -> np.ndarray:
    """TGCRN's time id for metro data: the 15-minute slot since 05:30, 0 .. 72, int64 (another
    series: its ``step``-long slot since ``origin`` after midnight).

    (TGCRN's default ``period_time=False`` gives weekends and holidays the same ids as
    workdays; :func:`day_of_week` is separate for models that want it.)"""
    times = np.asarray(times, dtype="datetime64[ns]")
    return ((times - times.astype("datetime64[D]") - origin) // step).astype(np.int64)


# -- windows ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetroWindows:
    """Windows: ``x`` (S, T_in, N, 2) and ``y`` (S, T_out, N, 2), channels [inflow, outflow]
    (passenger counts per 15 min until :meth:`MetroSplits.normalised`), with the timestamps of
    their steps, ``x_time`` (S, T_in) and ``y_time`` (S, T_out), datetime64[ns]. Time features
    are the same for every station, so they are kept per window and step, not per station.
    A day's slots start at ``slot_origin`` after midnight, ``slot_step`` apart (HZMetro: 05:30,
    15 min; another series: its DailySeries', data/graph_series.py)."""

    x: np.ndarray
    y: np.ndarray
    x_time: np.ndarray
    y_time: np.ndarray
    slot_origin: np.timedelta64 = FIRST_STEP
    slot_step: np.timedelta64 = STEP

    def __len__(self) -> int:
        return len(self.x)

    @property
    def n_stations(self) -> int:
        return self.x.shape[2]

    @property
    def days(self) -> np.ndarray:
        """The distinct dates (datetime64[D]) the windows start on, in order."""
        return np.unique(self.x_time[:, 0].astype("datetime64[D]"))

    @property
    def x_time_of_day(self) -> np.ndarray:
        return time_of_day(self.x_time)

    @property
    def y_time_of_day(self) -> np.ndarray:
        return time_of_day(self.y_time)

    @property
    def x_slot(self) -> np.ndarray:
        return time_slot(self.x_time, self.slot_origin, self.slot_step)

    @property
    def y_slot(self) -> np.ndarray:
        return time_slot(self.y_time, self.slot_origin, self.slot_step)

    @property
    def day_of_week(self) -> np.ndarray:
        """(S,) Monday 0 .. Sunday 6 (a window never crosses midnight)."""
        return day_of_week(self.x_time[:, 0])

    def stations(self, indices: Sequence[int] | np.ndarray) -> MetroWindows:
        """The same windows restricted to ``indices`` (one client's stations), in that order."""
        idx = _station_indices(indices, self.n_stations)
        return dataclasses.replace(self, x=self.x[:, :, idx].copy(), y=self.y[:, :, idx].copy())


def _station_indices(indices: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    idx = np.asarray(indices)
    if idx.ndim != 1 or len(idx) == 0 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"station indices must be a non-empty 1-d integer sequence, got {idx!r}")
    if idx.min() < 0 or idx.max() >= n or len(np.unique(idx)) != len(idx):
        raise ValueError(f"station indices must be distinct and in [0, {n}), got {idx.tolist()}")
    return idx


def series_from_windows(windows: MetroWindows) -> tuple[np.ndarray, np.ndarray]:
    """Rebuild each day's contiguous series from overlapping windows (PVCGN's sample files).

    Every step of every window is placed by its timestamp, (t - 05:30) / 15 min, in its day's
    series; the series must then reproduce every window exactly, so a step that appears in
    several windows must carry the same values in all of them.

    Returns:
        ``flow`` (days, 73, N, 2) float32 and ``times`` (days, 73) datetime64[ns], by date.

    Raises:
        DataNotFoundError: a window whose steps are not 15 minutes apart, that crosses
            midnight or leaves 05:30 .. 23:30; overlapping windows that disagree; a day whose
            windows do not cover all 73 steps; non-finite values.
    """
    times = np.concatenate([windows.x_time, windows.y_time], axis=1).astype("datetime64[ns]")  # (S, 8)
    values = np.concatenate([windows.x, windows.y], axis=1)  # (S, 8, N, 2)
    if not np.isfinite(values).all():
        raise DataNotFoundError(f"{DATASET}: the windows hold non-finite values")
    gaps = np.diff(times, axis=1)
    if (gaps != STEP).any():
        s = int(np.argwhere(gaps != STEP)[0, 0])
        raise DataNotFoundError(f"{DATASET}: window {s}'s steps are not 15 minutes apart: {times[s].tolist()}")
    dates = times.astype("datetime64[D]")
    if (dates != dates[:, :1]).any():
        s = int(np.argwhere(dates != dates[:, :1])[0, 0])
        raise DataNotFoundError(f"{DATASET}: window {s} crosses midnight: {times[s].tolist()}")
    offset = times - dates - FIRST_STEP
    step = (offset // STEP).astype(np.int64)
    if (offset % STEP != np.timedelta64(0, "ns")).any() or (step < 0).any() or (step >= STEPS_PER_DAY).any():
        s = int(np.argwhere((offset % STEP != np.timedelta64(0, "ns")) | (step < 0) | (step >= STEPS_PER_DAY))[0, 0])
        raise DataNotFoundError(f"{DATASET}: window {s} is off the 15-minute grid 05:30 .. 23:30: {times[s].tolist()}")
    days = np.unique(dates[:, 0])
    flow = np.zeros((len(days), STEPS_PER_DAY) + values.shape[2:], dtype=np.float32)
    for d, day in enumerate(days):
        rows = dates[:, 0] == day
        idx, vals = step[rows], values[rows]
        flow[d, idx.ravel()] = vals.reshape((-1,) + vals.shape[2:])
        if not np.array_equal(flow[d, idx], vals):
            where = np.argwhere((flow[d, idx] != vals).any(axis=(2, 3)))[0]
            t = times[rows][tuple(where)]
            raise DataNotFoundError(f"{DATASET}: windows disagree about {t} (overlapping windows must carry identical values)")
        missing = np.setdiff1d(np.arange(STEPS_PER_DAY), idx)
        if len(missing):
            raise DataNotFoundError(f"{DATASET}: the windows of {day} miss steps {missing.tolist()} of 0 .. {STEPS_PER_DAY - 1}")
    series_times = (days.astype("datetime64[ns]") + FIRST_STEP)[:, None] + np.arange(STEPS_PER_DAY) * STEP
    return flow, series_times.astype("datetime64[ns]")


# -- the dataset -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HZMetro:
    """Contiguous flows per day, ``flow`` (days, 73, N, 2) float32 [inflow, outflow] in
    passengers per 15 min, ``times`` (days, 73) datetime64[ns] by date, and PVCGN's three
    (N, N) graphs as float32: ``conn`` (0/1 physical links with self loops, symmetric),
    ``sml`` (exp(-DTW) similarity) and ``cor`` (OD correlation, asymmetric). ``sml`` and
    ``cor`` were computed by PVCGN on its training days (Jan 1-18), none of which is here."""

    flow: np.ndarray
    times: np.ndarray
    conn: np.ndarray
    sml: np.ndarray
    cor: np.ndarray

    raw_files = ("val.pkl", "test.pkl", "graph_hz_conn.pkl", "graph_hz_sml.pkl", "graph_hz_cor.pkl")

    @classmethod
    def load(cls, data_dir: str | os.PathLike | None = None) -> HZMetro:
        """Read, verify and rebuild the 7 available days.

        Args:
            data_dir: the folder holding ``hzmetro/`` (the CLI's ``--data-dir``); None reads
                $SECURE_FEDGRAPH_DATA.

        Raises:
            DataNotFoundError: no data directory, a missing file (named, with the path looked
                for), a checksum mismatch (found before unpickling), or inconsistent windows.
        """
        paths = cls._paths(data_dir)
        parts = [cls._samples(paths, name) for name in ("val.pkl", "test.pkl")]
        windows = MetroWindows(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("x", "y", "x_time", "y_time")))
        flow, times = series_from_windows(windows)
        graphs = []
        for name in ("graph_hz_conn.pkl", "graph_hz_sml.pkl", "graph_hz_cor.pkl"):
            graph = _read_verified(paths[name], name)
            if not isinstance(graph, np.ndarray) or graph.shape != (N_STATIONS, N_STATIONS):
                raise DataNotFoundError(f"{DATASET}: {paths[name]} should hold an ({N_STATIONS}, {N_STATIONS}) array")
            graphs.append(graph.astype(np.float32))
        return cls(flow, times, *graphs)

    @classmethod
    def pvcgn_samples(cls, split: str, data_dir: str | os.PathLike | None = None) -> MetroWindows:
        """PVCGN's own windows of ``split`` ("val" or "test"), as stored, after the checksum."""
        if split not in ("val", "test"):
            raise ValueError(f"split must be 'val' or 'test' (PVCGN's train.pkl is not available), got {split!r}")
        return cls._samples(cls._paths(data_dir), f"{split}.pkl")

    @classmethod
    def check_files(cls, data_dir: str | os.PathLike | None) -> None:
        """DataNotFoundError unless every raw file is there (reads none of them)."""
        cls._paths(data_dir)

    @classmethod
    def _paths(cls, data_dir: str | os.PathLike | None) -> dict[str, Path]:
        root = data_root(data_dir)
        if root is None:
            raise DataNotFoundError(
                f"{DATASET}: no data directory; pass --data-dir or set {ENV_VAR} to the folder holding {DATASET}/ "
                f"(see ../shared/data/{DATASET}/SOURCE.md)"
            )
        return require(root, DATASET, cls.raw_files)

    @staticmethod
    def _samples(paths: Mapping[str, Path], name: str) -> MetroWindows:
        raw = _read_verified(paths[name], name)
        if not isinstance(raw, dict) or not {"x", "y", "xtime", "ytime"} <= raw.keys():
            raise DataNotFoundError(f"{DATASET}: {paths[name]} should hold a dict with x, y, xtime and ytime")
        x, y = np.asarray(raw["x"], dtype=np.float32), np.asarray(raw["y"], dtype=np.float32)
        if x.ndim != 4 or x.shape[2:] != (N_STATIONS, 2) or y.shape[0] != x.shape[0] or y.shape[2:] != x.shape[2:]:
            raise DataNotFoundError(f"{DATASET}: {paths[name]} has x {x.shape} and y {y.shape}, expected (S, T, {N_STATIONS}, 2)")
        return MetroWindows(x, y, raw["xtime"].astype("datetime64[ns]"), raw["ytime"].astype("datetime64[ns]"))

    @property
    def dates(self) -> np.ndarray:
        """(days,) datetime64[D]."""
        return self.times[:, 0].astype("datetime64[D]")

    @property
    def n_stations(self) -> int:
        return self.flow.shape[2]

    def stations(self, indices: Sequence[int] | np.ndarray) -> HZMetro:
        """The flows of ``indices`` (one client's stations) and the graphs among them."""
        idx = _station_indices(indices, self.n_stations)
        block = np.ix_(idx, idx)
        return HZMetro(self.flow[:, :, idx].copy(), self.times, self.conn[block], self.sml[block], self.cor[block])


# -- splits, normalisation, clients ----------------------------------------------------------


@dataclass(frozen=True)
class ZScore:
    """z-scoring with training statistics: ``mean`` and ``std`` of shape (2,), one per channel
    (both equal when the statistics were pooled over channels, TGCRN's default)."""

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def from_sums(cls, sums: Mapping[str, np.ndarray], channels: int = 2) -> ZScore:
        """From :meth:`MetroSplits.training_sums` (one client's, or all clients' pooled): mean
        sum / count and the population standard deviation (numpy's default ddof=0, as TGCRN),
        for ``channels`` channels."""
        total, squares, count = (np.asarray(sums[k], dtype=np.float64) for k in ("sum", "sum_sq", "count"))
        if (count <= 0).any():
            raise ValueError(f"training statistics need a positive count, got {count.tolist()}")
        mean = total / count
        std = np.sqrt(np.maximum(squares / count - mean**2, 0.0))
        if not (std > 0).all():
            raise ValueError(f"training standard deviation must be positive, got {std.tolist()}")
        return cls(np.broadcast_to(mean, (channels,)).copy(), np.broadcast_to(std, (channels,)).copy())

    def transform(self, values: np.ndarray) -> np.ndarray:
        """(..., 2) counts to z-scores, float32."""
        return ((values - self.mean) / self.std).astype(np.float32)

    def inverse(self, values: np.ndarray) -> np.ndarray:
        """(..., 2) z-scores back to counts (model outputs before the metrics)."""
        return values * self.std + self.mean


@dataclass(frozen=True)
class MetroSplits:
    """Chronological day split: ``train``, ``val`` and ``test`` windows."""

    train: MetroWindows
    val: MetroWindows
    test: MetroWindows

    def split(self, name: str) -> MetroWindows:
        if name not in ("train", "val", "test"):
            raise ValueError(f"split must be 'train', 'val' or 'test', got {name!r}")
        return getattr(self, name)

    def training_sums(self, *, per_channel: bool = False) -> dict[str, np.ndarray]:
        """Sum, sum of squares and count of the training inputs ``x`` (float64; shape (1,), or
        (2,) with ``per_channel``): what a secure sum pools before :meth:`ZScore.from_sums`.

        TGCRN takes ``x_train.mean()`` and ``x_train.std()``: every input window, both
        channels, all stations (a step counts once per window that holds it)."""
        x = self.train.x.astype(np.float64)
        axes = tuple(range(x.ndim - 1)) if per_channel else None
        channels = x.shape[-1]
        shape = (channels,) if per_channel else (1,)
        count = np.full(shape, x.size / (channels if per_channel else 1))
        return {"sum": np.reshape(x.sum(axis=axes), shape), "sum_sq": np.reshape((x**2).sum(axis=axes), shape), "count": count}

    def scaler(self, *, per_channel: bool = False) -> ZScore:
        """TGCRN's statistics (one mean and std over the training inputs), or one per channel."""
        return ZScore.from_sums(self.training_sums(per_channel=per_channel), self.train.x.shape[-1])

    def normalised(self, scaler: ZScore, *, targets: bool = False) -> MetroSplits:
        """z-score the inputs (and the targets too with ``targets=True``). Targets stay in
        passenger counts by default: TGCRN computes its loss and metrics on de-normalised
        values, so a model's output goes through :meth:`ZScore.inverse` before them."""

        def norm(w: MetroWindows) -> MetroWindows:
            return dataclasses.replace(w, x=scaler.transform(w.x), y=scaler.transform(w.y) if targets else w.y)

        return MetroSplits(norm(self.train), norm(self.val), norm(self.test))

    def stations(self, indices: Sequence[int] | np.ndarray) -> MetroSplits:
        """Every split restricted to one client's stations."""
        return MetroSplits(self.train.stations(indices), self.val.stations(indices), self.test.stations(indices))


def metro_windows(
    data: HZMetro | DailySeries, *, train_days: int = 5, val_days: int = 1, test_days: int = 1, steps_in: int = 4, steps_out: int = 4
) -> MetroSplits:
    """Split the days chronologically and cut windows inside each day.

    With the 7 available days the default is train 2019-01-19..23 (Saturday to Wednesday),
    val 01-24 and test 01-25. A window takes ``steps_in`` steps in and the next ``steps_out``
    out, sliding by one step inside a day, never across days: 73 - 8 + 1 = 66 per day, the
    same windows as PVCGN's files (ordered by day, then start). ``data`` may also be any
    series' complete days (``GraphSeries.daily()``, data/graph_series.py).

    Raises:
        ValueError: day counts below 1 or not adding up to the days available; windows
            longer than a day.
    """
    n_days, steps = data.flow.shape[:2]
    if min(train_days, val_days, test_days) < 1 or train_days + val_days + test_days != n_days:
        raise ConfigError(
            f"train_days + val_days + test_days must equal the {n_days} days available ({data.dates[0]} .. {data.dates[-1]}), "
            f"each at least 1; got {train_days} + {val_days} + {test_days}"
        )
    if steps_in < 1 or steps_out < 1 or steps_in + steps_out > steps:
        raise ConfigError(f"steps_in and steps_out must be >= 1 with steps_in + steps_out <= {steps} (a day's steps), got {steps_in} and {steps_out}")
    per_day = steps - steps_in - steps_out + 1
    starts = np.arange(per_day)[:, None]
    x_idx, y_idx = starts + np.arange(steps_in), starts + steps_in + np.arange(steps_out)

    def cut(days: slice) -> MetroWindows:
        flow, times = data.flow[days], data.times[days]
        return MetroWindows(
            flow[:, x_idx].reshape((-1, steps_in) + flow.shape[2:]),
            flow[:, y_idx].reshape((-1, steps_out) + flow.shape[2:]),
            times[:, x_idx].reshape(-1, steps_in),
            times[:, y_idx].reshape(-1, steps_out),
            getattr(data, "slot_origin", FIRST_STEP),
            getattr(data, "slot_step", STEP),
        )

    a, b = train_days, train_days + val_days
    return MetroSplits(cut(slice(0, a)), cut(slice(a, b)), cut(slice(b, n_days)))


def partition_stations(n_clients: int, n_stations: int = N_STATIONS) -> tuple[np.ndarray, ...]:
    """Deterministic split of station indices 0 .. n-1 into ``n_clients`` contiguous blocks,
    sizes differing by at most one (80 stations: 40/40, 4 x 20, 8 x 10).

    FedSTGD says only that the clients partition the global graph, each holding a subgraph
    with its intra-client edges; it does not say how. Its predecessor FedGTP hard-codes METIS
    lists. HZMetro's station indices follow the metro lines (74 of the 79 pairs i, i+1 are
    physically linked), so contiguous blocks are stretches of line: on ``conn`` they cut 8,
    12 and 16 of 84 links for M = 2, 4, 8, close to a graph bisection heuristic (Kernighan-Lin,
    recursive: 5, 9, 14), with no dependency and no randomness.
    """
    if not 1 <= n_clients <= n_stations:
        raise ConfigError(f"n_clients must be in [1, {n_stations}] (clients: at most one per station), got {n_clients}")
    return tuple(block.copy() for block in np.array_split(np.arange(n_stations), n_clients))
