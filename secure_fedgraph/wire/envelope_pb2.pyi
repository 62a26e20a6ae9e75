from secure_fedgraph.wire import common_pb2 as _common_pb2
from secure_fedgraph.wire import secure_sum_pb2 as _secure_sum_pb2
from secure_fedgraph.wire import collectives_pb2 as _collectives_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Envelope(_message.Message):
    __slots__ = ("advertise_request", "advertise_response", "share_keys_request", "share_keys_response", "key_deal_request", "key_deal_response", "key_install_request", "input_request", "input_response", "consistency_request", "consistency_response", "unmask_request", "unmask_response", "recover_request", "recover_response", "deliver_request", "ack", "hello", "welcome", "broadcast_request", "scatter_request", "upload_request", "upload_response", "end_request", "graph_request", "graph_response", "deliver_response", "verify_request", "verify_response", "joined", "session_request", "pair_seeds_request", "pair_seeds_response")
    ADVERTISE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    ADVERTISE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    SHARE_KEYS_REQUEST_FIELD_NUMBER: _ClassVar[int]
    SHARE_KEYS_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    KEY_DEAL_REQUEST_FIELD_NUMBER: _ClassVar[int]
    KEY_DEAL_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    KEY_INSTALL_REQUEST_FIELD_NUMBER: _ClassVar[int]
    INPUT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    INPUT_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_REQUEST_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    UNMASK_REQUEST_FIELD_NUMBER: _ClassVar[int]
    UNMASK_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    RECOVER_REQUEST_FIELD_NUMBER: _ClassVar[int]
    RECOVER_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    DELIVER_REQUEST_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_REQUEST_FIELD_NUMBER: _ClassVar[int]
    SCATTER_REQUEST_FIELD_NUMBER: _ClassVar[int]
    UPLOAD_REQUEST_FIELD_NUMBER: _ClassVar[int]
    UPLOAD_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    END_REQUEST_FIELD_NUMBER: _ClassVar[int]
    GRAPH_REQUEST_FIELD_NUMBER: _ClassVar[int]
    GRAPH_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    DELIVER_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    VERIFY_REQUEST_FIELD_NUMBER: _ClassVar[int]
    VERIFY_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    JOINED_FIELD_NUMBER: _ClassVar[int]
    SESSION_REQUEST_FIELD_NUMBER: _ClassVar[int]
    PAIR_SEEDS_REQUEST_FIELD_NUMBER: _ClassVar[int]
    PAIR_SEEDS_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    advertise_request: _secure_sum_pb2.AdvertiseRequest
    advertise_response: _secure_sum_pb2.AdvertiseResponse
    share_keys_request: _secure_sum_pb2.ShareKeysRequest
    share_keys_response: _secure_sum_pb2.ShareKeysResponse
    key_deal_request: _secure_sum_pb2.KeyDealRequest
    key_deal_response: _secure_sum_pb2.KeyDealResponse
    key_install_request: _secure_sum_pb2.KeyInstallRequest
    input_request: _secure_sum_pb2.InputRequest
    input_response: _secure_sum_pb2.InputResponse
    consistency_request: _secure_sum_pb2.ConsistencyRequest
    consistency_response: _secure_sum_pb2.ConsistencyResponse
    unmask_request: _secure_sum_pb2.UnmaskRequest
    unmask_response: _secure_sum_pb2.UnmaskResponse
    recover_request: _secure_sum_pb2.RecoverRequest
    recover_response: _secure_sum_pb2.RecoverResponse
    deliver_request: _secure_sum_pb2.DeliverRequest
    ack: _common_pb2.Ack
    hello: _collectives_pb2.Hello
    welcome: _collectives_pb2.Welcome
    broadcast_request: _collectives_pb2.BroadcastRequest
    scatter_request: _collectives_pb2.ScatterRequest
    upload_request: _collectives_pb2.UploadRequest
    upload_response: _collectives_pb2.UploadResponse
    end_request: _collectives_pb2.EndRequest
    graph_request: _secure_sum_pb2.GraphRequest
    graph_response: _secure_sum_pb2.GraphResponse
    deliver_response: _secure_sum_pb2.DeliverResponse
    verify_request: _secure_sum_pb2.VerifyRequest
    verify_response: _secure_sum_pb2.VerifyResponse
    joined: _collectives_pb2.Joined
    session_request: _collectives_pb2.SessionRequest
    pair_seeds_request: _secure_sum_pb2.PairSeedsRequest
    pair_seeds_response: _secure_sum_pb2.PairSeedsResponse
    def __init__(self, advertise_request: _Optional[_Union[_secure_sum_pb2.AdvertiseRequest, _Mapping]] = ..., advertise_response: _Optional[_Union[_secure_sum_pb2.AdvertiseResponse, _Mapping]] = ..., share_keys_request: _Optional[_Union[_secure_sum_pb2.ShareKeysRequest, _Mapping]] = ..., share_keys_response: _Optional[_Union[_secure_sum_pb2.ShareKeysResponse, _Mapping]] = ..., key_deal_request: _Optional[_Union[_secure_sum_pb2.KeyDealRequest, _Mapping]] = ..., key_deal_response: _Optional[_Union[_secure_sum_pb2.KeyDealResponse, _Mapping]] = ..., key_install_request: _Optional[_Union[_secure_sum_pb2.KeyInstallRequest, _Mapping]] = ..., input_request: _Optional[_Union[_secure_sum_pb2.InputRequest, _Mapping]] = ..., input_response: _Optional[_Union[_secure_sum_pb2.InputResponse, _Mapping]] = ..., consistency_request: _Optional[_Union[_secure_sum_pb2.ConsistencyRequest, _Mapping]] = ..., consistency_response: _Optional[_Union[_secure_sum_pb2.ConsistencyResponse, _Mapping]] = ..., unmask_request: _Optional[_Union[_secure_sum_pb2.UnmaskRequest, _Mapping]] = ..., unmask_response: _Optional[_Union[_secure_sum_pb2.UnmaskResponse, _Mapping]] = ..., recover_request: _Optional[_Union[_secure_sum_pb2.RecoverRequest, _Mapping]] = ..., recover_response: _Optional[_Union[_secure_sum_pb2.RecoverResponse, _Mapping]] = ..., deliver_request: _Optional[_Union[_secure_sum_pb2.DeliverRequest, _Mapping]] = ..., ack: _Optional[_Union[_common_pb2.Ack, _Mapping]] = ..., hello: _Optional[_Union[_collectives_pb2.Hello, _Mapping]] = ..., welcome: _Optional[_Union[_collectives_pb2.Welcome, _Mapping]] = ..., broadcast_request: _Optional[_Union[_collectives_pb2.BroadcastRequest, _Mapping]] = ..., scatter_request: _Optional[_Union[_collectives_pb2.ScatterRequest, _Mapping]] = ..., upload_request: _Optional[_Union[_collectives_pb2.UploadRequest, _Mapping]] = ..., upload_response: _Optional[_Union[_collectives_pb2.UploadResponse, _Mapping]] = ..., end_request: _Optional[_Union[_collectives_pb2.EndRequest, _Mapping]] = ..., graph_request: _Optional[_Union[_secure_sum_pb2.GraphRequest, _Mapping]] = ..., graph_response: _Optional[_Union[_secure_sum_pb2.GraphResponse, _Mapping]] = ..., deliver_response: _Optional[_Union[_secure_sum_pb2.DeliverResponse, _Mapping]] = ..., verify_request: _Optional[_Union[_secure_sum_pb2.VerifyRequest, _Mapping]] = ..., verify_response: _Optional[_Union[_secure_sum_pb2.VerifyResponse, _Mapping]] = ..., joined: _Optional[_Union[_collectives_pb2.Joined, _Mapping]] = ..., session_request: _Optional[_Union[_collectives_pb2.SessionRequest, _Mapping]] = ..., pair_seeds_request: _Optional[_Union[_secure_sum_pb2.PairSeedsRequest, _Mapping]] = ..., pair_seeds_response: _Optional[_Union[_secure_sum_pb2.PairSeedsResponse, _Mapping]] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("client", "body", "left")
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    client: int
    body: int
    left: str
    def __init__(self, client: _Optional[int] = ..., body: _Optional[int] = ..., left: _Optional[str] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("bodies", "frames")
    BODIES_FIELD_NUMBER: _ClassVar[int]
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    bodies: _containers.RepeatedScalarFieldContainer[bytes]
    frames: _containers.RepeatedCompositeFieldContainer[Frame]
    def __init__(self, bodies: _Optional[_Iterable[bytes]] = ..., frames: _Optional[_Iterable[_Union[Frame, _Mapping]]] = ...) -> None: ...
