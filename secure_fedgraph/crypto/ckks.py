"""TenSEAL CKKS for secure sums: parameters, fresh keys, chunked vectors, and their bounds.

What each party holds (threat_model.md claims C-PUBLIC, C-FRESH): clients share one secret
context made fresh per run by a key dealer; the server holds a context serialised with *no*
keys at all (parameters only), enough to deserialise ciphertexts and add them, not to
decrypt or even encrypt. We use symmetric-key CKKS: every client must hold the secret key to
decrypt the aggregate anyway, and symmetric encryption is about twice as fast.

Two lanes are appended to every encrypted vector: a constant 1.0 (its sum is the number of
contributors, which decrypting with a wrong key or a corrupted ciphertext cannot reproduce)
and the fraction of the client's values that were clipped. Every ciphertext (chunk) also ends
in CHECK_LANES values the caller chooses: the protocol puts there numbers only key holders can
predict, so a decrypted aggregate shows whether it is exactly the sum of the contributors it
claims (protocol/sum_backends/ckks.py, threat_model.md C-CHECK).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tenseal as ts

from secure_fedgraph.crypto.fixed_point import clip_and_count
from secure_fedgraph.crypto.keys import SecretMaterial
from secure_fedgraph.errors import CapacityError, ConfigError, ProtocolError

# Largest total coefficient-modulus bits for 128-bit security (HomomorphicEncryption.org
# standard, as enforced by SEAL's CoeffModulus.MaxBitCount).
MAX_COEFF_BITS_128 = {4096: 109, 8192: 218, 16384: 438, 32768: 881}
EXTRA_LANES = 2  # count lane, clipped-fraction lane
CHECK_LANES = 2  # at the end of every chunk: values the protocol derives from a key the server lacks


@dataclass(frozen=True)
class CkksParams:
    """CKKS parameters. The last modulus is SEAL's special prime; the others hold data.

    Attributes:
        poly_modulus_degree: N; each ciphertext packs N/2 values.
        coeff_mod_bit_sizes: bit sizes of the coefficient moduli.
        scale_bits: values are encoded at scale 2^scale_bits.
    """

    poly_modulus_degree: int
    coeff_mod_bit_sizes: tuple[int, ...]
    scale_bits: int

    def __post_init__(self) -> None:
        if self.poly_modulus_degree not in MAX_COEFF_BITS_128:
            raise ConfigError(f"poly_modulus_degree must be one of {sorted(MAX_COEFF_BITS_128)}, got {self.poly_modulus_degree}")
        if len(self.coeff_mod_bit_sizes) < 2:
            raise ConfigError(f"coeff_mod_bit_sizes needs at least two moduli (data + special prime), got {self.coeff_mod_bit_sizes}")
        total, limit = sum(self.coeff_mod_bit_sizes), MAX_COEFF_BITS_128[self.poly_modulus_degree]
        if total > limit:
            raise ConfigError(
                f"coeff_mod_bit_sizes sum to {total} bits, above the 128-bit-security limit of {limit} for "
                f"poly_modulus_degree={self.poly_modulus_degree}; drop a modulus or raise poly_modulus_degree"
            )
        if not 20 <= self.scale_bits < self.coeff_mod_bit_sizes[0]:
            raise ConfigError(
                f"scale_bits must be in [20, first modulus = {self.coeff_mod_bit_sizes[0]}), got {self.scale_bits}"
            )

    @property
    def slots(self) -> int:
        return self.poly_modulus_degree // 2

    @property
    def data_slots(self) -> int:
        """Slots per ciphertext left for values and the extra lanes (the rest are check lanes)."""
        return self.slots - CHECK_LANES

    @property
    def data_modulus_bits(self) -> int:
        return sum(self.coeff_mod_bit_sizes[:-1])

    def chunks(self, n_values: int) -> int:
        """Ciphertexts needed for n values plus the two extra lanes."""
        return math.ceil((n_values + EXTRA_LANES) / self.data_slots)

    def chunk_sizes(self, n_values: int) -> list[int]:
        """How many slots each ciphertext of n values fills, its check lanes included."""
        total = n_values + EXTRA_LANES
        return [min(self.data_slots, total - i) + CHECK_LANES for i in range(0, total, self.data_slots)]

    MIN_SCALE_BITS = 20

    def scale_for(self, *, n_clients: int, clip_range: float) -> int:
        """The encoding scale (bits) for a sum of n values in [-clip_range, clip_range]:
        scale_bits, lowered when needed so n * clip_range * 2^scale stays below the data
        modulus with 2 bits of headroom (a sum of large statistics trades precision for range).

        Raises:
            CapacityError: even 2^20 would overflow; names clip_range and the moduli.
        """
        magnitude = math.log2(n_clients * max(clip_range, 1.0))
        scale = min(self.scale_bits, math.floor(self.data_modulus_bits - 2 - magnitude))
        if scale < self.MIN_SCALE_BITS:
            raise CapacityError(
                f"CKKS sum of {n_clients} clients at clip_range={clip_range} needs 2^{magnitude:.1f} of range, leaving "
                f"a scale below 2^{self.MIN_SCALE_BITS} in the 2^{self.data_modulus_bits - 2} headroom of the data "
                f"modulus; lower clip_range, or use larger coeff_mod_bit_sizes (e.g. the 'standard' preset)"
            )
        return scale

    def check_capacity(self, *, n_clients: int, clip_range: float) -> None:
        """Raise CapacityError if no usable scale fits (see :meth:`scale_for`)."""
        self.scale_for(n_clients=n_clients, clip_range=clip_range)

    def error_bound(self, n_clients: int, *, clip_range: float, scale_bits: int | None = None) -> float:
        """Stated absolute error per element of a decrypted sum of n fresh encryptions.

        Two parts per ciphertext: the encryption noise, read through the canonical embedding,
        stays below N * 2^-scale_bits per slot with overwhelming probability (about
        6 sigma sqrt(N) with sigma = 3.2, rounded up to N); and the float64 FFTs of encoding
        and decoding lose about 2^-50 relative to the values, bounded here by
        max(clip_range, 1) * 2^-45. Additions add the errors. tests/crypto/test_ckks.py checks it.
        """
        scale = self.scale_bits if scale_bits is None else scale_bits
        return n_clients * (self.poly_modulus_degree * 2.0**-scale + max(clip_range, 1.0) * 2.0**-45)


PRESETS = {
    # Add-only: one 60-bit data modulus plus the special prime. 8.2x float32 bytes.
    "lean": CkksParams(8192, (60, 60), 40),
    # The TenSEAL tutorial parameters: depth for multiplications, 20.7x float32 bytes.
    "standard": CkksParams(8192, (60, 40, 40, 60), 40),
}


class SecretContext(SecretMaterial):
    """A TenSEAL context holding the shared CKKS secret key (clients only)."""

    def __init__(self, context: ts.Context) -> None:
        if not context.has_secret_key():
            raise ConfigError("a SecretContext needs a context with a secret key")
        self._context = context

    @classmethod
    def generate(cls, params: CkksParams) -> SecretContext:
        """Fresh keys from the OS randomness (SEAL's default PRNG seeding)."""
        context = ts.context(
            ts.SCHEME_TYPE.CKKS,
            params.poly_modulus_degree,
            coeff_mod_bit_sizes=list(params.coeff_mod_bit_sizes),
            encryption_type=ts.ENCRYPTION_TYPE.SYMMETRIC,
        )
        context.global_scale = 2.0**params.scale_bits
        return cls(context)

    @classmethod
    def from_bytes(cls, data: bytes, params: CkksParams) -> SecretContext:
        try:
            context = ts.context_from(data)
        except Exception as exc:  # TenSEAL raises plain Exceptions for malformed input
            raise ProtocolError(f"could not load the CKKS secret context: {exc}") from None
        context.global_scale = 2.0**params.scale_bits
        return cls(context)

    def secret_bytes(self) -> bytes:
        """Serialised secret context; only ever sealed to a peer, never written in clear."""
        return self._context.serialize(save_secret_key=True)

    def public_bytes(self) -> bytes:
        """Parameters only: no secret, public, Galois or relinearisation key."""
        return self._context.serialize(
            save_public_key=False, save_secret_key=False, save_galois_keys=False, save_relin_keys=False
        )

    def encrypt(
        self, values: np.ndarray, *, params: CkksParams, clip_range: float, scale_bits: int | None = None,
        check: Callable[[int, np.ndarray], np.ndarray] | None = None,
    ) -> tuple[list[bytes], int]:
        """Clip, append the extra lanes, encrypt in chunks of ``params.data_slots`` lanes, each
        followed by ``check(chunk index, its lanes)`` (CHECK_LANES values; zeros if None), at
        2^scale_bits (default: the parameters'); return (ciphertexts, clipped)."""
        clipped, count = clip_and_count(values, clip_range)
        fraction = count / max(clipped.size, 1)
        lanes = np.concatenate([clipped.ravel(), [1.0, fraction]])
        step = params.data_slots
        scale = 2.0 ** (params.scale_bits if scale_bits is None else scale_bits)
        chunks = []
        for j, i in enumerate(range(0, lanes.size, step)):
            data = lanes[i : i + step]
            tail = np.zeros(CHECK_LANES) if check is None else np.asarray(check(j, data), dtype=np.float64)
            if tail.shape != (CHECK_LANES,):
                raise ConfigError(f"check lanes of chunk {j} must have shape {(CHECK_LANES,)}, got {tail.shape}")
            chunks.append(ts.ckks_vector(self._context, np.concatenate([data, tail]), scale))
        return [c.serialize() for c in chunks], count

    def decrypt_sum(self, ciphertexts: Sequence[bytes], *, n_values: int, n_contributors: int) -> tuple[np.ndarray, int]:
        """Decrypt an aggregate; check its count lane; return (sums, total clipped values)."""
        values, clipped, _ = self.decrypt_checked(ciphertexts, n_values=n_values, n_contributors=n_contributors)
        return values, clipped

    def decrypt_checked(
        self, ciphertexts: Sequence[bytes], *, n_values: int, n_contributors: int
    ) -> tuple[np.ndarray, int, list[tuple[np.ndarray, np.ndarray]]]:
        """Decrypt an aggregate; check its count lane; return (sums, total clipped values, and per
        chunk its decrypted lanes and summed check lanes, for the caller's own check).

        Raises:
            ProtocolError: the count lane does not equal the number of contributors: the
                aggregate was made under another key, or a ciphertext was corrupted.
        """
        parts, checks = [], []
        for blob in ciphertexts:
            try:
                chunk = np.asarray(ts.ckks_vector_from(self._context, blob).decrypt(), dtype=np.float64)
            except Exception as exc:
                raise ProtocolError(f"could not decrypt the CKKS aggregate: {exc}") from None
            if chunk.size <= CHECK_LANES:
                raise ProtocolError(f"a CKKS ciphertext of the aggregate holds {chunk.size} values, too few for its check lanes")
            parts.append(chunk[:-CHECK_LANES])
            checks.append(chunk[-CHECK_LANES:])
        lanes = np.concatenate(parts) if parts else np.zeros(0)
        if lanes.size < n_values + EXTRA_LANES:
            raise ProtocolError(f"CKKS aggregate holds {lanes.size} values, expected {n_values + EXTRA_LANES}")
        count = lanes[n_values]
        if not abs(count - n_contributors) < 0.25:
            raise ProtocolError(
                f"CKKS aggregate failed its integrity check: count lane decrypts to {count:.3g}, expected "
                f"{n_contributors} contributors (wrong key, or corrupted ciphertexts)"
            )
        clipped_total = int(round(lanes[n_values + 1] * max(n_values, 1)))
        return lanes[:n_values], clipped_total, list(zip(parts, checks, strict=True))


class PublicContext:
    """The server's context: parameters only, asserted to hold no secret key."""

    def __init__(self, data: bytes) -> None:
        try:
            context = ts.context_from(data)
        except Exception as exc:
            raise ProtocolError(f"could not load the CKKS public context: {exc}") from None
        if context.has_secret_key() or context.is_private():
            raise ProtocolError("the CKKS context sent to the server contains a secret key; refusing it")
        self._context = context

    @property
    def has_secret_key(self) -> bool:
        return self._context.has_secret_key()

    def load(self, blob: bytes) -> ts.CKKSVector:
        try:
            return ts.ckks_vector_from(self._context, blob)
        except Exception as exc:
            raise ProtocolError(f"malformed CKKS ciphertext: {exc}") from None

    @staticmethod
    def add(accumulator: list[ts.CKKSVector] | None, vectors: list[ts.CKKSVector]) -> list[ts.CKKSVector]:
        """Element-wise ciphertext sum as new objects, so a failing addition leaves the
        accumulator untouched; raises ProtocolError on mismatched ciphertexts."""
        if accumulator is None:
            return vectors
        if len(accumulator) != len(vectors):
            raise ProtocolError(f"expected {len(accumulator)} ciphertexts, got {len(vectors)}")
        try:
            return [a + b for a, b in zip(accumulator, vectors, strict=True)]
        except Exception as exc:
            raise ProtocolError(f"ciphertexts could not be added (mismatched parameters or sizes): {exc}") from None
