"""Tests for secure_fedgraph.crypto.keys: Ed25519 identity keys, X25519 agreement, HKDF, secret hygiene.

Published vectors (one test case each) live in tests/vectors/: RFC 7748 sections 5.2 and 6.1,
RFC 8032 section 7.1 TESTs 1-3, RFC 5869 Test Case 3.
"""

from __future__ import annotations

import copy
import pickle

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import given, settings
from hypothesis import strategies as st

from secure_fedgraph.crypto.keys import (
    DERIVED_KEY_BYTES,
    IdentityKey,
    RoundKeys,
    SecretMaterial,
    agree,
    derive_key,
    verify_signature,
)
from secure_fedgraph.crypto.labels import Purpose, label
from tests.helpers import read_vectors



def _hex(record: dict[str, str], key: str) -> bytes:
    return bytes.fromhex(record[key])


# --- X25519: RFC 7748 ---------------------------------------------------------------------------

X25519_5_2 = read_vectors("x25519_rfc7748_sec5_2.txt")
X25519_6_1 = read_vectors("x25519_rfc7748_sec6_1.txt")


def test_vector_files_hold_the_expected_cases() -> None:
    """Guard against a vector file that silently parses to nothing (the parametrised tests would vanish)."""
    assert [v["NAME"] for v in X25519_5_2] == [
        "5.2 scalar multiplication 1",
        "5.2 scalar multiplication 2",
        "5.2 iterated, after one iteration",
        "5.2 iterated, after 1,000 iterations",
    ]
    assert len(X25519_6_1) == 1
    assert [v["NAME"] for v in ED25519] == ["TEST 1", "TEST 2", "TEST 3"]
    assert [v["NAME"] for v in HKDF_VECTORS] == ["A.3 Test Case 3"]


@pytest.mark.parametrize("vector", [v for v in X25519_5_2 if "SCALAR" in v], ids=lambda v: v["NAME"])
def test_x25519_rfc7748_section_5_2_scalar_multiplication(vector: dict[str, str]) -> None:
    assert agree(_hex(vector, "SCALAR"), _hex(vector, "U")) == _hex(vector, "OUTPUT")


@pytest.mark.parametrize("vector", [v for v in X25519_5_2 if "ITERATIONS" in v], ids=lambda v: v["NAME"])
def test_x25519_rfc7748_section_5_2_iterated(vector: dict[str, str]) -> None:
    k = u = (9).to_bytes(32, "little")
    for _ in range(int(vector["ITERATIONS"])):
        k, u = agree(k, u), k
    assert k == _hex(vector, "OUTPUT")


@pytest.mark.parametrize("vector", X25519_6_1, ids=lambda v: v["NAME"])
def test_x25519_rfc7748_section_6_1_diffie_hellman(vector: dict[str, str]) -> None:
    alice, bob = _hex(vector, "ALICE_PRIVATE"), _hex(vector, "BOB_PRIVATE")
    base = (9).to_bytes(32, "little")
    assert agree(alice, base) == _hex(vector, "ALICE_PUBLIC")
    assert agree(bob, base) == _hex(vector, "BOB_PUBLIC")
    # RoundKeys derives the same public keys from the private keys
    keys = RoundKeys(X25519PrivateKey.from_private_bytes(alice), X25519PrivateKey.from_private_bytes(bob))
    assert keys.share_public == _hex(vector, "ALICE_PUBLIC")
    assert keys.mask_public == _hex(vector, "BOB_PUBLIC")
    assert keys.mask_private_bytes() == bob
    # both sides reach the published shared secret, from raw bytes and from key objects
    assert agree(alice, _hex(vector, "BOB_PUBLIC")) == _hex(vector, "SHARED")
    assert agree(bob, _hex(vector, "ALICE_PUBLIC")) == _hex(vector, "SHARED")
    assert agree(keys.share, _hex(vector, "BOB_PUBLIC")) == _hex(vector, "SHARED")


def test_agree_is_symmetric_for_fresh_round_keys() -> None:
    a, b = RoundKeys.generate(), RoundKeys.generate()
    shared = agree(a.share, b.share_public)
    assert len(shared) == 32
    assert shared == agree(b.share, a.share_public)
    assert shared == agree(a.share.private_bytes_raw(), b.share_public)
    assert shared != agree(a.mask, b.mask_public)
    assert a.share_public != a.mask_public


LOW_ORDER_POINTS = {
    "zero": bytes(32),
    "one": (1).to_bytes(32, "little"),
    "p-1": (2**255 - 20).to_bytes(32, "little"),
    "p (non-canonical zero)": (2**255 - 19).to_bytes(32, "little"),
    "p+1 (non-canonical one)": (2**255 - 18).to_bytes(32, "little"),
}


@pytest.mark.parametrize("point", LOW_ORDER_POINTS.values(), ids=LOW_ORDER_POINTS.keys())
def test_agree_rejects_low_order_public_keys(point: bytes) -> None:
    """These points give an all-zero shared secret; cryptography raises ValueError for it."""
    with pytest.raises(ValueError, match="Error computing shared key"):
        agree(RoundKeys.generate().share, point)
    with pytest.raises(ValueError, match="Error computing shared key"):
        agree(bytes(range(32)), point)


@pytest.mark.parametrize("length", [0, 31, 33, 64])
def test_agree_rejects_wrong_key_lengths(length: int) -> None:
    with pytest.raises(ValueError, match=f"X25519 public key must be 32 bytes, got {length}"):
        agree(bytes(range(32)), bytes(length))
    with pytest.raises(ValueError, match=f"X25519 private key must be 32 bytes, got {length}"):
        agree(bytes(length), RoundKeys.generate().share_public)


# --- Ed25519: RFC 8032 --------------------------------------------------------------------------

ED25519 = read_vectors("ed25519_rfc8032_sec7_1.txt")


@pytest.mark.parametrize("vector", ED25519, ids=lambda v: v["NAME"])
def test_ed25519_rfc8032_section_7_1(vector: dict[str, str]) -> None:
    secret, public = _hex(vector, "SECRET"), _hex(vector, "PUBLIC")
    message, signature = _hex(vector, "MESSAGE"), _hex(vector, "SIGNATURE")
    key = IdentityKey.from_private_bytes(secret)
    assert key.public_bytes == public
    assert key.private_bytes() == secret
    assert key.sign(message) == signature  # Ed25519 is deterministic
    assert verify_signature(public, signature, message) is None


@pytest.mark.parametrize("vector", ED25519, ids=lambda v: v["NAME"])
def test_ed25519_rfc8032_tampered_signature_raises_invalid_signature(vector: dict[str, str]) -> None:
    public, message, signature = _hex(vector, "PUBLIC"), _hex(vector, "MESSAGE"), _hex(vector, "SIGNATURE")
    for byte in (0, 31, 32, 63):  # in R and in S, first and last bytes
        tampered = bytearray(signature)
        tampered[byte] ^= 0x01
        with pytest.raises(InvalidSignature):
            verify_signature(public, bytes(tampered), message)
    with pytest.raises(InvalidSignature):
        verify_signature(public, signature, message + b"\x00")
    other_public = ED25519[(ED25519.index(vector) + 1) % len(ED25519)]["PUBLIC"]
    with pytest.raises(InvalidSignature):
        verify_signature(bytes.fromhex(other_public), signature, message)


def test_every_single_bit_flip_of_a_signature_is_rejected() -> None:
    key = IdentityKey.generate()
    message = label(Purpose.ADVERTISE, b"session", 1, 0)
    signature = key.sign(message)
    for bit in range(8 * len(signature)):
        tampered = bytearray(signature)
        tampered[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(InvalidSignature):
            verify_signature(key.public_bytes, bytes(tampered), message)


@settings(max_examples=50, deadline=None)
@given(message=st.binary(max_size=256), other=st.binary(max_size=256))
def test_sign_then_verify_round_trips_and_binds_the_message(message: bytes, other: bytes) -> None:
    key = IdentityKey.generate()
    signature = key.sign(message)
    assert len(signature) == 64
    verify_signature(key.public_bytes, signature, message)
    if other != message:
        with pytest.raises(InvalidSignature):
            verify_signature(key.public_bytes, signature, other)


def test_a_process_checks_a_valid_signature_once_and_a_forgery_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The many clients of one host check the same signatures (keys._verified_once): the
    second check of a valid triple costs no verification; a forgery, or the genuine signature
    on another message or under another key, is verified again and refused every time."""
    from secure_fedgraph.crypto import keys

    computed = []
    real = keys._verify
    monkeypatch.setattr(keys, "_verify", lambda *triple: computed.append(triple) or real(*triple))
    key, other = IdentityKey.generate(), IdentityKey.generate()
    message = label(Purpose.CONSISTENCY, b"a fresh session " + key.public_bytes, 0, 0)
    signature = key.sign(message)
    for _ in range(3):
        verify_signature(key.public_bytes, signature, message)
    assert computed == [(key.public_bytes, signature, message)]
    forged = bytes([signature[0] ^ 1]) + signature[1:]
    for public, sig, msg in [(key.public_bytes, forged, message), (key.public_bytes, signature, message + b"\x00"),
                             (other.public_bytes, signature, message)] * 2:
        with pytest.raises(InvalidSignature):
            verify_signature(public, sig, msg)
    assert len(computed) == 1 + 6


@pytest.mark.parametrize("length", [0, 63, 65, 128])
def test_wrong_signature_length_raises_invalid_signature(length: int) -> None:
    key = IdentityKey.generate()
    with pytest.raises(InvalidSignature, match=f"Ed25519 signature must be 64 bytes, got {length}"):
        verify_signature(key.public_bytes, bytes(length), b"m")


@pytest.mark.parametrize("length", [0, 31, 33])
def test_wrong_public_key_length_raises_value_error(length: int) -> None:
    with pytest.raises(ValueError, match=f"Ed25519 public key must be 32 bytes, got {length}"):
        verify_signature(bytes(length), bytes(64), b"m")


@pytest.mark.parametrize("length", [0, 31, 33, 64])
def test_identity_key_from_wrong_length_raises_value_error(length: int) -> None:
    with pytest.raises(ValueError, match=f"Ed25519 private key must be 32 bytes, got {length}"):
        IdentityKey.from_private_bytes(bytes(length))


# --- HKDF-SHA256: RFC 5869 ----------------------------------------------------------------------

HKDF_VECTORS = read_vectors("hkdf_sha256_rfc5869.txt")


@pytest.mark.parametrize("vector", HKDF_VECTORS, ids=lambda v: v["NAME"])
def test_hkdf_rfc5869_test_case_3(vector: dict[str, str]) -> None:
    """derive_key has salt=None and L=32; Test Case 3 has an empty salt, empty info and L=42.

    HKDF-Expand outputs T(1) || T(2) || ... with T(i) = HMAC(PRK, T(i-1) || info || i), and no
    T(i) depends on L, so a 32-byte output is the first 32 bytes of the 42-byte one (checked
    below with cryptography's HKDF, not assumed). An absent salt is HashLen zeros, which as an
    HMAC key equals the empty salt of the vector (HMAC zero-pads keys).
    """
    ikm, info, okm = _hex(vector, "IKM"), _hex(vector, "INFO"), _hex(vector, "OKM")
    assert vector["HASH"] == "SHA-256" and int(vector["L"]) == len(okm) == 42
    salt = _hex(vector, "SALT")
    assert salt == b""
    # the published vector, in full, through cryptography
    assert HKDF(algorithm=hashes.SHA256(), length=42, salt=salt, info=info).derive(ikm) == okm
    # prefix consistency and salt equivalence, demonstrated rather than assumed
    for equivalent_salt in (None, b"", bytes(32)):
        assert HKDF(algorithm=hashes.SHA256(), length=32, salt=equivalent_salt, info=info).derive(ikm) == okm[:32]
    # and our function
    assert derive_key(ikm, info) == okm[:DERIVED_KEY_BYTES]


@settings(max_examples=50)
@given(secret=st.binary(min_size=16, max_size=64), info=st.binary(max_size=64), other_info=st.binary(max_size=64))
def test_derive_key_is_32_bytes_and_bound_to_info(secret: bytes, info: bytes, other_info: bytes) -> None:
    key = derive_key(secret, info)
    assert len(key) == DERIVED_KEY_BYTES == 32
    assert key == derive_key(secret, info)
    assert (key == derive_key(secret, other_info)) == (info == other_info)


def test_derive_key_differs_for_different_secrets_and_purposes() -> None:
    secret = bytes(range(32))
    keys = {derive_key(secret, label(p, b"session", 1, 0)) for p in Purpose}
    assert len(keys) == len(Purpose)
    assert derive_key(secret, b"info") != derive_key(bytes(32), b"info")


def test_derive_key_accepts_exactly_128_bits() -> None:
    assert len(derive_key(bytes(16), b"")) == 32


@pytest.mark.parametrize("length", [0, 1, 15])
def test_derive_key_rejects_short_secrets(length: int) -> None:
    with pytest.raises(ValueError, match=f"at least 128 bits, got {length * 8}"):
        derive_key(bytes(length), b"info")


# --- secret hygiene -----------------------------------------------------------------------------


def _secret_objects() -> list[tuple[SecretMaterial, list[bytes]]]:
    identity = IdentityKey.generate()
    rounds = RoundKeys.generate()
    return [
        (identity, [identity.private_bytes()]),
        (rounds, [rounds.mask_private_bytes(), rounds.share.private_bytes_raw()]),
    ]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_secret_material_refuses_pickle(protocol: int) -> None:
    for obj, _ in _secret_objects():
        with pytest.raises(TypeError, match=f"{type(obj).__name__} holds secret key material and cannot be pickled"):
            pickle.dumps(obj, protocol=protocol)


def test_secret_material_refuses_deepcopy() -> None:
    for obj, _ in _secret_objects():
        with pytest.raises(TypeError, match="cannot be pickled"):
            copy.deepcopy(obj)


def test_secret_material_repr_is_redacted() -> None:
    for obj, secrets in _secret_objects():
        for text in (repr(obj), str(obj), f"{obj!r}", f"{[obj]}"):
            assert "redacted" in text
            assert type(obj).__name__ in text
            for secret in secrets:
                assert secret.hex() not in text
                assert secret.hex().upper() not in text
                assert repr(secret) not in text
