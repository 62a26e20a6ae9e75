from secure_fedgraph.wire import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SignedKeys(_message.Message):
    __slots__ = ("client", "share_public", "mask_public", "seed_commitment", "signature")
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    SHARE_PUBLIC_FIELD_NUMBER: _ClassVar[int]
    MASK_PUBLIC_FIELD_NUMBER: _ClassVar[int]
    SEED_COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    client: int
    share_public: bytes
    mask_public: bytes
    seed_commitment: bytes
    signature: bytes
    def __init__(self, client: _Optional[int] = ..., share_public: _Optional[bytes] = ..., mask_public: _Optional[bytes] = ..., seed_commitment: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class Sealed(_message.Message):
    __slots__ = ("owner", "holder", "data")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    owner: int
    holder: int
    data: bytes
    def __init__(self, owner: _Optional[int] = ..., holder: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class Share(_message.Message):
    __slots__ = ("owner", "value")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    owner: int
    value: bytes
    def __init__(self, owner: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class Signature(_message.Message):
    __slots__ = ("client", "signature")
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    client: int
    signature: bytes
    def __init__(self, client: _Optional[int] = ..., signature: _Optional[bytes] = ...) -> None: ...

class Complaint(_message.Message):
    __slots__ = ("dealer", "key")
    DEALER_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    dealer: int
    key: bytes
    def __init__(self, dealer: _Optional[int] = ..., key: _Optional[bytes] = ...) -> None: ...

class AdvertiseRequest(_message.Message):
    __slots__ = ("header", "epoch", "participants", "graph", "degree", "threshold", "min_survivors", "max_dropped", "streaming")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTICIPANTS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    DEGREE_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    MIN_SURVIVORS_FIELD_NUMBER: _ClassVar[int]
    MAX_DROPPED_FIELD_NUMBER: _ClassVar[int]
    STREAMING_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    epoch: int
    participants: _containers.RepeatedScalarFieldContainer[int]
    graph: str
    degree: int
    threshold: int
    min_survivors: int
    max_dropped: int
    streaming: bool
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., epoch: _Optional[int] = ..., participants: _Optional[_Iterable[int]] = ..., graph: _Optional[str] = ..., degree: _Optional[int] = ..., threshold: _Optional[int] = ..., min_survivors: _Optional[int] = ..., max_dropped: _Optional[int] = ..., streaming: _Optional[bool] = ...) -> None: ...

class AdvertiseResponse(_message.Message):
    __slots__ = ("header", "keys", "graph_commitment")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    keys: SignedKeys
    graph_commitment: bytes
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., keys: _Optional[_Union[SignedKeys, _Mapping]] = ..., graph_commitment: _Optional[bytes] = ...) -> None: ...

class GraphRequest(_message.Message):
    __slots__ = ("header", "commitments")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    COMMITMENTS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    commitments: bytes
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., commitments: _Optional[bytes] = ...) -> None: ...

class GraphResponse(_message.Message):
    __slots__ = ("header", "nonce")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    nonce: bytes
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., nonce: _Optional[bytes] = ...) -> None: ...

class ShareKeysRequest(_message.Message):
    __slots__ = ("header", "peers", "nonces", "key_hashes")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    NONCES_FIELD_NUMBER: _ClassVar[int]
    KEY_HASHES_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    peers: _containers.RepeatedCompositeFieldContainer[SignedKeys]
    nonces: bytes
    key_hashes: bytes
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., peers: _Optional[_Iterable[_Union[SignedKeys, _Mapping]]] = ..., nonces: _Optional[bytes] = ..., key_hashes: _Optional[bytes] = ...) -> None: ...

class DealtShares(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: bytes
    def __init__(self, records: _Optional[bytes] = ...) -> None: ...

class DealtToNeighbours(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: bytes
    def __init__(self, records: _Optional[bytes] = ...) -> None: ...

class ShareKeysResponse(_message.Message):
    __slots__ = ("header", "dealt")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DEALT_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    dealt: DealtToNeighbours
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., dealt: _Optional[_Union[DealtToNeighbours, _Mapping]] = ...) -> None: ...

class KeyDealRequest(_message.Message):
    __slots__ = ("header", "peers")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    peers: _containers.RepeatedCompositeFieldContainer[SignedKeys]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., peers: _Optional[_Iterable[_Union[SignedKeys, _Mapping]]] = ...) -> None: ...

class KeyDealResponse(_message.Message):
    __slots__ = ("header", "public_context", "sealed_context", "sealed")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SEALED_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    public_context: bytes
    sealed_context: bytes
    sealed: _containers.RepeatedCompositeFieldContainer[Sealed]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., public_context: _Optional[bytes] = ..., sealed_context: _Optional[bytes] = ..., sealed: _Optional[_Iterable[_Union[Sealed, _Mapping]]] = ...) -> None: ...

class KeyInstallRequest(_message.Message):
    __slots__ = ("header", "dealer", "sealed", "sealed_context")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DEALER_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    SEALED_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    dealer: SignedKeys
    sealed: Sealed
    sealed_context: bytes
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., dealer: _Optional[_Union[SignedKeys, _Mapping]] = ..., sealed: _Optional[_Union[Sealed, _Mapping]] = ..., sealed_context: _Optional[bytes] = ...) -> None: ...

class InputRequest(_message.Message):
    __slots__ = ("header", "sum_index", "spec", "encoding", "live", "dealt")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SUM_INDEX_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    DEALT_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    sum_index: int
    spec: _common_pb2.SumSpec
    encoding: _common_pb2.FixedPoint
    live: _containers.RepeatedScalarFieldContainer[int]
    dealt: DealtShares
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., sum_index: _Optional[int] = ..., spec: _Optional[_Union[_common_pb2.SumSpec, _Mapping]] = ..., encoding: _Optional[_Union[_common_pb2.FixedPoint, _Mapping]] = ..., live: _Optional[_Iterable[int]] = ..., dealt: _Optional[_Union[DealtShares, _Mapping]] = ...) -> None: ...

class InputResponse(_message.Message):
    __slots__ = ("header", "payload", "ciphertexts", "self_mask_commitment", "complaints", "pair_seed_root")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    SELF_MASK_COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    COMPLAINTS_FIELD_NUMBER: _ClassVar[int]
    PAIR_SEED_ROOT_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    payload: _common_pb2.Tensor
    ciphertexts: _containers.RepeatedScalarFieldContainer[bytes]
    self_mask_commitment: bytes
    complaints: _containers.RepeatedCompositeFieldContainer[Complaint]
    pair_seed_root: bytes
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., payload: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., ciphertexts: _Optional[_Iterable[bytes]] = ..., self_mask_commitment: _Optional[bytes] = ..., complaints: _Optional[_Iterable[_Union[Complaint, _Mapping]]] = ..., pair_seed_root: _Optional[bytes] = ...) -> None: ...

class ConsistencyRequest(_message.Message):
    __slots__ = ("header", "survivors")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SURVIVORS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    survivors: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., survivors: _Optional[_Iterable[int]] = ...) -> None: ...

class ConsistencyResponse(_message.Message):
    __slots__ = ("header", "signature")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    signature: bytes
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., signature: _Optional[bytes] = ...) -> None: ...

class PairSeed(_message.Message):
    __slots__ = ("peer", "seed", "path")
    PEER_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    peer: int
    seed: bytes
    path: bytes
    def __init__(self, peer: _Optional[int] = ..., seed: _Optional[bytes] = ..., path: _Optional[bytes] = ...) -> None: ...

class PairSeedsRequest(_message.Message):
    __slots__ = ("header", "signatures")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SIGNATURES_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    signatures: _containers.RepeatedCompositeFieldContainer[Signature]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., signatures: _Optional[_Iterable[_Union[Signature, _Mapping]]] = ...) -> None: ...

class PairSeedsResponse(_message.Message):
    __slots__ = ("header", "pair_seeds")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PAIR_SEEDS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    pair_seeds: _containers.RepeatedCompositeFieldContainer[PairSeed]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., pair_seeds: _Optional[_Iterable[_Union[PairSeed, _Mapping]]] = ...) -> None: ...

class UnmaskRequest(_message.Message):
    __slots__ = ("header", "signatures")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SIGNATURES_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    signatures: _containers.RepeatedCompositeFieldContainer[Signature]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., signatures: _Optional[_Iterable[_Union[Signature, _Mapping]]] = ...) -> None: ...

class UnmaskResponse(_message.Message):
    __slots__ = ("header", "self_mask_key", "mask_key_shares")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SELF_MASK_KEY_FIELD_NUMBER: _ClassVar[int]
    MASK_KEY_SHARES_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    self_mask_key: bytes
    mask_key_shares: _containers.RepeatedCompositeFieldContainer[Share]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., self_mask_key: _Optional[bytes] = ..., mask_key_shares: _Optional[_Iterable[_Union[Share, _Mapping]]] = ...) -> None: ...

class RecoverRequest(_message.Message):
    __slots__ = ("header", "missing", "signatures")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    SIGNATURES_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    missing: _containers.RepeatedScalarFieldContainer[int]
    signatures: _containers.RepeatedCompositeFieldContainer[Signature]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., missing: _Optional[_Iterable[int]] = ..., signatures: _Optional[_Iterable[_Union[Signature, _Mapping]]] = ...) -> None: ...

class RecoverResponse(_message.Message):
    __slots__ = ("header", "self_seed_shares")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SELF_SEED_SHARES_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    self_seed_shares: _containers.RepeatedCompositeFieldContainer[Share]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., self_seed_shares: _Optional[_Iterable[_Union[Share, _Mapping]]] = ...) -> None: ...

class DeliverRequest(_message.Message):
    __slots__ = ("header", "sum_index", "contributors", "aggregate", "ciphertexts", "clipped", "signatures")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SUM_INDEX_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    AGGREGATE_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    CLIPPED_FIELD_NUMBER: _ClassVar[int]
    SIGNATURES_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    sum_index: int
    contributors: _containers.RepeatedScalarFieldContainer[int]
    aggregate: _common_pb2.Tensor
    ciphertexts: _containers.RepeatedScalarFieldContainer[bytes]
    clipped: int
    signatures: _containers.RepeatedCompositeFieldContainer[Signature]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., sum_index: _Optional[int] = ..., contributors: _Optional[_Iterable[int]] = ..., aggregate: _Optional[_Union[_common_pb2.Tensor, _Mapping]] = ..., ciphertexts: _Optional[_Iterable[bytes]] = ..., clipped: _Optional[int] = ..., signatures: _Optional[_Iterable[_Union[Signature, _Mapping]]] = ...) -> None: ...

class DeliverResponse(_message.Message):
    __slots__ = ("header", "accepted", "reason")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    accepted: bool
    reason: str
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., accepted: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = ("header", "sum_index", "owner", "ciphertexts")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SUM_INDEX_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    sum_index: int
    owner: int
    ciphertexts: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., sum_index: _Optional[int] = ..., owner: _Optional[int] = ..., ciphertexts: _Optional[_Iterable[bytes]] = ...) -> None: ...

class VerifyResponse(_message.Message):
    __slots__ = ("header", "owner", "valid")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.Header
    owner: int
    valid: bool
    def __init__(self, header: _Optional[_Union[_common_pb2.Header, _Mapping]] = ..., owner: _Optional[int] = ..., valid: _Optional[bool] = ...) -> None: ...
