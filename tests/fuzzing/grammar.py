"""What the fuzzer sends: Hypothesis strategies built from the project's own protobuf messages
(proto/secure_fedgraph/wire/*.proto, through their descriptors), byte-level mutations, and
structural mutations of a real answer (wrong session, replay, stage skip, another sender,
another message type, a wrong shape, truncation).

The strategies follow the grammar, so most of what they make parses as an Envelope and reaches
the codec's field checks and the protocol's handlers, where random bytes would stop at the
parser. Values lean on the ones that matter (real stage names and dtypes, shapes at the edges
of int64, empty and huge fields) and mix in arbitrary ones.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import numpy as np
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core.messages import Hello
from secure_fedgraph.protocol.transports.batch import decode_batch
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.wire import envelope_pb2

ENVELOPE = envelope_pb2.Envelope.DESCRIPTOR
BODIES = tuple(ENVELOPE.oneofs_by_name["body"].fields)
STAGES = tuple(s.value for s in Stage)
DTYPES = ("<f4", "<f8", "<u4", "<u8", "<i4", "<i8", ">f8", "|O", "<c16", "float32", "", "nonsense")
EDGE_INTS = (0, 1, -1, 2**31 - 1, -(2**31), 2**32, 2**62, 2**63 - 1, -(2**63))

_INT_RANGE = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


def _ints(field: FieldDescriptor) -> st.SearchStrategy[int]:
    low, high = _INT_RANGE[field.type]
    edges = [v for v in EDGE_INTS if low <= v <= high]
    return st.one_of(st.sampled_from(edges), st.integers(0, 8), st.integers(low, high))


def _scalar(field: FieldDescriptor) -> st.SearchStrategy:
    if field.type in _INT_RANGE:
        return _ints(field)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        width = 64 if field.type == FieldDescriptor.TYPE_DOUBLE else 32
        return st.floats(width=width, allow_nan=True, allow_infinity=True)
    if field.type == FieldDescriptor.TYPE_STRING:
        if field.name == "stage":
            return st.one_of(st.sampled_from(STAGES), st.sampled_from(STAGES), st.text(max_size=12))
        if field.name == "dtype":
            return st.sampled_from(DTYPES)
        return st.one_of(st.text(max_size=24), st.sampled_from(("", "w", "update", "model", "{}", "[]", "null")))
    if field.type == FieldDescriptor.TYPE_BYTES:
        return st.one_of(st.binary(max_size=64), st.sampled_from((b"", bytes(16), bytes(32), bytes(64))))
    if field.type == FieldDescriptor.TYPE_ENUM:
        return st.one_of(st.sampled_from([v.number for v in field.enum_type.values]), st.integers(-3, 99))
    raise AssertionError(f"no strategy for field {field.full_name} of type {field.type}")


@st.composite
def _tensor(draw, descriptor: Descriptor):
    """A Tensor whose dtype, shape and data length agree, almost agree, or wildly disagree."""
    message = descriptor._concrete_class()
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.one_of(st.integers(0, 4), st.sampled_from(EDGE_INTS[:-1])), max_size=draw(st.sampled_from((2, 3, 12)))))
    message.dtype = dtype
    message.shape.extend(d for d in shape if -(2**63) <= d < 2**63)
    try:
        itemsize, count = np.dtype(dtype).itemsize, int(np.prod([max(d, 0) for d in message.shape] or [1], dtype=object))
    except TypeError:
        itemsize, count = 8, 1
    exact = itemsize * count if count * itemsize <= 4096 else 0
    length = draw(st.one_of(st.just(exact), st.sampled_from((0, max(exact - 1, 0), exact + 1)), st.integers(0, 256)))
    message.data = draw(st.binary(min_size=length, max_size=length))
    return message


def protobuf_messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy:
    """Instances of the protobuf message ``descriptor``, field by field (depth-limited)."""
    if descriptor.name == "Tensor":
        return _tensor(descriptor)

    @st.composite
    def build(draw):
        message = descriptor._concrete_class()
        for field in descriptor.fields:
            if field.name != "header" and not draw(st.booleans()):  # leave it at its default (absent on the wire)
                continue
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                if depth >= 3:
                    continue
                inner = protobuf_messages(field.message_type, depth + 1)
                if field.is_repeated:
                    for item in draw(st.lists(inner, max_size=3)):
                        getattr(message, field.name).add().CopyFrom(item)
                else:
                    getattr(message, field.name).CopyFrom(draw(inner))
            elif field.is_repeated:
                getattr(message, field.name).extend(draw(st.lists(_scalar(field), max_size=4)))
            else:
                setattr(message, field.name, draw(_scalar(field)))
        return message

    return build()


@st.composite
def envelopes(draw) -> bytes:
    """A serialised Envelope carrying any one of the wire's message types."""
    body = draw(st.sampled_from(BODIES))
    envelope = envelope_pb2.Envelope()
    getattr(envelope, body.name).CopyFrom(draw(protobuf_messages(body.message_type)))
    return envelope.SerializeToString()


def byte_mutations(data: bytes) -> st.SearchStrategy[bytes]:
    """``data`` flipped, cut, spliced or padded at the byte level."""

    @st.composite
    def mutate(draw) -> bytes:
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(("flip", "truncate", "insert", "delete", "duplicate")))
            at = draw(st.integers(0, max(len(out) - 1, 0)))
            if kind == "flip" and out:
                out[at] ^= draw(st.integers(1, 255))
            elif kind == "truncate":
                del out[at:]
            elif kind == "insert":
                out[at:at] = draw(st.binary(min_size=1, max_size=16))
            elif kind == "delete" and out:
                del out[at : at + draw(st.integers(1, 8))]
            elif kind == "duplicate" and out:
                out[at:at] = out[at : at + draw(st.integers(1, 32))]
        return bytes(out)

    return mutate()


def junk(data_for_mutation: bytes) -> st.SearchStrategy[bytes]:
    """What a fuzzer sends in place of a message: a generated Envelope, a byte-level mutation of
    a real one, or raw bytes."""
    return st.one_of(envelopes(), envelopes(), byte_mutations(data_for_mutation), st.binary(max_size=128))


def sample(strategy: st.SearchStrategy, count: int, *, seed_value: int) -> list:
    """``count`` values of ``strategy``, reproducibly for ``seed_value`` (Hypothesis drives the
    generation; nothing is shrunk, because nothing fails here: the server decides)."""
    drawn: list = []

    @seed(seed_value)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value) -> None:
        drawn.append(value)

    collect()
    while len(drawn) < count and drawn:  # Hypothesis stops early when it runs out of new values
        drawn.append(drawn[len(drawn) % max(1, len(drawn))])
    return drawn[:count]


# --- structural mutations of one real answer ---------------------------------------------------
# Each returns bytes the server can tell are not the answer it asked for (the oracle below
# checks that), so accepting one is a failure: values inside tensors, signatures or sealed
# shares are never changed (the server cannot tell those; recipients do, threat_model.md M-LIAR).


def _with_header(data: bytes, change: Callable[[object], None]) -> bytes:
    envelope = envelope_pb2.Envelope()
    envelope.ParseFromString(data)
    body = getattr(envelope, envelope.WhichOneof("body"))
    change(body.header)
    return envelope.SerializeToString()


def wrong_session(data: bytes, rng: random.Random) -> bytes:
    return _with_header(data, lambda h: setattr(h, "session", rng.randbytes(len(h.session) or 16)))


def wrong_round(data: bytes, rng: random.Random) -> bytes:
    return _with_header(data, lambda h: setattr(h, "round", h.round + rng.choice((-1, 1, 7))))


def wrong_step(data: bytes, rng: random.Random) -> bytes:
    return _with_header(data, lambda h: setattr(h, "step", h.step + rng.choice((-1, 1, 1000))))


def stage_skip(data: bytes, rng: random.Random) -> bytes:
    def change(header) -> None:
        header.stage = rng.choice([s for s in STAGES if s != header.stage])

    return _with_header(data, change)


def another_sender(data: bytes, rng: random.Random) -> bytes:
    return _with_header(data, lambda h: setattr(h, "sender", h.sender + rng.choice((-1, 1, 1000))))


def another_type(data: bytes, rng: random.Random) -> bytes:
    """The same header in a message of another type (an Ack where an input is due, ...)."""
    envelope = envelope_pb2.Envelope()
    envelope.ParseFromString(data)
    which = envelope.WhichOneof("body")
    header = getattr(envelope, which).header
    other = rng.choice([b for b in BODIES if b.name != which and "header" in b.message_type.fields_by_name])
    swapped = envelope_pb2.Envelope()
    getattr(swapped, other.name).header.CopyFrom(header)
    return swapped.SerializeToString()


def truncated(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(0, max(len(data), 1))]


def wrong_shape(data: bytes, rng: random.Random) -> bytes:
    """Every tensor of the answer one element shorter or longer (data and header agree)."""
    envelope = envelope_pb2.Envelope()
    envelope.ParseFromString(data)
    tensors = [t for t in _tensors(getattr(envelope, envelope.WhichOneof("body")))]
    if not tensors:
        return stage_skip(data, rng)
    for tensor in tensors:
        itemsize = np.dtype(tensor.dtype).itemsize
        if rng.random() < 0.5 and len(tensor.data) >= itemsize:
            tensor.data = tensor.data[:-itemsize]
        else:
            tensor.data = tensor.data + bytes(itemsize)
        del tensor.shape[:]
        tensor.shape.append(len(tensor.data) // itemsize)
    return envelope.SerializeToString()


def _tensors(message):
    for field, value in message.ListFields():
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        for item in value if field.is_repeated else [value]:
            if field.message_type.name == "Tensor":
                yield item
            else:
                yield from _tensors(item)


STRUCTURAL = {f.__name__: f for f in (wrong_session, wrong_round, wrong_step, stage_skip, another_sender, another_type, truncated, wrong_shape)}


def is_other_answer(data: bytes, honest: bytes) -> bool:
    """The oracle: True when ``data`` is not the honest answer in a way the server can check
    (it does not decode, or its type, header or any tensor's dtype or shape differs, or a
    non-tensor field differs). A change confined to tensor values is not one: the server
    cannot tell masked values apart, and a fuzzer must not send it."""
    try:
        mine = codec.decode(data)
    except ProtocolError:
        return True
    except Exception:  # noqa: BLE001 the codec should raise ProtocolError only; the server catches the rest
        return True
    return not _same_shape(mine, codec.decode(honest))


def _same_shape(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape
    if dataclasses.is_dataclass(a):
        return all(_same_shape(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_shape(x, y) for x, y in zip(a, b))
    return a == b


def is_other_hello(data: bytes, client: int) -> bool:
    """The oracle before joining: True unless ``data`` is a Hello of ``client`` (which would join)."""
    try:
        message = codec.decode(data)
    except Exception:  # noqa: BLE001 anything that does not decode is not a Hello
        return True
    return not (isinstance(message, Hello) and message.client == client)


def is_other_hello_batch(data: bytes, client: int) -> bool:
    """The oracle for a stream's raw first message: True unless ``data`` is a batch whose every
    frame is a Hello of ``client`` (which would join)."""
    try:
        frames = decode_batch(data, max_frames=1)  # a stream under one client's certificate
    except ProtocolError:
        return True
    return not frames or any(f.client != client or is_other_hello(f.body, client) for f in frames)
