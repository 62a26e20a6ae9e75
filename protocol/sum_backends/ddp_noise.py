"""Distributed DP inside the secure sum: what a client adds to its contribution before it leaves.

For a sum whose spec carries :class:`~secure_fedgraph.protocol.core.spec.SumNoise`, each client
clips its whole contribution to L2 norm C, rounds it to the sum's fixed-point grid 2^-p and adds
Skellam noise of variance (z C 2^p)^2 / n_expected per element, drawn from fresh OS randomness
(:mod:`secure_fedgraph.privacy.mechanisms.skellam`). With the mask backend the result is exactly the
integer code q + k the ring carries, and the pairwise masks go on top of it, so the server
never holds a sum without noise (threat_model.md DDP-NOISE). Flower's DP with SecAgg+ adds its
noise on the server after unmasking: its server sees the raw aggregate.
"""

from __future__ import annotations

import numpy as np

from secure_fedgraph.protocol.core.spec import SumNoise


def clip_l2(x: np.ndarray, bound: float) -> np.ndarray:
    """``x`` (float64) scaled down to L2 norm ``bound`` if it is longer."""
    x = np.asarray(x, dtype=np.float64)
    norm = float(np.linalg.norm(x))
    return x * (bound / norm) if norm > bound else x


def noised(x: np.ndarray, noise: SumNoise, *, precision_bits: int, key: bytes | None = None) -> np.ndarray:
    """``x`` clipped to ``noise.l2_clip``, on the grid 2^-precision_bits, plus this client's Skellam
    share of the sum's noise: float64 multiples of 2^-precision_bits, which a fixed-point encoding
    of that precision turns into exactly q + k. ``key``: reproducible noise (tests only)."""
    from secure_fedgraph.privacy.mechanisms.skellam import skellam  # scipy: only runs with distributed DP load it

    scale = 2.0**precision_bits
    codes = np.rint(clip_l2(x, noise.l2_clip) * scale)
    codes += skellam(noise.local_variance(precision_bits), codes.size, key=key)
    return codes / scale
