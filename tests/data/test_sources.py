"""Datasets by name and by folder (data/sources.py): every named dataset converts to the same
numbers its own loader gives, NYCBike1's series reproduces every window it was cut into,
PEMS-BAY reads a user's speeds on its real graph, and the processed cache follows its raw files."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from secure_fedgraph.data import HZMetro, MetrLA, metro_windows
from secure_fedgraph.data import sources
from secure_fedgraph.data.graph_series import write_folder
from secure_fedgraph.data.sources import check_files, layout_of, load_series, node_count
from secure_fedgraph.errors import ConfigError, DataFormatError, DataNotFoundError
from tests.helpers import HZMETRO_DIR, needs_hzmetro
from tests.helpers.data import NYCBIKE1_DIR, needs_nycbike1, needs_pems_bay_graph, pems_bay_with_synthetic_speeds


@pytest.fixture(autouse=True)
def _fresh_cache():
    sources._load.cache_clear()  # each test reads its own folders
    yield
    sources._load.cache_clear()


def test_metr_la_by_name_is_the_packaged_week_bit_for_bit():
    series, week = load_series("metr-la"), MetrLA.load(None)
    assert np.array_equal(series.signals[:, :, 0], week.speed) and np.array_equal(series.adjacency, week.adjacency)
    assert series.node_ids == week.sensor_ids and str(series.start) == "2012-03-01T00:00" and series.step_minutes == 5


@needs_hzmetro
def test_hzmetro_by_name_gives_fedstgd_the_same_windows_as_its_own_loader():
    series, own = load_series("hzmetro", HZMETRO_DIR), HZMetro.load(HZMETRO_DIR)
    assert series.layout == layout_of("hzmetro")  # the pinned layout is the data's
    daily = series.daily()
    assert np.array_equal(daily.flow, own.flow) and np.array_equal(daily.times, own.times)
    mine, theirs = metro_windows(daily), metro_windows(own)
    for split in ("train", "val", "test"):
        a, b = mine.split(split), theirs.split(split)
        for field in ("x", "y", "x_time", "y_time", "x_slot", "y_slot"):
            assert np.array_equal(getattr(a, field), getattr(b, field)), (split, field)


@needs_nycbike1
def test_nycbike1_series_reproduces_every_window_of_its_files():
    series = load_series("nycbike1", NYCBIKE1_DIR)
    assert series.layout == layout_of("nycbike1") and series.n_nodes == 128 and series.step_minutes == 60
    x_seen = 0
    for name in ("val.npz", "test.npz"):
        with np.load(NYCBIKE1_DIR / "nycbike1" / name) as z:
            offsets = z["x_offsets"].ravel()
            last = x_seen + 73 + np.arange(len(z["x"]))  # the series starts 73 hours before the first window's last input
            assert np.array_equal(series.signals[last[:, None] + offsets], z["x"])
            assert np.array_equal(series.signals[last + 1], z["y"][:, 0])
            x_seen += len(z["x"])
    hourly = series.daily().flow.sum(axis=(2, 3)).mean(axis=0)  # the placed midnight: least traffic in the small hours
    assert 2 <= int(hourly.argmin()) <= 5 and 7 <= int(hourly.argmax()) <= 19


@needs_pems_bay_graph
def test_pems_bay_reads_a_users_speeds_on_its_real_graph(tmp_path):
    root = pems_bay_with_synthetic_speeds(tmp_path)  # SYNTHETIC speeds on PEMS-BAY's real 325-sensor graph
    series = load_series("pems-bay", root)
    assert series.signals.shape == (576, 325, 1) and node_count("pems-bay") == 325
    assert np.count_nonzero(series.adjacency) == 2694 and series.node_ids[0] == "400001"
    assert load_series(str(root / "pems-bay")).signals.shape == (576, 325, 1)  # the same folder given as a path


@needs_pems_bay_graph
def test_pems_bay_without_speeds_says_where_to_put_them(tmp_path):
    root = pems_bay_with_synthetic_speeds(tmp_path)
    (root / "pems-bay" / "speed.csv").unlink()
    with pytest.raises(DataNotFoundError, match="missing file 'speed.csv'.*put your speeds in speed.csv"):
        check_files("pems-bay", root)


@needs_pems_bay_graph
def test_speeds_whose_header_is_not_the_graphs_sensors_are_refused(tmp_path):
    root = pems_bay_with_synthetic_speeds(tmp_path)
    csv = root / "pems-bay" / "speed.csv"
    header, rest = csv.read_text().split("\n", 1)
    ids = header.split(",")
    csv.write_text(",".join([ids[1], ids[0], *ids[2:]]) + "\n" + rest)
    with pytest.raises(DataFormatError, match="list the sensors in different orders"):
        load_series("pems-bay", root)


@needs_pems_bay_graph
def test_the_processed_cache_is_written_once_and_follows_its_raw_files(tmp_path):
    root = pems_bay_with_synthetic_speeds(tmp_path)
    first = load_series("pems-bay", root)
    cached = root / "pems-bay" / "processed" / "graph-series"
    assert (cached / "series.json").is_file() and (cached / "raw.json").is_file()
    sources._load.cache_clear()
    record = (cached / "raw.json").read_text()
    write_folder(dataclasses.replace(first, signals=np.zeros_like(first.signals)), cached)  # a marked cache, the same raw record
    (cached / "raw.json").write_text(record)
    assert not load_series("pems-bay", root).signals.any()  # the second read is the cache's
    sources._load.cache_clear()
    pems_bay_with_synthetic_speeds(tmp_path / "other", seed=1)
    shutil.copy(tmp_path / "other" / "pems-bay" / "speed.csv", root / "pems-bay" / "speed.csv")
    again = load_series("pems-bay", root)  # new raw speeds: converted again, not the old cache
    assert not np.array_equal(again.signals, first.signals)


def test_a_name_or_path_that_is_neither_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="unknown dataset; known names: metr-la, pems-bay, hzmetro, nycbike1"):
        check_files("metr_la")
    with pytest.raises(ConfigError, match="no such folder"):
        check_files(str(tmp_path / "absent"))
    with pytest.raises(DataNotFoundError, match="series.json: missing"):
        check_files(str(tmp_path))


def test_a_graph_series_folder_is_read_as_written(tmp_path):
    week = load_series("metr-la")
    folder = write_folder(week.first_nodes(4), tmp_path / "four")
    assert node_count(str(folder)) == 4 and layout_of(str(folder)).days == 7
    assert np.array_equal(load_series(str(folder)).signals, week.signals[:, :4])


class _Runs:
    def __reduce__(self):
        import os

        return (os.getpid, ())


def test_a_dataset_pickle_cannot_run_code(tmp_path):
    """A folder named metr-la given as --dataset PATH (a client reads the path its server's run
    names) holding a pickle that would call a function: refused before anything runs."""
    import pickle

    folder = tmp_path / "metr-la"
    (folder / "los-loop").mkdir(parents=True)
    (folder / "sensor_graph").mkdir()
    (folder / "los-loop" / "los_speed.csv").write_text("a,b\n1,2\n3,4\n")
    (folder / "sensor_graph" / "adj_mx.pkl").write_bytes(pickle.dumps([["a", "b"], {}, _Runs()]))
    with pytest.raises(DataFormatError, match="refusing to load posix.getpid: only numpy arrays are expected"):
        load_series(str(folder))
