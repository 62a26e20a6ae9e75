"""How many releases one member of a privacy unit takes part in, from per-row release counts.

A release clips every row (one sample: a window, a user's feature vector) to L2 norm C and adds
N(0, (sigma C)^2) to each entry. A member that sits in k rows of one release changes it by at
most sqrt(k) C in L2, so that release is a Gaussian mechanism with multiplier sigma / sqrt(k),
whose Renyi divergence (alpha k / (2 sigma^2)) and privacy loss distribution (mu-GDP with
mu = sqrt(k) / sigma) are those of k releases with multiplier sigma. So without subsampling a
member's privacy loss over a run is that of K releases with multiplier sigma, K the sum over
releases of the rows it sits in: exact for both accountants, tighter than group privacy's
k-fold epsilon. This holds for sampling rate 1 only (every upload releases all its rows);
DP-SGD's subsampled steps are accounted per sample (unit kind ROW) only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from secure_fedgraph.errors import ConfigError


class UnitKind(Enum):
    ROW = "row"  # one row: a window, a user's feature vector
    SPAN = "span"  # one value sitting in up to ``span`` consecutive rows: a reading in overlapping windows
    CLIENT = "client"  # every row of the client: a sensor, a user, over the run


@dataclass(frozen=True)
class Unit:
    """What a run protects: ``description`` says it in words (the metrics' ``unit``)."""

    kind: UnitKind
    description: str
    span: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.span, int) or self.span < 1 or (self.kind is not UnitKind.SPAN and self.span != 1):
            raise ConfigError(f"a privacy unit's span must be 1, or an integer >= 1 for kind 'span'; got {self.span!r} for {self.kind.value!r}")


def member_releases(unit: Unit, counts: Sequence[np.ndarray]) -> int:
    """K: the most row-releases one member of ``unit`` takes part in.

    Args:
        unit: the privacy unit.
        counts: per stream of rows, in the data's order (e.g. a sensor's train, val and test
            windows, chronological), how often each row was released.
    """
    parts = [np.asarray(c, dtype=np.int64) for c in counts if np.size(c)]
    if not parts:
        return 0
    if unit.kind is UnitKind.ROW:
        return int(max(p.max() for p in parts))
    if unit.kind is UnitKind.CLIENT:
        return int(sum(p.sum() for p in parts))
    rows = np.concatenate(parts)  # a value in the last windows of one split also sits in the first of the next
    width = min(unit.span, rows.size)
    running = np.concatenate([[0], np.cumsum(rows)])
    return int((running[width:] - running[:-width]).max())
