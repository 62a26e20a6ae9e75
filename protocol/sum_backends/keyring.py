"""Signed round keys and pairwise secrets: the key set-up shared by the mask and ckks backends.

A client's round public keys travel as :class:`SignedKeys`, signed with its Ed25519 identity
key over (session, round, epoch, client, keys). Every receiver verifies against the identity
directory, so a server that swaps a key is caught (threat_model.md claim M-SIGN). Pair keys
come from X25519 + HKDF with a label naming purpose, session, round, epoch and the pair.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from secure_fedgraph.crypto.envelope import open_sealed, seal
from secure_fedgraph.crypto.keys import IdentityKey, agree, derive_key, verify_signature
from secure_fedgraph.crypto.labels import Purpose, int_field, label
from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.sum_backends.mask_format import SHARE_COMMITMENT_BYTES
from secure_fedgraph.protocol.sum_backends.messages import Sealed, SignedKeys


def _statement(*, session: bytes, round: int, epoch: int, keys: SignedKeys) -> bytes:
    return label(
        Purpose.ADVERTISE, session, round, epoch, keys.client, keys.share_public, keys.mask_public, keys.seed_commitment
    )


def sign_keys(
    identity: IdentityKey,
    *,
    session: bytes,
    round: int,
    epoch: int,
    client: int,
    share_public: bytes,
    mask_public: bytes = b"",
    seed_commitment: bytes = b"",
) -> SignedKeys:
    unsigned = SignedKeys(client, share_public, mask_public, seed_commitment, b"")
    signature = identity.sign(_statement(session=session, round=round, epoch=epoch, keys=unsigned))
    return SignedKeys(client, share_public, mask_public, seed_commitment, signature)


def verify_keys(keys: SignedKeys, *, directory: Mapping[int, bytes], session: bytes, round: int, epoch: int) -> None:
    """Raise ProtocolError unless ``keys`` carry a valid signature of their claimed client."""
    identity = directory.get(keys.client)
    if identity is None:
        raise ProtocolError(f"keys advertised for unknown client {keys.client}")
    try:
        verify_signature(identity, keys.signature, _statement(session=session, round=round, epoch=epoch, keys=keys))
    except (InvalidSignature, ValueError) as exc:
        raise ProtocolError(
            f"the round keys of client {keys.client} do not carry its signature for round {round} epoch {epoch}: "
            "forged, swapped or replayed keys"
        ) from exc


def pair_key(private_key, peer_public: bytes, *, purpose: Purpose, session: bytes, round: int, epoch: int, a: int, b: int) -> bytes:
    """A 32-byte key shared by clients a and b (symmetric in a, b), bound to its purpose."""
    lo, hi = min(a, b), max(a, b)
    try:
        secret = agree(private_key, peer_public)
    except ValueError as exc:
        raise ProtocolError(f"key agreement between clients {lo} and {hi} failed: {exc}") from exc
    return derive_key(secret, label(purpose, session, round, epoch, lo, hi))


def pair_seed(key: bytes, *, session: bytes, round: int, epoch: int, sum_index: int, a: int, b: int) -> bytes:
    """The PRG key of the mask clients a and b add (with opposite signs) in one sum: HKDF of their
    pair key (:func:`pair_key`, purpose PAIRWISE_MASK) over session, round, key epoch, sum index
    and the ordered pair (symmetric in a, b).

    Revealing it opens that pair's mask in that sum only: when a client that contributed to an
    earlier sum of the epoch drops, its neighbours reveal their seeds with it for this sum
    instead of shares of its mask key, which would open its pair masks in every sum of the
    epoch (threat_model.md M-BOTH, M-DROPOUT).
    """
    lo, hi = min(a, b), max(a, b)
    return derive_key(key, label(Purpose.PAIR_SEED, session, round, epoch, sum_index, lo, hi))


def pair_seed_leaves(seeds: Mapping[int, bytes], *, session: bytes, round: int, epoch: int, sum_index: int, owner: int) -> list[bytes]:
    """The leaves of ``owner``'s commitment to its pair seeds of one sum (``seeds``: peer ->
    seed), in peer order: SHA-256 of a label naming the sum, the owner and the peer, and the seed.
    The root (crypto/merkle.py) goes with the masked input; a seed revealed later opens at its
    peer's position, so a client revealing another seed than it masked with is caught
    (threat_model.md M-LIAR). Seeds are uniform 256-bit secrets: the siblings in an opening say
    nothing of the seeds they hash."""
    common = label(Purpose.PAIR_SEED_COMMITMENT, session, round, epoch, sum_index, owner)
    return [_sha256(common, int_field(peer), seeds[peer]) for peer in sorted(seeds)]


def seal_for(
    key: bytes, payload: bytes, *, aad_purpose: Purpose, session: bytes, round: int, epoch: int, owner: int, holder: int, view: bytes = b""
) -> Sealed:
    """Seal ``payload`` from ``owner`` to ``holder``; ``view`` (the key epoch's view digest)
    binds it to what the owner saw, so a holder shown another view cannot open it."""
    aad = label(aad_purpose, session, round, epoch, owner, holder, view)
    return Sealed(owner, holder, seal(key, payload, aad))


def open_from(key: bytes, sealed: Sealed, *, aad_purpose: Purpose, session: bytes, round: int, epoch: int, view: bytes = b"") -> bytes:
    """Open an envelope; ProtocolError if it was tampered with, redirected, replayed, or sealed
    under another view of the key epoch."""
    aad = label(aad_purpose, session, round, epoch, sealed.owner, sealed.holder, view)
    try:
        return open_sealed(key, sealed.data, aad)
    except InvalidTag as exc:
        raise ProtocolError(
            f"envelope from client {sealed.owner} to {sealed.holder} fails authentication (tampered, redirected or replayed)"
        ) from exc


_ZERO_NONCE = bytes(12)  # an envelope key seals one envelope (envelope_key)


def envelope_key(pair: bytes, *, session: bytes, round: int, epoch: int, owner: int, holder: int) -> bytes:
    """The key of ``owner``'s share envelope to ``holder``: HKDF-Expand (RFC 5869, SHA-256, one
    block; ``hmac`` is OpenSSL's HMAC at a fraction of the per-call cost of an HKDF object) of the
    two clients' pair key (purpose SHARE_ENCRYPTION) over the direction. Each direction of a pair
    has its own key, and it seals one envelope of one key epoch, so its nonce can be zero; a
    complaint reveals it, which opens that envelope and nothing the complainer dealt."""
    return hmac.digest(pair, label(Purpose.ENVELOPE_KEY, session, round, epoch, owner, holder) + b"\x01", "sha256")


def _aad(owner: int, holder: int, seed_hash: bytes, key_hash: bytes, *, session: bytes, round: int, epoch: int, view: bytes) -> bytes:
    return label(Purpose.ENVELOPE, session, round, epoch, view, owner, holder) + seed_hash + key_hash  # the hashes: fixed-size fields


def seal_shares(key: bytes, shares: bytes, *, seed_hash: bytes, key_hash: bytes, session: bytes, round: int, epoch: int, view: bytes,
                owner: int, holder: int) -> Sealed:
    """A dealer's share envelope to ``holder``: AES-256-GCM under its :func:`envelope_key` (nonce
    zero: the key seals this envelope only), the AAD naming the key epoch, the dealer's view, the
    pair and the dealer's commitments to the two shares (threat_model.md M-LIAR).

    The GCM tag is what binds the dealer to its envelope and commitments. A holder whose key
    opens the envelope knows the dealer sealed it (the server, without the key, cannot alter the
    envelope or the commitments and keep the tag), so a complaint, which reveals that key, shows
    only what the dealer sealed. The server checks a complaint's key the same way: a holder would
    need another key under which the dealer's ciphertext and tag hold, a 2^-128 chance per try. A
    dealer that makes one envelope open under two keys gains nothing: the holder and the server
    both judge with the key the holder derives."""
    aad = _aad(owner, holder, seed_hash, key_hash, session=session, round=round, epoch=epoch, view=view)
    return Sealed(owner, holder, AESGCM(key).encrypt(_ZERO_NONCE, shares, aad))


def open_shares(key: bytes, sealed: Sealed, *, seed_hash: bytes, key_hash: bytes, session: bytes, round: int, epoch: int,
                view: bytes) -> bytes | None:
    """The shares in an envelope :func:`seal_shares` sealed under ``key`` with these commitments,
    or None where its tag does not hold (another key, commitments, view or pair, or altered)."""
    aad = _aad(sealed.owner, sealed.holder, seed_hash, key_hash, session=session, round=round, epoch=epoch, view=view)
    try:
        return AESGCM(key).decrypt(_ZERO_NONCE, sealed.data, aad)
    except InvalidTag:
        return None


def self_mask_key(seed: bytes, *, session: bytes, round: int, epoch: int, sum_index: int) -> bytes:
    """The PRG key of one client's self-mask for one sum, derived from its round seed.

    Revealing it opens that sum's self-mask only; the seed (which opens every sum of the
    epoch) is revealed only by Shamir recovery, for a client that went silent after sending
    its masked input.
    """
    return derive_key(seed, label(Purpose.SELF_MASK, session, round, epoch, sum_index))


def seed_commitment(seed: bytes, *, session: bytes, round: int, epoch: int, client: int) -> bytes:
    """SHA-256 commitment to a 256-bit self-mask seed, so a recovered seed can be checked."""
    return _sha256(label(Purpose.SEED_COMMITMENT, session, round, epoch, client), seed)


def consistency_statement(
    *, session: bytes, round: int, epoch: int, view: bytes, sum_index: int, live: tuple[int, ...], survivors: tuple[int, ...]
) -> bytes:
    """What each survivor signs in the consistency check (Bonawitz et al., round 3): a SHA-256
    digest of the labelled sets and the epoch's view, so signing and verifying cost the same for
    10 or 10,000 clients, and a signature made in one view never vouches in another."""
    return _sha256(label(Purpose.CONSISTENCY, session, round, epoch, view, sum_index, sorted(live), sorted(survivors)))


def _sha256(*parts: bytes) -> bytes:
    """SHA-256 (hashlib: the same OpenSSL primitive at a fraction of the per-call cost, which
    matters for the n commitments every client checks per sparse key epoch)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.digest()


def keys_hash(keys: SignedKeys) -> bytes:
    """A digest of one client's round keys (its share and mask public keys and its seed
    commitment), as they enter the view digest."""
    return _sha256(label(Purpose.KEYS, keys.client, keys.share_public, keys.mask_public, keys.seed_commitment))


def view_digest(
    *, session: bytes, round: int, epoch: int, participants: tuple[int, ...], members: tuple[int, ...], keys: tuple[bytes, ...],
    commitments: tuple[bytes, ...] = (), nonces: tuple[bytes, ...] = (),
) -> bytes:
    """What one key epoch is, as a client saw it: the announced participants, the members that
    advertised keys, the digest of each member's signed round keys (``keys``: :func:`keys_hash`
    in member order) and, with the sparse graph, every member's graph commitment and nonce. It
    seeds the sparse graph and goes into every share envelope and consistency statement, so
    clients shown different epochs (or different keys of one client) cannot vouch for, or hold
    shares of, each other."""
    return _sha256(label(Purpose.VIEW, session, round, epoch, participants, members, *keys, *commitments, *nonces))


def graph_commitment(nonce: bytes, keys: bytes, *, session: bytes, round: int, epoch: int, client: int) -> bytes:
    """A client's commitment to the 32-byte nonce it adds to the sparse graph's seed, and to its
    round keys (``keys``: their :func:`keys_hash`), so the view digest covers every member's keys
    though each client receives only its neighbours'."""
    return graph_commitments({client: nonce}, {client: keys}, session=session, round=round, epoch=epoch)[client]


def graph_commitments(nonces: Mapping[int, bytes], keys: Mapping[int, bytes], *, session: bytes, round: int, epoch: int) -> dict[int, bytes]:
    """:func:`graph_commitment` of many clients' nonces and key hashes at once: every client
    checks all n of them per sparse key epoch, so the label they share is encoded once (the same
    bytes as label(GRAPH_COMMITMENT, session, round, epoch, client))."""
    common = label(Purpose.GRAPH_COMMITMENT, session, round, epoch)
    return {client: _sha256(common, int_field(client), nonce, keys[client]) for client, nonce in nonces.items()}


@dataclass(frozen=True)
class SparseView:
    """A sparse key epoch's view digest, and the first participant (by id) whose revealed nonce
    and key hash do not open its graph commitment (None: all do)."""

    view: bytes
    mismatch: int | None


@functools.lru_cache(maxsize=8)
def sparse_view(*, session: bytes, round: int, epoch: int, participants: tuple[int, ...], commitments: bytes, nonces: bytes,
                key_hashes: bytes) -> SparseView:
    """Check every participant's nonce and key hash (``nonces``, ``key_hashes``: 32 bytes each in
    participant order) against its graph commitment (``commitments``, the same layout) and make
    the view digest (:func:`view_digest`, members = participants).

    Every client of a sparse epoch does this over all n participants, and the clients one host
    process answers for receive the same bytes: a pure function of public values, so the process
    computes it once (n SHA-256 per host, not per client; at n = 10,000 that is 4 x 10^4 instead
    of 10^8 a key set-up). Each client still refuses the epoch when ``mismatch`` is set.
    """
    size = len(commitments) // len(participants)
    split = lambda blob: tuple(blob[i : i + size] for i in range(0, len(blob), size))  # noqa: E731
    committed, revealed, hashes = split(commitments), split(nonces), split(key_hashes)
    expected = graph_commitments(dict(zip(participants, revealed, strict=True)), dict(zip(participants, hashes, strict=True)),
                                 session=session, round=round, epoch=epoch)
    mismatch = next((c for c, have in zip(participants, committed, strict=True) if expected[c] != have), None)
    view = view_digest(session=session, round=round, epoch=epoch, participants=participants, members=participants, keys=hashes,
                       commitments=committed, nonces=revealed)
    return SparseView(view, mismatch)


def share_commitment(share: bytes, *, kind: str, session: bytes, round: int, epoch: int, owner: int, holder: int) -> bytes:
    """The dealer's commitment to one Shamir share (``kind`` "seed" or "mask_key"), so the
    server can tell a holder that reveals a wrong share from one that reveals the dealt one.

    SHA-256 of a label naming the key epoch, the kind and the pair, and the share, truncated to
    128 bits (SHARE_COMMITMENT_BYTES): it travels once per neighbour and key set-up. What it must
    resist is a second preimage: a holder that reveals another share with the dealt share's
    commitment, 2^-128 per try, and the label makes every commitment a target of its own. A
    collision, which a dealer could search for at 2^64, gains it nothing: the holder reveals the
    share it was dealt, which meets the commitment either way, and what the shares rebuild is
    checked against the dealer's full-length commitments (its advertised key, its seed commitment)."""
    return _sha256(label(Purpose.SHARE_COMMITMENT, session, round, epoch, kind, owner, holder), share)[:SHARE_COMMITMENT_BYTES]


def self_mask_commitment(key: bytes, *, session: bytes, round: int, epoch: int, sum_index: int, client: int) -> bytes:
    """A client's commitment, sent with its masked input, to the self-mask key it will reveal."""
    return _sha256(label(Purpose.SELF_MASK_COMMITMENT, session, round, epoch, sum_index, client), key)
