"""Wire messages of the secure-sum protocol, as frozen dataclasses (Header and Ack are shared:
see :mod:`secure_fedgraph.protocol.core.messages`).

Field names match proto/secure_fedgraph/wire/secure_sum.proto one for one; the codec maps
between them and tests/protocol/transports/test_codec.py round-trips every message. Every message
starts with a Header: session, round, step (strictly increasing per session, so replays are
refused), stage and sender (-1 for the server).

Request/response pairs, per stage (server -> client, client -> server):

=============  ======================  =======================
stage          request                 response
=============  ======================  =======================
ADVERTISE      AdvertiseRequest        AdvertiseResponse
GRAPH          GraphRequest            GraphResponse
SHARE_KEYS     ShareKeysRequest        ShareKeysResponse
KEY_DEAL       KeyDealRequest          KeyDealResponse
KEY_INSTALL    KeyInstallRequest       Ack
INPUT          InputRequest            InputResponse
CONSISTENCY    ConsistencyRequest      ConsistencyResponse
PAIR_SEEDS     PairSeedsRequest        PairSeedsResponse
UNMASK         UnmaskRequest           UnmaskResponse
RECOVER        RecoverRequest          RecoverResponse
DELIVER        DeliverRequest          DeliverResponse
VERIFY         VerifyRequest           VerifyResponse
=============  ======================  =======================
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from secure_fedgraph.crypto.fixed_point import FixedPoint
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.sum_backends.mask_format import (
    COMMITMENTS_AT,
    COMMITTED_BYTES,
    COMMITTED_FIELDS,
    DEALT_BODY_BYTES,
    DEALT_HEAD_BYTES,
    DEALT_RECORD_BYTES,
    SEALED_BYTES,
    SHARE_COMMITMENT_BYTES,
)
from secure_fedgraph.protocol.core.spec import SumSpec, TensorSpec
from secure_fedgraph.protocol.core.messages import SERVER, Ack, Header
from secure_fedgraph.protocol.core.stages import Stage

@dataclass(frozen=True)
class SignedKeys:
    """A client's round public keys, signed with its Ed25519 identity key."""

    client: int
    share_public: bytes
    mask_public: bytes  # empty for ckks
    seed_commitment: bytes  # SHA-256 commitment to the self-mask seed; empty for ckks
    signature: bytes


@dataclass(frozen=True)
class Sealed:
    """An AES-GCM envelope from ``owner`` to ``holder``, relayed by the server."""

    owner: int
    holder: int
    data: bytes


@dataclass(frozen=True)
class Share:
    """A Shamir share of ``owner``'s secret, revealed to the server."""

    owner: int
    value: bytes


@dataclass(frozen=True)
class Signature:
    client: int
    signature: bytes


@dataclass(frozen=True)
class ShareCommitment:
    """The dealer's (owner's) commitments to the two Shamir shares it sealed to ``holder``. The
    envelope's tag covers them (keyring.seal_shares): what makes a holder's complaint about the
    envelope checkable by the server once it reveals the key (threat_model.md M-LIAR)."""

    owner: int
    holder: int
    seed_hash: bytes
    key_hash: bytes


_DEALT_HEAD = struct.Struct(">II")  # a dealt record's owner and holder: DEALT_HEAD_BYTES
_DEALT_FIELDS = (SEALED_BYTES, *COMMITTED_FIELDS)  # sealed data, seed_hash, key_hash


@dataclass(frozen=True)
class DealtShares:
    """Share envelopes with their dealers' commitments (:class:`Sealed` and
    :class:`ShareCommitment` of one owner and holder), as fixed-size records in one bytes value:
    owner and holder (big-endian uint32), the envelope (its GCM tag included) and the two share
    commitments (mask_format.DEALT_RECORD_BYTES each: 128).

    Why records and not repeated messages: a key set-up relays k envelopes per client, 242,000 at
    n = 1,000, and each went through protobuf sub-messages and Python objects four times (dealer,
    server in, server out, holder); the server now counts a dealer's records, adds their owner and
    holder (:class:`DealtToNeighbours`) and moves bytes. The
    layout also leaves nothing to check about an envelope without its commitments, or one of
    another size: neither can be written."""

    records: bytes = b""

    def __post_init__(self) -> None:
        if len(self.records) % DEALT_RECORD_BYTES:
            raise ConfigError(f"dealt shares must be whole {DEALT_RECORD_BYTES}-byte records, got {len(self.records)} bytes")

    @staticmethod
    def record(sealed: Sealed, committed: ShareCommitment) -> bytes:
        """One envelope and its commitments as a record; ConfigError if they do not fit it."""
        return _head(sealed.owner, sealed.holder) + _body(sealed, committed)

    @classmethod
    def of(cls, pairs: Iterable[tuple[Sealed, ShareCommitment]]) -> DealtShares:
        return cls(b"".join(cls.record(s, c) for s, c in pairs))

    def __len__(self) -> int:
        return len(self.records) // DEALT_RECORD_BYTES

    def heads(self) -> list[tuple[int, int]]:
        """(owner, holder) of each record, in order."""
        return [_DEALT_HEAD.unpack_from(self.records, at) for at in range(0, len(self.records), DEALT_RECORD_BYTES)]

    def pairs(self) -> tuple[tuple[Sealed, ShareCommitment], ...]:
        """Each record as (envelope, commitments), in order."""
        out, r = [], self.records
        s = SHARE_COMMITMENT_BYTES
        for at in range(0, len(r), DEALT_RECORD_BYTES):
            owner, holder = _DEALT_HEAD.unpack_from(r, at)
            h = at + COMMITMENTS_AT
            out.append((Sealed(owner, holder, r[at + DEALT_HEAD_BYTES : h]), ShareCommitment(owner, holder, r[h : h + s], r[h + s : h + COMMITTED_BYTES])))
        return tuple(out)


def _head(owner: int, holder: int) -> bytes:
    try:
        return _DEALT_HEAD.pack(owner, holder)
    except struct.error:
        raise ConfigError(f"client ids {owner}, {holder} do not fit a dealt record") from None


def _body(sealed: Sealed, committed: ShareCommitment) -> bytes:
    """An envelope and its commitments as a record's body; ConfigError if they do not fit it."""
    fields = (sealed.data, committed.seed_hash, committed.key_hash)
    if (sealed.owner, sealed.holder) != (committed.owner, committed.holder) or tuple(map(len, fields)) != _DEALT_FIELDS:
        raise ConfigError(f"envelope {sealed.owner}->{sealed.holder} and its commitments do not fit a dealt record")
    return b"".join(fields)


@dataclass(frozen=True)
class DealtToNeighbours:
    """One dealer's share envelopes as it sends them up: one to each of its neighbours, in id
    order, each with its commitments (mask_format.DEALT_BODY_BYTES a record: 120), without
    :class:`DealtShares`' owner and holder.

    Why no head: the owner is the sender and its holders are its neighbours, which the server
    knows (the graph), so the heads said nothing the server did not have, at 8 bytes a neighbour
    (448 bytes a client and key set-up at n = 100, 6% of what a client sends beyond its input).
    The server adds them (:meth:`addressed`) before it relays. Who an envelope is for is bound
    where it is checked: it is sealed under that direction's own key (keyring.envelope_key), its
    AAD naming owner and holder (keyring.seal_shares), so one in another neighbour's place does
    not open for that neighbour, who sets it aside."""

    records: bytes = b""

    def __post_init__(self) -> None:
        if len(self.records) % DEALT_BODY_BYTES:
            raise ConfigError(f"dealt shares must be whole {DEALT_BODY_BYTES}-byte records, got {len(self.records)} bytes")

    @classmethod
    def of(cls, pairs: Iterable[tuple[Sealed, ShareCommitment]]) -> DealtToNeighbours:
        """The records of ``pairs`` (each envelope with its commitments), in the order given: the
        holders' id order."""
        return cls(b"".join(_body(s, c) for s, c in pairs))

    def __len__(self) -> int:
        return len(self.records) // DEALT_BODY_BYTES

    def to_holders(self, owner: int, holders: Sequence[int]) -> list[tuple[int, bytes]]:
        """(holder, record) for each record, the i-th from ``owner`` to the i-th of ``holders``,
        each a :class:`DealtShares` record (with owner and holder): what the server stores and
        relays; ConfigError unless there is one holder per record."""
        if len(holders) != len(self):
            raise ConfigError(f"{len(self)} dealt records for {len(holders)} holders")
        body = memoryview(self.records)
        return [(holder, _head(owner, holder) + body[i * DEALT_BODY_BYTES:(i + 1) * DEALT_BODY_BYTES]) for i, holder in enumerate(holders)]

    def addressed(self, owner: int, holders: Sequence[int]) -> DealtShares:
        """The records as one :class:`DealtShares` (see :meth:`to_holders`)."""
        return DealtShares(b"".join(record for _, record in self.to_holders(owner, holders)))


@dataclass(frozen=True)
class Complaint:
    """A holder's complaint that ``dealer``'s envelope to it does not hold the shares it committed
    to: the envelope's key (that direction's only), under which it opens, so the server can open
    it and see."""

    dealer: int
    key: bytes


@dataclass(frozen=True)
class AdvertiseRequest:
    header: Header
    epoch: int
    participants: tuple[int, ...]
    graph: str
    degree: int
    threshold: int
    min_survivors: int
    max_dropped: int = 0  # mask: most neighbours of a client that may be missing from a sum's survivors
    streaming: bool = False  # mask: sums marked streaming take the streaming variant


@dataclass(frozen=True)
class AdvertiseResponse:
    header: Header
    keys: SignedKeys
    graph_commitment: bytes = b""  # mask, sparse graph: commitment to this client's graph nonce


@dataclass(frozen=True)
class GraphRequest:
    """Sparse graph: every participant's 32-byte commitment, concatenated in participant order,
    fixed before any nonce is revealed."""

    header: Header
    commitments: bytes


@dataclass(frozen=True)
class GraphResponse:
    header: Header
    nonce: bytes


@dataclass(frozen=True)
class ShareKeysRequest:
    header: Header
    peers: tuple[SignedKeys, ...]
    nonces: bytes = b""  # sparse graph: every participant's revealed 32-byte nonce, concatenated in participant order
    key_hashes: bytes = b""  # sparse graph: every participant's keys_hash (32 bytes), in participant order; its commitment covers it


@dataclass(frozen=True)
class ShareKeysResponse:
    header: Header
    dealt: DealtToNeighbours  # one record per neighbour, in id order: the envelope sealed to it and its commitments


@dataclass(frozen=True)
class KeyDealRequest:
    header: Header
    peers: tuple[SignedKeys, ...]


@dataclass(frozen=True)
class KeyDealResponse:
    header: Header
    public_context: bytes  # parameters only, for the server
    sealed_context: bytes  # the secret context, AES-GCM under a fresh content key
    sealed: tuple[Sealed, ...]  # the content key, sealed to each peer


@dataclass(frozen=True)
class KeyInstallRequest:
    header: Header
    dealer: SignedKeys
    sealed: Sealed  # the content key, sealed to this client
    sealed_context: bytes


@dataclass(frozen=True)
class InputRequest:
    header: Header
    sum_index: int
    spec: SumSpec
    encoding: FixedPoint | None  # mask only
    live: tuple[int, ...]
    dealt: DealtShares = DealtShares()  # mask: the envelopes dealt to this client with their commitments, on the first sum of a key epoch only


@dataclass(frozen=True)
class InputResponse:
    header: Header
    payload: np.ndarray | None  # plain: float vector; mask: ring vector
    ciphertexts: tuple[bytes, ...]  # ckks
    self_mask_commitment: bytes = b""  # mask, full protocol: commitment to the self-mask key of this sum
    complaints: tuple[Complaint, ...] = ()  # mask, first sum of a key epoch: envelopes that opened but did not hold the committed shares
    pair_seed_root: bytes = b""  # mask, full protocol: Merkle root over this sum's pair seeds with the live neighbours


@dataclass(frozen=True)
class ConsistencyRequest:
    header: Header
    survivors: tuple[int, ...]


@dataclass(frozen=True)
class ConsistencyResponse:
    header: Header
    signature: bytes


@dataclass(frozen=True)
class PairSeed:
    """A survivor's pair seed of this sum with ``peer`` (a neighbour that dropped after
    contributing to an earlier sum of the key epoch), and its opening against the survivor's
    commitment: the Merkle siblings, bottom up, 32 bytes each (crypto/merkle.py)."""

    peer: int
    seed: bytes
    path: bytes


@dataclass(frozen=True)
class PairSeedsRequest:
    header: Header
    signatures: tuple[Signature, ...]  # consistency signatures vouching for the dropped neighbours


@dataclass(frozen=True)
class PairSeedsResponse:
    header: Header
    pair_seeds: tuple[PairSeed, ...]


@dataclass(frozen=True)
class UnmaskRequest:
    header: Header
    signatures: tuple[Signature, ...]


@dataclass(frozen=True)
class UnmaskResponse:
    header: Header
    self_mask_key: bytes
    mask_key_shares: tuple[Share, ...]


@dataclass(frozen=True)
class RecoverRequest:
    header: Header
    missing: tuple[int, ...]
    signatures: tuple[Signature, ...]  # consistency signatures vouching for the missing clients


@dataclass(frozen=True)
class RecoverResponse:
    header: Header
    self_seed_shares: tuple[Share, ...]


@dataclass(frozen=True)
class DeliverRequest:
    header: Header
    sum_index: int
    contributors: tuple[int, ...]
    aggregate: np.ndarray | None  # plain: float sum; mask: ring sum
    ciphertexts: tuple[bytes, ...]  # ckks: encrypted sum
    clipped: int | None
    signatures: tuple[Signature, ...] = ()  # ckks: contributors' signatures on the contributor set


@dataclass(frozen=True)
class DeliverResponse:
    """``accepted`` False (ckks): the aggregate failed its check lanes at this client, which
    keeps nothing of it; the server then has each contribution checked (VERIFY)."""

    header: Header
    accepted: bool
    reason: str = ""


@dataclass(frozen=True)
class VerifyRequest:
    """ckks: check one contributor's ciphertexts of a sum (this client decrypts them and
    answers only whether their check lanes are that contributor's)."""

    header: Header
    sum_index: int
    owner: int
    ciphertexts: tuple[bytes, ...]


@dataclass(frozen=True)
class VerifyResponse:
    header: Header
    owner: int
    valid: bool


Message = (
    AdvertiseRequest
    | AdvertiseResponse
    | GraphRequest
    | GraphResponse
    | ShareKeysRequest
    | ShareKeysResponse
    | KeyDealRequest
    | KeyDealResponse
    | KeyInstallRequest
    | InputRequest
    | InputResponse
    | ConsistencyRequest
    | ConsistencyResponse
    | PairSeedsRequest
    | PairSeedsResponse
    | UnmaskRequest
    | UnmaskResponse
    | RecoverRequest
    | RecoverResponse
    | DeliverRequest
    | DeliverResponse
    | VerifyRequest
    | VerifyResponse
    | Ack
)

REQUESTS: dict[Stage, type] = {
    Stage.ADVERTISE: AdvertiseRequest,
    Stage.GRAPH: GraphRequest,
    Stage.SHARE_KEYS: ShareKeysRequest,
    Stage.KEY_DEAL: KeyDealRequest,
    Stage.KEY_INSTALL: KeyInstallRequest,
    Stage.INPUT: InputRequest,
    Stage.CONSISTENCY: ConsistencyRequest,
    Stage.PAIR_SEEDS: PairSeedsRequest,
    Stage.UNMASK: UnmaskRequest,
    Stage.RECOVER: RecoverRequest,
    Stage.DELIVER: DeliverRequest,
    Stage.VERIFY: VerifyRequest,
}
RESPONSES: dict[Stage, type] = {
    Stage.ADVERTISE: AdvertiseResponse,
    Stage.GRAPH: GraphResponse,
    Stage.SHARE_KEYS: ShareKeysResponse,
    Stage.KEY_DEAL: KeyDealResponse,
    Stage.KEY_INSTALL: Ack,
    Stage.INPUT: InputResponse,
    Stage.CONSISTENCY: ConsistencyResponse,
    Stage.PAIR_SEEDS: PairSeedsResponse,
    Stage.UNMASK: UnmaskResponse,
    Stage.RECOVER: RecoverResponse,
    Stage.DELIVER: DeliverResponse,
    Stage.VERIFY: VerifyResponse,
}
