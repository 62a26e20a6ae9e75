"""FedSTGD's distributed DP: the noise each of its secure sums carries (``ddp_noise`` > 0), and
the rows its statistics sums are made of (papers/fedstgd.py; threat_model.md ST-DDP).

The unit is one window of one client's stations, and every sum is noised by its clients inside
the secure sum (protocol SumNoise; the Skellam mechanism written once, protocol/sum_backends/
ddp_noise.py): each client clips every window's part of its contribution to the sum's bound and
adds its share of noise of standard deviation ``ddp_noise`` times that bound, so the sum carries
the full noise whatever the server does. What each sum's rows are (the module docstring of
papers/fedstgd.py derives their sensitivities):

- ``pq``: row b of P_kj and Q_kj is window b's (NoiseUnit.ROW), clipped to ``ddp_clip``.
- ``pq-grad``: row b of dL_i/dS is window b's, clipped to ``ddp_gradient_clip`` on a grid fine
  enough that rounding adds at most 1% to its sensitivity (fine_grid_bits).
- ``normalisation``: one staged row per training window (NoiseUnit.SUMMED_ROWS): its readings,
  clipped to [-V, V] (V = ``ddp_reading_clip``), summed and summed in squares, in units of
  n V and n V^2 (n: the readings of the largest client's window), so every row lies in
  [-1, 1] x [0, 1] and its bound is sqrt(2). The count is public (windows x steps x stations x
  channels) and is not summed.
- ``validation``, ``test``: one staged row per evaluation window: its squared, absolute and
  absolute percentage errors and its count of targets above the mask, in units of n sigma^2,
  n sigma, n and n (sigma: the released normalisation's standard deviation; n the entries of the
  largest client's window), each capped on its own (E = ``ddp_error_clip``: the window's mean
  squared error at (E sigma)^2, its mean absolute error at E sigma, its mean absolute percentage
  error at E, its count at n), so every row lies within E^2 + 1 and a window whose errors are
  huge cannot crowd out the others' counts.

Decoding the statistics is post-processing of released sums, the same for the server and every
client: the mean is kept within [-V, V] and the variance within [(V / 100)^2, V^2] (noise can
make a small run's variance negative), error totals at 0 or more and the count at 1 or more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from secure_fedgraph.data.graph_series import SeriesLayout
from secure_fedgraph.data.hzmetro import ZScore
from secure_fedgraph.models.fedstgd import MLP_UNITS
from secure_fedgraph.privacy.analysis.skellam import fine_grid_bits
from secure_fedgraph.protocol.core.spec import NoiseUnit, SumNoise, SumSpec, TensorSpec
from secure_fedgraph.protocol.engine.contexts import ServerContext
from secure_fedgraph.training.metrics import masked_error_sums

NORMALISATION_NAME = "normalisation"
MOMENTS = ("sum", "sum_sq")  # the normalisation's rows: the count is public
ERRORS = ("sse", "sae", "sape", "count")
ROW_BOUND = math.sqrt(2.0)  # a normalisation row lies in [-1, 1] x [0, 1]


def error_bound(config) -> float:
    """The L2 bound of an error row: sqrt(E^4 + E^2 + E^2 + 1) = E^2 + 1 (module docstring)."""
    return config.ddp_error_clip**2 + 1.0


def largest_block(config, layout: SeriesLayout) -> int:
    """Stations of the largest client (partition_stations: blocks of ceil(N / M) or fewer)."""
    return math.ceil(layout.nodes / config.clients)


def pq_unit_size(config, layout: SeriesLayout) -> int:
    """Values of one window's row in the widest P/Q sum (a decoder step): (4 + Γ's width) x C."""
    shape = config.shape_for(layout)
    return (MLP_UNITS + shape.gamma_width) * max(shape.sum_width(i) for i in range(shape.n_sums))


def window_noise(ctx: ServerContext, config, layout: SeriesLayout, kind: str) -> SumNoise | None:
    """The noise of the FedSTGD sum ``kind`` ("pq", "pq-grad", "normalisation", "validation" or
    "test") for the live clients; None without distributed DP."""
    if not config.ddp_noise:
        return None
    if kind in ("pq", "pq-grad"):
        clip = config.ddp_clip if kind == "pq" else config.ddp_gradient_clip
        return ctx.sum_noise(noise_multiplier=config.ddp_noise, l2_clip=clip, unit=NoiseUnit.ROW,
                             min_precision_bits=fine_grid_bits(l2_clip=clip, dimension=pq_unit_size(config, layout)))
    if kind == NORMALISATION_NAME:
        return ctx.sum_noise(noise_multiplier=config.ddp_noise, l2_clip=ROW_BOUND, unit=NoiseUnit.SUMMED_ROWS,
                             max_rows=config.windows("train", layout))
    split = {"validation": "val", "test": "test"}[kind]
    return ctx.sum_noise(noise_multiplier=config.ddp_noise, l2_clip=error_bound(config), unit=NoiseUnit.SUMMED_ROWS,
                         max_rows=config.windows(split, layout))


def statistics_spec(name: str, fields: tuple[str, ...], noise: SumNoise) -> SumSpec:
    """A noised sum of one scalar per field, the clients staging one row per window."""
    return SumSpec(name, tuple(TensorSpec(f, (1,)) for f in fields), noise=noise)


# -- normalisation ------------------------------------------------------------------------------

def _moment_units(config, layout: SeriesLayout) -> dict[str, float]:
    """The units of a normalisation row: n V and n V^2, n the readings of the largest client's window."""
    v, n = float(config.ddp_reading_clip), config.steps_in * largest_block(config, layout) * layout.channels
    return {"sum": n * v, "sum_sq": n * v * v}


def window_moments(x: np.ndarray, config, layout: SeriesLayout) -> dict[str, np.ndarray]:
    """One client's normalisation rows: per training window (x: (windows, steps_in, stations,
    channels), counts), the sum and the sum of squares of its readings clipped to [-V, V], in
    their units (:func:`_moment_units`); each (windows, 1)."""
    v, units = float(config.ddp_reading_clip), _moment_units(config, layout)
    clipped = np.clip(np.asarray(x, dtype=np.float64), -v, v).reshape(len(x), -1)
    return {"sum": clipped.sum(1, keepdims=True) / units["sum"], "sum_sq": (clipped**2).sum(1, keepdims=True) / units["sum_sq"]}


def scaler_from_moments(values: Mapping[str, np.ndarray], config, layout: SeriesLayout) -> ZScore:
    """TGCRN's one z-score from the released (noisy) normalisation sum, as every party decodes it."""
    v, units = float(config.ddp_reading_clip), _moment_units(config, layout)
    count = config.windows("train", layout) * config.steps_in * layout.nodes * layout.channels
    mean = min(max(float(np.sum(values["sum"])) * units["sum"] / count, -v), v)
    variance = float(np.sum(values["sum_sq"])) * units["sum_sq"] / count - mean**2
    std = math.sqrt(min(max(variance, (v / 100) ** 2), v * v))
    return ZScore(np.full(layout.channels, mean), np.full(layout.channels, std))


# -- error statistics ----------------------------------------------------------------------------

def _error_units(scaler: ZScore, config, layout: SeriesLayout) -> dict[str, float]:
    """The units of an error row: n sigma^2, n sigma, n and n, n the entries of the largest client's window."""
    sigma, n = float(scaler.std[0]), config.steps_out * largest_block(config, layout) * layout.channels
    return {"sse": n * sigma * sigma, "sae": n * sigma, "sape": n, "count": n}


def window_errors(prediction: np.ndarray, target: np.ndarray, scaler: ZScore, config, layout: SeriesLayout) -> dict[str, np.ndarray]:
    """One client's error rows for a batch of evaluation windows (counts, (windows, steps_out,
    stations, channels)): each window's masked error sums (training/metrics.py) in their units
    (:func:`_error_units`), each capped (E^2, E, E, 1); each (windows, 1)."""
    units, e = _error_units(scaler, config, layout), float(config.ddp_error_clip)
    caps = {"sse": e * e, "sae": e, "sape": e, "count": 1.0}
    rows = [masked_error_sums(p, t) for p, t in zip(prediction, target, strict=True)]
    return {k: np.array([min(float(r[k][0]) / units[k], caps[k]) for r in rows]).reshape(-1, 1) for k in ERRORS}


def errors_from_rows(values: Mapping[str, np.ndarray], scaler: ZScore, config, layout: SeriesLayout) -> dict[str, np.ndarray]:
    """The pooled error sums (for training/metrics.py pooled_errors) from a released (noisy) sum of error rows."""
    units, least = _error_units(scaler, config, layout), {"sse": 0.0, "sae": 0.0, "sape": 0.0, "count": 1.0}
    return {k: np.array([max(float(np.sum(values[k])) * units[k], least[k])]) for k in ERRORS}
