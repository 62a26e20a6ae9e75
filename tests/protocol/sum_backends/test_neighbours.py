"""The neighbour graph every party derives from public inputs."""

from __future__ import annotations

import pytest

from secure_fedgraph.protocol.sum_backends import GraphKind
from secure_fedgraph.protocol.sum_backends.neighbours import NeighbourGraph

SEED = b"v" * 32


def test_complete():
    graph = NeighbourGraph.build(kind=GraphKind.COMPLETE, participants=[5, 1, 3], degree=2)
    assert graph.participants == (1, 3, 5)
    assert graph.of(1) == {3, 5} and graph.of(3) == {1, 5}
    assert graph.closed(1) == {1, 3, 5} and graph.complete


@pytest.mark.parametrize("n,degree", [(50, 6), (1000, 20)])
def test_sparse_is_regular_symmetric_and_connected(n, degree):
    graph = NeighbourGraph.build(kind=GraphKind.SPARSE, participants=range(n), degree=degree, seed=SEED)
    assert all(len(graph.of(c)) == degree and c not in graph.of(c) for c in range(n))
    assert all(c in graph.of(v) for c in range(n) for v in graph.of(c))
    seen, frontier = {0}, [0]
    while frontier:
        for v in graph.of(frontier.pop()):
            if v not in seen:
                seen.add(v)
                frontier.append(v)
    assert len(seen) == n


def test_sparse_is_deterministic_given_the_view_and_changes_with_it():
    def build(seed=SEED):
        graph = NeighbourGraph.build(kind=GraphKind.SPARSE, participants=range(64), degree=6, seed=seed)
        return {c: graph.of(c) for c in range(64)}

    assert build() == build()
    assert build() != build(b"w" * 32)
    with pytest.raises(ValueError, match="32-byte view digest"):
        build(b"")
    ring_neighbours = {1, 2, 3, 63, 62, 61}
    assert build()[0] != ring_neighbours  # placement on the ring is shuffled, not by id

