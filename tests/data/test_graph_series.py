"""The graph-series folder format: round trips (adjacency and edge list agree), the time axis
(contiguous and daily blocks), and a one-line error naming the file for each malformed folder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from secure_fedgraph.data.graph_series import GraphSeries, day_split, read_folder, write_folder
from secure_fedgraph.data.sources import load_series
from secure_fedgraph.errors import ConfigError, DataFormatError, DataNotFoundError


def _series(**changes) -> GraphSeries:
    rng = np.random.default_rng(0)
    adjacency = (rng.random((5, 5)) < 0.4).astype(np.float32) * rng.random((5, 5)).astype(np.float32)
    fields = dict(name="toy", signals=rng.normal(size=(48, 5, 2)), adjacency=adjacency, start=np.datetime64("2020-01-01T22:00", "m"),
                  step_minutes=60, steps_per_day=24, channels=("a", "b"), node_ids=tuple("vwxyz"), splits=(0.5, 0.25, 0.25))
    return GraphSeries(**{**fields, **changes})


def _same(a: GraphSeries, b: GraphSeries) -> None:
    assert np.array_equal(a.signals, b.signals) and a.signals.dtype == b.signals.dtype
    assert np.array_equal(a.adjacency, b.adjacency)
    assert (a.start, a.step_minutes, a.steps_per_day, a.channels, a.node_ids, a.splits) == (
        b.start, b.step_minutes, b.steps_per_day, b.channels, b.node_ids, b.splits)


def test_a_folder_round_trips_and_the_edge_list_gives_the_same_graph(tmp_path):
    series = _series()
    _same(read_folder(write_folder(series, tmp_path / "dense")), series)
    _same(read_folder(write_folder(series, tmp_path / "edges", edges=True)), series)
    assert not (tmp_path / "edges" / "adjacency.npy").exists()


def test_the_real_metr_la_week_round_trips_and_keeps_dcrnn_time_of_day(tmp_path):
    metr_la = load_series("metr-la")  # the packaged week
    _same(read_folder(write_folder(metr_la, tmp_path / "m")), metr_la)
    assert np.array_equal(metr_la.time_of_day(), (np.arange(2016) % 288) / 288)  # DCRNN's feature, bit for bit


def test_a_contiguous_series_keeps_only_complete_days_for_daily_windows():
    series = _series()  # 48 hourly steps from 22:00: a partial first day, one complete day, a partial last one
    daily = series.daily()
    assert daily.flow.shape == (1, 24, 5, 2) and str(daily.times[0, 0]) == "2020-01-02T00:00:00.000000000"
    assert np.array_equal(daily.flow[0], series.signals[2:26])
    assert series.layout.days == 1 and (series.segments() == 0).all()


def test_a_series_of_daily_blocks_has_one_segment_per_day():
    series = _series(signals=np.ones((6, 5, 2)), start=np.datetime64("2020-01-01T06:00", "m"), step_minutes=30, steps_per_day=3)
    assert series.segments().tolist() == [0, 0, 0, 1, 1, 1]
    assert [str(t)[11:16] for t in series.times()] == ["06:00", "06:30", "07:00"] * 2
    assert str(series.times()[3])[:10] == "2020-01-02" and series.layout.days == 2
    assert series.daily().slot_origin == np.timedelta64(6, "h")


def test_the_day_split_takes_the_data_s_fractions_or_dcrnn_s():
    assert day_split(7, (None, None, None)) == (5, 1, 1)  # HZMetro's days, the plan's old default
    assert day_split(57, (None, None, None)) == (40, 6, 11)
    assert day_split(8, (None, None, None), (0.5, 0.25, 0.25)) == (4, 2, 2)
    with pytest.raises(ConfigError, match="must be the dataset's 7 available days"):
        day_split(7, (4, None, None))


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda f: (f / "series.json").unlink(), "series.json: missing"),
        (lambda f: (f / "series.json").write_text("{"), "series.json: not valid JSON"),
        (lambda f: _meta(f, colour="red"), "unknown keys ['colour']"),
        (lambda f: _meta(f, format="csv/1"), "format must be 'graph-series/1'"),
        (lambda f: _meta(f, start="yesterday"), "start must be an ISO date and time"),
        (lambda f: _meta(f, step_minutes=7), "step_minutes must be a whole number of minutes dividing a day"),
        (lambda f: (f / "adjacency.npy").unlink(), "adjacency.npy: missing"),
        (lambda f: _unsum(f, np.save(f / "signals.npy", np.ones((48, 5)))), "signals must be [time, nodes, channels], got shape (48, 5)"),
        (lambda f: _unsum(f, np.save(f / "adjacency.npy", np.ones((4, 4)))), "expected a numeric (5, 5) adjacency"),
        (lambda f: _unsum(f, np.save(f / "signals.npy", np.full((48, 5, 2), np.nan))), "NaN or inf refused"),
        (lambda f: np.save(f / "signals.npy", np.zeros((48, 5, 2))), "sha256"),
        (lambda f: (f / "signals.npy").write_bytes(b"not numpy"), "signals.npy"),
        (lambda f: _meta(f, channels=["a"]), "1 channel names and 5 node ids"),
        (lambda f: _meta(f, splits=[0.5, 0.5]), "splits must be three positive fractions"),
    ],
)
def test_every_malformed_folder_is_one_line_naming_the_file(tmp_path, damage, message):
    folder = write_folder(_series(), tmp_path / "data")
    damage(folder)
    with pytest.raises((DataFormatError, DataNotFoundError)) as error:
        read_folder(folder)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_an_edge_list_with_a_bad_row_names_its_line(tmp_path):
    folder = write_folder(_series(), tmp_path / "data", edges=True)
    _unsum(folder)
    (folder / "edges.csv").write_text("source,target,weight\n0,1,0.5\n0,9,1\n")
    with pytest.raises(DataFormatError, match=r"edges.csv:3: node index out of \[0, 5\): 0,9"):
        read_folder(folder)


def _meta(folder, **changes):
    meta = json.loads((folder / "series.json").read_text())
    (folder / "series.json").write_text(json.dumps({**meta, **changes}))


def _unsum(folder, _=None):
    _meta(folder, sha256={})
