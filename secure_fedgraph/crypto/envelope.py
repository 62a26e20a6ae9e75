"""AES-256-GCM sealing of a payload for one peer (Shamir shares, the CKKS secret context).

The server relays these envelopes and must learn nothing from them: the key comes from an
X25519 agreement between the two clients' signed share keys, and the AAD binds session,
round, epoch, sender and recipient, so a relayed envelope cannot be redirected or replayed
into another round without failing the tag check (``cryptography.exceptions.InvalidTag``).
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_BYTES = 12

__all__ = ["InvalidTag", "seal", "open_sealed"]


def seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """Encrypt and authenticate; returns nonce || ciphertext || tag (a fresh random nonce)."""
    if len(key) != 32:
        raise ValueError(f"AES-256-GCM key must be 32 bytes, got {len(key)}")
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def open_sealed(key: bytes, sealed: bytes, aad: bytes) -> bytes:
    """Inverse of :func:`seal`.

    Raises:
        cryptography.exceptions.InvalidTag: wrong key, wrong AAD, or tampered bytes.
    """
    if len(key) != 32:
        raise ValueError(f"AES-256-GCM key must be 32 bytes, got {len(key)}")
    if len(sealed) < NONCE_BYTES + 16:
        raise InvalidTag()
    return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)
