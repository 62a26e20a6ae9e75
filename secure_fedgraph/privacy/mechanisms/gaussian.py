"""The Gaussian mechanism on rows: clip each row to L2 norm C, add N(0, (sigma*C)^2) noise.

Used as the ``upload`` privacy hook (CNFGNN's h_c,i): it runs on the client, so the server
only ever sees noised rows. One row is one sample (a window); what a run's unit (a window, a
reading in several windows, a whole sensor) pays for its rows is privacy/analysis/units.py's
(threat_model.md, DP-UNIT). No unit is a node of the graph.

The noise comes from the client's :class:`~.noise.NoiseSource`: AES-256-CTR keyed by 32 fresh
OS-random bytes per release, never from the run seed (the server knows the run seed, and noise
it could regenerate would protect nothing); a reproducible source is an explicit opt-in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.privacy.mechanisms.noise import NoiseSource


def clip_rows(x: np.ndarray, clip: float) -> tuple[np.ndarray, int]:
    """Rows (last axis) scaled to L2 norm at most ``clip``; also how many rows were clipped."""
    norms = np.linalg.norm(x.astype(np.float64), axis=-1, keepdims=True)
    scale = np.minimum(1.0, clip / np.maximum(norms, 1e-12))
    return (x * scale).astype(x.dtype, copy=False), int(np.count_nonzero(norms > clip))


@dataclass
class GaussianRows:
    """Upload privacy hook: per-row clipping to ``clip`` and Gaussian noise of standard
    deviation ``sigma * clip``, drawn from ``noise``. Counts its releases and clipped rows (the
    accountant counts what the server received: the upload collective records it)."""

    clip: float
    sigma: float
    noise: NoiseSource = field(default_factory=NoiseSource, repr=False)
    releases: int = 0
    clipped_rows: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.clip) and self.clip > 0):
            raise ConfigError(f"DP clip must be a finite number > 0, got {self.clip!r}")
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise ConfigError(f"DP sigma must be a finite number >= 0, got {self.sigma!r}")

    def __call__(self, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {}
        for name, value in tensors.items():
            value = np.asarray(value)
            if value.ndim < 1:
                raise ConfigError(f"DP upload {name!r}: expected rows, got a scalar")
            clipped, count = clip_rows(value, self.clip)
            self.clipped_rows += count
            noise = self.noise.normal(clipped.size, "gaussian rows", self.releases, name).reshape(clipped.shape) * (self.sigma * self.clip)
            out[name] = (clipped + noise).astype(value.dtype, copy=False)
        self.releases += 1
        return out
