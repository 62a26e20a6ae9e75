"""Which clients share pairwise masks and hold each other's Shamir shares.

Complete graph (Bonawitz et al., CCS 2017): every pair; each client does n-1 key agreements
and PRG streams. Sparse graph (Bell et al., CCS 2020, SecAgg+): a random Harary graph, i.e.
clients placed on a ring in a random order, each linked to degree/2 clients on either side;
degree = 2 * ceil(log2 n) keeps per-client cost logarithmic, so 1,000 clients are practical.

Every party derives the same graph from public inputs (session, round, key epoch and the
participant list) through SHA-256 and our AES-CTR PRG, so the server does not choose it.
What each graph guarantees is in threat_model.md (claims M-GRAPH-COMPLETE, M-GRAPH-SPARSE).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from secure_fedgraph.crypto.labels import Purpose, label
from secure_fedgraph.crypto.prg import MaskPRG
from secure_fedgraph.protocol.secure_sum.config import GraphKind


@dataclass(frozen=True)
class NeighbourGraph:
    """An undirected graph over the round's participants (open neighbourhoods)."""

    participants: tuple[int, ...]
    neighbours: dict[int, frozenset[int]]

    def of(self, client: int) -> frozenset[int]:
        return self.neighbours[client]

    @classmethod
    def build(
        cls, *, kind: GraphKind, participants: Sequence[int], degree: int, session: bytes, round: int, epoch: int
    ) -> NeighbourGraph:
        """The graph every party computes for these public inputs."""
        ordered = tuple(sorted(participants))
        n = len(ordered)
        if kind is GraphKind.COMPLETE or degree >= n - 1:
            everyone = frozenset(ordered)
            return cls(ordered, {c: everyone - {c} for c in ordered})
        if kind is not GraphKind.SPARSE:
            raise ValueError(f"graph kind must be COMPLETE or SPARSE, got {kind}")
        seed = hashlib.sha256(label(Purpose.NEIGHBOUR_GRAPH, session, round, epoch, ordered)).digest()
        keys = MaskPRG().keystream(seed, stream_id=0, count=n, ring_bits=64)
        ring = [ordered[i] for i in np.argsort(keys, kind="stable")]
        half = degree // 2
        links: dict[int, set[int]] = {c: set() for c in ordered}
        for position, client in enumerate(ring):
            for offset in range(1, half + 1):
                other = ring[(position + offset) % n]
                links[client].add(other)
                links[other].add(client)
        return cls(ordered, {c: frozenset(v) for c, v in links.items()})
