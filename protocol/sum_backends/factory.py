"""Pick the server and client role classes for a backend (the one place backends are named)."""

from __future__ import annotations

from collections.abc import Mapping

from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.protocol.sum_backends.config import Backend, SecureSumConfig
from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy, KeyEpochCount
from secure_fedgraph.protocol.sum_backends.roles import ClientRole, ServerRole
from secure_fedgraph.protocol.sum_backends.signed import SignedContributions


def _classes(backend: Backend) -> tuple[type[ServerRole], type[ClientRole]]:
    if backend is Backend.PLAIN:
        from secure_fedgraph.protocol.sum_backends.plain import PlainClient, PlainServer

        return PlainServer, PlainClient
    if backend is Backend.MASK:
        from secure_fedgraph.protocol.sum_backends.mask_client import MaskClient
        from secure_fedgraph.protocol.sum_backends.mask_server import MaskServer

        return MaskServer, MaskClient
    if backend is Backend.CKKS:
        from secure_fedgraph.protocol.sum_backends.ckks import CkksClient, CkksServer

        return CkksServer, CkksClient
    raise ValueError(f"unknown backend {backend!r}")


def make_server(
    config: SecureSumConfig, *, session: bytes, directory: Mapping[int, bytes], clients: list[int], sequencer=None
) -> ServerRole:
    return _classes(config.backend)[0](config, session=session, directory=directory, clients=clients, sequencer=sequencer)


def make_client(
    config: SecureSumConfig,
    *,
    client_id: int,
    session: bytes,
    identity: IdentityKey,
    directory: Mapping[int, bytes],
    policy: ClientPolicy | None = None,
    signed: SignedContributions | None = None,
    key_epochs: KeyEpochCount | None = None,
) -> ClientRole:
    """A client role; ``policy`` is the client's own minimums (default: accept ``config``);
    ``signed``: its signed contributions from earlier sessions of a resumed run (R-RESUME);
    ``key_epochs``: the key epochs it took part in over the run (ClientPolicy.max_key_epochs)."""
    return _classes(config.backend)[1](config, client_id=client_id, session=session, identity=identity, directory=directory, policy=policy,
                                       signed=signed, key_epochs=key_epochs)
