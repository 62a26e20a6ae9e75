from secure_fedgraph.wire import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NamedTensor(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: _common_pb2.Tensor
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("client", "version")
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    client: int
    version: str
    def __init__(self, client: _Optional[int] = ..., version: _Optional[str] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("header", "config_json", "participants", "certificates")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    PARTICIPANTS_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATES_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    config_json: str
    participants: _containers.RepeatedScalarFieldContainer[int]
    certificates: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., config_json: _Optional[str] = ..., participants: _Optional[_Iterable[int]] = ..., certificates: _Optional[_Iterable[bytes]] = ...) -> None: ...

class Joined(_message.Message):
    __slots__ = ("header", "nonce")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    nonce: bytes
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., nonce: _Optional[bytes] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("header", "clients", "nonces")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    NONCES_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    clients: _containers.RepeatedScalarFieldContainer[int]
    nonces: bytes
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., clients: _Optional[_Iterable[int]] = ..., nonces: _Optional[bytes] = ...) -> None: ...

class BroadcastRequest(_message.Message):
    __slots__ = ("header", "name", "tensors")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    name: str
    tensors: _containers.RepeatedCompositeFieldContainer[NamedTensor]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., name: _Optional[str] = ..., tensors: _Optional[_Iterable[_Union[NamedTensor, _Mapping]]] = ...) -> None: ...

class ScatterRequest(_message.Message):
    __slots__ = ("header", "name", "tensors")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    name: str
    tensors: _containers.RepeatedCompositeFieldContainer[NamedTensor]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., name: _Optional[str] = ..., tensors: _Optional[_Iterable[_Union[NamedTensor, _Mapping]]] = ...) -> None: ...

class UploadRequest(_message.Message):
    __slots__ = ("header", "name", "spec")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    name: str
    spec: _common_pb2.SumSpec
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., name: _Optional[str] = ..., spec: _Optional[_Union[_common_pb2.SumSpec, _Mapping]] = ...) -> None: ...

class UploadResponse(_message.Message):
    __slots__ = ("header", "name", "tensors")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    name: str
    tensors: _containers.RepeatedCompositeFieldContainer[NamedTensor]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., name: _Optional[str] = ..., tensors: _Optional[_Iterable[_Union[NamedTensor, _Mapping]]] = ...) -> None: ...

class EndRequest(_message.Message):
    __slots__ = ("header", "reason")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    reason: str
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...
