"""What is summed (SumSpec: named tensors and their shapes) and what comes out (SumResult)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.validation import positive, positive_number

_NAME = re.compile(r"^[A-Za-z0-9_.:/\-]{1,128}$")


def as_array(value: Any) -> np.ndarray:
    """Accept numpy arrays, torch tensors (detached, moved to CPU) and nested lists."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


@dataclass(frozen=True)
class TensorSpec:
    """One named tensor of a sum."""

    name: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(f"tensor name {self.name!r} must match {_NAME.pattern}")
        if any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in self.shape):
            raise ConfigError(f"tensor {self.name!r}: shape must be non-negative ints, got {self.shape!r}")

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class NoiseUnit(Enum):
    """What one unit of privacy is in a noised sum's contribution: what each client clips to the
    sum's ``l2_clip`` before it adds its share of the noise (threat_model.md DDP-NOISE)."""

    CONTRIBUTION = "contribution"  # the whole contribution (a client's model update: FedAvg)
    ROW = "row"  # each row of the leading axis every tensor shares (FedSTGD's windows of a batch); the sum is per row
    SUMMED_ROWS = "summed-rows"  # the client stages rows (one more leading axis), clips each and contributes their sum


@dataclass(frozen=True)
class SumNoise:
    """Distributed DP on one secure sum: every client clips each unit of its contribution to L2
    norm ``l2_clip`` and adds Skellam noise in the integer ring of the sum's fixed-point encoding,
    before masking, scaled so that the sum over ``expected_contributors`` clients carries noise
    of standard deviation ``noise_multiplier * l2_clip`` per element (TFF's distributed DP;
    threat_model.md DDP-NOISE). Fewer survivors carry less noise: sqrt(survivors / expected) of it.

    ``unit`` (:class:`NoiseUnit`): the whole contribution (the default), each row of it, or each
    row of a client's staged rows, which it then sums (at most ``max_rows`` of them); one unit of
    a contribution moves the sum by at most ``l2_clip`` (zero-out) whatever the others hold, and
    the noise is the same whatever the unit. ``min_precision_bits``: the grid
    2^-p the contribution is rounded to and the noise drawn on is at least this fine (the
    backend's precision where that is finer): a small clip on a coarse grid would let rounding
    dominate a unit's sensitivity (privacy/analysis/skellam.py: fine_grid_bits).
    """

    l2_clip: float
    noise_multiplier: float
    expected_contributors: int
    unit: NoiseUnit = NoiseUnit.CONTRIBUTION
    min_precision_bits: int = 0
    max_rows: int = 1

    def __post_init__(self) -> None:
        positive_number("l2_clip", self.l2_clip)
        positive_number("noise_multiplier", self.noise_multiplier)
        positive("expected_contributors", self.expected_contributors)
        if not isinstance(self.unit, NoiseUnit):
            raise ConfigError(f"unit must be a NoiseUnit, got {self.unit!r}")
        positive("min_precision_bits", self.min_precision_bits, 0)
        positive("max_rows", self.max_rows)
        if self.max_rows > 1 and self.unit is not NoiseUnit.SUMMED_ROWS:
            raise ConfigError(f"max_rows bounds the rows a client sums (unit summed-rows), got max_rows={self.max_rows} with unit "
                              f"{self.unit.value}")

    def grid_bits(self, precision_bits: int) -> int:
        """The fractional bits of the grid a backend of precision ``precision_bits`` noises this sum on."""
        return max(precision_bits, self.min_precision_bits)

    def local_variance(self, precision_bits: int) -> float:
        """Each client's Skellam variance per element, in integer units (the grid 2^-precision_bits)."""
        return (self.noise_multiplier * self.l2_clip * 2.0**precision_bits) ** 2 / self.expected_contributors

    def value_bound(self, *, size: int, precision_bits: int, security_bits: int = 40) -> float:
        """The largest |value| one client's noised contribution reaches, except with probability
        2^-security_bits over its ``size`` values: the clip plus the noise's tail, in the values'
        units (a sum of up to ``max_rows`` clipped rows reaches ``max_rows`` clips). It is the
        sum's clipping range, so the ring's capacity check covers the noise."""
        from secure_fedgraph.privacy.mechanisms.skellam import skellam_tail

        tail = skellam_tail(self.local_variance(precision_bits), size, security_bits=security_bits)
        return self.max_rows * self.l2_clip + (tail + 1) * 2.0**-precision_bits


@dataclass(frozen=True)
class SumSpec:
    """A named secure sum over several named tensors, laid out in this order on the wire.

    ``clip_range``: this sum's own clipping range, overriding the backend's (a sum of error
    statistics needs a wider range than a sum of model weights); None keeps the backend's.
    ``resolution``: the largest absolute error per element of the sum the plan accepts, in the
    values' own units (FedSTGD's gradient sums carry values of 1e-6); None keeps the backend's
    precision. The backend chooses its encoding from it: mask takes enough fixed-point bits
    (and refuses a range and resolution its ring cannot hold), ckks refuses a sum whose stated
    error bound exceeds it, plain is exact. Plans never scale values to suit an encoding.
    ``server_only``: only the server needs the sum (FedAvg followed by a broadcast), so the
    clients are told the contributors but not sent the values; impossible with ckks.
    ``streaming``: one of many sums inside a round that the next computation waits for
    (FedSTGD's per-step P/Q sums and their gradients). The mask backend then uses its streaming
    variant where its configuration allows (``MaskConfig.streaming``, complete graph): pairwise
    masks from the round's keys only, no per-sum consistency and unmask steps, and a dropout
    re-keys and redoes the sum (threat_model.md M-STREAM says what that costs). Other backends
    ignore it.
    ``noise``: distributed DP (:class:`SumNoise`): clients clip and noise their contribution
    before it leaves them; the sum's range then follows from the clip and the noise's tail, and
    its grid is the backend's precision, so ``clip_range`` and ``resolution`` must stay unset.
    """

    name: str
    tensors: tuple[TensorSpec, ...]
    clip_range: float | None = None
    server_only: bool = False
    streaming: bool = False
    resolution: float | None = None
    noise: SumNoise | None = None

    def __post_init__(self) -> None:
        for option in ("clip_range", "resolution"):
            if getattr(self, option) is not None:
                positive_number(f"sum {self.name!r}: {option}", getattr(self, option))
        if not _NAME.match(self.name):
            raise ConfigError(f"sum name {self.name!r} must match {_NAME.pattern}")
        names = [t.name for t in self.tensors]
        if len(set(names)) != len(names):
            raise ConfigError(f"sum {self.name!r} names a tensor twice: {names}")
        if not self.tensors:
            raise ConfigError(f"sum {self.name!r} has no tensors")
        for flag in ("server_only", "streaming"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"sum {self.name!r}: {flag} must be a bool, got {getattr(self, flag)!r}")
        if self.noise is not None:
            if not isinstance(self.noise, SumNoise):
                raise ConfigError(f"sum {self.name!r}: noise must be a SumNoise, got {self.noise!r}")
            if self.clip_range is not None or self.resolution is not None:
                raise ConfigError(f"sum {self.name!r}: a noised sum takes its range from its l2_clip and noise; leave clip_range "
                                  "and resolution unset")
            if self.noise.unit is NoiseUnit.ROW and (any(not t.shape for t in self.tensors)
                                                     or len({t.shape[0] for t in self.tensors}) != 1):
                raise ConfigError(f"sum {self.name!r}: noise per row needs every tensor to share its leading axis (the rows), got "
                                  f"shapes {[t.shape for t in self.tensors]}")

    def clip_range_or(self, default: float) -> float:
        """This sum's clipping range, else the backend's ``default`` (every backend asks the same way)."""
        return default if self.clip_range is None else self.clip_range

    @classmethod
    def of(
        cls,
        name: str,
        tensors: Mapping[str, Any],
        *,
        clip_range: float | None = None,
        server_only: bool = False,
        streaming: bool = False,
        resolution: float | None = None,
        noise: SumNoise | None = None,
    ) -> SumSpec:
        """The spec matching a mapping of name -> array (in the mapping's order)."""
        shapes = tuple(TensorSpec(k, tuple(int(d) for d in as_array(v).shape)) for k, v in tensors.items())
        return cls(name, shapes, clip_range, server_only, streaming, resolution, noise)

    @property
    def size(self) -> int:
        return sum(t.size for t in self.tensors)

    @property
    def summed_rows(self) -> bool:
        """Whether a client stages rows of this sum (one more leading axis) that the noise sums."""
        return self.noise is not None and self.noise.unit is NoiseUnit.SUMMED_ROWS

    @property
    def unit_size(self) -> int:
        """How many values one unit of privacy holds (SumNoise.unit): a row's with noise per row,
        else the whole sum's (what the rounding to the grid adds to a unit's sensitivity)."""
        if self.noise is not None and self.noise.unit is NoiseUnit.ROW:
            return self.size // self.tensors[0].shape[0] if self.size else 0
        return self.size

    def rows(self, vector: np.ndarray) -> np.ndarray:
        """A flat contribution (:meth:`flatten`) as its rows, (rows, unit_size): row r holds row r
        of every tensor, in spec order (noise per row; one row for any other sum)."""
        if self.noise is None or self.noise.unit is not NoiseUnit.ROW:
            return np.asarray(vector).reshape(1, -1)
        count, offset, parts = self.tensors[0].shape[0], 0, []
        for t in self.tensors:
            parts.append(np.asarray(vector)[offset : offset + t.size].reshape(count, -1))
            offset += t.size
        return np.concatenate(parts, axis=1)

    def from_rows(self, rows: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`rows`: the flat contribution."""
        if self.noise is None or self.noise.unit is not NoiseUnit.ROW:
            return np.asarray(rows).reshape(-1)
        count, offset, parts = self.tensors[0].shape[0], 0, []
        for t in self.tensors:
            width = t.size // count if count else 0
            parts.append(np.asarray(rows)[:, offset : offset + width].reshape(-1))
            offset += width
        return np.concatenate(parts)

    def flatten(self, tensors: Mapping[str, Any]) -> np.ndarray:
        """Concatenate the tensors in spec order as one vector, in their own (promoted) real
        dtype: each backend converts once, where it needs to (float32 inputs stay float32 here).
        A sum of staged rows (:attr:`summed_rows`) gives one such vector per row, (rows, size).

        Raises:
            ConfigError: a missing, extra or wrongly shaped tensor (named in the message).
        """
        expected = {t.name for t in self.tensors}
        if set(tensors) != expected:
            raise ConfigError(
                f"sum {self.name!r} expects tensors {sorted(expected)}, got {sorted(tensors)}"
            )
        parts, rows = [], None
        for t in self.tensors:
            array = as_array(tensors[t.name])
            shape = tuple(array.shape)
            if self.summed_rows:
                fits = len(shape) == len(t.shape) + 1 and shape[1:] == t.shape and rows in (None, shape[0])
                rows = shape[0] if fits else rows
            else:
                fits = shape == t.shape
            if not fits:
                wanted = f"(rows, *{t.shape}) with the same rows in every tensor" if self.summed_rows else f"{t.shape}"
                raise ConfigError(f"sum {self.name!r}: tensor {t.name!r} has shape {shape}, expected {wanted}")
            if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
                raise ConfigError(f"sum {self.name!r}: tensor {t.name!r} has dtype {array.dtype}, expected a real number type")
            parts.append(array.reshape(rows, -1) if self.summed_rows else array.ravel())
        if self.summed_rows:
            if not 1 <= rows <= self.noise.max_rows:
                raise ConfigError(f"sum {self.name!r}: {rows} rows staged, expected 1 to max_rows={self.noise.max_rows}")
            return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def unflatten(self, vector: np.ndarray) -> dict[str, np.ndarray]:
        """Split a flat vector back into named tensors (copies)."""
        if vector.shape != (self.size,):
            raise ConfigError(f"sum {self.name!r}: expected a vector of {self.size} values, got shape {vector.shape}")
        out, offset = {}, 0
        for t in self.tensors:
            out[t.name] = vector[offset : offset + t.size].reshape(t.shape).copy()
            offset += t.size
        return out


@dataclass(frozen=True)
class SumResult:
    """The outcome of one secure sum, as one party sees it.

    Attributes:
        spec: what was summed.
        values: name -> float64 sum, or None where this party may not see the sum (the
            server with the ckks backend).
        contributors: the clients whose inputs the sum contains.
        clipped: total number of input values clipped to the range, over all contributors
            (None where this party cannot know it).
        error_bound: stated absolute error per element versus the float64 sum of the
            clipped inputs.
    """

    spec: SumSpec
    values: Mapping[str, np.ndarray] | None
    contributors: frozenset[int]
    clipped: int | None
    error_bound: float
