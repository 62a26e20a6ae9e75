"""The wire codec round-trips every message and turns anything malformed into ProtocolError."""

from __future__ import annotations

import dataclasses
import types
import typing

import numpy as np
import pytest

from secure_fedgraph.crypto.fixed_point import FixedPoint
from secure_fedgraph.errors import ConfigError, ProtocolError
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.sum_backends import SumSpec
from secure_fedgraph.protocol.sum_backends import messages as m
from secure_fedgraph.protocol.sum_backends.mask_format import DEALT_BODY_BYTES, SEALED_BYTES
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core import messages as pm
from secure_fedgraph.wire import common_pb2, envelope_pb2
from tests.helpers import defence_stops

HEADER = m.Header(b"s" * 16, 3, 41, Stage.UNMASK, 7)
SAMPLES = {
    bool: True,
    int: 5,
    float: 2.5,
    str: "complete",
    bytes: b"\x00\x01payload",
    SumSpec: SumSpec.of("grads", {"w": np.zeros((2, 3)), "b": np.zeros(4)}, streaming=True),  # non-default flags survive
    FixedPoint: FixedPoint(8.0, 20, 32),
    m.SignedKeys: m.SignedKeys(4, b"a" * 32, b"b" * 32, b"c" * 32, b"d" * 64),
    m.Sealed: m.Sealed(1, 2, b"sealed"),
    m.Share: m.Share(3, b"v" * 66),
    m.Signature: m.Signature(5, b"z" * 64),
    m.Complaint: m.Complaint(3, b"q" * 32),
    m.DealtShares: m.DealtShares.of([(m.Sealed(1, h, bytes([h % 251]) * SEALED_BYTES), m.ShareCommitment(1, h, b"s" * 16, b"k" * 16))
                                     for h in (2, 70_000)]),
    m.DealtToNeighbours: m.DealtToNeighbours.of([(m.Sealed(1, h, bytes([h % 251]) * SEALED_BYTES), m.ShareCommitment(1, h, b"s" * 16, b"k" * 16))
                                                 for h in (2, 70_000)]),
    m.PairSeed: m.PairSeed(4, b"p" * 32, b"o" * 64),
    pm.NamedTensor: pm.NamedTensor("w", np.arange(4, dtype=np.float32)),
}


def _sample(cls):
    fields = {}
    for name, hint in typing.get_type_hints(cls, {**vars(m), **vars(pm)}).items():
        if name == "header":
            fields[name] = HEADER
        elif typing.get_origin(hint) is tuple:
            (item,) = {a for a in typing.get_args(hint) if a is not Ellipsis}
            fields[name] = (SAMPLES[item], SAMPLES[item])
        elif hint in SAMPLES:
            fields[name] = SAMPLES[hint]
        elif "ndarray" in str(hint):
            fields[name] = np.arange(6, dtype=np.uint32).reshape(2, 3)
        elif "FixedPoint" in str(hint):
            fields[name] = SAMPLES[FixedPoint]
        else:  # int | None
            fields[name] = 9
    return cls(**fields)


@pytest.mark.parametrize("cls", sorted(codec._ENVELOPE_FIELD, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_round_trip(cls):
    message = _sample(cls)
    decoded = codec.decode(codec.encode(message))
    assert type(decoded) is cls
    for name in (f for f in vars(message)):
        a, b = getattr(message, name), getattr(decoded, name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        elif name == "tensors":
            assert [(t.name, t.value.tolist()) for t in a] == [(t.name, t.value.tolist()) for t in b]
        else:
            assert a == b, name


@pytest.mark.parametrize("cls", sorted(codec._ENVELOPE_FIELD, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_repeated_plain_messages_in_one_call_each_are_the_same_bytes_and_objects_as_field_by_field(cls, monkeypatch):
    """codec._flat: a repeated message of plain scalars (a key set-up's signed keys, an unmask's
    signatures) is written and read one call per item; the wire and what is read are the same."""
    message = _sample(cls)
    data = codec.encode(message)
    read = codec.decode(data)
    monkeypatch.setattr(codec, "_flat", lambda cls: None)  # every message field by field
    assert codec.encode(message) == data
    assert codec.encode(read) == codec.encode(codec.decode(data)) == data


def test_the_repeated_messages_of_a_key_set_up_take_the_one_call_path():
    flat = {c.__name__ for c in codec._PB_CLASS if codec._flat(c) is not None}
    assert {"SignedKeys", "Signature", "Share", "PairSeed", "Complaint"} <= flat
    assert not flat & {"Header", "DealtShares", "DealtToNeighbours", "NamedTensor", "SumSpec"}  # an enum, checks on construction, a tensor, nested


def test_a_one_field_plain_message_is_read_as_one_object_per_item():
    @dataclasses.dataclass(frozen=True)
    class One:
        client: int

    items = [types.SimpleNamespace(client=c) for c in (3, 5)]  # what a protobuf item offers: its fields
    assert codec._flat_reader(One)(items) == (One(3), One(5))
    codec._flat.cache_clear()
    codec._flat_reader.cache_clear()


def test_a_message_that_checks_itself_or_has_slots_goes_field_by_field():
    @dataclasses.dataclass(frozen=True)
    class Checked(m.Signature):
        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True)
    class Inherits(Checked):  # its check is inherited, not in its own namespace
        pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        client: int

    for cls in (Checked, Inherits, Slotted):
        codec._flat.cache_clear()
        assert codec._flat(cls) is None, cls.__name__
    codec._flat.cache_clear()


@pytest.mark.parametrize("cls", sorted(codec._ENVELOPE_FIELD, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_peek_reads_what_decode_does_of_class_header_and_name(cls):
    """The audit reads clients' transcripts with peek: it must name every message as decode does."""
    message = _sample(cls)
    peeked = codec.peek(codec.encode(message))
    assert peeked.cls is cls
    assert peeked.header == getattr(message, "header", None)
    assert peeked.name == getattr(message, "name", "")


@pytest.mark.parametrize("data", [b"\xff\xff\xff", b""])
def test_peek_refuses_what_decode_refuses(data):
    with pytest.raises(ProtocolError):
        codec.peek(data)


def test_optional_fields_stay_absent():
    message = m.DeliverRequest(HEADER, 0, (1,), None, (b"ct",), None)
    decoded = codec.decode(codec.encode(message))
    assert decoded.aggregate is None and decoded.clipped is None


@pytest.mark.parametrize("data", [b"\xff\xff\xff", b"\x0a\x05abc", b"garbage bytes here"])
def test_malformed_bytes(data):
    with pytest.raises(ProtocolError, match="malformed|no body"):
        codec.decode(data)


def test_empty_envelope_has_no_body():
    with pytest.raises(ProtocolError, match="carries no body"):
        codec.decode(b"")


def _input_response_with(tensor: common_pb2.Tensor) -> bytes:
    envelope = envelope_pb2.Envelope()
    envelope.input_response.header.CopyFrom(codec.to_pb(HEADER))
    envelope.input_response.payload.CopyFrom(tensor)
    return envelope.SerializeToString()


@pytest.mark.parametrize(
    "tensor,match",
    [
        (common_pb2.Tensor(dtype="<u4", shape=[4], data=b"\x00" * 15), "needs 16 bytes"),
        (common_pb2.Tensor(dtype="|O", shape=[1], data=b"\x00" * 8), "not allowed"),
        (common_pb2.Tensor(dtype="nonsense", shape=[1], data=b""), "unknown dtype"),
        (common_pb2.Tensor(dtype="<f8", shape=[-1], data=b""), "negative"),
        (common_pb2.Tensor(dtype="<f8", shape=[2**62, 0], data=b""), "too large"),  # found by tests/fuzzing: numpy's "array is too big"
    ],
)
def test_malformed_tensors(tensor, match):
    with pytest.raises(ProtocolError, match=match):
        codec.decode(_input_response_with(tensor))


def test_unknown_stage_and_invalid_spec_are_protocol_errors():
    envelope = envelope_pb2.Envelope()
    envelope.ack.header.CopyFrom(codec.to_pb(HEADER))
    envelope.ack.header.stage = "teleport"
    with pytest.raises(ProtocolError, match="unknown Stage"):
        codec.decode(envelope.SerializeToString())
    request = codec.to_pb(_sample(m.InputRequest))
    request.spec.name = "bad name with spaces"
    envelope = envelope_pb2.Envelope()
    envelope.input_request.CopyFrom(request)
    with pytest.raises(ProtocolError, match="malformed SumSpec: sum name"):
        codec.decode(envelope.SerializeToString())


def test_big_endian_arrays_go_on_the_wire_little_endian():
    big = np.arange(4, dtype=">u4")
    decoded = codec.decode(codec.encode(m.InputResponse(HEADER, big, ())))
    assert decoded.payload.dtype == np.dtype("<u4") and decoded.payload.tolist() == [0, 1, 2, 3]


def overflowing_header() -> bytes:
    """An upload whose tensor header claims [2^32, 2^32] float64s and carries no data: numpy's
    int64 product of that shape wraps to 0, which matches the empty data."""
    return _input_response_with(common_pb2.Tensor(dtype="<f8", shape=[2**32, 2**32], data=b""))


def test_attack_a_tensor_header_whose_size_wraps(monkeypatch):
    """A malicious client's header claims 2^64 elements (threat_model.md R-CRASH). Sizes are
    computed with Python ints, so the decoder refuses it with a ProtocolError (its sender is
    rejected); computed with numpy's int64, the size wraps to 0, passes the length check, and
    the reshape raises a ValueError that no ProtocolError handler catches."""

    def attack() -> bool:
        try:
            codec.decode(overflowing_header())
        except ProtocolError:
            return False
        except Exception:  # noqa: BLE001 anything else escapes the handlers written for bad input
            return True
        return True

    defence_stops(attack, monkeypatch, codec, "byte_size", lambda shape, dtype: int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)


def test_headers_with_too_many_dimensions_are_refused_before_any_arithmetic():
    with pytest.raises(ProtocolError, match="at most 8 are allowed"):
        codec.decode(_input_response_with(common_pb2.Tensor(dtype="<f8", shape=[1] * 10_000, data=b"\x00" * 8)))


def test_dealt_shares_hold_whole_records_only():
    """An envelope without its commitments, or a cut record, cannot be a DealtShares: the layout
    leaves the server and the holder nothing to check about them (messages.DealtShares)."""
    dealt = SAMPLES[m.DealtShares]
    assert len(dealt) == 2 and [s.holder for s, _ in dealt.pairs()] == [2, 70_000] and dealt.heads() == [(1, 2), (1, 70_000)]
    cut = envelope_pb2.Envelope()
    cut.input_request.CopyFrom(codec.to_pb(_sample(m.InputRequest)))
    cut.input_request.dealt.records = dealt.records[:-1]
    with pytest.raises(ProtocolError, match="whole"):
        codec.decode(cut.SerializeToString())
    sealed, committed = dealt.pairs()[0]
    for wrong in ((m.Sealed(1, 3, sealed.data), committed), (m.Sealed(1, 2, sealed.data[1:]), committed),
                  (m.Sealed(-1, 2, sealed.data), m.ShareCommitment(-1, 2, *dataclasses.astuple(committed)[2:]))):
        with pytest.raises(ConfigError):
            m.DealtShares.record(*wrong)


def test_a_dealers_records_are_addressed_by_their_place():
    """What a dealer sends up carries no owner or holder (messages.DealtToNeighbours): the server
    gives the i-th record to the i-th neighbour, and it arrives as the same record with them."""
    up = SAMPLES[m.DealtToNeighbours]
    assert len(up) == 2 and len(up.records) == 2 * DEALT_BODY_BYTES
    assert up.addressed(1, (2, 70_000)) == SAMPLES[m.DealtShares]
    with pytest.raises(ConfigError, match="2 dealt records for 3 holders"):
        up.addressed(1, (2, 3, 4))
    cut = envelope_pb2.Envelope()
    cut.share_keys_response.CopyFrom(codec.to_pb(_sample(m.ShareKeysResponse)))
    cut.share_keys_response.dealt.records = up.records[:-1]
    with pytest.raises(ProtocolError, match="whole"):
        codec.decode(cut.SerializeToString())
