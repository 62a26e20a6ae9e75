"""Experimental seeds derived from a run seed: a leaf that training, protocol and papers share.

Experimental randomness only (initialisation, sampling, simulated noise); cryptographic
randomness never comes from here (keys and masks use ``os.urandom`` and AES-CTR).
"""

from __future__ import annotations

import hashlib

__all__ = ["derive_seed"]


def derive_seed(run_seed: int, *labels: str | int) -> int:
    """A 64-bit seed for one purpose, from the run seed and labels (role, client, round, ...)."""
    digest = hashlib.sha256(repr((run_seed, *labels)).encode()).digest()
    return int.from_bytes(digest[:8], "big")
