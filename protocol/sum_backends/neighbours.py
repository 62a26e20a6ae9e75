"""Which clients share pairwise masks and hold each other's Shamir shares.

Complete graph (Bonawitz et al., CCS 2017): every pair; each client does n-1 key agreements
and PRG streams. Sparse graph (Bell et al., CCS 2020, SecAgg+): a random Harary graph, i.e.
clients placed on a ring in a random order, each linked to degree/2 clients on either side;
the degree follows from the adversary (protocol/sum_backends/adversary.py), logarithmic in n.

Nobody chooses the sparse graph: its ring order is keyed by the key epoch's view digest,
which hashes the nonces every participant committed to before any was revealed
(keyring.view_digest; threat_model.md M-GRAPH-SPARSE). A server that tried session ids or
participant lists offline until some honest client's neighbours were its colluders cannot
predict the graph any more. Neighbourhoods are computed on demand: a client needs its own and
its neighbours', not all n.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence

import numpy as np

from secure_fedgraph.crypto.labels import Purpose, label
from secure_fedgraph.crypto.prg import MaskPRG
from secure_fedgraph.protocol.sum_backends.config import GraphKind


class NeighbourGraph:
    """An undirected graph over the round's participants."""

    def __init__(self, participants: tuple[int, ...], ring: tuple[int, ...] | None, half: int) -> None:
        self.participants = participants
        self._members = frozenset(participants)
        self._ring = ring  # None: complete graph
        self._position = {c: i for i, c in enumerate(ring)} if ring is not None else None
        self._half = half
        self._cache: dict[int, frozenset[int]] = {}

    @property
    def complete(self) -> bool:
        return self._ring is None

    def of(self, client: int) -> frozenset[int]:
        """The (open) neighbourhood of ``client``."""
        found = self._cache.get(client)
        if found is None:
            if client not in self._members:
                raise KeyError(f"client {client} is not a participant")
            if self._ring is None:
                found = self._members - {client}
            else:
                n, at = len(self._ring), self._position[client]
                found = frozenset(self._ring[(at + k) % n] for k in range(-self._half, self._half + 1) if k)
            self._cache[client] = found
        return found

    def closed(self, client: int) -> frozenset[int]:
        """``client`` and its neighbours: the parties whose signatures vouch for it."""
        return self.of(client) | {client}

    @classmethod
    def build(cls, *, kind: GraphKind, participants: Sequence[int], degree: int, seed: bytes = b"") -> NeighbourGraph:
        """The graph for these participants; a sparse graph needs ``seed``, the epoch's view
        digest (32 bytes), and every party holding the same view builds the same graph: one
        object per process, shared by the clients it hosts (a ring and its index are n values;
        per client, n^2 a host at n = 10,000). Only its memo of neighbourhoods grows."""
        return _built(cls, kind, tuple(sorted(participants)), degree, bytes(seed))


@functools.lru_cache(maxsize=8)
def _built(cls: type[NeighbourGraph], kind: GraphKind, ordered: tuple[int, ...], degree: int, seed: bytes) -> NeighbourGraph:
    """NeighbourGraph.build, once per (kind, participants, degree, seed) in a process."""
    n = len(ordered)
    if kind is GraphKind.COMPLETE or degree >= n - 1:
        return cls(ordered, None, 0)
    if kind is not GraphKind.SPARSE:
        raise ValueError(f"graph kind must be COMPLETE or SPARSE, got {kind}")
    if len(seed) != 32:
        raise ValueError(f"a sparse graph needs the 32-byte view digest as its seed, got {len(seed)} bytes")
    key = hashlib.sha256(label(Purpose.NEIGHBOUR_GRAPH, seed)).digest()
    keys = MaskPRG().keystream(key, stream_id=0, count=n, ring_bits=64)
    ring = tuple(ordered[i] for i in np.argsort(keys, kind="stable"))
    return cls(ordered, ring, degree // 2)
