"""Encode and decode protocol messages to the protobuf wire format (one Envelope per message).

The mapping is generic: a dataclass field maps to the protobuf field of the same name, by
type (ints, floats, strings, bytes, enums by value, tuples as repeated fields, nested
dataclasses as sub-messages, numpy arrays as Tensor). Anything that does not decode to a
well-formed message raises ProtocolError, so a receiver can reject the sender and go on.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from functools import cache
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from secure_fedgraph.errors import ConfigError, ProtocolError
from secure_fedgraph.protocol import messages as protocol_messages
from secure_fedgraph.protocol.secure_sum import messages as secure_sum_messages
from secure_fedgraph.protocol import spec as spec_module
from secure_fedgraph.wire import collectives_pb2, common_pb2, envelope_pb2, secure_sum_pb2

# dtypes a tensor may carry on the wire (little-endian only; no object arrays, ever)
WIRE_DTYPES = {np.dtype(name) for name in ("<f4", "<f8", "<u4", "<u8", "<i4", "<i8")}

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


def tensor_to_pb(array: np.ndarray) -> common_pb2.Tensor:
    dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    if dtype not in WIRE_DTYPES:
        raise ConfigError(f"dtype {array.dtype} cannot go on the wire; use one of {sorted(str(d) for d in WIRE_DTYPES)}")
    contiguous = np.ascontiguousarray(array, dtype=dtype)
    return common_pb2.Tensor(dtype=dtype.str, shape=list(array.shape), data=contiguous.tobytes())


def tensor_from_pb(tensor: common_pb2.Tensor) -> np.ndarray:
    """A read-only array view of a Tensor, after checking dtype, shape and byte length."""
    try:
        dtype = np.dtype(tensor.dtype)
    except TypeError:
        raise ProtocolError(f"tensor has unknown dtype {tensor.dtype!r}") from None
    if dtype not in WIRE_DTYPES:
        raise ProtocolError(f"tensor dtype {tensor.dtype!r} is not allowed on the wire")
    shape = tuple(tensor.shape)
    if any(d < 0 for d in shape):
        raise ProtocolError(f"tensor has a negative dimension: {shape}")
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if shape else dtype.itemsize
    if len(tensor.data) != expected:
        raise ProtocolError(f"tensor of shape {shape} and dtype {dtype} needs {expected} bytes, got {len(tensor.data)}")
    return np.frombuffer(tensor.data, dtype=dtype).reshape(shape)


def to_pb(obj: Any) -> Any:
    """Dataclass message -> protobuf message."""
    out = _PB_CLASS[type(obj)]()
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if value is None:
            continue
        if isinstance(value, np.ndarray):
            getattr(out, f.name).CopyFrom(tensor_to_pb(value))
        elif dataclasses.is_dataclass(value):
            getattr(out, f.name).CopyFrom(to_pb(value))
        elif isinstance(value, enum.Enum):
            setattr(out, f.name, value.value)
        elif isinstance(value, tuple):
            if value and dataclasses.is_dataclass(value[0]):
                getattr(out, f.name).extend(to_pb(v) for v in value)
            else:
                getattr(out, f.name).extend(value)
        else:
            setattr(out, f.name, value)
    return out


def _value(msg: Any, name: str, hint: Any) -> Any:
    inner = _optional_inner(hint)
    if inner is not None:
        return _value(msg, name, inner) if msg.HasField(name) else None
    raw = getattr(msg, name)
    if hint is np.ndarray:
        return tensor_from_pb(raw)
    if typing.get_origin(hint) is tuple:
        (item,) = {a for a in typing.get_args(hint) if a is not Ellipsis}
        if dataclasses.is_dataclass(item):
            return tuple(from_pb(item, r) for r in raw)
        return tuple(item(r) for r in raw)
    if dataclasses.is_dataclass(hint):
        return from_pb(hint, raw)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(raw)
        except ValueError:
            raise ProtocolError(f"unknown {hint.__name__} {raw!r}") from None
    return hint(raw)


def from_pb(cls: type, msg: Any) -> Any:
    """Protobuf message -> dataclass message; field validation errors become ProtocolError."""
    hints = _hints(cls)
    try:
        return cls(**{f.name: _value(msg, f.name, hints[f.name]) for f in dataclasses.fields(cls)})
    except ConfigError as exc:
        raise ProtocolError(f"malformed {cls.__name__}: {exc}") from None


def encode(message) -> bytes:
    """Serialise one message in an Envelope."""
    if type(message) not in _ENVELOPE_FIELD:
        raise ConfigError(f"{type(message).__name__} is not a wire message")
    envelope = envelope_pb2.Envelope()
    getattr(envelope, _ENVELOPE_FIELD[type(message)]).CopyFrom(to_pb(message))
    return envelope.SerializeToString()


def decode(data: bytes):
    """Parse an Envelope; raises ProtocolError for anything that is not one well-formed message."""
    envelope = envelope_pb2.Envelope()
    try:
        envelope.ParseFromString(data)
    except (DecodeError, ValueError, TypeError) as exc:
        raise ProtocolError(f"malformed message ({len(data)} bytes): {exc}") from None
    which = envelope.WhichOneof("body")
    if which is None:
        raise ProtocolError(f"message of {len(data)} bytes carries no body")
    return from_pb(_CLASS_OF_FIELD[which], getattr(envelope, which))
