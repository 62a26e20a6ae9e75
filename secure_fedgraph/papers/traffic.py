"""What the METR-LA forecasting plans share: one client per sensor, its DCRNN windows, the
normalisation statistics as a secure sum (the error totals every plan reports are in
error_totals.py).

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
from secure_fedgraph.data.metr_la import METR_LA_SENSORS, TrafficSplits, load_cached
from secure_fedgraph.papers.base import Plan
from secure_fedgraph.protocol.engine.contexts import ClientContext, ServerContext
from secure_fedgraph.protocol.core.spec import SumSpec, TensorSpec
from secure_fedgraph.protocol.core.steps import StepGen

MOMENTS = SumSpec("normalisation", (TensorSpec("mean", (1,)), TensorSpec("mean_square", (1,))), clip_range=1e4)


def sensor_windows(client_id: int, data_dir: str | os.PathLike | None, max_windows: int | None, stride: int = 1) -> TrafficSplits:
    """One sensor's raw windows (mph), DCRNN's split (a window every ``stride`` steps): all a client reads."""
    speed = load_cached(None if data_dir is None else str(data_dir)).speed
    return dcrnn_windows(speed[:, [client_id]], max_windows=max_windows, stride=stride)


class SensorPlan(Plan):
    """A METR-LA plan with one client per sensor: the first ``config.sensors`` sensors (all 207
    by default), each reading only its own windows (``config.max_windows`` caps them)."""

    clients_field = "sensors"
    window_stride = 1  # a window every step, as DCRNN (CNFGNN's option can space them out)

    def client_ids(self) -> list[int]:
        return list(range(self.config.sensors or METR_LA_SENSORS))

    def load_client_data(self, client_id: int, data_dir: str | os.PathLike | None) -> TrafficSplits:
        """This sensor's raw windows (mph), DCRNN's split."""
        return sensor_windows(client_id, data_dir, self.config.max_windows, self.window_stride)


def server_normalisation(ctx: ServerContext) -> StepGen[Any]:
    """Server side of the normalisation sum."""
    return (yield from ctx.secure_sum(MOMENTS))


def client_normalisation(ctx: ClientContext, raw: TrafficSplits):
    """Client side: contribute this sensor's moments; returns (z-scored windows, mean, std)."""
    mean, mean_square = raw.training_moments()
    moments = yield ctx.secure_sum(MOMENTS.name, {"mean": [mean], "mean_square": [mean_square]})
    n = len(moments.contributors)
    mean = float(moments.values["mean"][0]) / n
    std = math.sqrt(float(moments.values["mean_square"][0]) / n - mean**2)
    return raw.normalised(mean, std), mean, std
