"""Tests for secure_fedgraph.crypto.ckks: CKKS parameters, secret/public contexts, chunked sums, bounds."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import tenseal as ts

from secure_fedgraph.crypto.ckks import (
    CHECK_LANES,
    EXTRA_LANES,
    MAX_COEFF_BITS_128,
    PRESETS,
    CkksParams,
    PublicContext,
    SecretContext,
)
from secure_fedgraph.errors import CapacityError, ConfigError, ProtocolError

LEAN = PRESETS["lean"]
CLIP_RANGE = 2.0


@pytest.fixture(scope="module")
def dealer() -> SecretContext:
    """The key dealer's context; clients load copies of its secret bytes."""
    return SecretContext.generate(LEAN)


@pytest.fixture(scope="module")
def clients(dealer: SecretContext) -> list[SecretContext]:
    secret = dealer.secret_bytes()
    return [SecretContext.from_bytes(secret, LEAN) for _ in range(10)]


@pytest.fixture(scope="module")
def server(dealer: SecretContext) -> PublicContext:
    return PublicContext(dealer.public_bytes())


def _aggregate(server: PublicContext, uploads: list[list[bytes]]) -> list[bytes]:
    """The server's part: load each client's ciphertexts and add them up, never decrypting."""
    acc = None
    for blobs in uploads:
        acc = PublicContext.add(acc, [server.load(b) for b in blobs])
    assert acc is not None
    return [v.serialize() for v in acc]


# --- parameters ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_validate_and_work(name: str) -> None:
    params = PRESETS[name]
    rebuilt = CkksParams(params.poly_modulus_degree, tuple(params.coeff_mod_bit_sizes), params.scale_bits)
    assert rebuilt == params
    assert sum(params.coeff_mod_bit_sizes) <= MAX_COEFF_BITS_128[params.poly_modulus_degree]
    assert 20 <= params.scale_bits < params.coeff_mod_bit_sizes[0]
    context = SecretContext.generate(params)
    values = np.linspace(-1.0, 1.0, 50)
    blobs, clipped = context.encrypt(values, params=params, clip_range=1.0)
    sums, clipped_total = context.decrypt_sum(blobs, n_values=50, n_contributors=1)
    assert clipped == clipped_total == 0
    assert np.max(np.abs(sums - values)) <= params.error_bound(1, clip_range=1.0)


def test_lean_preset_shape() -> None:
    assert LEAN.slots == 4096
    assert LEAN.data_modulus_bits == 60
    assert PRESETS["standard"].data_modulus_bits == 140


@pytest.mark.parametrize("degree", sorted(MAX_COEFF_BITS_128))
def test_coefficient_bits_limit_is_inclusive(degree: int) -> None:
    limit = MAX_COEFF_BITS_128[degree]
    at_limit = (60, limit - 60) if limit - 60 >= 21 else (limit - 30, 30)
    assert sum(at_limit) == limit
    CkksParams(degree, at_limit, 20)
    over = (at_limit[0], at_limit[1] + 1)
    with pytest.raises(ConfigError, match=f"sum to {limit + 1} bits, above the 128-bit-security limit of {limit}"):
        CkksParams(degree, over, 20)


def test_too_many_coefficient_bits_for_n_raise() -> None:
    with pytest.raises(ConfigError, match="128-bit") as raised:
        CkksParams(8192, (60, 60, 60, 39), 40)
    assert "poly_modulus_degree=8192" in str(raised.value)
    with pytest.raises(ConfigError, match="128-bit"):
        CkksParams(4096, (60, 40, 40), 30)


@pytest.mark.parametrize("scale_bits", [60, 61, 19, 0])
def test_scale_must_lie_below_the_first_modulus(scale_bits: int) -> None:
    with pytest.raises(ConfigError, match=r"scale_bits must be in \[20, first modulus = 60\), got " + str(scale_bits)):
        CkksParams(8192, (60, 60), scale_bits)


@pytest.mark.parametrize("degree", [1024, 2048, 8000, 65536])
def test_unknown_poly_modulus_degree_raises(degree: int) -> None:
    with pytest.raises(ConfigError, match=f"poly_modulus_degree must be one of .*got {degree}"):
        CkksParams(degree, (60, 60), 40)


def test_a_single_modulus_raises() -> None:
    with pytest.raises(ConfigError, match="needs at least two moduli"):
        CkksParams(8192, (60,), 40)


@pytest.mark.parametrize(("n_values", "chunks"), [(0, 1), (1, 1), (4092, 1), (4093, 2), (5000, 2), (8186, 2), (8187, 3)])
def test_chunks_count_the_two_extra_lanes_and_the_check_lanes(n_values: int, chunks: int, dealer: SecretContext) -> None:
    assert EXTRA_LANES == 2
    assert LEAN.chunks(n_values) == chunks
    blobs, _ = dealer.encrypt(np.zeros(n_values), params=LEAN, clip_range=1.0)
    assert len(blobs) == chunks


def test_check_lanes_ride_at_the_end_of_every_chunk_and_add_up(dealer: SecretContext, server: PublicContext) -> None:
    rows = [np.random.default_rng(i).uniform(-1, 1, (2, CHECK_LANES)) for i in range(3)]
    seen: list = []

    def check_of(row):
        return lambda j, data: seen.append(data.size) or row[j]

    uploads = [dealer.encrypt(np.full(5000, 0.25), params=LEAN, clip_range=1.0, check=check_of(r))[0] for r in rows]
    sums, _, chunks = dealer.decrypt_checked(_aggregate(server, uploads), n_values=5000, n_contributors=3)
    bound = LEAN.error_bound(3, clip_range=1.0)
    assert seen[:2] == [LEAN.data_slots, 5002 - LEAN.data_slots]  # each chunk's lanes, the extra lanes included
    np.testing.assert_allclose(np.array([c for _, c in chunks]), sum(rows), atol=bound, rtol=0)
    np.testing.assert_allclose(np.concatenate([d for d, _ in chunks])[:5000], 0.75, atol=bound, rtol=0)
    np.testing.assert_allclose(sums, 0.75, atol=bound, rtol=0)
    with pytest.raises(ConfigError, match=r"check lanes of chunk 0 must have shape \(2,\)"):
        dealer.encrypt(np.ones(5000), params=LEAN, clip_range=1.0, check=lambda j, data: np.zeros(3))


# --- who holds what -----------------------------------------------------------------------------


def test_public_bytes_load_into_a_context_without_secret_key(dealer: SecretContext, server: PublicContext) -> None:
    assert server.has_secret_key is False
    raw = ts.context_from(dealer.public_bytes())
    assert not raw.has_secret_key() and not raw.is_private()
    assert not raw.has_galois_keys() and not raw.has_relin_keys()


def test_server_context_can_neither_decrypt_nor_encrypt(dealer: SecretContext, server: PublicContext) -> None:
    blobs, _ = dealer.encrypt(np.ones(3), params=LEAN, clip_range=1.0)
    with pytest.raises(ValueError, match="doesn't hold a secret_key"):
        server.load(blobs[0]).decrypt()
    with pytest.raises(ValueError, match="doesn't support encryption"):
        ts.ckks_vector(ts.context_from(dealer.public_bytes()), [1.0])


def test_public_context_refuses_secret_bytes(dealer: SecretContext) -> None:
    with pytest.raises(ProtocolError, match="secret key"):
        PublicContext(dealer.secret_bytes())


def test_public_context_refuses_garbage() -> None:
    with pytest.raises(ProtocolError, match="could not load the CKKS public context"):
        PublicContext(b"not a context")


def test_secret_context_requires_a_secret_key(dealer: SecretContext) -> None:
    with pytest.raises(ConfigError, match="a SecretContext needs a context with a secret key"):
        SecretContext.from_bytes(dealer.public_bytes(), LEAN)
    with pytest.raises(ConfigError, match="a SecretContext needs a context with a secret key"):
        SecretContext(ts.context_from(dealer.public_bytes()))
    with pytest.raises(ProtocolError, match="could not load the CKKS secret context"):
        SecretContext.from_bytes(b"not a context", LEAN)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_secret_context_refuses_pickle(protocol: int, dealer: SecretContext) -> None:
    with pytest.raises(TypeError, match="SecretContext holds secret key material and cannot be pickled"):
        pickle.dumps(dealer, protocol=protocol)


def test_secret_context_repr_is_redacted(dealer: SecretContext) -> None:
    assert repr(dealer) == "SecretContext(<redacted>)"


def test_fresh_contexts_have_fresh_keys(dealer: SecretContext) -> None:
    assert SecretContext.generate(LEAN).secret_bytes() != dealer.secret_bytes()


# --- secure sums --------------------------------------------------------------------------------


@pytest.mark.parametrize("n_values", [5000, 4094, 4095, 8190])
@pytest.mark.parametrize("n", [1, 3, 10])
def test_encrypt_add_decrypt_equals_the_float64_sum(
    n: int, n_values: int, dealer: SecretContext, clients: list[SecretContext], server: PublicContext
) -> None:
    rng = np.random.default_rng(1000 * n + n_values)
    inputs = [rng.uniform(-1.2 * CLIP_RANGE, 1.2 * CLIP_RANGE, size=n_values) for _ in range(n)]
    uploads, counts = [], []
    for client, values in zip(clients[:n], inputs, strict=False):
        blobs, clipped = client.encrypt(values, params=LEAN, clip_range=CLIP_RANGE)
        assert len(blobs) == LEAN.chunks(n_values)
        uploads.append(blobs)
        counts.append(clipped)
    assert counts == [int(np.sum(np.abs(v) > CLIP_RANGE)) for v in inputs]
    assert sum(counts) > 0  # the inputs do exercise clipping

    aggregate = _aggregate(server, uploads)
    sums, clipped_total = dealer.decrypt_sum(aggregate, n_values=n_values, n_contributors=n)

    expected = np.sum([np.clip(v, -CLIP_RANGE, CLIP_RANGE) for v in inputs], axis=0)
    assert sums.shape == (n_values,)
    assert np.max(np.abs(sums - expected)) <= LEAN.error_bound(n, clip_range=CLIP_RANGE)
    assert clipped_total == sum(counts)
    # any client holding the shared key decrypts the same aggregate
    assert np.array_equal(clients[-1].decrypt_sum(aggregate, n_values=n_values, n_contributors=n)[0], sums)


def test_sum_of_nothing_but_lanes(dealer: SecretContext, server: PublicContext) -> None:
    uploads = [dealer.encrypt(np.zeros(0), params=LEAN, clip_range=1.0)[0] for _ in range(2)]
    sums, clipped_total = dealer.decrypt_sum(_aggregate(server, uploads), n_values=0, n_contributors=2)
    assert sums.shape == (0,) and clipped_total == 0


def test_decrypting_with_another_key_fails_the_integrity_check(dealer: SecretContext, server: PublicContext) -> None:
    uploads = [dealer.encrypt(np.full(5000, 0.5), params=LEAN, clip_range=1.0)[0] for _ in range(3)]
    aggregate = _aggregate(server, uploads)
    stranger = SecretContext.generate(LEAN)
    with pytest.raises(ProtocolError, match="integrity"):
        stranger.decrypt_sum(aggregate, n_values=5000, n_contributors=3)


def test_wrong_contributor_count_fails_the_integrity_check(dealer: SecretContext, server: PublicContext) -> None:
    aggregate = _aggregate(server, [dealer.encrypt(np.ones(10), params=LEAN, clip_range=1.0)[0] for _ in range(3)])
    dealer.decrypt_sum(aggregate, n_values=10, n_contributors=3)
    for claimed in (2, 4):
        with pytest.raises(ProtocolError, match="integrity check: count lane decrypts to 3, expected"):
            dealer.decrypt_sum(aggregate, n_values=10, n_contributors=claimed)


def test_grossly_corrupted_ciphertext_is_refused(dealer: SecretContext) -> None:
    blob = bytearray(dealer.encrypt(np.ones(10), params=LEAN, clip_range=1.0)[0][0])
    blob[len(blob) // 2 :] = bytes(len(blob) - len(blob) // 2)  # zero the second half
    with pytest.raises(ProtocolError, match="integrity|could not decrypt"):
        dealer.decrypt_sum([bytes(blob)], n_values=10, n_contributors=1)


def test_too_few_values_in_the_aggregate_raise(dealer: SecretContext, server: PublicContext) -> None:
    aggregate = _aggregate(server, [dealer.encrypt(np.ones(10), params=LEAN, clip_range=1.0)[0]])
    with pytest.raises(ProtocolError, match="CKKS aggregate holds 12 values, expected 4102"):
        dealer.decrypt_sum(aggregate, n_values=4100, n_contributors=1)


def test_server_add_rejects_mismatched_uploads(dealer: SecretContext, server: PublicContext) -> None:
    two_chunks = [server.load(b) for b in dealer.encrypt(np.ones(5000), params=LEAN, clip_range=1.0)[0]]
    one_chunk = [server.load(b) for b in dealer.encrypt(np.ones(10), params=LEAN, clip_range=1.0)[0]]
    other_size = [server.load(b) for b in dealer.encrypt(np.ones(20), params=LEAN, clip_range=1.0)[0]]
    assert PublicContext.add(None, one_chunk) is one_chunk
    with pytest.raises(ProtocolError, match="expected 2 ciphertexts, got 1"):
        PublicContext.add(two_chunks, one_chunk)
    with pytest.raises(ProtocolError, match="ciphertexts could not be added"):
        PublicContext.add(one_chunk, other_size)
    # a failed addition leaves the accumulator usable and unchanged
    acc = PublicContext.add(one_chunk, one_chunk)
    sums, _ = dealer.decrypt_sum([v.serialize() for v in acc], n_values=10, n_contributors=2)
    assert np.max(np.abs(sums - 2.0)) <= LEAN.error_bound(2, clip_range=1.0)
    sums, _ = dealer.decrypt_sum([v.serialize() for v in one_chunk], n_values=10, n_contributors=1)
    assert np.max(np.abs(sums - 1.0)) <= LEAN.error_bound(1, clip_range=1.0)


def test_server_refuses_a_malformed_ciphertext(server: PublicContext) -> None:
    with pytest.raises(ProtocolError, match="malformed CKKS ciphertext"):
        server.load(b"not a ciphertext")


# --- capacity and error bound -------------------------------------------------------------------


def test_scale_is_lowered_to_keep_the_sum_inside_the_modulus() -> None:
    """lean: data modulus 60 bits, 2 bits of headroom: n * R * 2^scale must stay below 2^58."""
    assert LEAN.scale_for(n_clients=2**17, clip_range=1.0) == 40  # 2^17 * 2^40 < 2^58
    assert LEAN.scale_for(n_clients=2**18, clip_range=1.0) == 40  # 2^58: one bit below q/2 = 2^59
    assert LEAN.scale_for(n_clients=2**19, clip_range=1.0) == 39
    assert LEAN.scale_for(n_clients=207, clip_range=1e4) == 37  # log2(2.07e6) = 20.98
    assert LEAN.scale_for(n_clients=1, clip_range=0.5) == 40  # the count lane needs range 1 anyway


def test_capacity_fires_when_no_usable_scale_is_left() -> None:
    LEAN.check_capacity(n_clients=2**10, clip_range=float(2**28))  # scale 58 - 38 = 20: still usable
    with pytest.raises(CapacityError, match="below 2\\^20.*clip_range"):
        LEAN.check_capacity(n_clients=2**10, clip_range=float(2**29))


def test_a_lowered_scale_still_sums_correctly() -> None:
    context = SecretContext.generate(LEAN)
    server = PublicContext(context.public_bytes())
    scale = LEAN.scale_for(n_clients=3, clip_range=1e6)
    assert scale < LEAN.scale_bits
    rng = np.random.default_rng(5)
    inputs = [rng.uniform(-1e6, 1e6, 100) for _ in range(3)]
    total = None
    for x in inputs:
        blobs, _ = context.encrypt(x, params=LEAN, clip_range=1e6, scale_bits=scale)
        total = PublicContext.add(total, [server.load(b) for b in blobs])
    sums, _ = context.decrypt_sum([v.serialize() for v in total], n_values=100, n_contributors=3)
    assert np.max(np.abs(sums - np.sum(inputs, axis=0))) <= LEAN.error_bound(3, clip_range=1e6, scale_bits=scale)


def test_check_capacity_scales_with_the_data_modulus() -> None:
    standard = PRESETS["standard"]
    assert standard.scale_for(n_clients=2**20, clip_range=1e6) == 40  # 138 bits of headroom
    with pytest.raises(CapacityError, match="2\\^138"):
        standard.check_capacity(n_clients=2**48, clip_range=float(2**80))


def test_error_bound_grows_linearly_with_clients_and_with_the_range() -> None:
    assert LEAN.error_bound(1, clip_range=1.0) == 8192 * 2.0**-40 + 2.0**-45
    assert LEAN.error_bound(10, clip_range=1.0) == 10 * LEAN.error_bound(1, clip_range=1.0)
    assert LEAN.error_bound(1, clip_range=0.5) == LEAN.error_bound(1, clip_range=1.0)  # the encoding floor
    assert LEAN.error_bound(1, clip_range=2.0**20) > 2.0**-26


def test_error_bound_holds_for_large_clip_ranges_that_check_capacity_allows() -> None:
    """The 'standard' preset's capacity check accepts clip_range = 2^28 for one client (2^68 <<
    2^138); decrypted float64 values then carry relative rounding of order 2^-50 from the
    encoding and decoding FFTs (about 1.8e-7 here), which the stated bound must cover (an
    earlier bound, n * N * 2^-scale_bits alone, stated 7.5e-9)."""
    params = PRESETS["standard"]
    clip_range = float(2**28)
    params.check_capacity(n_clients=1, clip_range=clip_range)
    context = SecretContext.generate(params)
    values = np.random.default_rng(3).uniform(-clip_range, clip_range, size=4094)
    blobs, _ = context.encrypt(values, params=params, clip_range=clip_range)
    sums, _ = context.decrypt_sum(blobs, n_values=values.size, n_contributors=1)
    error = float(np.max(np.abs(sums - values)))
    bound = params.error_bound(1, clip_range=clip_range)
    assert error <= bound, f"error {error:.3g} exceeds the stated error_bound = {bound:.3g} at clip_range 2^28"
