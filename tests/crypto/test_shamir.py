"""Tests for secure_fedgraph.crypto.shamir: Shamir sharing of 32-byte secrets over GF(2^521 - 1)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from secure_fedgraph.crypto.shamir import PRIME, SECRET_BYTES, SHARE_BYTES, combine, split

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


def test_prime_is_the_mersenne_prime_2_521_minus_1() -> None:
    assert PRIME == 2**521 - 1
    assert SHARE_BYTES == (PRIME.bit_length() + 7) // 8 == 66
    assert pow(3, PRIME - 1, PRIME) == 1  # Fermat witness (2^521 - 1 is a known Mersenne prime)


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
    fake_y = data.draw(st.integers(min_value=0, max_value=PRIME - 1))
    assume(fake_y.to_bytes(SHARE_BYTES, "big") != shares[fake_x])
    forged = honest | {fake_x: fake_y.to_bytes(SHARE_BYTES, "big")}
    try:
        recovered = combine(forged, threshold=threshold)
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


def test_t_minus_one_shares_are_consistent_with_every_secret() -> None:
    """Information-theoretic hiding, checked on one case: for any candidate secret s', there is a
    degree t-1 polynomial through (0, s') and the t-1 known shares, so a t-th point on it makes
    combine return s'. Hence t-1 shares rule no secret out."""
    threshold = 3
    shares = split(SECRET, xs=[1, 2, 3, 4], threshold=threshold)
    known = {1: shares[1], 2: shares[2]}
    for candidate in (bytes(32), b"\xff" * 32, bytes(reversed(SECRET))):
        points = [(0, int.from_bytes(candidate, "big"))] + [(x, int.from_bytes(v, "big")) for x, v in known.items()]
        # Lagrange-evaluate the polynomial through `points` at x = 7
        y7 = 0
        for i, (xi, yi) in enumerate(points):
            num, den = 1, 1
            for j, (xj, _) in enumerate(points):
                if j != i:
                    num = num * (7 - xj) % PRIME
                    den = den * (xi - xj) % PRIME
            y7 = (y7 + yi * num * pow(den, -1, PRIME)) % PRIME
        assert combine(known | {7: y7.to_bytes(SHARE_BYTES, "big")}, threshold=threshold) == candidate


def test_threshold_one_shares_are_the_secret_itself() -> None:
    shares = split(SECRET, xs=[1, 5, 9], threshold=1)
    for x, value in shares.items():
        assert value == SECRET.rjust(SHARE_BYTES, b"\x00")
        assert combine({x: value}, threshold=1) == SECRET


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


@pytest.mark.parametrize("length", [0, 1, SHARE_BYTES - 1, SHARE_BYTES + 1, 2 * SHARE_BYTES])
def test_malformed_share_length_raises(length: int) -> None:
    shares = split(SECRET, xs=[1, 2, 3], threshold=2)
    with pytest.raises(ValueError, match="malformed share at x=2"):
        combine({1: shares[1], 2: bytes(length)}, threshold=2)


def test_share_value_outside_the_field_raises() -> None:
    shares = split(SECRET, xs=[1, 2, 3], threshold=2)
    for y in (PRIME, 2 ** (8 * SHARE_BYTES) - 1):
        with pytest.raises(ValueError, match="share value at x=1 is not a field element"):
            combine({1: y.to_bytes(SHARE_BYTES, "big"), 2: shares[2]}, threshold=2)


@pytest.mark.parametrize("x", [0, PRIME, -1])
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


@pytest.mark.parametrize("threshold", [0, -3])
def test_split_rejects_threshold_below_one(threshold: int) -> None:
    with pytest.raises(ValueError, match=f"threshold must be >= 1, got {threshold}"):
        split(SECRET, xs=[1, 2], threshold=threshold)


@pytest.mark.parametrize("xs", [[1, 1], [0, 1], [1, PRIME], [-1, 2]], ids=repr)
def test_split_rejects_bad_x_coordinates(xs: list[int]) -> None:
    with pytest.raises(ValueError, match=r"x-coordinates must be distinct and in \[1, PRIME\)"):
        split(SECRET, xs=xs, threshold=1)
