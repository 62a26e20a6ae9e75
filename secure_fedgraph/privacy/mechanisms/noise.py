"""Where a client's DP noise comes from: a cryptographic stream the server cannot regenerate.

By default every draw uses a fresh 32-byte key from the OS (``os.urandom``) to key AES-256-CTR
(crypto/prg.py), turned into normals by Box-Muller on 53-bit uniforms. The run seed is never
used: the server knows it, and noise it could regenerate it could subtract.

``NoiseSource.reproducible(seed_key)`` derives each draw's key from ``seed_key`` and the draw's
labels instead: the same noise on every transport, so a DP run in one process and across
processes can be compared number for number. It is an explicit opt-in of the client
(``client --reproducible-dp-noise``, ``simulate(..., reproducible_noise=True)``), and its cost
is stated there: whoever knows the seed key (with the key derived from the run seed, the
server) can regenerate the noise and remove it.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field

import numpy as np

from secure_fedgraph.crypto.prg import mask_vector


def uniform_draws(count: int, key: bytes) -> np.ndarray:
    """``count`` float64 values uniform in (0, 1) (53 random bits each) from the AES-CTR stream of ``key``."""
    bits = mask_vector(key, stream_id=0, count=count, ring_bits=64)
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53  # never 0 or 1


def gaussian_noise(count: int, key: bytes) -> np.ndarray:
    """``count`` standard normal float64 values from the AES-CTR stream of ``key`` (Box-Muller)."""
    pairs = (count + 1) // 2
    u = uniform_draws(2 * pairs, key)
    radius = np.sqrt(-2.0 * np.log(u[:pairs]))
    angle = 2.0 * math.pi * u[pairs:]
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:count]


@dataclass(frozen=True)
class NoiseSource:
    """Standard normal draws for DP mechanisms: fresh OS-random keys (``seed_key`` None, the
    default and the secure setting) or keys derived from ``seed_key`` and each draw's labels."""

    seed_key: bytes | None = field(default=None, repr=False)

    @classmethod
    def reproducible(cls, seed_key: bytes) -> NoiseSource:
        return cls(bytes(seed_key))

    @property
    def is_reproducible(self) -> bool:
        return self.seed_key is not None

    def key(self, *labels: str | int) -> bytes:
        """The AES key of one draw: fresh, or derived from the seed key and ``labels``."""
        if self.seed_key is None:
            return os.urandom(32)
        return hashlib.sha256(self.seed_key + repr(labels).encode()).digest()

    def uniform(self, count: int, *labels: str | int) -> np.ndarray:
        """``count`` uniforms in (0, 1) for the draw named by ``labels`` (e.g. a Poisson sample)."""
        return uniform_draws(count, self.key(*labels))

    def normal(self, count: int, *labels: str | int) -> np.ndarray:
        """``count`` standard normals (float64) for the draw named by ``labels``."""
        return gaussian_noise(count, self.key(*labels))

    def __getstate__(self):
        raise TypeError("a NoiseSource holds key material and is not pickled")
