"""Clipping and fixed-point encoding of floats into the ring Z_2^32 or Z_2^64.

A value x is clipped to [-clip_range, clip_range] and encoded as q = round(x * 2^precision_bits)
in two's complement. A sum of n encodings decodes exactly as long as
n * round(clip_range * 2^precision_bits) < 2^(ring_bits - 1); :meth:`FixedPoint.for_sum`
checks that before a round and raises :class:`CapacityError` naming the parameter to change.
Per element, rounding costs at most 2^-(precision_bits+1), and reading the exact integer sum
back as float64 at most half an ulp of a value below n * clip_range, so a sum of n is within
n * 2^-(precision_bits+1) + n * clip_range * 2^-53 of the exact sum of the clipped inputs (the
second term only matters when the summed codes pass 2^53).
Values outside the range are clipped and counted, never wrapped (threat_model.md claim M-RANGE).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from secure_fedgraph.crypto.prg import ring_dtype
from secure_fedgraph.errors import CapacityError, ConfigError

_SIGNED = {32: np.dtype("<i4"), 64: np.dtype("<i8")}


def clip_and_count(values: np.ndarray, clip_range: float) -> tuple[np.ndarray, int]:
    """Clip to [-clip_range, clip_range] in float64; return (clipped copy, number clipped).

    Raises:
        ConfigError: NaN or infinite inputs (they have no place in a sum; clipping would hide them).
    """
    x = np.asarray(values, dtype=np.float64)
    if not np.isfinite(x).all():
        raise ConfigError(f"input contains {int((~np.isfinite(x)).sum())} NaN or infinite values; a secure sum needs finite inputs")
    outside = np.abs(x) > clip_range
    count = int(outside.sum())
    return (np.clip(x, -clip_range, clip_range) if count else x.copy()), count


@dataclass(frozen=True)
class FixedPoint:
    """A fixed-point encoding: clip range, fractional bits, and ring size.

    Attributes:
        clip_range: inputs are clipped to [-clip_range, clip_range]; > 0 and finite.
        precision_bits: fractional bits; the scale is 2^precision_bits.
        ring_bits: 32 or 64, the ring Z_2^ring_bits the masked sum lives in.
    """

    clip_range: float
    precision_bits: int
    ring_bits: int

    def __post_init__(self) -> None:
        if isinstance(self.clip_range, bool) or not (isinstance(self.clip_range, int | float) and math.isfinite(self.clip_range) and self.clip_range > 0):
            raise ConfigError(f"clip_range must be a finite number > 0, got {self.clip_range!r}")
        if isinstance(self.precision_bits, bool) or not isinstance(self.precision_bits, int) or not 0 <= self.precision_bits <= 62:
            raise ConfigError(f"precision_bits must be an int in [0, 62], got {self.precision_bits!r}")
        ring_dtype(self.ring_bits)

    @staticmethod
    def bits_for(n_clients: int, resolution: float) -> int:
        """The fewest fractional bits that keep a sum of ``n_clients`` encodings within
        ``resolution`` of the exact sum (each rounding costs at most 2^-(bits+1)).

        Raises:
            CapacityError: more than 62 bits would be needed.
        """
        bits = max(0, math.ceil(math.log2(n_clients / (2 * resolution))))
        if bits > 62:
            raise CapacityError(f"a resolution of {resolution:g} over {n_clients} clients needs {bits} fractional bits; at most 62 fit a ring")
        return bits

    @property
    def max_code(self) -> int:
        """Largest |q| one clipped input can encode to."""
        return round(self.clip_range * 2**self.precision_bits)

    @classmethod
    def for_sum(
        cls,
        *,
        n_clients: int,
        clip_range: float,
        precision_bits: int,
        ring_bits: int | None = None,
        count_lane_max: int = 0,
    ) -> FixedPoint:
        """Choose the ring (32-bit when it fits, else 64-bit) and check capacity up front.

        Args:
            n_clients: how many encodings will be summed.
            clip_range, precision_bits: as in the class.
            ring_bits: force 32 or 64; None picks the smaller ring that holds the sum.
            count_lane_max: the largest integer one client puts in an unscaled lane (the count
                of clipped values); the sum of those must fit too.

        Raises:
            CapacityError: the sum cannot be represented; the message names what to change.
        """
        candidates = (32, 64) if ring_bits is None else (ring_bits,)
        for bits in candidates:
            encoding = cls(clip_range=clip_range, precision_bits=precision_bits, ring_bits=bits)
            if encoding.fits(n_clients, count_lane_max=count_lane_max):
                return encoding
        bits = candidates[-1]
        encoding = cls(clip_range=clip_range, precision_bits=precision_bits, ring_bits=bits)
        worst = n_clients * max(encoding.max_code, count_lane_max)
        hint = "set ring_bits=64 or " if ring_bits == 32 else ""
        raise CapacityError(
            f"a sum of {n_clients} clients can reach {worst} = n_clients * round(clip_range * 2^precision_bits) "
            f"(clip_range={clip_range}, precision_bits={precision_bits}), which does not fit the signed "
            f"{bits}-bit ring (limit 2^{bits - 1} - 1); {hint}lower precision_bits or clip_range, or sum fewer clients"
        )

    def fits(self, n_clients: int, *, count_lane_max: int = 0) -> bool:
        """Whether a sum of ``n_clients`` encodings (and their count lanes) decodes exactly."""
        limit = 2 ** (self.ring_bits - 1)
        return n_clients * self.max_code < limit and n_clients * count_lane_max < limit

    def error_bound(self, n_clients: int) -> float:
        """Stated absolute error of a decoded sum of n clipped inputs, per element: fixed-point
        rounding plus the float64 read-back of the integer sum."""
        return n_clients * (2.0 ** -(self.precision_bits + 1) + self.clip_range * 2.0**-53)

    def encode(self, values: np.ndarray, *, out: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """Clip, scale, round; return (ring elements, number of clipped values).

        Scaling multiplies by 2^precision_bits, which is exact in float64; the range test is done
        on the scaled values (|x| > R iff |x * 2^p| > R * 2^p). ``out``: a ring array of the
        same size to write into (saves a copy on the masking hot path).
        """
        scaled = np.multiply(values, float(2**self.precision_bits), dtype=np.float64)
        limit = self.clip_range * float(2**self.precision_bits)
        count = 0
        if scaled.size and not (-limit <= scaled.min() and scaled.max() <= limit):  # NaN fails both too
            if not np.isfinite(scaled).all():
                raise ConfigError(f"input contains {int((~np.isfinite(scaled)).sum())} NaN or infinite values; a secure sum needs finite inputs")
            count = int(np.count_nonzero(np.abs(scaled) > limit))
            np.clip(scaled, -limit, limit, out=scaled)
        np.rint(scaled, out=scaled)
        dtype = ring_dtype(self.ring_bits)
        if out is None:
            out = np.empty(scaled.shape, dtype=dtype)
        elif out.shape != scaled.shape or out.dtype != dtype:
            raise ConfigError(f"encode: out must be {dtype} of shape {scaled.shape}, got {out.dtype} {out.shape}")
        # |code| <= max_code < 2^(ring_bits-1): a signed cast is exact; its bits are the ring element
        np.copyto(out.view(_SIGNED[self.ring_bits]), scaled, casting="unsafe")
        return out, count

    def decode_sum(self, ring_values: np.ndarray) -> np.ndarray:
        """Read a summed ring vector as signed integers and unscale to float64."""
        dtype = ring_dtype(self.ring_bits)
        if ring_values.dtype != dtype:
            raise ConfigError(f"expected ring elements of dtype {dtype}, got {ring_values.dtype}")
        return ring_values.view(_SIGNED[self.ring_bits]).astype(np.float64) * 2.0**-self.precision_bits

    def decode_count(self, ring_value: np.ndarray) -> int:
        """Read an unscaled count lane (e.g. the summed number of clipped values)."""
        return int(np.asarray(ring_value, dtype=ring_dtype(self.ring_bits)).view(_SIGNED[self.ring_bits]))
