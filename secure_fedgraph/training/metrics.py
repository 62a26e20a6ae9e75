"""Forecast errors as sums a secure sum can pool, and the pooled metrics: RMSE and MAE for the
METR-LA plans (CNFGNN's convention: unmasked, mph), and RMSE, MAE and MAPE with TGCRN's mask
for FedSTGD on HZMetro (passenger counts). Every function is pure numpy: a client computes its
sums, only their totals are released, and the metrics come from the totals."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


def rmse_mae(sums: Mapping[str, np.ndarray] | None) -> tuple[float, float]:
    """RMSE and MAE from pooled error sums (NaN when the sum was abandoned: no numbers are made up)."""
    if sums is None:
        return math.nan, math.nan
    count = float(sums["count"][0])
    return math.sqrt(float(sums["sse"][0]) / count), float(sums["sae"][0]) / count


MASK_THRESHOLD = 0.0


def masked_error_sums(prediction: np.ndarray, target: np.ndarray, *, threshold: float = MASK_THRESHOLD) -> dict[str, np.ndarray]:
    """Error sums over the entries whose target exceeds ``threshold``, in passenger counts.

    Convention (TGCRN ``script/metrics.py: All_Metrics`` with its defaults ``mae_thresh=False``
    and ``mape_thresh=0.``): RMSE, MAE and MAPE all use the entries with ``target > 0``, both
    channels, every station and horizon step pooled; zero targets (closed stations, early
    morning) are left out of all three, which also keeps MAPE finite. FedSTGD does not state its
    convention; TGCRN is its backbone.

    Args:
        prediction, target: same shape, de-normalised counts (numpy, or CPU tensors without grad).
        threshold: entries with ``target > threshold`` count.

    Returns:
        ``sse`` (squared errors), ``sae`` (absolute errors), ``sape`` (absolute errors over the
        target) and ``count`` (masked entries), each a float64 array of shape (1,): a secure sum
        of every client's gives the pooled sums for :func:`pooled_errors`.
    """
    prediction, target = np.asarray(prediction, dtype=np.float64), np.asarray(target, dtype=np.float64)
    if prediction.shape != target.shape:
        raise ValueError(f"prediction {prediction.shape} and target {target.shape} differ in shape")
    mask = target > threshold
    error = prediction[mask] - target[mask]
    return {
        "sse": np.array([np.sum(error**2)]),
        "sae": np.array([np.sum(np.abs(error))]),
        "sape": np.array([np.sum(np.abs(error) / target[mask])]),
        "count": np.array([float(mask.sum())]),
    }


@dataclass(frozen=True)
class ForecastErrors:
    """RMSE and MAE in passengers per 15 min, MAPE in percent (as FedSTGD's tables), over
    ``count`` masked entries."""

    rmse: float
    mae: float
    mape_percent: float
    count: int


def pooled_errors(sums: Mapping[str, np.ndarray]) -> ForecastErrors:
    """RMSE, MAE and MAPE from (pooled) :func:`masked_error_sums`."""
    count = float(np.asarray(sums["count"]).sum())
    if count <= 0:
        raise ValueError("no target above the mask threshold: RMSE, MAE and MAPE are undefined")
    sse, sae, sape = (float(np.asarray(sums[k]).sum()) for k in ("sse", "sae", "sape"))
    return ForecastErrors(math.sqrt(sse / count), sae / count, 100.0 * sape / count, int(round(count)))
