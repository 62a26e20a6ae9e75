from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Header(_message.Message):
    __slots__ = ("session", "round", "step", "stage", "sender")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    session: bytes
    round: int
    step: int
    stage: str
    sender: int
    def __init__(self, session: _Optional[bytes] = ..., round: _Optional[int] = ..., step: _Optional[int] = ..., stage: _Optional[str] = ..., sender: _Optional[int] = ...) -> None: ...

class Tensor(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class TensorSpec(_message.Message):
    __slots__ = ("name", "shape")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ...) -> None: ...

class SumSpec(_message.Message):
    __slots__ = ("name", "tensors", "clip_range", "server_only", "streaming", "resolution", "noise")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    CLIP_RANGE_FIELD_NUMBER: _ClassVar[int]
    SERVER_ONLY_FIELD_NUMBER: _ClassVar[int]
    STREAMING_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    NOISE_FIELD_NUMBER: _ClassVar[int]
    name: str
    tensors: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    clip_range: float
    server_only: bool
    streaming: bool
    resolution: float
    noise: SumNoise
    def __init__(self, name: _Optional[str] = ..., tensors: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ..., clip_range: _Optional[float] = ..., server_only: _Optional[bool] = ..., streaming: _Optional[bool] = ..., resolution: _Optional[float] = ..., noise: _Optional[_Union[SumNoise, _Mapping]] = ...) -> None: ...

class SumNoise(_message.Message):
    __slots__ = ("l2_clip", "noise_multiplier", "expected_contributors", "unit", "min_precision_bits", "max_rows")
    L2_CLIP_FIELD_NUMBER: _ClassVar[int]
    NOISE_MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    MIN_PRECISION_BITS_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_FIELD_NUMBER: _ClassVar[int]
    l2_clip: float
    noise_multiplier: float
    expected_contributors: int
    unit: str
    min_precision_bits: int
    max_rows: int
    def __init__(self, l2_clip: _Optional[float] = ..., noise_multiplier: _Optional[float] = ..., expected_contributors: _Optional[int] = ..., unit: _Optional[str] = ..., min_precision_bits: _Optional[int] = ..., max_rows: _Optional[int] = ...) -> None: ...

class FixedPoint(_message.Message):
    __slots__ = ("clip_range", "precision_bits", "ring_bits")
    CLIP_RANGE_FIELD_NUMBER: _ClassVar[int]
    PRECISION_BITS_FIELD_NUMBER: _ClassVar[int]
    RING_BITS_FIELD_NUMBER: _ClassVar[int]
    clip_range: float
    precision_bits: int
    ring_bits: int
    def __init__(self, clip_range: _Optional[float] = ..., precision_bits: _Optional[int] = ..., ring_bits: _Optional[int] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("header",)
    HEADER_FIELD_NUMBER: _ClassVar[int]
    header: Header
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ...) -> None: ...
