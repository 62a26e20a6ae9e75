"""Protocol-wide wire messages: the header every message carries, and the messages of the
collectives other than secure_sum (broadcast, scatter, upload) and of session control.

Field names match proto/secure_fedgraph/wire/*.proto one for one (the codec maps by name).
Secure-sum messages are in :mod:`secure_fedgraph.protocol.sum_backends.messages`.

=============  ======================  =======================
stage          request                 response
=============  ======================  =======================
WELCOME        Welcome                 Joined
SESSION        SessionRequest          Ack
BROADCAST      BroadcastRequest        Ack
SCATTER        ScatterRequest          Ack
UPLOAD         UploadRequest           UploadResponse
END            EndRequest              Ack
=============  ======================  =======================

``Hello`` is the first message a client sends on a new connection, before any request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from secure_fedgraph.protocol.core.spec import SumSpec
from secure_fedgraph.protocol.core.stages import Stage

SERVER = -1


@dataclass(frozen=True)
class Header:
    session: bytes
    round: int
    step: int
    stage: Stage
    sender: int


@dataclass(frozen=True)
class Ack:
    header: Header


@dataclass(frozen=True)
class NamedTensor:
    name: str
    value: np.ndarray


@dataclass(frozen=True)
class Hello:
    """A logical client introduces itself on a new connection (its certificate must agree)."""

    client: int
    version: str


@dataclass(frozen=True)
class Welcome:
    """The run this client joins: configuration and the participants' CA-signed certificates."""

    header: Header
    config_json: str
    participants: tuple[int, ...]
    certificates: tuple[bytes, ...]


@dataclass(frozen=True)
class Joined:
    """A client's answer to the Welcome: fresh randomness of its own (``nonce``, 32 bytes) that
    the session id will hash, so no signature, key or label of the run can be one of an earlier
    session (protocol/core/session.py; threat_model.md R-SESSION)."""

    header: Header
    nonce: bytes


@dataclass(frozen=True)
class SessionRequest:
    """The nonce of every client that answered the Welcome (``nonces``: 32 bytes per client, in
    ``clients`` order). Each client checks that its own is there and derives the session id."""

    header: Header
    clients: tuple[int, ...]
    nonces: bytes


@dataclass(frozen=True)
class BroadcastRequest:
    header: Header
    name: str
    tensors: tuple[NamedTensor, ...]


@dataclass(frozen=True)
class ScatterRequest:
    header: Header
    name: str
    tensors: tuple[NamedTensor, ...]


@dataclass(frozen=True)
class UploadRequest:
    header: Header
    name: str
    spec: SumSpec


@dataclass(frozen=True)
class UploadResponse:
    header: Header
    name: str
    tensors: tuple[NamedTensor, ...]


@dataclass(frozen=True)
class EndRequest:
    header: Header
    reason: str


REQUESTS: dict[Stage, type] = {
    Stage.WELCOME: Welcome,
    Stage.SESSION: SessionRequest,
    Stage.BROADCAST: BroadcastRequest,
    Stage.SCATTER: ScatterRequest,
    Stage.UPLOAD: UploadRequest,
    Stage.END: EndRequest,
}
RESPONSES: dict[Stage, type] = {
    Stage.WELCOME: Joined,
    Stage.SESSION: Ack,
    Stage.BROADCAST: Ack,
    Stage.SCATTER: Ack,
    Stage.UPLOAD: UploadResponse,
    Stage.END: Ack,
}


def tensors_of(named: tuple[NamedTensor, ...]) -> dict[str, np.ndarray]:
    """NamedTensors as a dict, refusing duplicate names."""
    out: dict[str, np.ndarray] = {}
    for t in named:
        if t.name in out:
            from secure_fedgraph.errors import ProtocolError

            raise ProtocolError(f"tensor {t.name!r} appears twice in one message")
        out[t.name] = t.value
    return out


def named(tensors) -> tuple[NamedTensor, ...]:
    """A mapping of name -> array as NamedTensors (torch tensors accepted)."""
    from secure_fedgraph.protocol.core.spec import as_array

    return tuple(NamedTensor(k, as_array(v)) for k, v in tensors.items())
