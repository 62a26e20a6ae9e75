"""The share envelopes a mask server relays, held as records in one buffer per holder.

Why not the decoded objects: a key set-up at n = 10,000 and degree 490 deals 4.9 million
envelopes, and each (a ``Sealed`` and its ``ShareCommitment``, six bytes objects and two ints)
took about 1 KB of the server's memory (measured with tracemalloc), 4.9 GB before any was sent.
As a record it is its bytes (the envelope, two share hashes, the key commitment and the
dealer's signature). Objects are built again only for the holder whose request is being
encoded, and once a holder has answered its first INPUT only the two share hashes stay: they
are what the server checks revealed shares against for the rest of the key epoch
(threat_model.md M-LIAR).
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Mapping, Sequence

from secure_fedgraph.protocol.sum_backends.mask_format import SEALED_SHARES_BYTES
from secure_fedgraph.protocol.sum_backends.messages import Sealed, ShareCommitment

SEALED_BYTES = 12 + SEALED_SHARES_BYTES + 16  # AES-GCM nonce + the two shares + tag
_HASHES = 32 + 32  # seed_hash, key_hash
_RECORD = SEALED_BYTES + _HASHES + 32 + 64  # + key_commitment, signature


class EnvelopeStore:
    """Every envelope of one key epoch, by holder: ``routed(holder)`` gives what its first INPUT
    request carries, ``commitment(owner, holder)`` what a revealed share is checked against."""

    def __init__(self) -> None:
        self._owners: dict[int, array] = {}  # holder -> the dealers of its records, in order
        self._records: dict[int, bytearray] = {}  # holder -> its records, _RECORD bytes each (or _HASHES once delivered)
        self._delivered: set[int] = set()
        self._dealers: frozenset[int] | None = None  # once fixed: only these dealers' envelopes count

    def deal(self, owner: int, sealed: Sequence[Sealed], commitments: Mapping[tuple[int, int], ShareCommitment]) -> None:
        """Keep ``owner``'s envelopes, each with its commitment (the caller checked sizes and that
        there is one commitment per envelope)."""
        for s in sealed:
            c = commitments[(owner, s.holder)]
            self._owners.setdefault(s.holder, array("q")).append(owner)
            self._records.setdefault(s.holder, bytearray()).extend(s.data + c.seed_hash + c.key_hash + c.key_commitment + c.signature)

    def fix_dealers(self, dealers: Collection[int]) -> None:
        """Only ``dealers`` (those whose share keys were accepted) count from now on."""
        self._dealers = frozenset(dealers)

    def _counts(self, owner: int) -> bool:
        return self._dealers is None or owner in self._dealers

    def routed(self, holder: int) -> tuple[tuple[Sealed, ShareCommitment], ...]:
        """The envelopes dealt to ``holder`` with their commitments, by dealer; empty once the
        holder has answered its first INPUT (``delivered``)."""
        if holder in self._delivered:
            return ()
        records = self._records.get(holder, b"")
        out = []
        for i, owner in enumerate(self._owners.get(holder, ())):
            if not self._counts(owner):
                continue
            r = memoryview(records)[i * _RECORD:(i + 1) * _RECORD]
            seed_hash_at = SEALED_BYTES
            out.append((Sealed(owner, holder, bytes(r[:seed_hash_at])),
                        ShareCommitment(owner, holder, bytes(r[seed_hash_at:seed_hash_at + 32]), bytes(r[seed_hash_at + 32:seed_hash_at + 64]),
                                        bytes(r[seed_hash_at + 64:seed_hash_at + 96]), bytes(r[seed_hash_at + 96:_RECORD]))))
        return tuple(sorted(out, key=lambda pair: pair[0].owner))

    def delivered(self, holder: int) -> None:
        """``holder`` has had its envelopes and answered about them: keep only the share hashes."""
        if holder in self._delivered:
            return
        self._delivered.add(holder)
        records = self._records.get(holder)
        if records is not None:
            view = memoryview(records)
            self._records[holder] = bytearray(b"".join(view[i * _RECORD + SEALED_BYTES:i * _RECORD + SEALED_BYTES + _HASHES]
                                                       for i in range(len(records) // _RECORD)))

    def delivered_all(self) -> None:
        for holder in list(self._records):
            self.delivered(holder)

    def commitment(self, owner: int, holder: int) -> tuple[bytes, bytes] | None:
        """(seed_hash, key_hash) ``owner`` committed to for the shares it sealed to ``holder``, or
        None if it sealed none that count."""
        owners = self._owners.get(holder)
        if owners is None or not self._counts(owner):
            return None
        try:
            i = owners.index(owner)
        except ValueError:
            return None
        size, start = (_HASHES, 0) if holder in self._delivered else (_RECORD, SEALED_BYTES)
        r = memoryview(self._records[holder])[i * size + start:i * size + start + _HASHES]
        return bytes(r[:32]), bytes(r[32:])
