"""Tests for secure_fedgraph.crypto.prg: the AES-256-CTR mask PRG.

The chain of evidence: the NIST SP 800-38A vector pins AES-256 (ECB and CTR) in ``cryptography``;
the layout tests show MaskPRG's keystream is exactly AES-256 of the counter blocks
(stream_id << 64) + j, read as little-endian words; the known-answer file pins those numbers so
any change of format is caught; the properties check what masking needs (determinism,
unrelated streams, uniform bytes, exact wrap-around cancellation).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from secure_fedgraph.crypto.prg import KEY_BYTES, MaskPRG, mask_vector, ring_dtype
from secure_fedgraph.errors import ConfigError
from tests.helpers import VECTORS, read_vectors

KEYS = st.binary(min_size=KEY_BYTES, max_size=KEY_BYTES)
STREAM_IDS = st.integers(min_value=0, max_value=2**64 - 1)
RING_BITS = st.sampled_from([32, 64])
FIXED_KEY = bytes(range(32))


def _aes_ecb(key: bytes, blocks: bytes) -> bytes:
    return Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(blocks)


def _keystream_bytes(key: bytes, stream_id: int, nbytes: int) -> bytes:
    """The documented layout, built independently: AES(key, (stream_id << 64) + j) for j = 0, 1, ..."""
    nblocks = -(-nbytes // 16)
    counters = b"".join(((stream_id << 64) + j).to_bytes(16, "big") for j in range(nblocks))
    return _aes_ecb(key, counters)[:nbytes]


def _bit_fraction_differing(a: np.ndarray, b: np.ndarray) -> float:
    x = np.bitwise_xor(a.view(np.uint8), b.view(np.uint8))
    return float(np.unpackbits(x).sum()) / (x.size * 8)


# --- NIST SP 800-38A F.5.5: AES-256 in cryptography -------------------------------------------

NIST_CTR = read_vectors("aes256_ctr_sp800_38a_f5_5.txt")


@pytest.mark.parametrize("vector", NIST_CTR, ids=[v["NAME"] for v in NIST_CTR])
def test_nist_sp800_38a_ctr_aes256_block(vector: dict[str, str]) -> None:
    key, counter = bytes.fromhex(vector["KEY"]), bytes.fromhex(vector["COUNTER"])
    plaintext, ciphertext = bytes.fromhex(vector["PLAINTEXT"]), bytes.fromhex(vector["CIPHERTEXT"])
    keystream = bytes(p ^ c for p, c in zip(plaintext, ciphertext, strict=True))
    # The output block is AES-256 of the counter block ...
    assert _aes_ecb(key, counter) == keystream
    # ... and CTR mode started at this counter block encrypts the plaintext to the ciphertext.
    assert Cipher(algorithms.AES(key), modes.CTR(counter)).encryptor().update(plaintext) == ciphertext


def test_nist_sp800_38a_ctr_counter_increments_as_128_bit_integer() -> None:
    """The four blocks in one CTR pass: the counter carries from the low byte into the next (ff -> 00)."""
    key, counter = bytes.fromhex(NIST_CTR[0]["KEY"]), bytes.fromhex(NIST_CTR[0]["COUNTER"])
    plaintext = b"".join(bytes.fromhex(v["PLAINTEXT"]) for v in NIST_CTR)
    ciphertext = b"".join(bytes.fromhex(v["CIPHERTEXT"]) for v in NIST_CTR)
    assert Cipher(algorithms.AES(key), modes.CTR(counter)).encryptor().update(plaintext) == ciphertext


# --- our layout and known answers ---------------------------------------------------------------

KAT = json.loads((VECTORS / "mask_prg_kat.json").read_text())


@pytest.mark.parametrize("case", KAT["cases"], ids=lambda c: f"stream{c['stream_id']}-ring{c['ring_bits']}")
def test_mask_prg_known_answer(case: dict) -> None:
    out = mask_vector(bytes.fromhex(KAT["key_hex"]), stream_id=case["stream_id"], count=8, ring_bits=case["ring_bits"])
    assert out.dtype == ring_dtype(case["ring_bits"])
    assert [int(v) for v in out] == [int(v) for v in case["first_8"]]


@pytest.mark.parametrize("ring_bits", [32, 64])
def test_stream_zero_is_aes_ctr_from_the_all_zero_counter_block(ring_bits: int) -> None:
    count = 100
    nbytes = count * ring_bits // 8
    expected = Cipher(algorithms.AES(FIXED_KEY), modes.CTR(bytes(16))).encryptor().update(bytes(nbytes))
    out = mask_vector(FIXED_KEY, stream_id=0, count=count, ring_bits=ring_bits)
    assert out.tobytes() == expected
    assert out.tolist() == np.frombuffer(expected, dtype=f"<u{ring_bits // 8}").tolist()


@settings(max_examples=50, deadline=None)
@given(key=KEYS, stream_id=STREAM_IDS, count=st.integers(min_value=1, max_value=70), ring_bits=RING_BITS)
def test_stream_s_starts_at_counter_block_s_shifted_64(key: bytes, stream_id: int, count: int, ring_bits: int) -> None:
    out = mask_vector(key, stream_id=stream_id, count=count, ring_bits=ring_bits)
    assert out.tobytes() == _keystream_bytes(key, stream_id, count * ring_bits // 8)
    first = Cipher(algorithms.AES(key), modes.CTR((stream_id << 64).to_bytes(16, "big"))).encryptor()
    assert out.tobytes() == first.update(bytes(count * ring_bits // 8))


def test_elements_are_little_endian_words_of_the_keystream() -> None:
    raw = _keystream_bytes(FIXED_KEY, 3, 16)
    assert int(mask_vector(FIXED_KEY, stream_id=3, count=1, ring_bits=32)[0]) == int.from_bytes(raw[:4], "little")
    assert int(mask_vector(FIXED_KEY, stream_id=3, count=1, ring_bits=64)[0]) == int.from_bytes(raw[:8], "little")
    # a 64-bit element is two consecutive 32-bit elements, low word first
    w32 = mask_vector(FIXED_KEY, stream_id=3, count=4, ring_bits=32).astype(np.uint64)
    w64 = mask_vector(FIXED_KEY, stream_id=3, count=2, ring_bits=64)
    assert (w64 == w32[0::2] | (w32[1::2] << np.uint64(32))).all()


def test_prefix_consistency_across_counts() -> None:
    long = mask_vector(FIXED_KEY, stream_id=9, count=1000, ring_bits=32)
    assert (mask_vector(FIXED_KEY, stream_id=9, count=7, ring_bits=32) == long[:7]).all()
    assert (mask_vector(FIXED_KEY, stream_id=9, count=513, ring_bits=32) == long[:513]).all()


# --- properties ---------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(key=KEYS, stream_id=STREAM_IDS, ring_bits=RING_BITS)
def test_same_key_and_stream_give_identical_output(key: bytes, stream_id: int, ring_bits: int) -> None:
    prg = MaskPRG()
    first = prg.keystream(key, stream_id=stream_id, count=300, ring_bits=ring_bits).copy()
    prg.keystream(bytes(32), stream_id=1, count=5000, ring_bits=64)  # scratch buffers reused and grown
    again = prg.keystream(key, stream_id=stream_id, count=300, ring_bits=ring_bits)
    fresh = MaskPRG().keystream(key, stream_id=stream_id, count=300, ring_bits=ring_bits)
    assert (first == again).all()
    assert (first == fresh).all()


WORDS_64KIB = 16384  # 64 KiB of 32-bit words


@settings(max_examples=50, deadline=None)
@given(key=KEYS, bit=st.integers(min_value=0, max_value=8 * KEY_BYTES - 1), stream_id=STREAM_IDS)
def test_one_flipped_key_bit_gives_an_unrelated_mask(key: bytes, bit: int, stream_id: int) -> None:
    flipped = bytearray(key)
    flipped[bit // 8] ^= 1 << (bit % 8)
    a = mask_vector(key, stream_id=stream_id, count=WORDS_64KIB, ring_bits=32)
    b = mask_vector(bytes(flipped), stream_id=stream_id, count=WORDS_64KIB, ring_bits=32)
    # 16384 words agree by chance with probability 2^-32 each: expect 0, allow 2 (p < 1e-13 to exceed).
    assert int((a == b).sum()) <= 2
    # 524288 bits: the differing fraction has std 0.07%; 45%..55% is a ~70-sigma band.
    assert 0.45 <= _bit_fraction_differing(a, b) <= 0.55


@settings(max_examples=50, deadline=None)
@given(key=KEYS, ids=st.lists(STREAM_IDS, min_size=2, max_size=2, unique=True))
def test_different_stream_ids_give_unrelated_streams(key: bytes, ids: list[int]) -> None:
    a = mask_vector(key, stream_id=ids[0], count=WORDS_64KIB, ring_bits=32)
    b = mask_vector(key, stream_id=ids[1], count=WORDS_64KIB, ring_bits=32)
    assert int((a == b).sum()) <= 2
    assert 0.45 <= _bit_fraction_differing(a, b) <= 0.55


@pytest.mark.parametrize("ring_bits", [32, 64])
def test_keystream_bytes_are_uniform_chi_square(ring_bits: int) -> None:
    """Chi-square over the 256 byte values of 1 MiB of keystream (fixed key: deterministic)."""
    count = (1 << 20) * 8 // ring_bits
    out = mask_vector(FIXED_KEY, stream_id=0, count=count, ring_bits=ring_bits)
    counts = np.bincount(out.view(np.uint8), minlength=256)
    assert counts.sum() == 1 << 20
    assert chisquare(counts).pvalue > 0.001


def test_chi_square_check_rejects_a_biased_stream() -> None:
    """The uniformity check has teeth: the same bytes with one byte value suppressed fail it."""
    raw = mask_vector(FIXED_KEY, stream_id=0, count=1 << 18, ring_bits=32).view(np.uint8).copy()
    raw[raw == 0] = 1
    assert chisquare(np.bincount(raw, minlength=256)).pvalue < 0.001


# --- add_into: wrap-around arithmetic -----------------------------------------------------------


def _ring_arrays(bits: int) -> st.SearchStrategy[np.ndarray]:
    dtype = ring_dtype(bits)
    return st.lists(st.integers(min_value=0, max_value=2**bits - 1), min_size=1, max_size=64).map(
        lambda xs: np.array(xs, dtype=dtype)
    )


@settings(max_examples=50, deadline=None)
@given(data=st.data(), key=KEYS, stream_id=STREAM_IDS, bits=RING_BITS)
def test_add_into_plus_then_minus_restores_the_accumulator(data: st.DataObject, key: bytes, stream_id: int, bits: int) -> None:
    acc = data.draw(_ring_arrays(bits))
    original = acc.copy()
    prg = MaskPRG()
    prg.add_into(acc, key, stream_id=stream_id, sign=1)
    mask = mask_vector(key, stream_id=stream_id, count=acc.size, ring_bits=bits)
    modulus = 2**bits
    assert [int(v) for v in acc] == [(int(o) + int(m)) % modulus for o, m in zip(original, mask, strict=True)]
    prg.add_into(acc, key, stream_id=stream_id, sign=-1)
    assert acc.dtype == original.dtype
    assert (acc == original).all()


@pytest.mark.parametrize("bits", [32, 64])
def test_pairwise_masks_cancel_exactly(bits: int) -> None:
    rng = np.random.default_rng(7)
    dtype = ring_dtype(bits)
    x_u = rng.integers(0, 2**bits, size=1000, dtype=np.uint64).astype(dtype)
    x_v = rng.integers(0, 2**bits, size=1000, dtype=np.uint64).astype(dtype)
    y_u, y_v = x_u.copy(), x_v.copy()
    prg = MaskPRG()
    prg.add_into(y_u, FIXED_KEY, stream_id=4, sign=1)
    prg.add_into(y_v, FIXED_KEY, stream_id=4, sign=-1)
    assert not (y_u == x_u).all()
    assert ((y_u + y_v) == (x_u + x_v)).all()


def test_add_into_rejects_a_sign_other_than_plus_or_minus_one() -> None:
    acc = np.zeros(4, dtype=np.uint32)
    for sign in (0, 2, -2):
        with pytest.raises(ValueError, match="sign must be \\+1 or -1"):
            MaskPRG().add_into(acc, FIXED_KEY, stream_id=0, sign=sign)
    assert (acc == 0).all()


# --- scratch buffers and views ------------------------------------------------------------------


def test_mask_vector_returns_an_independent_copy() -> None:
    first = mask_vector(FIXED_KEY, stream_id=0, count=16, ring_bits=32)
    snapshot = first.copy()
    mask_vector(FIXED_KEY, stream_id=1, count=16, ring_bits=32)
    assert (first == snapshot).all()
    first[0] ^= 1  # writable and private to the caller
    assert not (mask_vector(FIXED_KEY, stream_id=0, count=16, ring_bits=32) == first).all()


def test_keystream_view_is_read_only_as_documented() -> None:
    """MaskPRG.keystream documents "a read-only view"; writing to it must fail."""
    view = MaskPRG().keystream(FIXED_KEY, stream_id=0, count=4, ring_bits=32)
    assert not view.flags.writeable


def test_count_zero_gives_an_empty_vector() -> None:
    out = MaskPRG().keystream(FIXED_KEY, stream_id=0, count=0, ring_bits=64)
    assert out.shape == (0,) and out.dtype == np.dtype("<u8")


# --- rejected inputs ----------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 16, 24, 31, 33, 64])
def test_wrong_key_length_raises_value_error(length: int) -> None:
    with pytest.raises(ValueError, match=f"PRG key must be 32 bytes, got {length}"):
        MaskPRG().keystream(bytes(length), stream_id=0, count=4, ring_bits=32)
    with pytest.raises(ValueError, match=f"PRG key must be 32 bytes, got {length}"):
        MaskPRG().add_into(np.zeros(4, dtype=np.uint64), bytes(length), stream_id=0, sign=1)


@pytest.mark.parametrize("stream_id", [-1, 2**64, 2**70])
def test_stream_id_out_of_range_raises_value_error(stream_id: int) -> None:
    with pytest.raises(ValueError, match="stream_id must be in \\[0, 2\\^64\\)"):
        mask_vector(FIXED_KEY, stream_id=stream_id, count=4, ring_bits=32)


def test_largest_stream_id_is_accepted() -> None:
    out = mask_vector(FIXED_KEY, stream_id=2**64 - 1, count=4, ring_bits=32)
    assert out.tobytes() == _keystream_bytes(FIXED_KEY, 2**64 - 1, 16)


@pytest.mark.parametrize("ring_bits", [8, 16, 31, 128, None])
def test_unknown_ring_bits_raise_config_error(ring_bits: object) -> None:
    with pytest.raises(ConfigError, match="ring_bits must be 32 or 64"):
        mask_vector(FIXED_KEY, stream_id=0, count=4, ring_bits=ring_bits)  # type: ignore[arg-type]
