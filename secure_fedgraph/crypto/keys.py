"""Identity keys (Ed25519), round keys (X25519) and key derivation (HKDF-SHA256).

Each client owns a long-term Ed25519 identity key whose public half its peers know in
advance (from the certificate directory in the gRPC runtime). Every round it makes two fresh
X25519 key pairs, as Bonawitz et al. do: ``share`` for sealing Shamir shares to peers and
``mask`` for pairwise masks. They must differ: the mask key is Shamir-shared and may be
reconstructed by the server when its owner drops out, and that must not open the shares its
owner received. Both public keys are signed with the identity key, so a server relaying them
cannot substitute its own (threat_model.md claim M-SIGN).
"""

from __future__ import annotations

import functools
from typing import NoReturn

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
DERIVED_KEY_BYTES = 32

__all__ = [
    "InvalidSignature",
    "SecretMaterial",
    "IdentityKey",
    "RoundKeys",
    "verify_signature",
    "agree",
    "derive_key",
]


class SecretMaterial:
    """Base for objects that hold secrets: redacted ``repr`` and no pickling.

    Pickling would be the easiest way to write a key to a log, a transcript or a config file
    by accident (FedGraph ships a pickled secret-key context); we refuse it outright.
    """

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<redacted>)"

    def __reduce__(self) -> NoReturn:
        raise TypeError(f"{type(self).__name__} holds secret key material and cannot be pickled")


class IdentityKey(SecretMaterial):
    """A client's long-term Ed25519 signing key."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._key = private_key
        self.public_bytes: bytes = private_key.public_key().public_bytes_raw()

    @classmethod
    def generate(cls) -> IdentityKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, data: bytes) -> IdentityKey:
        if len(data) != 32:
            raise ValueError(f"Ed25519 private key must be 32 bytes, got {len(data)}")
        return cls(Ed25519PrivateKey.from_private_bytes(data))

    def private_bytes(self) -> bytes:
        """Raw private key, for writing to a key file with restrictive permissions only."""
        return self._key.private_bytes_raw()

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)


def verify_signature(public_bytes: bytes, signature: bytes, message: bytes) -> None:
    """Verify an Ed25519 signature.

    Raises:
        ValueError: malformed public key or signature length.
        cryptography.exceptions.InvalidSignature: the signature does not verify.
    """
    if len(public_bytes) != PUBLIC_KEY_BYTES:
        raise ValueError(f"Ed25519 public key must be {PUBLIC_KEY_BYTES} bytes, got {len(public_bytes)}")
    if len(signature) != SIGNATURE_BYTES:
        raise InvalidSignature(f"Ed25519 signature must be {SIGNATURE_BYTES} bytes, got {len(signature)}")
    _verified_once(bytes(public_bytes), bytes(signature), bytes(message))


VERIFIED_CACHE_SIZE = 1 << 16  # signatures a process remembers as valid (public bytes only; ~20 MB at most)


@functools.lru_cache(maxsize=VERIFIED_CACHE_SIZE)
def _verified_once(public_bytes: bytes, signature: bytes, message: bytes) -> None:
    """One process checks one (key, signature, message) once.

    A host process answers for many clients, and they check the same signatures: every client
    of a sum checks t consistency signatures on the same statement, every neighbour the same
    signed keys. Verification is a pure function of the three, so a triple that verified once
    verifies again; a failure raises and is not remembered, so a forgery is refused every time
    and a change to any of the three is checked anew. Each client still decides what it needs
    verified (the cache changes how often a host computes, never what a client accepts); the
    keys are public, so remembering them leaks nothing."""
    _verify(public_bytes, signature, message)


def _verify(public_bytes: bytes, signature: bytes, message: bytes) -> None:
    Ed25519PublicKey.from_public_bytes(public_bytes).verify(signature, message)


class RoundKeys(SecretMaterial):
    """A client's two X25519 key pairs for one key epoch of a round (never reused)."""

    def __init__(self, share: X25519PrivateKey, mask: X25519PrivateKey) -> None:
        self.share = share
        self.mask = mask
        self.share_public: bytes = share.public_key().public_bytes_raw()
        self.mask_public: bytes = mask.public_key().public_bytes_raw()

    @classmethod
    def generate(cls) -> RoundKeys:
        return cls(X25519PrivateKey.generate(), X25519PrivateKey.generate())

    def mask_private_bytes(self) -> bytes:
        """The 32-byte mask key, the secret that is Shamir-shared for dropout recovery."""
        return self.mask.private_bytes_raw()


def agree(private_key: X25519PrivateKey | bytes, peer_public: bytes) -> bytes:
    """X25519 shared secret with a peer's raw public key.

    Raises:
        ValueError: wrong key length, or a low-order peer key (all-zero shared secret).
    """
    if len(peer_public) != PUBLIC_KEY_BYTES:
        raise ValueError(f"X25519 public key must be {PUBLIC_KEY_BYTES} bytes, got {len(peer_public)}")
    if isinstance(private_key, bytes):
        if len(private_key) != 32:
            raise ValueError(f"X25519 private key must be 32 bytes, got {len(private_key)}")
        private_key = X25519PrivateKey.from_private_bytes(private_key)
    return private_key.exchange(X25519PublicKey.from_public_bytes(peer_public))


def derive_key(secret: bytes, info: bytes) -> bytes:
    """HKDF-SHA256 (RFC 5869) with no salt: 32 bytes bound to ``info`` (from labels.label)."""
    if len(secret) < 16:
        raise ValueError(f"HKDF input secret must be at least 128 bits, got {len(secret) * 8}")
    return HKDF(algorithm=hashes.SHA256(), length=DERIVED_KEY_BYTES, salt=None, info=info).derive(secret)
