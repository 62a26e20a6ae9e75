"""Shamir secret sharing of 32-byte secrets, limb by limb over the prime field GF(2^26 - 5).

Scheme: a secret is read as 11 big-endian limbs of 24 bits (one zero byte in front of its 32
bytes, then 3 bytes a limb: the top limb holds 16 bits, the others 24), and each limb is
Shamir-shared on its own polynomial of degree t - 1 over GF(p), p = 2^26 - 5: constant term the
limb, the other t - 1 coefficients uniform in [0, p) from the OS CSPRNG (``os.urandom``, with
rejection sampling). A holder's share is its 11 values f_l(x), 26 bits each (every field element
is below 2^26), packed big-endian behind two zero bits: ``SHARE_BYTES`` = 36 (as a uint32 per
value it took 44, and the whole secret in GF(2^521 - 1) 66). Every share travels sealed to its
holder once per key epoch, so its size is most of a key set-up's upload (benchmarks/README.md).

Why limbs are as safe as one big field: Shamir's hiding is information-theoretic in any field
larger than the values shared (every limb < 2^24 < p). The limbs' polynomials have independent
uniform coefficients, so any t - 1 shares are uniform and independent of each limb, hence of the
whole secret; t shares recover every limb. Nothing rests on p being large.

Why this field: p is the largest prime below 2^26. A product of two field elements is below
2^52, so numpy's int64 sums 2^11 of them without overflow before reducing mod p: sharing is a
matrix product, the Vandermonde rows x^j of all holders [k x t] times the coefficients
[t x limbs of every secret], chunked along t by 2^11; recovery is the Lagrange weights at 0
[t] times the shares [t x limbs]. Both run in numpy's integer matmul instead of pure-Python
Horner over 521-bit integers: at k = 490, t = 375 a split costs about 11x less per secret, a
combine about 18x less (benchmarks/README.md).

x-coordinates: a holder's is its client id + 1; they must be distinct and in [1, p), so that
they are distinct nonzero field elements (ids below 2^26 - 6, far above any run's n).

Recovery's range check is defence in depth only: a recovered limb at or above its limb's
bound (2^16 for the top limb, 2^24 for the others) shows the shares are inconsistent, but a
random wrong limb passes it with probability about 1/4 (2^-10 for the top one), so garbage
passes all 11 with probability about 2^-30, far weaker than the 2^-265 of the 521-bit field. The
checks that matter are downstream (threat_model.md M-LIAR): the server checks a rebuilt mask
key against the public key its owner advertised, and a rebuilt seed against its commitment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

PRIME = 2**26 - 5
SECRET_BYTES = 32
LIMB_BITS = 24
LIMBS = -(-8 * SECRET_BYTES // LIMB_BITS)  # 11
VALUE_BITS = 26  # every field element is below 2^26
SHARE_BYTES = -(-LIMBS * VALUE_BITS // 8)  # 11 values of 26 bits, packed: 36
_SHARE_PAD_BITS = 8 * SHARE_BYTES - LIMBS * VALUE_BITS  # zero bits in front of a packed share: 2
_LIMB_BYTES = LIMB_BITS // 8
_PAD = LIMBS * _LIMB_BYTES - SECRET_BYTES  # zero bytes in front of the secret: 1, so the top limb holds 16 bits
_LIMB_BOUNDS = np.array([2 ** (LIMB_BITS - 8 * _PAD)] + [2**LIMB_BITS] * (LIMBS - 1), dtype=np.int64)
_CHUNK = 2**11  # products summed before a reduction: 2^11 * (p - 1)^2 < 2^63
_SHARE_DTYPE = np.dtype(">u4")
_ROWS = 128  # rows of the t x t differences reduced at a time in _lagrange_at_zero


def split(secret: bytes, *, xs: Sequence[int], threshold: int) -> dict[int, bytes]:
    """Split ``secret`` into one share per x-coordinate; any ``threshold`` of them recover it.

    Args:
        secret: exactly 32 bytes.
        xs: distinct x-coordinates in [1, PRIME) (the holders' client id + 1).
        threshold: shares needed to recover, >= 1. It may exceed len(xs): the sharing is then
            valid but unrecoverable, which the caller detects at recovery time.

    Returns:
        {x: SHARE_BYTES-byte share}.

    Raises:
        ValueError: a secret of another length, a threshold below 1, or bad x-coordinates.
    """
    return split_many([secret], xs=xs, threshold=threshold)[0]


def split_many(secrets: Sequence[bytes], *, xs: Sequence[int], threshold: int) -> list[dict[int, bytes]]:
    """Split several secrets to the same holders at the same threshold, each on its own fresh
    polynomials: the same as one :func:`split` per secret, with the holders' Vandermonde rows
    built once and one matrix product for all (a client shares its seed and its mask key).

    Args and Raises: as :func:`split`, for each of ``secrets``.

    Returns:
        One {x: share} per secret, in order.
    """
    for secret in secrets:
        if len(secret) != SECRET_BYTES:
            raise ValueError(f"secret must be {SECRET_BYTES} bytes, got {len(secret)}")
    if threshold < 1:
        raise ValueError(f"threshold must be >= 1, got {threshold}")
    if len(set(xs)) != len(xs) or any(not 0 < x < PRIME for x in xs):
        raise ValueError("x-coordinates must be distinct and in [1, PRIME)")
    if not secrets:
        return []
    columns = len(secrets) * LIMBS
    coefficients = np.empty((threshold, columns), dtype=np.int64)  # [t, secrets x limbs]: row j holds the x^j coefficients
    coefficients[0] = _to_limbs(secrets).reshape(-1)
    coefficients[1:] = _uniform_below_prime((threshold - 1) * columns).reshape(threshold - 1, columns)
    values = _matmul_mod(_vandermonde(np.asarray(xs, dtype=np.int64), threshold), coefficients)  # [k, secrets x limbs]
    encoded = _pack(values.reshape(len(xs), len(secrets), LIMBS).transpose(1, 0, 2).reshape(-1, LIMBS))
    per_secret = len(xs) * SHARE_BYTES
    return [{x: encoded[s * per_secret + i * SHARE_BYTES: s * per_secret + (i + 1) * SHARE_BYTES] for i, x in enumerate(xs)}
            for s in range(len(secrets))]


def combine(shares: Mapping[int, bytes], *, threshold: int) -> bytes:
    """Recover the secret from at least ``threshold`` shares (Lagrange interpolation at 0 of each
    limb; the ``threshold`` lowest x-coordinates are used).

    The final range check only catches most inconsistent shares (module docstring): callers
    that must know the secret is the dealt one check it against a commitment, as the server does.

    Raises:
        ValueError: fewer than ``threshold`` shares; a malformed share (wrong length, x out of
            range); a limb that is not a field element; or shares that do not interpolate to a
            32-byte secret (a limb beyond its bound: corrupted, or from different sharings).
    """
    if threshold < 1:
        raise ValueError(f"threshold must be >= 1, got {threshold}")
    if len(shares) < threshold:
        raise ValueError(f"need {threshold} shares to recover the secret, got {len(shares)}")
    points = sorted(shares.items())[:threshold]
    for x, value in points:
        if len(value) != SHARE_BYTES or not 0 < x < PRIME:
            raise ValueError(f"malformed share at x={x}")
    ys, padded = _unpack(b"".join(value for _, value in points))
    outside = np.flatnonzero((ys >= PRIME).any(axis=1) | padded)
    if outside.size:
        raise ValueError(f"share value at x={points[outside[0]][0]} is not a field element")
    weights = _lagrange_at_zero(np.array([x for x, _ in points], dtype=np.int64))
    limbs = _matmul_mod(weights[np.newaxis, :], ys)[0]
    if np.any(limbs >= _LIMB_BOUNDS):
        raise ValueError("shares are inconsistent: they do not interpolate to a 32-byte secret")
    return _from_limbs(limbs)


def _pack(values: np.ndarray) -> bytes:
    """[m, LIMBS] field elements as m packed shares: each value's 26 low bits, big-endian, two
    zero bits in front of each share."""
    bits = np.unpackbits(values.astype(_SHARE_DTYPE).view(np.uint8).reshape(-1, LIMBS, 4), axis=-1)[..., 32 - VALUE_BITS:]
    padded = np.zeros((bits.shape[0], 8 * SHARE_BYTES), dtype=np.uint8)
    padded[:, _SHARE_PAD_BITS:] = bits.reshape(bits.shape[0], LIMBS * VALUE_BITS)
    return np.packbits(padded, axis=1).tobytes()


def _unpack(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`_pack`: ([m, LIMBS] int64 values, [m] whether a share's pad bits are
    set, which no packed field element has)."""
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8).reshape(-1, SHARE_BYTES), axis=1)
    words = np.zeros((bits.shape[0], LIMBS, 32), dtype=np.uint8)
    words[..., 32 - VALUE_BITS:] = bits[:, _SHARE_PAD_BITS:].reshape(-1, LIMBS, VALUE_BITS)
    values = np.packbits(words, axis=-1).view(_SHARE_DTYPE)[..., 0].astype(np.int64)
    return values, bits[:, :_SHARE_PAD_BITS].any(axis=1)


def _to_limbs(secrets: Sequence[bytes]) -> np.ndarray:
    """[secrets, LIMBS] int64: each secret, zero-padded in front, as big-endian 24-bit limbs."""
    groups = np.frombuffer(b"".join(bytes(_PAD) + s for s in secrets), dtype=np.uint8).reshape(len(secrets), LIMBS, _LIMB_BYTES)
    words = np.zeros((len(secrets), LIMBS, 4), dtype=np.uint8)
    words[..., 4 - _LIMB_BYTES:] = groups
    return words.view(_SHARE_DTYPE)[..., 0].astype(np.int64)


def _from_limbs(limbs: np.ndarray) -> bytes:
    """The 32 bytes whose limbs are ``limbs`` (each below its bound, so the padding is zero)."""
    return limbs.astype(_SHARE_DTYPE).view(np.uint8).reshape(LIMBS, 4)[:, 4 - _LIMB_BYTES:].tobytes()[_PAD:]


def _uniform_below_prime(count: int) -> np.ndarray:
    """``count`` independent uniform field elements from the OS CSPRNG: 26 random bits each,
    drawn again where they reach PRIME (5 in 2^26 do, so one draw almost always suffices)."""
    kept = np.empty(0, dtype=np.int64)
    while kept.size < count:
        wanted = count - kept.size
        draw = np.frombuffer(os.urandom(4 * (wanted + 16)), dtype=np.uint32) & np.uint32(2**26 - 1)
        kept = np.concatenate([kept, draw[draw < PRIME].astype(np.int64)])
    return kept[:count]


def _vandermonde(xs: np.ndarray, columns: int) -> np.ndarray:
    """[len(xs), columns]: row i is x_i^0 .. x_i^(columns - 1) mod PRIME. Built by doubling:
    the powers known so far, times x^width, are the next width powers (log2(columns) numpy
    operations over all holders, each product of two field elements below 2^52), written in
    place: fresh temporaries of this size cost more in page faults than the arithmetic."""
    powers = np.empty((xs.size, columns), dtype=np.int64)
    powers[:, 0] = 1
    width, step = 1, xs  # step = x^width
    while width < columns:
        more = min(width, columns - width)
        block = powers[:, width:width + more]
        _reduce(np.multiply(powers[:, :more], step[:, np.newaxis], out=block))
        width, step = width + more, _reduce(step * step)
    return powers


def _matmul_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a @ b) mod PRIME for int64 matrices with entries in [0, PRIME): the inner dimension in
    chunks of _CHUNK, so no partial sum reaches 2^63."""
    out = np.zeros((a.shape[0], b.shape[1]), dtype=np.int64)
    for start in range(0, a.shape[1], _CHUNK):
        out += _reduce(a[:, start:start + _CHUNK] @ b[start:start + _CHUNK])
        _reduce(out)
    return out


def _reduce(values: np.ndarray) -> np.ndarray:
    """``values`` mod PRIME in place (any int64, negative ones too), returned. As values -
    floor(values / PRIME) * PRIME: numpy divides int64 by a scalar through libdivide, several
    times faster than its ``%`` (a hardware division per element; numpy 2.4)."""
    quotients = values // PRIME
    quotients *= PRIME
    values -= quotients
    return values


def _row_products(factors: np.ndarray) -> np.ndarray:
    """Each row's product mod PRIME, by halving the columns (numpy's prod would overflow)."""
    while factors.shape[1] > 1:
        if factors.shape[1] % 2:
            factors = np.concatenate([factors, np.ones((factors.shape[0], 1), dtype=np.int64)], axis=1)
        factors = _reduce(factors[:, 0::2] * factors[:, 1::2])
    return factors[:, 0]


def _lagrange_at_zero(xs: np.ndarray) -> np.ndarray:
    """The weights l_i = prod_{j != i} x_j / (x_j - x_i) mod PRIME that interpolate at 0, as
    (prod_j x_j) / (x_i * prod_{j != i} (x_j - x_i)): the matrix of differences reduced by rows,
    _ROWS rows at a time (3x faster than all t at once at t = 375: the temporaries stay small),
    then t modular inverses of Python ints (xs distinct and nonzero, so all exist)."""
    denominators = np.empty(xs.size, dtype=np.int64)
    for start in range(0, xs.size, _ROWS):
        differences = xs[np.newaxis, :] - xs[start:start + _ROWS, np.newaxis]  # [i, j] = x_j - x_i, in (-PRIME, PRIME)
        rows = np.arange(differences.shape[0])
        differences[rows, start + rows] = 1  # j = i
        denominators[start:start + _ROWS] = _row_products(differences)
    everything = int(_row_products(xs[np.newaxis, :])[0])
    return np.array([everything * pow(d, -1, PRIME) % PRIME for d in _reduce(xs * denominators).tolist()], dtype=np.int64)
