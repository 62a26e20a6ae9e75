"""A binary Merkle tree over 32-byte leaf hashes: one commitment to many values, each opened alone.

Shape (RFC 6962 section 2.1, "Merkle Tree Hash"): nodes are paired left to right, level by
level, and an unpaired last node moves up unchanged; the root of one leaf is that leaf. This is
the same tree as RFC 6962's split at the largest power of two below the leaf count. An inner
node is SHA-256(0x01 || left || right). Leaves are hashes the caller makes; they must come from
inputs that never begin with 0x01 (ours are labelled: ``secure_fedgraph/v1/...``), so no leaf is
ever read as an inner node.

An opening of leaf i of m is the siblings on its way to the root, bottom up, concatenated
(``ceil(log2 m)`` hashes at most). The verifier knows i and m (they are not taken from the
opening), so one root opens at most one leaf per position: a second value for a committed
position would be a SHA-256 collision.

Used for a client's commitment to its pair seeds of one sum (keyring.pair_seed_leaves,
threat_model.md M-LIAR): 32 bytes with each masked input, whatever the client's degree, and an
opening of ``32 * ceil(log2 k)`` bytes only for a seed it reveals.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

HASH_BYTES = 32
_NODE = b"\x01"


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE + left + right).digest()


def levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """Every level of the tree, leaves first and the root (alone) last.

    Raises:
        ValueError: no leaves, or a leaf that is not 32 bytes.
    """
    if not leaves:
        raise ValueError("a Merkle tree needs at least one leaf")
    if any(len(leaf) != HASH_BYTES for leaf in leaves):
        raise ValueError(f"Merkle leaves must be {HASH_BYTES}-byte hashes")
    tree = [list(leaves)]
    while len(tree[-1]) > 1:
        below = tree[-1]
        level = [_node(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)]
        if len(below) % 2:
            level.append(below[-1])  # unpaired: moves up unchanged
        tree.append(level)
    return tree


def root(leaves: Sequence[bytes]) -> bytes:
    """The root of the tree over ``leaves`` (see :func:`levels`)."""
    return levels(leaves)[-1][0]


def opening(tree: list[list[bytes]], index: int) -> bytes:
    """The siblings of leaf ``index`` on its way up, bottom first, concatenated.

    Raises:
        IndexError: ``index`` is not a leaf of ``tree``.
    """
    if not 0 <= index < len(tree[0]):
        raise IndexError(f"leaf {index} of a tree of {len(tree[0])}")
    out = bytearray()
    for level in tree[:-1]:
        sibling = index ^ 1
        if sibling < len(level):
            out += level[sibling]
        index >>= 1
    return bytes(out)


def verify(leaf: bytes, *, index: int, count: int, path: bytes, root: bytes) -> bool:
    """Whether ``path`` opens ``leaf`` as leaf ``index`` of a tree of ``count`` leaves with ``root``.
    False (never an exception) for anything malformed: a wrong length, index or count."""
    if not 0 <= index < count or len(leaf) != HASH_BYTES or len(root) != HASH_BYTES or len(path) % HASH_BYTES:
        return False
    node, at, width = leaf, 0, count
    while width > 1:
        if index ^ 1 < width:  # paired at this level (else the last node, unpaired, moves up)
            sibling = path[at : at + HASH_BYTES]
            if len(sibling) != HASH_BYTES:
                return False
            node = _node(sibling, node) if index & 1 else _node(node, sibling)
            at += HASH_BYTES
        index, width = index >> 1, (width + 1) // 2
    return at == len(path) and node == root
