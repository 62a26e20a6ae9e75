"""HZMetro: checksummed loading, day series rebuilt from PVCGN's windows, splits, scaler,
client partitions and TGCRN-masked metrics.

Real-data tests read $SECURE_FEDGRAPH_DATA/hzmetro, else ../shared/data/hzmetro beside the
repository, and skip with a reason when neither holds it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from secure_fedgraph.data import HZMetro, MetroWindows, hzmetro, metro_windows, partition_stations
from secure_fedgraph.data.hzmetro import ZScore, series_from_windows
from secure_fedgraph.training.metrics import masked_error_sums, pooled_errors
from secure_fedgraph.errors import DataNotFoundError
from tests.helpers import HZMETRO_DIR, needs_hzmetro

DATA_DIR = HZMETRO_DIR
needs_data = needs_hzmetro


@pytest.fixture(scope="module")
def data() -> HZMetro:
    return HZMetro.load(DATA_DIR)


@pytest.fixture(scope="module")
def splits(data):
    return metro_windows(data)


@pytest.fixture
def copied(tmp_path) -> Path:
    """A private copy of the raw files, to corrupt or remove."""
    shutil.copytree(DATA_DIR / "hzmetro", tmp_path / "hzmetro", ignore=shutil.ignore_patterns("SOURCE.md"))
    for f in (tmp_path / "hzmetro").iterdir():
        f.chmod(0o644)
    return tmp_path


class _TouchOnLoad:
    """Unpickling this creates a file: proof of whether a pickle was ever loaded."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


# -- loading ----------------------------------------------------------------------------------


@needs_data
def test_load_gives_seven_days_of_73_steps_for_80_stations(data):
    assert data.flow.shape == (7, 73, 80, 2) and data.flow.dtype == np.float32
    assert data.times.shape == (7, 73) and data.times.dtype == np.dtype("datetime64[ns]")
    assert all(g.shape == (80, 80) and g.dtype == np.float32 for g in (data.conn, data.sml, data.cor))
    # SOURCE.md's counts: conn symmetric with 248 non-zeros, sml 2502, cor 1094 and asymmetric
    assert [int((g != 0).sum()) for g in (data.conn, data.sml, data.cor)] == [248, 2502, 1094]
    assert (data.conn == data.conn.T).all() and not (data.cor == data.cor.T).all()
    assert data.flow.min() == 0 and data.flow.max() == 3809


@needs_data
def test_days_are_in_order_and_steps_15_minutes_apart_from_0530_to_2330(data):
    expected = np.arange(np.datetime64("2019-01-19"), np.datetime64("2019-01-26"))
    np.testing.assert_array_equal(data.dates, expected)
    assert (np.diff(data.times, axis=1) == np.timedelta64(15, "m")).all()
    assert (data.times[:, 0] == expected + np.timedelta64(330, "m")).all()
    assert (data.times[:, -1] == expected + np.timedelta64(23 * 60 + 30, "m")).all()


@needs_data
def test_rebuilt_series_reproduce_every_pvcgn_window_exactly(data):
    # days 0-1 are val.pkl's, days 2-6 test.pkl's; windows are cut from the rebuilt series
    cut = metro_windows(data, train_days=2, val_days=4, test_days=1)
    rebuilt = {"val": cut.train, "test": MetroWindows(*(np.concatenate([getattr(cut.val, f), getattr(cut.test, f)]) for f in ("x", "y", "x_time", "y_time")))}
    for split, windows in rebuilt.items():
        original = HZMetro.pvcgn_samples(split, DATA_DIR)
        assert len(original) == {"val": 132, "test": 330}[split]
        for field in ("x", "y", "x_time", "y_time"):
            np.testing.assert_array_equal(getattr(windows, field), getattr(original, field), err_msg=f"{split}.{field}")


@needs_data
def test_source_md_recipe_gives_the_same_day(data):
    test = HZMetro.pvcgn_samples("test", DATA_DIR)
    k = 66  # second test day, 2019-01-22
    day = np.concatenate([test.x[k : k + 66, 0], test.x[k + 65, 1:], test.y[k + 65]])
    np.testing.assert_array_equal(day, data.flow[3])


@needs_data
def test_overlapping_windows_that_disagree_are_rejected():
    samples = HZMetro.pvcgn_samples("val", DATA_DIR)
    x = samples.x.copy()
    x[1, 0, 7, 1] += 1  # 05:45 on 2019-01-19, also step 1 of window 0
    with pytest.raises(DataNotFoundError, match="disagree about 2019-01-19T05:45"):
        series_from_windows(dataclasses.replace(samples, x=x))


@needs_data
def test_windows_off_the_grid_or_missing_steps_are_rejected():
    samples = HZMetro.pvcgn_samples("val", DATA_DIR)
    shifted = samples.x_time.copy()
    shifted[3, 2] += np.timedelta64(1, "m")
    with pytest.raises(DataNotFoundError, match="not 15 minutes apart"):
        series_from_windows(dataclasses.replace(samples, x_time=shifted))
    late = dataclasses.replace(samples, x_time=samples.x_time + np.timedelta64(15, "m"), y_time=samples.y_time + np.timedelta64(15, "m"))
    with pytest.raises(DataNotFoundError, match="off the 15-minute grid"):
        series_from_windows(late)
    keep = np.arange(1, len(samples))  # without the first window, 05:30 is never seen on 01-19
    first_gone = MetroWindows(samples.x[keep], samples.y[keep], samples.x_time[keep], samples.y_time[keep])
    with pytest.raises(DataNotFoundError, match=r"2019-01-19 miss steps \[0\]"):
        series_from_windows(first_gone)


# -- checksums, missing files ----------------------------------------------------------------


@needs_data
def test_checksum_mismatch_is_caught_before_unpickling(copied):
    sentinel = copied / "unpickled"
    (copied / "hzmetro" / "val.pkl").write_bytes(pickle.dumps({"x": _TouchOnLoad(sentinel)}))
    with pytest.raises(DataNotFoundError, match=r"val\.pkl has sha256 [0-9a-f]{64}, expected e7dd8e5e.*not unpickling"):
        HZMetro.load(copied)
    assert not sentinel.exists()


@needs_data
def test_one_flipped_byte_in_a_graph_is_caught(copied):
    path = copied / "hzmetro" / "graph_hz_cor.pkl"
    blob = bytearray(path.read_bytes())
    blob[-20] ^= 1
    path.write_bytes(bytes(blob))
    with pytest.raises(DataNotFoundError, match=f"{path}.*expected 88940de2"):
        HZMetro.load(copied)


@needs_data
def test_unpickler_accepts_only_numpy_arrays_even_with_a_matching_checksum(copied, monkeypatch):
    sentinel = copied / "unpickled"
    blob = pickle.dumps({"x": _TouchOnLoad(sentinel)})
    (copied / "hzmetro" / "val.pkl").write_bytes(blob)
    monkeypatch.setitem(hzmetro.SHA256, "val.pkl", hashlib.sha256(blob).hexdigest())
    with pytest.raises(DataNotFoundError, match="refusing to load pathlib"):
        HZMetro.load(copied)
    assert not sentinel.exists()


@needs_data
def test_missing_file_error_names_the_file_and_the_path(copied):
    (copied / "hzmetro" / "test.pkl").unlink()
    with pytest.raises(DataNotFoundError, match=f"missing file 'test.pkl'; looked for {copied / 'hzmetro' / 'test.pkl'}.*SECURE_FEDGRAPH_DATA"):
        HZMetro.load(copied)


def test_without_a_data_directory_the_error_says_how_to_give_one(monkeypatch):
    monkeypatch.delenv("SECURE_FEDGRAPH_DATA", raising=False)
    with pytest.raises(DataNotFoundError, match="no data directory; pass --data-dir or set SECURE_FEDGRAPH_DATA"):
        HZMetro.load()


@needs_data
def test_environment_variable_points_at_the_data(monkeypatch, data):
    monkeypatch.setenv("SECURE_FEDGRAPH_DATA", str(DATA_DIR))
    np.testing.assert_array_equal(HZMetro.load().flow, data.flow)


# -- splits and windows ----------------------------------------------------------------------


@needs_data
def test_split_is_chronological_by_day_and_no_window_crosses_a_day(splits):
    days = {name: splits.split(name).days.astype(str).tolist() for name in ("train", "val", "test")}
    assert days == {"train": ["2019-01-19", "2019-01-20", "2019-01-21", "2019-01-22", "2019-01-23"], "val": ["2019-01-24"], "test": ["2019-01-25"]}
    for name, n_days in (("train", 5), ("val", 1), ("test", 1)):
        w = splits.split(name)
        assert w.x.shape == (66 * n_days, 4, 80, 2) and w.y.shape == (66 * n_days, 4, 80, 2)
        times = np.concatenate([w.x_time, w.y_time], axis=1)
        assert (times.astype("datetime64[D]") == times[:, :1].astype("datetime64[D]")).all()
        assert (np.diff(times, axis=1) == np.timedelta64(15, "m")).all()
        assert (np.diff(w.x_time[:, 0]) > np.timedelta64(0)).all()  # ordered by day, then start
    assert splits.train.x_time.max() < splits.val.x_time.min() and splits.val.y_time.max() < splits.test.x_time.min()


@needs_data
def test_day_counts_and_window_lengths_are_options(data):
    other = metro_windows(data, train_days=4, val_days=2, test_days=1, steps_in=6, steps_out=2)
    assert (len(other.train), len(other.val), len(other.test)) == (4 * 66, 2 * 66, 66)
    assert other.train.x.shape[1] == 6 and other.train.y.shape[1] == 2
    with pytest.raises(ValueError, match="must equal the 7 days available"):
        metro_windows(data, train_days=5, val_days=1, test_days=2)
    with pytest.raises(ValueError, match="steps_in \\+ steps_out <= 73"):
        metro_windows(data, steps_in=40, steps_out=40)
    with pytest.raises(ValueError, match="split must be"):
        other.split("training")


@needs_data
def test_time_features(splits):
    first = splits.train
    np.testing.assert_allclose(first.x_time_of_day[0], (330 + 15 * np.arange(4)) / 1440, rtol=1e-6)
    assert first.x_slot[0].tolist() == [0, 1, 2, 3] and first.y_slot[65].tolist() == [69, 70, 71, 72]
    assert first.day_of_week[::66].tolist() == [5, 6, 0, 1, 2]  # 2019-01-19 was a Saturday
    assert splits.test.day_of_week[0] == 4  # 2019-01-25 a Friday


@needs_data
def test_normalisation_uses_training_days_only(data, splits):
    scaler = splits.scaler()
    x = splits.train.x.astype(np.float64)
    np.testing.assert_allclose(scaler.mean, [x.mean()] * 2, rtol=1e-12)
    np.testing.assert_allclose(scaler.std, [x.std()] * 2, rtol=1e-9)
    per_channel = splits.scaler(per_channel=True)
    np.testing.assert_allclose(per_channel.mean, x.mean(axis=(0, 1, 2)), rtol=1e-12)
    np.testing.assert_allclose(per_channel.std, x.std(axis=(0, 1, 2)), rtol=1e-9)
    # val and test days changed: same statistics; a training day changed: different ones
    flow = data.flow.copy()
    flow[5:] *= 3
    assert _same(metro_windows(dataclasses.replace(data, flow=flow)).scaler(), scaler)
    flow = data.flow.copy()
    flow[0] *= 3
    assert not _same(metro_windows(dataclasses.replace(data, flow=flow)).scaler(), scaler)


def _same(a: ZScore, b: ZScore) -> bool:
    return bool(np.array_equal(a.mean, b.mean) and np.array_equal(a.std, b.std))


@needs_data
def test_clients_pool_training_sums_into_the_global_scaler(splits):
    for per_channel in (False, True):
        parts = [splits.stations(block).training_sums(per_channel=per_channel) for block in partition_stations(4)]
        pooled = {k: sum(p[k] for p in parts) for k in parts[0]}
        whole = splits.scaler(per_channel=per_channel)
        ours = ZScore.from_sums(pooled)
        np.testing.assert_allclose(ours.mean, whole.mean, rtol=1e-12)
        np.testing.assert_allclose(ours.std, whole.std, rtol=1e-9)


@needs_data
def test_normalised_inputs_and_counts_as_targets_by_default(splits):
    scaler = splits.scaler()
    normed = splits.normalised(scaler)
    np.testing.assert_allclose(normed.train.x.mean(), 0, atol=1e-4)
    np.testing.assert_allclose(normed.train.x.std(), 1, atol=1e-4)
    np.testing.assert_array_equal(normed.test.y, splits.test.y)
    np.testing.assert_allclose(scaler.inverse(normed.val.x), splits.val.x, atol=1e-3)
    both = splits.normalised(scaler, targets=True)
    np.testing.assert_allclose(scaler.inverse(both.test.y), splits.test.y, atol=1e-3)


# -- clients ---------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [2, 4, 8])
def test_partition_covers_every_station_exactly_once(m):
    blocks = partition_stations(m)
    assert len(blocks) == m and [len(b) for b in blocks] == [80 // m] * m
    np.testing.assert_array_equal(np.sort(np.concatenate(blocks)), np.arange(80))
    assert all((np.diff(b) == 1).all() for b in blocks)  # contiguous index blocks
    assert all(np.array_equal(a, b) for a, b in zip(blocks, partition_stations(m)))  # deterministic


def test_partition_of_uneven_counts_and_bad_counts():
    assert [len(b) for b in partition_stations(3)] == [27, 27, 26]
    for bad in (0, 81):
        with pytest.raises(ValueError, match="n_clients must be in"):
            partition_stations(bad)


@needs_data
def test_one_clients_stations_and_subgraph(data, splits):
    block = partition_stations(4)[2]
    mine = splits.stations(block)
    np.testing.assert_array_equal(mine.val.x, splits.val.x[:, :, block])
    np.testing.assert_array_equal(mine.test.y, splits.test.y[:, :, block])
    np.testing.assert_array_equal(mine.train.x_time, splits.train.x_time)
    sub = data.stations(block)
    assert sub.flow.shape == (7, 73, 20, 2)
    np.testing.assert_array_equal(sub.conn, data.conn[40:60, 40:60])
    np.testing.assert_array_equal(sub.cor, data.cor[40:60, 40:60])
    with pytest.raises(ValueError, match="distinct and in"):
        splits.stations([0, 0])
    with pytest.raises(ValueError, match="distinct and in"):
        data.stations([80])


# -- metrics ---------------------------------------------------------------------------------


def _targets() -> np.ndarray:
    """Counts with zeros, like HZMetro's early-morning steps (real test targets if present)."""
    if DATA_DIR is not None:
        return metro_windows(HZMetro.load(DATA_DIR)).test.y
    rng = np.random.default_rng(0)
    y = rng.integers(0, 500, size=(66, 4, 80, 2)).astype(np.float32)
    y[:3] = 0
    return y


def test_masked_error_sums_match_a_direct_numpy_computation():
    target = _targets()
    assert (target == 0).any()
    prediction = target + np.random.default_rng(1).normal(0, 20, target.shape).astype(np.float32)
    sums = masked_error_sums(prediction, target)
    keep = target > 0
    p, t = prediction[keep].astype(np.float64), target[keep].astype(np.float64)
    assert sums["count"][0] == keep.sum() < target.size
    np.testing.assert_allclose(sums["sse"], [np.sum((p - t) ** 2)], rtol=1e-12)
    np.testing.assert_allclose(sums["sae"], [np.sum(np.abs(p - t))], rtol=1e-12)
    np.testing.assert_allclose(sums["sape"], [np.sum(np.abs(p - t) / t)], rtol=1e-12)
    errors = pooled_errors(sums)
    assert errors.rmse == pytest.approx(np.sqrt(np.mean((p - t) ** 2)), rel=1e-12)
    assert errors.mae == pytest.approx(np.mean(np.abs(p - t)), rel=1e-12)
    assert errors.mape_percent == pytest.approx(100 * np.mean(np.abs(p - t) / t), rel=1e-12)
    assert errors.count == keep.sum()


def test_error_sums_pooled_over_clients_equal_the_global_ones():
    target = _targets()
    prediction = target * 1.1 + 3
    whole = pooled_errors(masked_error_sums(prediction, target))
    parts = [masked_error_sums(prediction[:, :, b], target[:, :, b]) for b in partition_stations(8)]
    pooled = pooled_errors({k: sum(p[k] for p in parts) for k in parts[0]})
    assert (pooled.rmse, pooled.mae, pooled.mape_percent, pooled.count) == pytest.approx((whole.rmse, whole.mae, whole.mape_percent, whole.count), rel=1e-12)


def test_mask_threshold_and_edge_cases():
    target = np.array([0.0, 3.0, 10.0, 20.0])
    prediction = np.array([5.0, 6.0, 10.0, 10.0])
    errors = pooled_errors(masked_error_sums(prediction, target))  # the zero target is ignored
    assert (errors.count, errors.mae, errors.mape_percent) == (3, pytest.approx(13 / 3), pytest.approx(100 * (1 + 0 + 0.5) / 3))
    assert errors.rmse == pytest.approx(np.sqrt((9 + 0 + 100) / 3))
    assert pooled_errors(masked_error_sums(prediction, target, threshold=5.0)).count == 2
    with pytest.raises(ValueError, match="undefined"):
        pooled_errors(masked_error_sums(prediction, np.zeros(4)))
    with pytest.raises(ValueError, match="differ in shape"):
        masked_error_sums(prediction, target[:3])
