"""The share envelopes a mask server relays, held as records in one buffer per holder.

Why not the decoded objects: a key set-up at n = 10,000 and degree 490 deals 4.9 million
envelopes, and each (a ``Sealed`` and its ``ShareCommitment``, six bytes objects and two ints)
took about 1 KB of the server's memory (measured with tracemalloc), 4.9 GB before any was sent.
As a record it is its bytes: what the dealer sent (the envelope, its GCM tag included, and two
share commitments) after the owner and holder the server adds by the record's place
(messages.DealtToNeighbours.to_holders: messages.DealtShares records), and nothing is decoded into
objects on its way in or out. Once a holder has answered its first INPUT only the
two share commitments stay: they are what the server checks revealed shares against for the rest of
the key epoch (threat_model.md M-LIAR).
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterable

from secure_fedgraph.protocol.sum_backends.mask_format import COMMITMENTS_AT, COMMITTED_BYTES, DEALT_RECORD_BYTES, SHARE_COMMITMENT_BYTES
from secure_fedgraph.protocol.sum_backends.messages import DealtShares

class EnvelopeStore:
    """Every envelope of one key epoch, by holder: ``routed(holder)`` gives what its first INPUT
    request carries, ``commitment(owner, holder)`` what a revealed share is checked against."""

    def __init__(self) -> None:
        self._owners: dict[int, array] = {}  # holder -> the dealers of its records, in order
        self._records: dict[int, bytearray] = {}  # holder -> its dealt records (DEALT_RECORD_BYTES each, or their two share commitments, COMMITTED_BYTES, once delivered)
        self._delivered: set[int] = set()
        self._dealers: frozenset[int] | None = None  # once fixed: only these dealers' envelopes count

    def deal(self, owner: int, records: Iterable[tuple[int, bytes]]) -> None:
        """Keep ``owner``'s records, each with its holder, as the server addressed them
        (DealtToNeighbours.to_holders: one to each of its holders, after the caller counted them)."""
        for holder, record in records:
            self._owners.setdefault(holder, array("q")).append(owner)
            self._records.setdefault(holder, bytearray()).extend(record)

    def fix_dealers(self, dealers: Collection[int]) -> None:
        """Only ``dealers`` (those whose share keys were accepted) count from now on."""
        self._dealers = frozenset(dealers)

    def _counts(self, owner: int) -> bool:
        return self._dealers is None or owner in self._dealers

    def routed(self, holder: int) -> DealtShares:
        """The records dealt to ``holder``, by dealer; none once the holder has answered its first
        INPUT (``delivered``)."""
        if holder in self._delivered:
            return DealtShares()
        view = memoryview(self._records.get(holder, b""))
        order = sorted((owner, i) for i, owner in enumerate(self._owners.get(holder, ())) if self._counts(owner))
        return DealtShares(b"".join(view[i * DEALT_RECORD_BYTES:(i + 1) * DEALT_RECORD_BYTES] for _, i in order))

    def delivered(self, holder: int) -> None:
        """``holder`` has had its envelopes and answered about them: keep only the share hashes."""
        if holder in self._delivered:
            return
        self._delivered.add(holder)
        records = self._records.get(holder)
        if records is not None:
            view = memoryview(records)
            self._records[holder] = bytearray(b"".join(view[at + COMMITMENTS_AT:at + COMMITMENTS_AT + COMMITTED_BYTES]
                                                       for at in range(0, len(records), DEALT_RECORD_BYTES)))

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
        size, start = (COMMITTED_BYTES, 0) if holder in self._delivered else (DEALT_RECORD_BYTES, COMMITMENTS_AT)
        r = memoryview(self._records[holder])[i * size + start:i * size + start + COMMITTED_BYTES]
        return bytes(r[:SHARE_COMMITMENT_BYTES]), bytes(r[SHARE_COMMITMENT_BYTES:])
