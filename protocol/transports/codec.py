"""Encode and decode protocol messages to the protobuf wire format (one Envelope per message).

The mapping is generic: a dataclass field maps to the protobuf field of the same name, by
type (ints, floats, strings, bytes, enums by value, tuples as repeated fields, nested
dataclasses as sub-messages, numpy arrays as Tensor). Anything that does not decode to a
well-formed message raises ProtocolError, so a receiver can reject the sender and go on.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import operator
import re
import types
import typing
from functools import cache
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from secure_fedgraph.errors import ConfigError, ProtocolError
from secure_fedgraph.protocol.core import messages as protocol_messages
from secure_fedgraph.protocol.sum_backends import messages as secure_sum_messages
from secure_fedgraph.protocol.core import spec as spec_module
from secure_fedgraph.wire import collectives_pb2, common_pb2, envelope_pb2, secure_sum_pb2

# dtypes a tensor may carry on the wire (little-endian only; no object arrays, ever)
WIRE_DTYPES = {np.dtype(name) for name in ("<f4", "<f8", "<u4", "<u8", "<i4", "<i8")}
MAX_DIMS = 8  # no message of ours has more; a header with thousands of dimensions is refused before any arithmetic

_MESSAGE_MODULES = (protocol_messages, secure_sum_messages, spec_module)
_PB_MODULES = (common_pb2, secure_sum_pb2, collectives_pb2)
_TYPES = {
    obj.__name__: obj
    for module in _MESSAGE_MODULES
    for obj in vars(module).values()
    if isinstance(obj, type) and dataclasses.is_dataclass(obj)
}
_TYPES["FixedPoint"] = secure_sum_messages.FixedPoint


def _pb_class(name: str):
    for module in _PB_MODULES:
        if hasattr(module, name):
            return getattr(module, name)
    return None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


_PB_CLASS = {cls: _pb_class(name) for name, cls in _TYPES.items() if _pb_class(name) is not None}
_ENVELOPE_FIELDS = {f.name for f in envelope_pb2.Envelope.DESCRIPTOR.oneofs_by_name["body"].fields}
_ENVELOPE_FIELD = {cls: _snake(cls.__name__) for cls in _PB_CLASS if _snake(cls.__name__) in _ENVELOPE_FIELDS}
_CLASS_OF_FIELD = {name: cls for cls, name in _ENVELOPE_FIELD.items()}
_HINT_NAMESPACE = {**vars(secure_sum_messages), **vars(protocol_messages), **vars(spec_module), "np": np}


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, _HINT_NAMESPACE)


def _optional_inner(hint: Any) -> Any | None:
    """X for ``X | None``, else None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0]
    return None


def byte_size(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """Bytes a tensor of ``shape`` needs, in Python ints (threat_model.md R-CRASH): numpy's
    int64 product wraps ([2^32, 2^32] gives 0), so a header could claim any size at all."""
    return math.prod(shape) * dtype.itemsize


def tensor_from_pb(tensor: common_pb2.Tensor) -> np.ndarray:
    """A read-only array view of a Tensor, after checking dtype, shape and byte length."""
    try:
        dtype = np.dtype(tensor.dtype)
    except TypeError:
        raise ProtocolError(f"tensor has unknown dtype {tensor.dtype!r}") from None
    if dtype not in WIRE_DTYPES:
        raise ProtocolError(f"tensor dtype {tensor.dtype!r} is not allowed on the wire")
    if len(tensor.shape) > MAX_DIMS:
        raise ProtocolError(f"tensor has {len(tensor.shape)} dimensions, at most {MAX_DIMS} are allowed")
    shape = tuple(int(d) for d in tensor.shape)
    if any(d < 0 for d in shape):
        raise ProtocolError(f"tensor has a negative dimension: {shape}")
    if byte_size(tuple(d for d in shape if d), dtype) >= 2**62:  # numpy refuses such shapes even when one dimension is 0
        raise ProtocolError(f"tensor of shape {shape} is too large for any message")
    expected = byte_size(shape, dtype)
    data = tensor.data  # each access copies the bytes out of the message: once, not twice
    if len(data) != expected:
        raise ProtocolError(f"tensor of shape {shape} and dtype {dtype} needs {expected} bytes, got {len(data)}")
    return np.frombuffer(data, dtype=dtype).reshape(shape)


# Each dataclass gets a compiled plan, computed once: (field name, kind, inner type). Kinds:
# "scalar", "enum", "tensor", "message", "repeated_message", "repeated_scalar", plus an
# "optional_" prefix for ``X | None`` fields (absent on the wire when None).
_PLANS: dict[type, list[tuple[str, str, Any]]] = {}


def _kind(hint: Any) -> tuple[str, Any]:
    inner = _optional_inner(hint)
    if inner is not None:
        kind, sub = _kind(inner)
        return "optional_" + kind, sub
    if hint is np.ndarray:
        return "tensor", None
    if typing.get_origin(hint) is tuple:
        (item,) = {a for a in typing.get_args(hint) if a is not Ellipsis}
        return ("repeated_message", item) if dataclasses.is_dataclass(item) else ("repeated_scalar", item)
    if dataclasses.is_dataclass(hint):
        return "message", hint
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "enum", hint
    return "scalar", hint


def _plan(cls: type) -> list[tuple[str, str, Any]]:
    plan = _PLANS.get(cls)
    if plan is None:
        hints = _hints(cls)
        plan = _PLANS[cls] = [(f.name, *_kind(hints[f.name])) for f in dataclasses.fields(cls)]
    return plan


_FLAT_SCALARS = (int, bytes, str, float, bool)


@cache
def _flat(cls: type) -> tuple[str, ...] | None:
    """The field names of a message whose fields are all plain scalars and that checks nothing
    on construction (a client's signed keys, a signature, a share), else None. A repeated one
    goes on and off the wire in one call per item, not field by field: a key set-up relays n
    signed keys to every client process and an unmask k + 1 signatures to every client, which
    this reads in half the time (benchmarks/wire_messages.py)."""
    plan = _plan(cls)
    checks_or_slots = hasattr(cls, "__post_init__") or hasattr(cls, "__slots__")  # inherited too; slots: no vars(item)
    if checks_or_slots or any(kind != "scalar" or sub not in _FLAT_SCALARS for _, kind, sub in plan):
        return None
    return tuple(name for name, _, _ in plan)


@cache
def _flat_reader(cls: type):
    """Protobuf items -> ``cls`` objects, for a :func:`_flat` class: its fields in order (the
    wire's scalars are already the field types: the conversions of :func:`from_pb` are identities)."""
    names = _flat(cls)
    if len(names) == 1:
        (only,) = names
        return lambda items: tuple(cls(getattr(item, only)) for item in items)
    get = operator.attrgetter(*names)
    return lambda items: tuple(cls(*get(item)) for item in items)


def _fill_tensor(out: common_pb2.Tensor, array: np.ndarray) -> None:
    dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    if dtype not in WIRE_DTYPES:
        raise ConfigError(f"dtype {array.dtype} cannot go on the wire; use one of {sorted(str(d) for d in WIRE_DTYPES)}")
    out.dtype = dtype.str
    out.shape.extend(array.shape)
    out.data = np.ascontiguousarray(array, dtype=dtype).tobytes()


def _fill(out: Any, obj: Any) -> None:
    """Write a dataclass message into a protobuf message in place (no intermediate copies)."""
    for name, kind, sub in _plan(type(obj)):
        value = getattr(obj, name)
        if kind.startswith("optional_"):
            if value is None:
                continue
            kind = kind[len("optional_") :]
            if kind in ("message", "tensor"):
                getattr(out, name).SetInParent()  # present even if every field has its default
        if kind == "scalar":
            setattr(out, name, value)
        elif kind == "enum":
            setattr(out, name, value.value)
        elif kind == "tensor":
            _fill_tensor(getattr(out, name), value)
        elif kind == "message":
            _fill(getattr(out, name), value)
        elif kind == "repeated_message":
            container = getattr(out, name)
            flat = _flat(sub) is not None
            for item in value:
                if flat and type(item) is sub:
                    container.add(**vars(item))  # its fields, nothing else (_flat)
                else:
                    _fill(container.add(), item)
        else:  # repeated_scalar
            getattr(out, name).extend(value)


def to_pb(obj: Any) -> Any:
    """Dataclass message -> protobuf message."""
    out = _PB_CLASS[type(obj)]()
    _fill(out, obj)
    return out


def from_pb(cls: type, msg: Any) -> Any:
    """Protobuf message -> dataclass message; field validation errors become ProtocolError."""
    values = {}
    try:
        for name, kind, sub in _plan(cls):
            if kind.startswith("optional_"):
                if not msg.HasField(name):
                    values[name] = None
                    continue
                kind = kind[len("optional_") :]
            raw = getattr(msg, name)
            if kind == "scalar":
                values[name] = sub(raw)
            elif kind == "enum":
                try:
                    values[name] = sub(raw)
                except ValueError:
                    raise ProtocolError(f"unknown {sub.__name__} {raw!r}") from None
            elif kind == "tensor":
                values[name] = tensor_from_pb(raw)
            elif kind == "message":
                values[name] = from_pb(sub, raw)
            elif kind == "repeated_message":
                values[name] = _flat_reader(sub)(raw) if _flat(sub) is not None else tuple(from_pb(sub, r) for r in raw)
            else:  # repeated scalars: map, not a generator (a Deliver names every contributor, n per client)
                values[name] = tuple(raw) if sub is int else tuple(map(sub, raw))
        return cls(**values)
    except ConfigError as exc:
        raise ProtocolError(f"malformed {cls.__name__}: {exc}") from None


def encode(message) -> bytes:
    """Serialise one message in an Envelope."""
    if type(message) not in _ENVELOPE_FIELD:
        raise ConfigError(f"{type(message).__name__} is not a wire message")
    envelope = envelope_pb2.Envelope()
    _fill(getattr(envelope, _ENVELOPE_FIELD[type(message)]), message)
    return envelope.SerializeToString()


def decode(data: bytes):
    """Parse an Envelope; raises ProtocolError for anything that is not one well-formed message."""
    cls, body = _body(data)
    return from_pb(cls, body)


@dataclasses.dataclass(frozen=True)
class Peeked:
    """What :func:`peek` reads of a message: its class, its header (None for a Hello) and its
    name (uploads, broadcasts; "" where it has none)."""

    cls: type
    header: Any
    name: str


def peek(data: bytes) -> Peeked:
    """A message's class, header and name without converting its tensors and lists: what an
    audit needs of most transcript records (a client's transcript repeats the server's messages,
    which the audit decodes in full once). Raises ProtocolError as :func:`decode` does for a
    malformed Envelope; the rest of the body is not checked."""
    cls, body = _body(data)
    fields = {name: sub for name, _, sub in _plan(cls)}
    header = from_pb(fields["header"], body.header) if "header" in fields else None
    return Peeked(cls, header, str(body.name) if "name" in fields else "")


def _body(data: bytes) -> tuple[type, Any]:
    envelope = envelope_pb2.Envelope()
    try:
        envelope.ParseFromString(data)
    except (DecodeError, ValueError, TypeError) as exc:
        raise ProtocolError(f"malformed message ({len(data)} bytes): {exc}") from None
    which = envelope.WhichOneof("body")
    if which is None:
        raise ProtocolError(f"message of {len(data)} bytes carries no body")
    return _CLASS_OF_FIELD[which], getattr(envelope, which)
