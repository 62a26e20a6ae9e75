"""How many input + output windows a graph series holds, from its sizes alone (a
:class:`~secure_fedgraph.data.graph_series.SeriesLayout`: nothing read), so that the command
line refuses window lengths the data cannot hold before torch is imported, and says the longest
it can (cli/plans.py: check_windows).

The two ways the plans cut windows:

- sliding windows (DCRNN's, data/metr_la.py: dcrnn_windows; cnfgnn, fedavg-gru, local-gru, the
  demo): a window of ``steps_in + steps_out`` steps starts every ``stride`` steps and never spans
  a gap in the series (a series of a few hours a day is one stretch per day); at least
  :data:`MIN_SLIDING_WINDOWS` are needed, so each of the 70/10/20 splits gets one;
- windows within a day (FedSTGD's, as PVCGN's; data/hzmetro.py: metro_windows): every window
  lies inside one day's ``steps_per_day`` steps.
"""

from __future__ import annotations

import numpy as np

from secure_fedgraph.data.graph_series import SeriesLayout

MIN_SLIDING_WINDOWS = 10  # dcrnn_windows refuses fewer: a 70/10/20 split of 10 gives every split at least one


def sliding_windows(layout: SeriesLayout, length: int, stride: int = 1) -> int:
    """Windows of ``length`` steps starting every ``stride`` steps, none across a gap: the count
    dcrnn_windows makes of the series (GraphSeries.segments: one stretch, or one per day)."""
    if length > layout.steps:
        return 0
    starts = np.arange(0, layout.steps - length + 1, stride)
    if not layout.contiguous:
        starts = starts[starts // layout.steps_per_day == (starts + length - 1) // layout.steps_per_day]
    return len(starts)


def longest_sliding_window(layout: SeriesLayout, stride: int = 1, minimum: int = MIN_SLIDING_WINDOWS) -> int:
    """The largest ``steps_in + steps_out`` that leaves at least ``minimum`` sliding windows (0:
    no length does). The count only falls as windows grow, so a bisection finds it."""
    low, high = 0, layout.steps if layout.contiguous else min(layout.steps, layout.steps_per_day)
    while low < high:
        middle = (low + high + 1) // 2
        if sliding_windows(layout, middle, stride) >= minimum:
            low = middle
        else:
            high = middle - 1
    return low
