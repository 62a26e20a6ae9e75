"""Signed round keys and pairwise secrets: the key set-up shared by the mask and ckks backends.

A client's round public keys travel as :class:`SignedKeys`, signed with its Ed25519 identity
key over (session, round, epoch, client, keys). Every receiver verifies against the identity
directory, so a server that swaps a key is caught (threat_model.md claim M-SIGN). Pair keys
come from X25519 + HKDF with a label naming purpose, session, round, epoch and the pair.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature, InvalidTag

from secure_fedgraph.crypto.envelope import open_sealed, seal
from secure_fedgraph.crypto.keys import IdentityKey, agree, derive_key, verify_signature
from secure_fedgraph.crypto.labels import Purpose, int_field, label
from secure_fedgraph.errors import ProtocolError
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


def envelope_key_commitment(key: bytes, *, session: bytes, round: int, epoch: int, owner: int, holder: int) -> bytes:
    """The dealer's commitment to the key sealing its envelope to ``holder``: a holder that
    complains reveals the key, and anyone can check it is the one committed to."""
    return _sha256(label(Purpose.ENVELOPE_KEY, session, round, epoch, owner, holder), key)


def envelope_statement(*, session: bytes, round: int, epoch: int, view: bytes, owner: int, holder: int, sealed: bytes, seed_hash: bytes,
                       key_hash: bytes, key_commitment: bytes) -> bytes:
    """What a dealer signs for each envelope it seals (threat_model.md M-LIAR): the envelope, the
    commitments to its two shares and to its key, in the dealer's view. A holder that cannot open
    the envelope, or finds other shares in it, complains with the key; the server opens it and
    excludes the dealer or, if the envelope holds what was signed, the holder. The signature is
    what keeps a server from making an honest holder complain about an honest dealer (by
    altering an envelope in transit) and so from learning the holder's shares."""
    return _sha256(label(Purpose.ENVELOPE, session, round, epoch, view, owner, holder, _sha256(sealed), seed_hash, key_hash, key_commitment))


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
    server can tell a holder that reveals a wrong share from one that reveals the dealt one."""
    return _sha256(label(Purpose.SHARE_COMMITMENT, session, round, epoch, kind, owner, holder), share)


def self_mask_commitment(key: bytes, *, session: bytes, round: int, epoch: int, sum_index: int, client: int) -> bytes:
    """A client's commitment, sent with its masked input, to the self-mask key it will reveal."""
    return _sha256(label(Purpose.SELF_MASK_COMMITMENT, session, round, epoch, sum_index, client), key)
