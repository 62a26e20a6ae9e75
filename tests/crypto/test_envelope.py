"""Tests for secure_fedgraph.crypto.envelope: AES-256-GCM sealing (nonce || ciphertext || tag)."""

from __future__ import annotations

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from secure_fedgraph.crypto.envelope import NONCE_BYTES, open_sealed, seal
from secure_fedgraph.crypto.labels import Purpose, label

KEYS = st.binary(min_size=32, max_size=32)
TAG_BYTES = 16
KEY = bytes(range(32))
AAD = label(Purpose.CKKS_KEY_AAD, b"session", 3, 0, 1, 2)


@settings(max_examples=50)
@given(key=KEYS, plaintext=st.binary(max_size=512), aad=st.binary(max_size=64))
def test_seal_then_open_round_trips(key: bytes, plaintext: bytes, aad: bytes) -> None:
    sealed = seal(key, plaintext, aad)
    assert len(sealed) == NONCE_BYTES + len(plaintext) + TAG_BYTES
    assert open_sealed(key, sealed, aad) == plaintext


def test_layout_is_nonce_then_aesgcm_output() -> None:
    """An envelope is the 12-byte nonce followed by AESGCM.encrypt(nonce, plaintext, aad)."""
    sealed = seal(KEY, b"share bytes", AAD)
    nonce = sealed[:NONCE_BYTES]
    assert AESGCM(KEY).encrypt(nonce, b"share bytes", AAD) == sealed[NONCE_BYTES:]
    handmade = bytes(12) + AESGCM(KEY).encrypt(bytes(12), b"payload", AAD)
    assert open_sealed(KEY, handmade, AAD) == b"payload"


def test_two_seals_of_the_same_plaintext_differ() -> None:
    sealed = [seal(KEY, b"the same plaintext", AAD) for _ in range(8)]
    assert len(set(sealed)) == len(sealed)
    assert len({s[:NONCE_BYTES] for s in sealed}) == len(sealed)  # fresh random nonce each time
    assert all(open_sealed(KEY, s, AAD) == b"the same plaintext" for s in sealed)


@settings(max_examples=50)
@given(key=KEYS, other=KEYS, plaintext=st.binary(max_size=128))
def test_wrong_key_raises_invalid_tag(key: bytes, other: bytes, plaintext: bytes) -> None:
    assume(other != key)
    sealed = seal(key, plaintext, AAD)
    with pytest.raises(InvalidTag):
        open_sealed(other, sealed, AAD)


@settings(max_examples=50)
@given(aad=st.binary(max_size=64), other=st.binary(max_size=64))
def test_wrong_aad_raises_invalid_tag(aad: bytes, other: bytes) -> None:
    assume(other != aad)
    sealed = seal(KEY, b"payload", aad)
    with pytest.raises(InvalidTag):
        open_sealed(KEY, sealed, other)


def test_aad_binds_the_recipient() -> None:
    """A share sealed for recipient 2 cannot be opened under the label of recipient 3."""
    to_2 = label(Purpose.CKKS_KEY_AAD, b"session", 3, 0, 1, 2)
    to_3 = label(Purpose.CKKS_KEY_AAD, b"session", 3, 0, 1, 3)
    with pytest.raises(InvalidTag):
        open_sealed(KEY, seal(KEY, b"share", to_2), to_3)


@settings(max_examples=50)
@given(plaintext=st.binary(max_size=64), data=st.data())
def test_any_flipped_bit_raises_invalid_tag(plaintext: bytes, data: st.DataObject) -> None:
    sealed = bytearray(seal(KEY, plaintext, AAD))
    bit = data.draw(st.integers(min_value=0, max_value=8 * len(sealed) - 1))  # nonce, ciphertext or tag
    sealed[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(InvalidTag):
        open_sealed(KEY, bytes(sealed), AAD)


def test_flipped_ciphertext_byte_raises_invalid_tag() -> None:
    sealed = bytearray(seal(KEY, b"sixteen byte msg", AAD))
    sealed[NONCE_BYTES] ^= 0x80  # first ciphertext byte
    with pytest.raises(InvalidTag):
        open_sealed(KEY, bytes(sealed), AAD)


@pytest.mark.parametrize("plaintext", [b"", b"x", bytes(range(40))], ids=["empty", "one-byte", "forty-bytes"])
def test_every_truncation_raises_invalid_tag(plaintext: bytes) -> None:
    sealed = seal(KEY, plaintext, AAD)
    for length in range(len(sealed)):
        with pytest.raises(InvalidTag):
            open_sealed(KEY, sealed[:length], AAD)


def test_appended_bytes_raise_invalid_tag() -> None:
    with pytest.raises(InvalidTag):
        open_sealed(KEY, seal(KEY, b"payload", AAD) + b"\x00", AAD)


@pytest.mark.parametrize("length", [0, 16, 24, 31, 33])
def test_wrong_key_length_raises_value_error(length: int) -> None:
    with pytest.raises(ValueError, match=f"AES-256-GCM key must be 32 bytes, got {length}"):
        seal(bytes(length), b"payload", AAD)
    with pytest.raises(ValueError, match=f"AES-256-GCM key must be 32 bytes, got {length}"):
        open_sealed(bytes(length), seal(KEY, b"payload", AAD), AAD)
