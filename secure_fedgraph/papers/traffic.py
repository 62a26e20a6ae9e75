"""What the sensor forecasting plans share: one client per sensor of a graph series (METR-LA
by default; ``dataset`` names another or a folder, data/sources.py), its DCRNN windows of the
series' first channel, the normalisation statistics as a secure sum (the error totals every
plan reports are in error_totals.py).

Normalisation: each client contributes the mean and mean square of its training speeds; the
secure sum gives DCRNN's global training statistics (the same numbers, within the encoding
error) without revealing any sensor's. Metrics: each client's squared and absolute errors
(mph) and counts; only the totals, hence RMSE and MAE, are released (unmasked, as CNFGNN).
"""

from __future__ import annotations

import math
import os
from typing import Any

from secure_fedgraph.data import dcrnn_windows
from secure_fedgraph.data.metr_la import TrafficSplits, check_sensors
from secure_fedgraph.data.sources import load_series, node_count
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.papers.base import Plan
from secure_fedgraph.protocol.engine.contexts import ClientContext, ServerContext
from secure_fedgraph.protocol.core.spec import SumSpec, TensorSpec
from secure_fedgraph.protocol.core.steps import StepGen
from secure_fedgraph.validation import positive, positive_number

MOMENTS = "normalisation"
SPEED_DATASETS = ("metr-la", "pems-bay")  # mph: squares of speeds below 100 mph stay under 1e4


def moments_spec(config) -> SumSpec:
    """The normalisation sum: each client's mean and mean square, clipped to ``config.moments_clip``
    (None: 1e4 for the speed datasets, as before, else 1e8: values up to 1e4 in magnitude, such
    as passenger or bike counts). The bound is public: the server states it in the sum's spec."""
    clip = config.moments_clip if config.moments_clip is not None else (1e4 if config.dataset in SPEED_DATASETS else 1e8)
    return SumSpec(MOMENTS, (TensorSpec("mean", (1,)), TensorSpec("mean_square", (1,))), clip_range=clip)


def sensor_windows(client_id: int, data_dir: str | os.PathLike | None, max_windows: int | None, stride: int = 1, *,
                   dataset: str = "metr-la", steps_in: int = 12, steps_out: int = 12) -> TrafficSplits:
    """One sensor's raw windows (the series' first channel: METR-LA's mph), DCRNN's split (a
    window every ``stride`` steps, none across a gap in the series): all a client reads."""
    series = load_series(dataset, data_dir)
    return dcrnn_windows(series.signals[:, [client_id], 0], steps_in=steps_in, steps_out=steps_out, max_windows=max_windows, stride=stride,
                         time_of_day=series.time_of_day(), segments=series.segments())


def check_series_options(config) -> None:
    """``dataset``, ``sensors``, ``steps_in``, ``steps_out`` and ``moments_clip`` of a sensor
    plan's config: the sensor count against the dataset's nodes (its name or its folder's
    header: no reading)."""
    for name in ("steps_in", "steps_out"):
        positive(name, getattr(config, name))
    if config.moments_clip is not None:
        positive_number("moments_clip", config.moments_clip)
    check_sensors(config.sensors, node_count(config.dataset))


class SensorPlan(Plan):
    """A plan with one client per sensor: the first ``config.sensors`` sensors of
    ``config.dataset`` (all of them by default), each reading only its own windows
    (``config.max_windows`` caps them)."""

    clients_field = "sensors"
    window_stride = 1  # a window every step, as DCRNN (CNFGNN's option can space them out)

    def client_ids(self) -> list[int]:
        return list(range(self.config.sensors or node_count(self.config.dataset)))

    def load_client_data(self, client_id: int, data_dir: str | os.PathLike | None) -> TrafficSplits:
        """This sensor's raw windows, DCRNN's split."""
        c = self.config
        try:
            return sensor_windows(client_id, data_dir, c.max_windows, self.window_stride, dataset=c.dataset, steps_in=c.steps_in,
                                  steps_out=c.steps_out)
        except ValueError as exc:  # too few steps for the windows asked for
            raise ConfigError(f"dataset {c.dataset}: {exc}") from None


def server_normalisation(ctx: ServerContext, config) -> StepGen[Any]:
    """Server side of the normalisation sum (its clip from ``config``: :func:`moments_spec`)."""
    return (yield from ctx.secure_sum(moments_spec(config)))


def client_normalisation(ctx: ClientContext, raw: TrafficSplits):
    """Client side: contribute this sensor's moments; returns (z-scored windows, mean, std)."""
    mean, mean_square = raw.training_moments()
    moments = yield ctx.secure_sum(MOMENTS, {"mean": [mean], "mean_square": [mean_square]})
    n = len(moments.contributors)
    mean = float(moments.values["mean"][0]) / n
    std = math.sqrt(max(float(moments.values["mean_square"][0]) / n - mean**2, 0.0))  # the sum's encoding error can dip below 0
    if not std > 0:
        raise ConfigError(f"the clients' training values are constant ({mean:g}): nothing to normalise; use more windows or sensors "
                          "(max_windows, sensors) or another channel of the data")
    return raw.normalised(mean, std), mean, std
