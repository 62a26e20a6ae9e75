"""Distributed DP inside the secure sum: what a client adds to its contribution before it leaves.

For a sum whose spec carries :class:`~secure_fedgraph.protocol.core.spec.SumNoise`, each client
clips every unit of its contribution (the whole of it, each row, or each of its staged rows before
it sums them: ``SumNoise.unit``) to L2 norm C, rounds it to the sum's fixed-point grid 2^-p and adds
Skellam noise of variance (z C 2^p)^2 / n_expected per element, drawn from fresh OS randomness
(:mod:`secure_fedgraph.privacy.mechanisms.skellam`). With the mask backend the result is exactly the
integer code q + k the ring carries, and the pairwise masks go on top of it, so the server
never holds a sum without noise (threat_model.md DDP-NOISE). Flower's DP with SecAgg+ adds its
noise on the server after unmasking: its server sees the raw aggregate.
"""

from __future__ import annotations

import numpy as np

from secure_fedgraph.protocol.core.spec import NoiseUnit, SumSpec


def clip_l2(x: np.ndarray, bound: float) -> np.ndarray:
    """``x`` (float64) scaled down to L2 norm ``bound`` if it is longer."""
    x = np.asarray(x, dtype=np.float64)
    norm = float(np.linalg.norm(x))
    return x * (bound / norm) if norm > bound else x


def clipped(x: np.ndarray, spec: SumSpec) -> np.ndarray:
    """A contribution (``spec.flatten``'s) with every unit of privacy clipped to the sum's L2
    bound: the whole vector, each row, or each staged row, which are then summed (float64, flat)."""
    noise = spec.noise
    if noise.unit is NoiseUnit.CONTRIBUTION:
        return clip_l2(x, noise.l2_clip)
    rows = np.asarray(x, dtype=np.float64) if spec.summed_rows else spec.rows(np.asarray(x, dtype=np.float64))
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    rows = rows * np.minimum(1.0, noise.l2_clip / np.where(norms > 0, norms, 1.0))
    return rows.sum(axis=0) if spec.summed_rows else spec.from_rows(rows)


def noised(x: np.ndarray, spec: SumSpec, *, precision_bits: int, key: bytes | None = None) -> np.ndarray:
    """``x`` clipped per unit (:func:`clipped`), on the grid 2^-precision_bits, plus this client's
    Skellam share of the sum's noise: float64 multiples of 2^-precision_bits, which a fixed-point
    encoding of that precision turns into exactly q + k. ``key``: reproducible noise (tests only)."""
    from secure_fedgraph.privacy.mechanisms.skellam import skellam  # scipy: only runs with distributed DP load it

    scale = 2.0**precision_bits
    codes = np.rint(clipped(x, spec) * scale)
    codes += skellam(spec.noise.local_variance(precision_bits), codes.size, key=key)
    return codes / scale
