"""Canonical byte strings for everything that is signed, used as AAD, or fed to HKDF as ``info``.

Why one module: a signature or a derived key is only as good as the unambiguity of the bytes
behind it. Every field is typed and length-prefixed, so ``("ab", "c")`` and ``("a", "bc")``
never collide, and every label starts with a versioned purpose string, so a signature made for
one purpose never verifies for another (domain separation).
"""

from __future__ import annotations

import enum
import functools
import struct
from collections.abc import Iterable

_PREFIX = b"secure_fedgraph/v1/"


class Purpose(enum.Enum):
    """What a label is for. Adding a purpose never changes the bytes of existing ones."""

    ADVERTISE = "advertise"  # signed: a client's round public keys
    CONSISTENCY = "consistency"  # signed: a client's view of (live set, survivor set)
    SHARE_ENCRYPTION = "share-encryption"  # HKDF: key sealing Shamir shares to one peer
    PAIRWISE_MASK = "pairwise-mask"  # HKDF: PRG key of one client pair
    SELF_MASK = "self-mask"  # HKDF: PRG key of one client's self-mask for one sum
    SEED_COMMITMENT = "seed-commitment"  # hash: commitment to a self-mask seed
    CKKS_KEY_TRANSPORT = "ckks-key-transport"  # HKDF: key sealing the CKKS secret context
    CKKS_KEY_AAD = "ckks-key-aad"  # AAD of a content key sealed to one peer
    CKKS_CONTEXT_AAD = "ckks-context-aad"  # AAD of the CKKS secret context sealed under the content key
    NEIGHBOUR_GRAPH = "neighbour-graph"  # hash input: the PRG key of the neighbour graph, from the view
    VIEW = "view"  # hash: what one key epoch is (participants, members, graph commitments and nonces)
    GRAPH_COMMITMENT = "graph-commitment"  # hash: a client's commitment to its graph nonce
    SHARE_COMMITMENT = "share-commitment"  # hash: the dealer's commitment to one Shamir share
    SELF_MASK_COMMITMENT = "self-mask-commitment"  # hash: a client's commitment to one sum's self-mask key
    CKKS_CHECK = "ckks-check"  # HKDF: key of one contributor's check lanes in one ckks sum
    SESSION = "session"  # hash: a session id, from the server's proposal, its Welcome and every client's nonce
    WELCOME = "welcome"  # hash: what a Welcome announces (configuration, participants, certificates)
    KEYS = "keys"  # hash: the signed round keys of a key epoch's members, in the view digest
    ENVELOPE = "envelope"  # AAD of one share envelope: the dealer's view, the pair (then the dealer's share commitments)
    ENVELOPE_KEY = "envelope-key"  # HKDF-Expand: the key of one direction's share envelope, from the pair key
    CKKS_CONTRIBUTORS = "ckks-contributors"  # signed: a ckks contributor's statement of (sum, its name, contributor set)
    PAIR_SEED = "pair-seed"  # HKDF: PRG key of one client pair's mask in one sum, from their pair key
    PAIR_SEED_COMMITMENT = "pair-seed-commitment"  # hash: a leaf of a client's Merkle commitment to its pair seeds of one sum


_INT_TAG = b"i\x00\x00\x00\x08"
_pack_int = struct.Struct(">q").pack


def int_field(value: int) -> bytes:
    """One int field as :func:`encode_fields` writes it (tag, length 8, signed 64-bit big-endian)."""
    try:
        return _INT_TAG + _pack_int(value)
    except struct.error:
        raise ValueError(f"int label field {value} is outside the signed 64-bit range") from None


def encode_fields(*fields: bytes | str | int | Iterable[int]) -> bytes:
    """Encode fields unambiguously: a type tag, a length, then the payload, for each field.

    Args:
        fields: bytes, str (UTF-8), int (signed 64-bit) or an iterable of ints (e.g. a set of
            client ids, encoded in the given order; sort sets before passing them).

    Raises:
        TypeError: for any other field type (bool included, to avoid True == 1 confusion).
    """
    out = bytearray()
    for field in fields:
        kind = type(field)
        if kind is int:  # the common cases first: labels are built for every key, share and statement
            out += int_field(field)
            continue
        if kind is bytes:
            out += b"b" + len(field).to_bytes(4, "big") + field
            continue
        if kind is str:
            payload = field.encode("utf-8")
            out += b"s" + len(payload).to_bytes(4, "big") + payload
            continue
        if isinstance(field, bool):
            raise TypeError("bool is not a label field; pass an int explicitly")
        if isinstance(field, bytearray | memoryview):
            payload, tag = bytes(field), b"b"
        elif isinstance(field, str):
            payload, tag = field.encode("utf-8"), b"s"
        elif isinstance(field, int):  # an int subclass (an IntEnum): written as its int value
            out += int_field(int(field))
            continue
        elif isinstance(field, Iterable):
            items = list(field)
            if not all(type(i) is int for i in items) and any(isinstance(i, bool) or not isinstance(i, int) for i in items):
                raise TypeError(f"an iterable label field must hold ints, got {items[:4]!r}")
            payload, tag = struct.pack(f">{len(items)}q", *items), b"l"
        else:
            raise TypeError(f"unsupported label field type {type(field).__name__}")
        out += tag + struct.pack(">I", len(payload)) + payload
    return bytes(out)


def label(purpose: Purpose, *fields: bytes | str | int | Iterable[int]) -> bytes:
    """The one function that builds signed statements, AAD and HKDF ``info`` strings.

    Callers pass the context that makes the label unique, in this order: session id, round,
    key epoch, then purpose-specific fields (sum index, client ids, sets).
    """
    if len(fields) >= 3 and type(fields[0]) is bytes and type(fields[1]) is int and type(fields[2]) is int:
        # a client builds about seven labels per neighbour and key set-up, all with the same
        # purpose, session, round and epoch: their encoding is made once (the same bytes)
        return _head(purpose, *fields[:3]) + encode_fields(*fields[3:])
    return _encoded(purpose, fields)


def _encoded(purpose: Purpose, fields: tuple) -> bytes:
    return _PREFIX + purpose.value.encode("ascii") + b"\x00" + encode_fields(*fields)


@functools.lru_cache(maxsize=256)
def _head(purpose: Purpose, session: bytes, round: int, epoch: int) -> bytes:
    """The bytes :func:`label` starts with for one purpose, session, round and key epoch."""
    return _encoded(purpose, (session, round, epoch))
