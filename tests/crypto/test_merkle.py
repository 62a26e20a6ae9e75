"""secure_fedgraph/crypto/merkle.py: the tree is RFC 6962's, every leaf opens at its position only,
and anything else fails verification (never raises)."""

from __future__ import annotations

import hashlib
import os

import pytest

from secure_fedgraph.crypto import merkle


def _rfc6962(leaves: list[bytes]) -> bytes:
    """RFC 6962 section 2.1's Merkle Tree Hash over leaf hashes: split at the largest power of two
    below the count."""
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + _rfc6962(leaves[:k]) + _rfc6962(leaves[k:])).digest()


def _leaves(count: int) -> list[bytes]:
    return [hashlib.sha256(b"leaf" + bytes([i])).digest() for i in range(count)]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 7, 8, 9, 33, 99])
def test_every_leaf_opens_at_its_position_and_the_root_is_rfc_6962s(count):
    leaves = _leaves(count)
    tree = merkle.levels(leaves)
    root = merkle.root(leaves)
    assert root == tree[-1][0] == _rfc6962(leaves)
    for i, leaf in enumerate(leaves):
        path = merkle.opening(tree, i)
        assert len(path) <= merkle.HASH_BYTES * (count - 1).bit_length()
        assert merkle.verify(leaf, index=i, count=count, path=path, root=root)
        if count > 1:
            assert not merkle.verify(leaf, index=(i + 1) % count, count=count, path=path, root=root)


def test_the_root_of_one_leaf_is_the_leaf():
    (leaf,) = _leaves(1)
    assert merkle.root([leaf]) == leaf and merkle.opening(merkle.levels([leaf]), 0) == b""


def test_anything_else_fails_verification():
    leaves = _leaves(6)
    tree, root = merkle.levels(leaves), merkle.root(leaves)
    path = merkle.opening(tree, 4)
    good = {"index": 4, "count": 6, "path": path, "root": root}
    assert merkle.verify(leaves[4], **good)
    for change in ({"index": 5}, {"index": 6}, {"index": -1}, {"count": 5}, {"count": 8}, {"path": path[:-1]}, {"path": path[:-32]},
                   {"path": path + bytes(32)}, {"path": bytes(len(path))}, {"root": os.urandom(32)}, {"root": root[:31]}):
        assert not merkle.verify(leaves[4], **{**good, **change}), change
    assert not merkle.verify(os.urandom(32), **good)
    assert not merkle.verify(leaves[4][:31], **good)


def test_malformed_trees_are_refused():
    with pytest.raises(ValueError, match="at least one leaf"):
        merkle.levels([])
    with pytest.raises(ValueError, match="32-byte"):
        merkle.levels([b"short"])
    with pytest.raises(IndexError):
        merkle.opening(merkle.levels(_leaves(3)), 3)
