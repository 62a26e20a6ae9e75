"""Tests for secure_fedgraph.crypto.fixed_point: clipping, fixed-point encoding, capacity, error bound."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from secure_fedgraph.crypto.fixed_point import FixedPoint, clip_and_count
from secure_fedgraph.crypto.prg import ring_dtype
from secure_fedgraph.errors import CapacityError, ConfigError

CLIP_RANGES = st.floats(min_value=2.0**-10, max_value=2.0**12, allow_nan=False, allow_infinity=False)


def _sum_ring(fp: FixedPoint, rows: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """What the secure sum computes: the wrap-around ring sum of every client's encoding."""
    acc = np.zeros(rows[0].size, dtype=ring_dtype(fp.ring_bits))
    clipped = 0
    for row in rows:
        codes, count = fp.encode(row)
        np.add(acc, codes, out=acc)
        clipped += count
    return acc, clipped


def _exact_sum(column: np.ndarray) -> Fraction:
    return sum((Fraction(float(v)) for v in column), Fraction(0))


# --- round trip and sums ------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(data=st.data(), precision_bits=st.integers(min_value=0, max_value=62), clip_range=CLIP_RANGES)
def test_encode_decode_round_trip_within_half_a_step(data: st.DataObject, precision_bits: int, clip_range: float) -> None:
    assume(round(clip_range * 2**precision_bits) < 2**63)
    fp = FixedPoint.for_sum(n_clients=1, clip_range=clip_range, precision_bits=precision_bits)
    values = np.array(
        data.draw(st.lists(st.floats(min_value=-clip_range, max_value=clip_range), min_size=1, max_size=32))
        + [clip_range, -clip_range, 0.0]
    )
    codes, count = fp.encode(values)
    assert count == 0
    assert codes.dtype == ring_dtype(fp.ring_bits)
    decoded = fp.decode_sum(codes)
    assert decoded.dtype == np.float64
    assert np.all(np.abs(decoded - values) <= 2.0 ** -(precision_bits + 1))


@settings(max_examples=50, deadline=None)
@given(
    data=st.data(),
    n=st.integers(min_value=1, max_value=20),
    precision_bits=st.integers(min_value=0, max_value=40),
    clip_range=CLIP_RANGES,
)
def test_sum_of_encodings_decodes_within_error_bound(data: st.DataObject, n: int, precision_bits: int, clip_range: float) -> None:
    """Domain: n * max_code <= 2^53, so the summed codes convert to float64 exactly. (Beyond it,
    see test_error_bound_holds_when_summed_codes_exceed_53_bits.)

    Against the exact rational sum of the inputs the stated bound must hold as is; against the
    float64 sum it holds up to that sum's own rounding, (n - 1) * eps * sum|x|.
    """
    fp = FixedPoint.for_sum(n_clients=n, clip_range=clip_range, precision_bits=precision_bits)
    assume(n * fp.max_code <= 2**53)
    width = data.draw(st.integers(min_value=1, max_value=8))
    element = st.floats(min_value=-clip_range, max_value=clip_range)
    rows = [np.array(data.draw(st.lists(element, min_size=width, max_size=width))) for _ in range(n)]
    acc, clipped = _sum_ring(fp, rows)
    assert clipped == 0
    decoded = fp.decode_sum(acc)
    stacked = np.stack(rows)
    bound = fp.error_bound(n)
    assert bound == n * (2.0 ** -(precision_bits + 1) + clip_range * 2.0**-53)
    for j in range(width):
        assert abs(Fraction(float(decoded[j])) - _exact_sum(stacked[:, j])) <= Fraction(bound)
    float_sum = stacked.sum(axis=0)
    allowance = (n - 1) * np.finfo(np.float64).eps * np.abs(stacked).sum(axis=0)
    assert np.all(np.abs(decoded - float_sum) <= bound + allowance)


def test_sum_decodes_negative_totals_through_wrap_around() -> None:
    fp = FixedPoint.for_sum(n_clients=3, clip_range=1.0, precision_bits=16, ring_bits=32)
    acc, _ = _sum_ring(fp, [np.array([-1.0, 0.25]), np.array([-1.0, -0.5]), np.array([-0.5, -0.5])])
    assert acc[0] > 2**31  # stored as a large unsigned ring element ...
    assert fp.decode_sum(acc).tolist() == [-2.5, -0.75]  # ... and read back as a signed sum


def test_error_bound_holds_when_summed_codes_exceed_53_bits() -> None:
    """for_sum accepts clip_range=4096, precision_bits=44 for 4 clients (4 * 2^56 < 2^63).
    decode_sum converts the int64 ring sum to float64, which rounds sums above 2^53 codes to
    53 significant bits, adding up to half an ulp of the sum (about 9e-13 observed here): the
    stated bound must include that read-back term (n * clip_range * 2^-53), not only the
    fixed-point rounding (4 * 2^-45 ~ 1.1e-13)."""
    n, clip_range, precision_bits = 4, 4096.0, 44
    fp = FixedPoint.for_sum(n_clients=n, clip_range=clip_range, precision_bits=precision_bits)
    assert fp.ring_bits == 64
    rows = list(np.random.default_rng(0).uniform(-clip_range, clip_range, size=(n, 1000)))
    acc, _ = _sum_ring(fp, rows)
    decoded = fp.decode_sum(acc)
    stacked = np.stack(rows)
    worst = max(abs(Fraction(float(decoded[j])) - _exact_sum(stacked[:, j])) for j in range(stacked.shape[1]))
    assert worst <= Fraction(fp.error_bound(n)), (
        f"decoded sum is off by {float(worst):.3g}, above the stated error_bound({n}) = {fp.error_bound(n):.3g}"
    )


# --- capacity -----------------------------------------------------------------------------------


def test_capacity_bound_is_exact_for_32_bit_ring() -> None:
    """n * max_code = 2^31 - 1 fits the signed 32-bit ring; 2^31 does not."""
    fits = FixedPoint.for_sum(n_clients=1, clip_range=float(2**31 - 1), precision_bits=0, ring_bits=32)
    assert fits.max_code == 2**31 - 1 and fits.fits(1)
    with pytest.raises(CapacityError, match="does not fit the signed 32-bit ring"):
        FixedPoint.for_sum(n_clients=1, clip_range=float(2**31), precision_bits=0, ring_bits=32)
    # the same bound reached through n and precision_bits: 2^3 * 2^28 = 2^31
    with pytest.raises(CapacityError, match="limit 2\\^31 - 1"):
        FixedPoint.for_sum(n_clients=8, clip_range=1.0, precision_bits=28, ring_bits=32)
    assert FixedPoint.for_sum(n_clients=7, clip_range=1.0, precision_bits=28, ring_bits=32).ring_bits == 32


def test_capacity_bound_is_exact_for_64_bit_ring() -> None:
    """n * max_code = 2^63 - 1024 fits the signed 64-bit ring; 2^63 does not."""
    fits = FixedPoint.for_sum(n_clients=1024, clip_range=float(2**53 - 1), precision_bits=0, ring_bits=64)
    assert 1024 * fits.max_code == 2**63 - 1024
    with pytest.raises(CapacityError, match="does not fit the signed 64-bit ring"):
        FixedPoint.for_sum(n_clients=1024, clip_range=float(2**53), precision_bits=0, ring_bits=64)


@settings(max_examples=50)
@given(n=st.integers(min_value=1, max_value=10_000), precision_bits=st.integers(min_value=0, max_value=20))
def test_capacity_check_fires_exactly_at_its_bound(n: int, precision_bits: int) -> None:
    """The largest max_code with n * max_code < 2^31 fits; one more does not."""
    largest = (2**31 - 1) // n
    clip_fits = largest / 2**precision_bits  # exact: largest < 2^31 needs no rounding
    clip_overflows = (largest + 1) / 2**precision_bits
    fits = FixedPoint.for_sum(n_clients=n, clip_range=clip_fits, precision_bits=precision_bits, ring_bits=32)
    assert fits.max_code == largest
    fewest_overflowing = -(-(2**31) // largest)  # ceil(2^31 / largest) clients reach 2^31
    assert fits.fits(n) and fits.fits(fewest_overflowing - 1) and not fits.fits(fewest_overflowing)
    with pytest.raises(CapacityError, match="set ring_bits=64 or lower precision_bits or clip_range"):
        FixedPoint.for_sum(n_clients=n, clip_range=clip_overflows, precision_bits=precision_bits, ring_bits=32)
    # with ring_bits=None the same overflow moves to the 64-bit ring instead
    assert FixedPoint.for_sum(n_clients=n, clip_range=clip_overflows, precision_bits=precision_bits).ring_bits == 64


def test_for_sum_picks_32_then_64_then_raises() -> None:
    """10 clients, clip_range 1: 10 * 2^27 < 2^31 <= 10 * 2^28; 10 * 2^59 < 2^63 <= 10 * 2^60."""
    assert FixedPoint.for_sum(n_clients=10, clip_range=1.0, precision_bits=27).ring_bits == 32
    assert FixedPoint.for_sum(n_clients=10, clip_range=1.0, precision_bits=28).ring_bits == 64
    assert FixedPoint.for_sum(n_clients=10, clip_range=1.0, precision_bits=59).ring_bits == 64
    with pytest.raises(CapacityError) as raised:
        FixedPoint.for_sum(n_clients=10, clip_range=1.0, precision_bits=60)
    message = str(raised.value)
    assert "precision_bits" in message and "clip_range" in message
    assert "signed 64-bit ring" in message
    assert "set ring_bits=64" not in message  # already at 64 bits: no such hint


def test_capacity_error_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        FixedPoint.for_sum(n_clients=10, clip_range=1.0, precision_bits=60)


def test_count_lane_must_fit_too() -> None:
    assert FixedPoint.for_sum(n_clients=2, clip_range=1.0, precision_bits=0, count_lane_max=2**30 - 1).ring_bits == 32
    assert FixedPoint.for_sum(n_clients=2, clip_range=1.0, precision_bits=0, count_lane_max=2**30).ring_bits == 64
    with pytest.raises(CapacityError, match="does not fit the signed 32-bit ring"):
        FixedPoint.for_sum(n_clients=2, clip_range=1.0, precision_bits=0, ring_bits=32, count_lane_max=2**30)


def test_count_lane_decodes_as_a_signed_integer() -> None:
    fp = FixedPoint(clip_range=1.0, precision_bits=8, ring_bits=32)
    lane = np.array([3], dtype="<u4") + np.array([5], dtype="<u4")
    assert fp.decode_count(lane[0]) == 8
    assert fp.decode_count(np.uint32(2**32 - 1)) == -1


# --- clipping -----------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(data=st.data(), clip_range=CLIP_RANGES, precision_bits=st.integers(min_value=0, max_value=30))
def test_out_of_range_values_are_clipped_and_counted(data: st.DataObject, clip_range: float, precision_bits: int) -> None:
    element = st.one_of(
        st.floats(min_value=-4 * clip_range, max_value=4 * clip_range),
        st.sampled_from([clip_range, -clip_range, math.nextafter(clip_range, math.inf), -math.nextafter(clip_range, math.inf)]),
    )
    values = np.array(data.draw(st.lists(element, min_size=1, max_size=40)))
    expected_count = int(np.sum(np.abs(values) > clip_range))
    clipped, count = clip_and_count(values, clip_range)
    assert count == expected_count
    assert np.array_equal(clipped, np.clip(values, -clip_range, clip_range))
    fp = FixedPoint.for_sum(n_clients=1, clip_range=clip_range, precision_bits=precision_bits)
    codes, encode_count = fp.encode(values)
    assert encode_count == expected_count
    assert np.all(np.abs(fp.decode_sum(codes) - clipped) <= 2.0 ** -(precision_bits + 1))


def test_clip_and_count_copies_its_input() -> None:
    values = np.array([0.5, -0.25])
    clipped, count = clip_and_count(values, 1.0)
    assert count == 0
    clipped[0] = 9.0
    assert values[0] == 0.5


def test_clipped_values_encode_to_plus_minus_max_code() -> None:
    fp = FixedPoint.for_sum(n_clients=1, clip_range=2.0, precision_bits=10, ring_bits=32)
    codes, count = fp.encode(np.array([1e9, -1e9, 2.0, -2.0]))
    assert count == 2
    assert codes.view("<i4").tolist() == [2048, -2048, 2048, -2048]


@pytest.mark.parametrize(
    ("bad", "n_bad"),
    [([np.nan], 1), ([1.0, np.inf], 1), ([-np.inf, np.nan, 0.0], 2)],
    ids=["nan", "inf", "both"],
)
def test_nan_and_inf_raise_config_error(bad: list[float], n_bad: int) -> None:
    with pytest.raises(ConfigError, match=f"input contains {n_bad} NaN or infinite values"):
        clip_and_count(np.array(bad), 1.0)
    fp = FixedPoint(clip_range=1.0, precision_bits=8, ring_bits=32)
    with pytest.raises(ConfigError, match="NaN or infinite"):
        fp.encode(np.array(bad))


# --- rejected configuration ---------------------------------------------------------------------


@pytest.mark.parametrize("clip_range", [0, 0.0, -1.0, -1e-300, math.inf, -math.inf, math.nan, "1.0", None])
def test_invalid_clip_range_raises_config_error(clip_range: object) -> None:
    with pytest.raises(ConfigError, match="clip_range must be a finite number > 0"):
        FixedPoint(clip_range=clip_range, precision_bits=8, ring_bits=32)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="clip_range must be a finite number > 0"):
        FixedPoint.for_sum(n_clients=2, clip_range=clip_range, precision_bits=8)  # type: ignore[arg-type]


@pytest.mark.parametrize("precision_bits", [True, False, -1, 63, 64, 8.0, None])
def test_invalid_precision_bits_raise_config_error(precision_bits: object) -> None:
    with pytest.raises(ConfigError, match=r"precision_bits must be an int in \[0, 62\]"):
        FixedPoint(clip_range=1.0, precision_bits=precision_bits, ring_bits=64)  # type: ignore[arg-type]


def test_precision_bits_bounds_are_accepted() -> None:
    assert FixedPoint(clip_range=1.0, precision_bits=0, ring_bits=32).max_code == 1
    assert FixedPoint(clip_range=1.0, precision_bits=62, ring_bits=64).max_code == 2**62


@pytest.mark.parametrize("ring_bits", [0, 16, 128, None])
def test_invalid_ring_bits_raise_config_error(ring_bits: object) -> None:
    with pytest.raises(ConfigError, match="ring_bits must be 32 or 64"):
        FixedPoint(clip_range=1.0, precision_bits=8, ring_bits=ring_bits)  # type: ignore[arg-type]


def test_decode_sum_rejects_the_wrong_dtype() -> None:
    fp = FixedPoint(clip_range=1.0, precision_bits=8, ring_bits=32)
    for dtype in ("<u8", "<i4", "float64"):
        with pytest.raises(ConfigError, match="expected ring elements of dtype uint32"):
            fp.decode_sum(np.zeros(3, dtype=dtype))
