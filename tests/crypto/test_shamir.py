"""Tests for secure_fedgraph.crypto.shamir: Shamir sharing of 32-byte secrets, limb by limb over GF(2^26 - 5)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from secure_fedgraph.crypto import shamir
from secure_fedgraph.crypto.shamir import LIMB_BITS, LIMBS, PRIME, SECRET_BYTES, SHARE_BYTES, VALUE_BITS, combine, split, split_many

SECRETS = st.binary(min_size=SECRET_BYTES, max_size=SECRET_BYTES)
SECRET = bytes(range(32))


@st.composite
def sharings(draw: st.DrawFn) -> tuple[bytes, dict[int, bytes], int]:
    """A secret, its shares for n distinct holders (x = client id + 1), and the threshold t <= n."""
    n = draw(st.integers(min_value=1, max_value=12))
    threshold = draw(st.integers(min_value=1, max_value=n))
    xs = draw(st.lists(st.integers(min_value=1, max_value=10_000), min_size=n, max_size=n, unique=True))
    secret = draw(SECRETS)
    return secret, split(secret, xs=xs, threshold=threshold), threshold


# --- a reference in Python integers, independent of the module's numpy route -------------------


def limbs_of(secret: bytes) -> list[int]:
    """The secret's LIMBS big-endian limbs of LIMB_BITS bits (the top one holds what is left)."""
    value = int.from_bytes(secret, "big")
    return [(value >> (LIMB_BITS * (LIMBS - 1 - i))) & (2**LIMB_BITS - 1) for i in range(LIMBS)]


def encode(limbs: list[int], *, pad: int = 0) -> bytes:
    """The packed share of these values (26 bits each, big-endian), written independently of
    shamir._pack; ``pad`` goes in the two bits in front, which a share keeps zero."""
    value = pad
    for y in limbs:
        assert 0 <= y < 2**VALUE_BITS
        value = (value << VALUE_BITS) | y
    return value.to_bytes(SHARE_BYTES, "big")


def decode(share: bytes) -> list[int]:
    value = int.from_bytes(share, "big")
    return [(value >> (VALUE_BITS * (LIMBS - 1 - i))) & (2**VALUE_BITS - 1) for i in range(LIMBS)]


def interpolate(points: list[tuple[int, int]], at: int) -> int:
    """The value at ``at`` of the polynomial through ``points``, mod PRIME (textbook Lagrange)."""
    total = 0
    for i, (xi, yi) in enumerate(points):
        num, den = 1, 1
        for j, (xj, _) in enumerate(points):
            if j != i:
                num = num * (at - xj) % PRIME
                den = den * (xi - xj) % PRIME
        total = (total + yi * num * pow(den, -1, PRIME)) % PRIME
    return total


def is_prime(p: int) -> bool:
    return p > 1 and all(p % d for d in range(2, int(p**0.5) + 1))


# --- the field and the encoding ----------------------------------------------------------------


def test_prime_is_the_largest_below_2_26_and_every_limb_is_a_field_element() -> None:
    assert PRIME == 2**26 - 5 and is_prime(PRIME)
    assert not any(is_prime(q) for q in range(PRIME + 1, 2**26))
    assert LIMBS * LIMB_BITS >= 8 * SECRET_BYTES > (LIMBS - 1) * LIMB_BITS
    assert 2**LIMB_BITS < PRIME
    assert PRIME < 2**VALUE_BITS and SHARE_BYTES == 36 == -(-LIMBS * VALUE_BITS // 8)  # 26 bits per value, packed
    assert shamir._CHUNK * (PRIME - 1) ** 2 < 2**63  # a chunk of products sums within int64


def test_threshold_one_shares_are_the_limbs_of_the_secret() -> None:
    shares = split(SECRET, xs=[1, 5, 9], threshold=1)
    for x, value in shares.items():
        assert value == encode(limbs_of(SECRET))
        assert combine({x: value}, threshold=1) == SECRET


@pytest.mark.parametrize("secret", [bytes(32), b"\xff" * 32, b"\x80" + bytes(31), bytes(31) + b"\x01"], ids=lambda s: s.hex()[:6])
def test_the_extreme_secrets_round_trip(secret: bytes) -> None:
    shares = split(secret, xs=[3, 1, 7, 2], threshold=3)
    assert combine(shares, threshold=3) == secret
    assert combine({x: shares[x] for x in (1, 2, 7)}, threshold=3) == secret


def test_split_many_evaluates_each_limb_of_each_secret_on_its_own_polynomial(monkeypatch) -> None:
    """The matrix product equals Horner per (secret, limb) in Python integers, with the
    coefficients the CSPRNG drew (captured), laid out as [power, secret x limbs]."""
    drawn = []
    real = shamir._uniform_below_prime
    monkeypatch.setattr(shamir, "_uniform_below_prime", lambda count: drawn.append(real(count)) or drawn[-1])
    secrets, xs, threshold = [SECRET, b"\xff" * 32, os.urandom(32)], [1, 2, 1000, PRIME - 1], 4
    sharings = split_many(secrets, xs=xs, threshold=threshold)
    coefficients = drawn[0].reshape(threshold - 1, len(secrets) * LIMBS).tolist()
    for s, (secret, shares) in enumerate(zip(secrets, sharings, strict=True)):
        for x in xs:
            expected = []
            for limb, constant in enumerate(limbs_of(secret)):
                polynomial = [constant] + [row[s * LIMBS + limb] for row in coefficients]
                y = 0
                for c in reversed(polynomial):
                    y = (y * x + c) % PRIME
                expected.append(y)
            assert decode(shares[x]) == expected, (s, x)


def test_split_many_gives_independent_sharings_each_recoverable() -> None:
    xs = [2, 4, 6, 8, 10]
    first, second, third = split_many([SECRET, SECRET, b"\x07" * 32], xs=xs, threshold=3)
    assert combine(first, threshold=3) == combine(second, threshold=3) == SECRET
    assert combine(third, threshold=3) == b"\x07" * 32
    assert all(first[x] != second[x] for x in xs)  # fresh coefficients per secret: equal secrets, unrelated shares
    assert set(map(len, first.values())) == {SHARE_BYTES}
    mixed = {2: first[2], 4: second[4], 6: first[6]}
    try:
        recovered = combine(mixed, threshold=3)
    except ValueError as exc:
        assert "inconsistent" in str(exc)
    else:
        assert recovered != SECRET
    assert split_many([], xs=xs, threshold=3) == []


def test_coefficients_are_uniform_below_the_prime_by_rejection(monkeypatch) -> None:
    """26 bits of CSPRNG output make a value; one at or above PRIME is drawn again (never reduced
    mod PRIME, which would favour the smallest residues)."""
    rejected = [PRIME, 2**26 - 1, 2**32 - 1]  # the last is 2^26 - 1 once its top 6 bits are masked off
    accepted = [PRIME - 1, 0xFC000000 | 5, 0]  # the second is 5 once masked
    calls = []

    def urandom(n: int) -> bytes:
        calls.append(n)
        words = (rejected if len(calls) == 1 else accepted) * n
        return b"".join(w.to_bytes(4, "little") for w in words)[:n]

    monkeypatch.setattr(shamir, "os", type("FakeOS", (), {"urandom": staticmethod(urandom)}))
    assert shamir._uniform_below_prime(3).tolist() == [PRIME - 1, 5, 0]
    assert len(calls) == 2  # the first draw was all rejected


@settings(max_examples=30, deadline=None)
@given(count=st.integers(min_value=0, max_value=2000))
def test_coefficient_draws_are_field_elements(count: int) -> None:
    draw = shamir._uniform_below_prime(count)
    assert draw.shape == (count,) and draw.dtype == np.int64
    assert ((0 <= draw) & (draw < PRIME)).all()


def test_matrix_products_reduce_before_int64_overflows() -> None:
    """The largest entries, over an inner dimension of three chunks and more: summed without
    chunking, 6,149 products of (PRIME - 1)^2 would pass 2^63 and wrap."""
    inner = 3 * shamir._CHUNK + 5
    a, b = np.full((2, inner), PRIME - 1, dtype=np.int64), np.full((inner, 3), PRIME - 1, dtype=np.int64)
    assert (shamir._matmul_mod(a, b) == inner * (PRIME - 1) ** 2 % PRIME).all()


def test_a_threshold_above_the_chunk_size_recovers() -> None:
    threshold = shamir._CHUNK + 60
    xs = np.unique(np.random.default_rng(7).integers(1, PRIME, size=threshold + 50))[: threshold + 5]
    assert xs.size == threshold + 5
    shares = split(b"\xff" * 32, xs=xs.tolist(), threshold=threshold)
    assert combine(shares, threshold=threshold) == b"\xff" * 32
    assert combine(dict(list(shares.items())[5:]), threshold=threshold) == b"\xff" * 32
    with pytest.raises(ValueError, match=f"need {threshold} shares to recover the secret, got {threshold - 1}"):
        combine(dict(list(shares.items())[6:]), threshold=threshold)


# --- the textbook properties -------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(sharing=sharings(), data=st.data())
def test_any_threshold_sized_subset_recovers_the_secret(sharing: tuple, data: st.DataObject) -> None:
    secret, shares, threshold = sharing
    assert set(len(v) for v in shares.values()) == {SHARE_BYTES}
    subset_xs = data.draw(st.lists(st.sampled_from(sorted(shares)), min_size=threshold, max_size=len(shares), unique=True))
    assert combine({x: shares[x] for x in subset_xs}, threshold=threshold) == secret


@settings(max_examples=50, deadline=None)
@given(sharing=sharings(), data=st.data())
def test_t_minus_one_shares_plus_a_fake_do_not_recover_the_secret(sharing: tuple, data: st.DataObject) -> None:
    secret, shares, threshold = sharing
    assume(threshold >= 2)
    xs = data.draw(st.permutations(sorted(shares)))
    honest = {x: shares[x] for x in xs[: threshold - 1]}
    fake_x = data.draw(st.sampled_from(xs[threshold - 1 :]))
    fake = encode(data.draw(st.lists(st.integers(min_value=0, max_value=PRIME - 1), min_size=LIMBS, max_size=LIMBS)))
    assume(fake != shares[fake_x])
    try:
        recovered = combine(honest | {fake_x: fake}, threshold=threshold)
    except ValueError as exc:
        assert "inconsistent" in str(exc)
    else:
        assert recovered != secret


@settings(max_examples=50, deadline=None)
@given(sharing=sharings(), data=st.data())
def test_fewer_than_threshold_shares_raise(sharing: tuple, data: st.DataObject) -> None:
    _, shares, threshold = sharing
    k = data.draw(st.integers(min_value=0, max_value=threshold - 1))
    subset = dict(sorted(shares.items())[:k])
    with pytest.raises(ValueError, match=f"need {threshold} shares to recover the secret, got {k}"):
        combine(subset, threshold=threshold)


@pytest.mark.parametrize("threshold", [2, 3, 5])
def test_t_minus_one_shares_are_consistent_with_every_secret(threshold: int) -> None:
    """Information-theoretic hiding, limb by limb: for any candidate secret s', each limb has a
    degree t-1 polynomial through (0, limb of s') and that limb's t-1 known shares, so a t-th
    share made of those polynomials' values makes combine return s'. Hence t-1 shares rule no
    secret out."""
    shares = split(SECRET, xs=list(range(1, threshold + 2)), threshold=threshold)
    known = {x: decode(shares[x]) for x in range(1, threshold)}
    for candidate in (bytes(32), b"\xff" * 32, bytes(reversed(SECRET)), os.urandom(32)):
        forged = [interpolate([(0, limb)] + [(x, ys[i]) for x, ys in known.items()], at=9_999) for i, limb in enumerate(limbs_of(candidate))]
        assert combine({x: shares[x] for x in known} | {9_999: encode(forged)}, threshold=threshold) == candidate


def test_split_uses_fresh_randomness() -> None:
    first = split(SECRET, xs=[1, 2, 3], threshold=2)
    second = split(SECRET, xs=[1, 2, 3], threshold=2)
    assert first != second
    assert combine(first, threshold=2) == combine(second, threshold=2) == SECRET


def test_shares_of_different_sharings_do_not_combine() -> None:
    first = split(SECRET, xs=[1, 2, 3], threshold=2)
    second = split(SECRET, xs=[1, 2, 3], threshold=2)
    mixed = {1: first[1], 2: second[2]}
    try:
        recovered = combine(mixed, threshold=2)
    except ValueError as exc:
        assert "inconsistent" in str(exc)
    else:
        assert recovered != SECRET


def test_threshold_above_holder_count_is_valid_but_unrecoverable() -> None:
    shares = split(SECRET, xs=[1, 2], threshold=3)
    assert len(shares) == 2
    with pytest.raises(ValueError, match="need 3 shares to recover the secret, got 2"):
        combine(shares, threshold=3)


# --- rejected inputs ----------------------------------------------------------------------------


@pytest.mark.parametrize(("limb", "value"), [(0, 2**16), (0, 2**24 - 1), (1, 2**24), (LIMBS - 1, PRIME - 1)])
def test_a_limb_beyond_its_bound_is_inconsistent(limb: int, value: int) -> None:
    """With threshold 1 a share is the secret's limbs: a top limb of 16 bits or more, or any
    other of 24 bits or more, is no 32-byte secret (the range check, defence in depth)."""
    limbs = limbs_of(b"\xff" * 32)
    assert combine({1: encode(limbs)}, threshold=1) == b"\xff" * 32  # each limb at its largest
    limbs[limb] = value
    with pytest.raises(ValueError, match="shares are inconsistent: they do not interpolate to a 32-byte secret"):
        combine({1: encode(limbs)}, threshold=1)


@pytest.mark.parametrize("length", [0, 1, SHARE_BYTES - 1, SHARE_BYTES + 1, 2 * SHARE_BYTES, 66])
def test_malformed_share_length_raises(length: int) -> None:
    shares = split(SECRET, xs=[1, 2, 3], threshold=2)
    with pytest.raises(ValueError, match="malformed share at x=2"):
        combine({1: shares[1], 2: bytes(length)}, threshold=2)


@pytest.mark.parametrize("limb", [0, 5, LIMBS - 1])
@pytest.mark.parametrize("value", [PRIME, 2**26 - 1])
def test_a_share_with_a_limb_outside_the_field_raises(limb: int, value: int) -> None:
    shares = split(SECRET, xs=[1, 2, 3], threshold=2)
    limbs = decode(shares[2])
    limbs[limb] = value
    with pytest.raises(ValueError, match="share value at x=2 is not a field element"):
        combine({1: shares[1], 2: encode(limbs)}, threshold=2)


@pytest.mark.parametrize("pad", [1, 2, 3])
def test_a_share_with_its_pad_bits_set_raises(pad: int) -> None:
    """No packed field element sets the two bits in front of a share: one that does was not
    written by split (the same 36 bytes with those bits cleared would pass as another share)."""
    shares = split(SECRET, xs=[1, 2, 3], threshold=2)
    assert combine({1: shares[1], 2: encode(decode(shares[2]))}, threshold=2) == SECRET
    with pytest.raises(ValueError, match="share value at x=2 is not a field element"):
        combine({1: shares[1], 2: encode(decode(shares[2]), pad=pad)}, threshold=2)


@pytest.mark.parametrize("x", [0, PRIME, -1, 2**70])
def test_share_at_an_invalid_x_raises(x: int) -> None:
    shares = split(SECRET, xs=[1, 2, 3], threshold=2)
    with pytest.raises(ValueError, match=f"malformed share at x={x}"):
        combine({x: shares[1], 2: shares[2]}, threshold=2)


@pytest.mark.parametrize("threshold", [0, -1])
def test_combine_rejects_a_threshold_below_one(threshold: int) -> None:
    """split refuses threshold < 1; combine must too, instead of interpolating over no points
    (threshold 0 returns 32 zero bytes as 'the secret', threshold -1 silently drops a share)."""
    shares = split(SECRET, xs=[1, 2, 3], threshold=2)
    with pytest.raises(ValueError, match="threshold"):
        combine(shares, threshold=threshold)


@pytest.mark.parametrize("length", [0, 16, 31, 33, 66])
def test_split_rejects_wrong_secret_length(length: int) -> None:
    with pytest.raises(ValueError, match=f"secret must be 32 bytes, got {length}"):
        split(bytes(length), xs=[1, 2], threshold=1)
    with pytest.raises(ValueError, match=f"secret must be 32 bytes, got {length}"):
        split_many([SECRET, bytes(length)], xs=[1, 2], threshold=1)


@pytest.mark.parametrize("threshold", [0, -3])
def test_split_rejects_threshold_below_one(threshold: int) -> None:
    with pytest.raises(ValueError, match=f"threshold must be >= 1, got {threshold}"):
        split(SECRET, xs=[1, 2], threshold=threshold)


@pytest.mark.parametrize("xs", [[1, 1], [0, 1], [1, PRIME], [-1, 2], [2**70]], ids=repr)
def test_split_rejects_bad_x_coordinates(xs: list[int]) -> None:
    with pytest.raises(ValueError, match=r"x-coordinates must be distinct and in \[1, PRIME\)"):
        split(SECRET, xs=xs, threshold=1)
    with pytest.raises(ValueError, match=r"x-coordinates must be distinct and in \[1, PRIME\)"):
        split_many([SECRET, SECRET], xs=xs, threshold=2)
