"""Window counts from a series' sizes alone (secure_fedgraph/data/windows.py) are the counts the
loaders make from its data, so the command line's preflight refuses exactly the windows a run
would fail on, and names the longest that fits."""

from __future__ import annotations

import numpy as np
import pytest

from secure_fedgraph.data.graph_series import GraphSeries, folder_layout, write_folder
from secure_fedgraph.data.metr_la import dcrnn_windows
from secure_fedgraph.data.windows import MIN_SLIDING_WINDOWS, longest_sliding_window, sliding_windows


def _series(steps: int, *, start: str, step_minutes: int, steps_per_day: int) -> GraphSeries:
    signals = np.arange(steps * 2, dtype=np.float32).reshape(steps, 2, 1) % 97 + 1
    return GraphSeries("toy", signals, np.eye(2, dtype=np.float32), np.datetime64(start, "m"), step_minutes, steps_per_day, ("v",), ("a", "b"))


SERIES = {
    "contiguous": _series(60, start="2020-01-01T00:00", step_minutes=60, steps_per_day=24),
    "daily blocks": _series(5 * 12, start="2020-01-01T06:00", step_minutes=60, steps_per_day=12),  # 06:00-17:00 each day
}


def _made(series: GraphSeries, length: int, stride: int) -> int:
    """How many windows dcrnn_windows makes (it refuses fewer than the minimum)."""
    try:
        splits = dcrnn_windows(series.signals[:, :, 0], steps_in=length - 1, steps_out=1, stride=stride, time_of_day=series.time_of_day(),
                               segments=series.segments())
    except ValueError:
        return -1
    return sum(len(x) for x in splits.x.values())


@pytest.mark.parametrize("name", SERIES)
@pytest.mark.parametrize("stride", [1, 2, 5])
def test_sliding_windows_from_the_sizes_are_the_windows_the_loader_makes(name, stride):
    series = SERIES[name]
    for length in range(2, series.signals.shape[0] + 2):
        count = sliding_windows(series.layout, length, stride)
        assert _made(series, length, stride) == (count if count >= MIN_SLIDING_WINDOWS else -1), (length, count)


@pytest.mark.parametrize("name", SERIES)
@pytest.mark.parametrize("stride", [1, 2, 5])
def test_the_longest_window_is_the_last_length_that_leaves_enough(name, stride):
    layout = SERIES[name].layout
    longest = longest_sliding_window(layout, stride)
    assert longest == max([n for n in range(1, layout.steps + 1) if sliding_windows(layout, n, stride) >= MIN_SLIDING_WINDOWS], default=0)


def test_a_folders_header_says_whether_its_days_are_contiguous(tmp_path):
    """What the server's preflight reads (series.json and the signals header, not the signals)."""
    for name, series in SERIES.items():
        layout = folder_layout(write_folder(series, tmp_path / name.replace(" ", "-")))
        assert layout == series.layout and layout.contiguous == (name == "contiguous")
