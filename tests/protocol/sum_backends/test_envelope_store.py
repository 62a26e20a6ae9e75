"""The mask server's envelope store (protocol/sum_backends/envelope_store.py): what a holder's
first INPUT carries is exactly what its dealers sealed to it, with their commitments; only
accepted dealers count; once delivered only the share commitments remain, and they still check
revealed shares."""

from __future__ import annotations

import os

from secure_fedgraph.protocol.sum_backends.envelope_store import EnvelopeStore
from secure_fedgraph.protocol.sum_backends.mask_format import SEALED_BYTES
from secure_fedgraph.protocol.sum_backends.messages import DealtShares, DealtToNeighbours, Sealed, ShareCommitment


def _deal(store: EnvelopeStore, owner: int, holders: list[int]) -> dict[int, tuple[Sealed, ShareCommitment]]:
    sealed = [Sealed(owner, h, os.urandom(SEALED_BYTES)) for h in holders]
    committed = {(owner, h): ShareCommitment(owner, h, os.urandom(16), os.urandom(16)) for h in holders}
    store.deal(owner, DealtToNeighbours.of((s, committed[(owner, s.holder)]) for s in sealed).to_holders(owner, holders))
    return {s.holder: (s, committed[(owner, s.holder)]) for s in sealed}


def test_a_holder_gets_what_each_dealer_sealed_to_it_with_the_commitment_by_dealer():
    store = EnvelopeStore()
    dealt = {owner: _deal(store, owner, [h for h in range(6) if h != owner]) for owner in (4, 1, 3)}
    store.fix_dealers({1, 3, 4})
    assert store.routed(0).pairs() == tuple(dealt[o][0] for o in (1, 3, 4))
    assert store.routed(1).pairs() == tuple(dealt[o][1] for o in (3, 4))
    assert store.commitment(3, 5) == (dealt[3][5][1].seed_hash, dealt[3][5][1].key_hash)
    assert store.commitment(2, 5) is None and store.commitment(3, 3) is None and store.commitment(3, 99) is None


def test_a_dealer_whose_share_keys_were_not_accepted_does_not_count():
    store = EnvelopeStore()
    _deal(store, 1, [0, 2])
    kept = _deal(store, 2, [0, 1])
    store.fix_dealers({2})
    assert store.routed(0).pairs() == (kept[0],)
    assert store.commitment(1, 0) is None and store.commitment(2, 0) is not None


def test_once_delivered_only_the_share_commitments_stay_and_they_still_check():
    store = EnvelopeStore()
    dealt = {owner: _deal(store, owner, [h for h in range(4) if h != owner]) for owner in range(4)}
    store.fix_dealers(range(4))
    store.delivered(0)
    assert store.routed(0) == DealtShares()  # the envelopes are gone: only the first INPUT carries them
    assert store.routed(1).pairs() == tuple(dealt[o][1] for o in (0, 2, 3))
    store.delivered_all()
    for owner in range(4):
        for holder in (h for h in range(4) if h != owner):
            c = dealt[owner][holder][1]
            assert store.commitment(owner, holder) == (c.seed_hash, c.key_hash)
    assert all(len(r) == 3 * 32 for r in store._records.values())  # 32 bytes a pair (two commitments), not the envelope
