"""Tests for secure_fedgraph.crypto.labels: unambiguous field encoding and domain-separated labels."""

from __future__ import annotations

import enum
import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secure_fedgraph.crypto.labels import Purpose, encode_fields, int_field, label

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FIELD = st.one_of(
    st.binary(max_size=12),
    st.text(max_size=12),
    INT64,
    st.lists(INT64, max_size=5),
)


def _normalise(field: object) -> tuple[str, object]:
    """What a field means: its kind and value (bytes and bytearray mean the same)."""
    if isinstance(field, bytes | bytearray | memoryview):
        return ("b", bytes(field))
    if isinstance(field, str):
        return ("s", field)
    if isinstance(field, int):
        return ("i", field)
    return ("l", tuple(field))


def _parse(data: bytes) -> list[tuple[str, object]]:
    """An independent decoder for encode_fields: if it recovers every field, encoding is injective."""
    fields, pos = [], 0
    while pos < len(data):
        tag = data[pos : pos + 1]
        (length,) = struct.unpack(">I", data[pos + 1 : pos + 5])
        payload = data[pos + 5 : pos + 5 + length]
        assert len(payload) == length, "length prefix runs past the end"
        pos += 5 + length
        if tag == b"b":
            fields.append(("b", payload))
        elif tag == b"s":
            fields.append(("s", payload.decode("utf-8")))
        elif tag == b"i":
            fields.append(("i", struct.unpack(">q", payload)[0]))
        elif tag == b"l":
            fields.append(("l", struct.unpack(f">{length // 8}q", payload)))
        else:
            raise AssertionError(f"unknown tag {tag!r}")
    return fields


# --- exact format -----------------------------------------------------------------------------


def test_encode_fields_writes_tag_length_payload_for_each_field() -> None:
    encoded = encode_fields(b"\x01\x02", "h\u00e9", -2, [1, 256])
    assert encoded == (
        b"b" + b"\x00\x00\x00\x02" + b"\x01\x02"
        + b"s" + b"\x00\x00\x00\x03" + b"h\xc3\xa9"
        + b"i" + b"\x00\x00\x00\x08" + b"\xff\xff\xff\xff\xff\xff\xff\xfe"
        + b"l" + b"\x00\x00\x00\x10" + (1).to_bytes(8, "big") + (256).to_bytes(8, "big")
    )  # fmt: skip


def test_label_is_prefix_purpose_nul_then_fields() -> None:
    assert label(Purpose.ADVERTISE, b"sid", 3) == (
        b"secure_fedgraph/v1/advertise\x00" + encode_fields(b"sid", 3)
    )
    assert label(Purpose.CKKS_KEY_AAD) == b"secure_fedgraph/v1/ckks-key-aad\x00"


def test_purpose_strings_are_pinned() -> None:
    """Existing purposes must never change their bytes (signatures and derived keys depend on them)."""
    assert {p.name: p.value for p in Purpose} == {
        "ADVERTISE": "advertise",
        "CONSISTENCY": "consistency",
        "SHARE_ENCRYPTION": "share-encryption",
        "PAIRWISE_MASK": "pairwise-mask",
        "SELF_MASK": "self-mask",
        "SEED_COMMITMENT": "seed-commitment",
        "CKKS_KEY_TRANSPORT": "ckks-key-transport",
        "CKKS_KEY_AAD": "ckks-key-aad",
        "CKKS_CONTEXT_AAD": "ckks-context-aad",
        "NEIGHBOUR_GRAPH": "neighbour-graph",
        "VIEW": "view",
        "GRAPH_COMMITMENT": "graph-commitment",
        "SHARE_COMMITMENT": "share-commitment",
        "SELF_MASK_COMMITMENT": "self-mask-commitment",
        "CKKS_CHECK": "ckks-check",
        "SESSION": "session",
        "WELCOME": "welcome",
        "KEYS": "keys",
        "ENVELOPE": "envelope",
        "ENVELOPE_KEY": "envelope-key",
        "CKKS_CONTRIBUTORS": "ckks-contributors",
        "PAIR_SEED": "pair-seed",
        "PAIR_SEED_COMMITMENT": "pair-seed-commitment",
    }


def test_bytes_like_fields_encode_alike() -> None:
    assert encode_fields(b"ab") == encode_fields(bytearray(b"ab")) == encode_fields(memoryview(b"ab"))
    assert encode_fields([3, 1]) == encode_fields((3, 1)) == encode_fields(iter([3, 1]))


# --- injectivity ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("ab", "c"), ("a", "bc")),
        ((b"ab", b"c"), (b"a", b"bc")),
        ((b"1",), ("1",)),
        ((b"1",), (1,)),
        (("1",), (1,)),
        (([1, 2],), ([12],)),
        (([1, 2],), ([1], [2])),
        (([1],), (1,)),
        (([],), (b"",)),
        (("",), (b"",)),
        ((), ("",)),
        ((b"",), (b"", b"")),
        ((0,), (b"\x00" * 8,)),
    ],
    ids=repr,
)
def test_encode_fields_separates_tricky_pairs(left: tuple, right: tuple) -> None:
    assert encode_fields(*left) != encode_fields(*right)


@settings(max_examples=50)
@given(fields=st.lists(FIELD, max_size=5))
def test_encode_fields_is_decodable_hence_injective(fields: list) -> None:
    assert _parse(encode_fields(*fields)) == [_normalise(f) for f in fields]


@settings(max_examples=50)
@given(left=st.lists(FIELD, max_size=4), right=st.lists(FIELD, max_size=4))
def test_different_fields_give_different_labels(left: list, right: list) -> None:
    same_meaning = [_normalise(f) for f in left] == [_normalise(f) for f in right]
    assert (label(Purpose.PAIRWISE_MASK, *left) == label(Purpose.PAIRWISE_MASK, *right)) == same_meaning


# --- domain separation ------------------------------------------------------------------------


def test_purpose_values_are_distinct_ascii_without_nul() -> None:
    values = [p.value for p in Purpose]
    assert len(set(values)) == len(values)
    for value in values:
        assert value.isascii() and "\x00" not in value


@settings(max_examples=50)
@given(fields=st.lists(FIELD, max_size=4), other_fields=st.lists(FIELD, max_size=4))
def test_different_purposes_never_give_the_same_label(fields: list, other_fields: list) -> None:
    for first, second in itertools.combinations(Purpose, 2):
        assert label(first, *fields) != label(second, *fields)
        assert label(first, *fields) != label(second, *other_fields)


def test_purpose_can_be_read_back_from_a_label() -> None:
    for purpose in Purpose:
        data = label(purpose, b"session", 7, [1, 2, 3])
        head, _, rest = data.partition(b"\x00")
        assert head == b"secure_fedgraph/v1/" + purpose.value.encode("ascii")
        assert rest == encode_fields(b"session", 7, [1, 2, 3])


# --- rejected inputs --------------------------------------------------------------------------


@pytest.mark.parametrize("flag", [True, False])
def test_bool_field_raises_type_error(flag: bool) -> None:
    with pytest.raises(TypeError, match="bool is not a label field"):
        encode_fields(flag)
    with pytest.raises(TypeError, match="bool is not a label field"):
        label(Purpose.CONSISTENCY, 1, flag)


def test_bool_inside_an_iterable_raises_type_error() -> None:
    with pytest.raises(TypeError, match="an iterable label field must hold ints"):
        encode_fields([1, True])


@pytest.mark.parametrize(("field", "name"), [(1.5, "float"), (None, "NoneType"), (object(), "object")])
def test_unsupported_field_type_raises_type_error(field: object, name: str) -> None:
    with pytest.raises(TypeError, match=f"unsupported label field type {name}"):
        encode_fields(field)


def test_iterable_of_non_ints_raises_type_error() -> None:
    with pytest.raises(TypeError, match="an iterable label field must hold ints"):
        encode_fields([1, "2"])
    with pytest.raises(TypeError, match="an iterable label field must hold ints"):
        encode_fields([1.0])


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_ints_outside_64_bits_raise_value_error_wherever_they_are(value: int) -> None:
    with pytest.raises(ValueError, match="outside the signed 64-bit range"):
        encode_fields(value)
    with pytest.raises(ValueError, match="outside the signed 64-bit range"):
        int_field(value)
    with pytest.raises(ValueError, match="outside the signed 64-bit range"):
        label(Purpose.PAIRWISE_MASK, b"session", value, 0, 1)  # in the head
    with pytest.raises(ValueError, match="outside the signed 64-bit range"):
        label(Purpose.PAIRWISE_MASK, b"session", 1, 0, value)  # in the tail


# --- the head a key epoch's labels share --------------------------------------------------------


@settings(max_examples=100)
@given(session=st.binary(max_size=40), round_=INT64, epoch=INT64, tail=st.lists(FIELD, max_size=4))
def test_labels_of_one_epoch_are_the_bytes_of_the_general_encoding(session: bytes, round_: int, epoch: int, tail: list) -> None:
    """label() encodes (session, round, epoch) once per purpose and epoch; the bytes must be
    those of encoding every field, or every signature and derived key would change."""
    for purpose in (Purpose.SHARE_COMMITMENT, Purpose.PAIRWISE_MASK):
        expected = b"secure_fedgraph/v1/" + purpose.value.encode("ascii") + b"\x00" + encode_fields(session, round_, epoch, *tail)
        assert label(purpose, session, round_, epoch, *tail) == expected
        assert label(purpose, session, round_, epoch, *tail) == expected  # from the cached head


def test_int_field_is_how_encode_fields_writes_an_int() -> None:
    for value in (0, 1, -1, 2**63 - 1, -(2**63)):
        assert int_field(value) == encode_fields(value)


def test_an_int_subclass_is_written_as_its_int_value() -> None:
    class Level(enum.IntEnum):
        HIGH = 7

    assert encode_fields(Level.HIGH) == encode_fields(7)
    assert label(Purpose.VIEW, b"session", Level.HIGH, 0) == label(Purpose.VIEW, b"session", 7, 0)
