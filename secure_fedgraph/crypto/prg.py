"""The mask PRG: AES-256-CTR keystream read as uniform elements of Z_2^32 or Z_2^64.

Why AES-CTR from ``cryptography``: it is a standard PRF in counter mode, keyed by the full
256-bit key, hardware-accelerated, and vectorised by construction; reading whole 4- or 8-byte
words of keystream gives exactly uniform ring elements (Flower's SecAgg+ seeds numpy's
RandomState with 32 bits and drops the top value; threat_model.md claim M-PRG).

Domain separation: each key is used for many sums of one round; ``stream_id`` (the sum index)
fills the top 64 bits of the initial counter block and the block counter the low 64 bits, so
different sums read disjoint parts of the keystream of the same key.
"""

from __future__ import annotations

import threading

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from secure_fedgraph.errors import ConfigError

KEY_BYTES = 32
_BLOCK = 16
_RING_DTYPES = {32: np.dtype("<u4"), 64: np.dtype("<u8")}
_zeros = b""  # shared by every MaskPRG: immutable, so threads may read it concurrently
_zeros_lock = threading.Lock()


def _zero_bytes(nbytes: int) -> memoryview:
    global _zeros
    if len(_zeros) < nbytes:
        with _zeros_lock:
            if len(_zeros) < nbytes:
                _zeros = bytes(max(nbytes, 2 * len(_zeros)))
    return memoryview(_zeros)[:nbytes]


def ring_dtype(ring_bits: int) -> np.dtype:
    """The numpy dtype of Z_2^ring_bits (little-endian, so keystream bytes map identically)."""
    try:
        return _RING_DTYPES[ring_bits]
    except KeyError:
        raise ConfigError(f"ring_bits must be 32 or 64, got {ring_bits!r}") from None


class MaskPRG:
    """Generates mask vectors, reusing scratch buffers across calls.

    One instance per party (not thread-safe). ``cryptography``'s ``update_into`` with
    preallocated buffers runs several times faster than ``update`` with fresh ``bytes``,
    which is what keeps masking close to the keystream floor. The zeros it encrypts are
    shared by all instances; the output buffer is the instance's own (``release`` frees it).
    """

    def __init__(self) -> None:
        self._out = bytearray()

    def release(self) -> None:
        """Free the scratch buffer (a client masking once per sum need not keep it)."""
        self._out = bytearray()

    def _scratch(self, nbytes: int) -> tuple[memoryview, memoryview]:
        if len(self._out) < nbytes + _BLOCK:
            self._out = bytearray(nbytes + _BLOCK)
        return _zero_bytes(nbytes), memoryview(self._out)

    def keystream(self, key: bytes, *, stream_id: int, count: int, ring_bits: int) -> np.ndarray:
        """Return a read-only view of ``count`` uniform ring elements (valid until the next call).

        Args:
            key: 32-byte AES-256 key.
            stream_id: 0 <= stream_id < 2^64; selects a disjoint part of the keystream.
            count: number of ring elements.
            ring_bits: 32 or 64.

        Raises:
            ValueError: key of the wrong length or stream_id out of range.
        """
        if len(key) != KEY_BYTES:
            raise ValueError(f"PRG key must be {KEY_BYTES} bytes, got {len(key)}")
        if not 0 <= stream_id < 2**64:
            raise ValueError(f"stream_id must be in [0, 2^64), got {stream_id}")
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        dtype = ring_dtype(ring_bits)
        nbytes = count * dtype.itemsize
        zeros, out = self._scratch(nbytes)
        nonce = stream_id.to_bytes(8, "big") + bytes(8)
        encryptor = Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()
        written = encryptor.update_into(zeros, out)
        if written != nbytes:  # CTR is a stream mode: every byte comes out at once
            raise RuntimeError(f"AES-CTR wrote {written} of {nbytes} bytes")
        view = np.frombuffer(out, dtype=dtype, count=count)
        view.flags.writeable = False
        return view

    def add_into(self, acc: np.ndarray, key: bytes, *, stream_id: int, sign: int) -> None:
        """acc += sign * PRG(key, stream_id) in the ring of ``acc``'s dtype (wrap-around)."""
        stream = self.keystream(key, stream_id=stream_id, count=acc.size, ring_bits=acc.dtype.itemsize * 8).reshape(acc.shape)
        if sign == 1:
            np.add(acc, stream, out=acc)
        elif sign == -1:
            np.subtract(acc, stream, out=acc)
        else:
            raise ValueError(f"sign must be +1 or -1, got {sign}")


def mask_vector(key: bytes, *, stream_id: int, count: int, ring_bits: int) -> np.ndarray:
    """A fresh copy of one mask vector (convenience for tests and audits)."""
    return MaskPRG().keystream(key, stream_id=stream_id, count=count, ring_bits=ring_bits).copy()
