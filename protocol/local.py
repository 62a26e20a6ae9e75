"""Run a secure sum with every party in one process (for tests, benchmarks and the demo).

``local_session`` wires a server role and its client roles through the in-process transport
(:class:`~secure_fedgraph.protocol.transports.inprocess.LocalRunner`). It sits above both the
secure-sum backends and the transports, so neither of those imports the other.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.protocol.secure_sum.config import SecureSumConfig
from secure_fedgraph.protocol.secure_sum.factory import make_client, make_server
from secure_fedgraph.protocol.secure_sum.policy import ClientPolicy
from secure_fedgraph.protocol.secure_sum.roles import ClientRole, ServerRole, check_directory, new_session_id
from secure_fedgraph.protocol.crash_point import CrashPoint
from secure_fedgraph.protocol.spec import SumNoise, SumResult, SumSpec
from secure_fedgraph.protocol.stages import Stage
from secure_fedgraph.protocol.transports.inprocess import Intercept, LocalRunner, Traffic

__all__ = ["LocalRunner", "LocalSession", "Traffic", "local_session"]


@dataclass
class LocalSession:
    """A server and its clients wired together in one process (see :func:`local_session`)."""

    server: ServerRole
    clients: dict[int, ClientRole]
    runner: LocalRunner
    round: int = -1

    def start_round(self) -> None:
        self.round += 1
        self.runner.run(self.server.setup(self.round))

    def secure_sum(
        self,
        name: str,
        inputs: Mapping[int, Mapping[str, Any]],
        *,
        streaming: bool = False,
        clip_range: float | None = None,
        resolution: float | None = None,
        noise: SumNoise | None = None,
        private: bool = False,
    ) -> SumResult:
        """Every client in ``inputs`` contributes; returns the server's view of the result
        (``streaming``, ``clip_range``, ``resolution``, ``noise``: see SumSpec; ``private``: the
        clients contribute their model, see ClientPolicy.min_ddp_noise)."""
        for client, tensors in inputs.items():
            self.clients[client].contribute(name, tensors, private=private)
        spec = SumSpec.of(name, next(iter(inputs.values())), streaming=streaming, clip_range=clip_range, resolution=resolution, noise=noise)
        return self.runner.run(self.server.aggregate(spec))


def local_session(
    config: SecureSumConfig,
    client_ids: Collection[int],
    *,
    drop: Mapping[Stage | CrashPoint, Collection[int]] | None = None,
    intercept: Intercept | None = None,
    record: bool = False,
    session: bytes | None = None,
    policy: ClientPolicy | None = None,
) -> LocalSession:
    """Fresh identity keys, a fresh session id (unless given), one server and one client role per
    id; every client holds ``policy`` (default: it accepts ``config``)."""
    identities = {c: IdentityKey.generate() for c in client_ids}
    directory = check_directory({c: k.public_bytes for c, k in identities.items()})  # validated once, shared: not n x n
    session = new_session_id() if session is None else session
    server = make_server(config, session=session, directory=directory, clients=sorted(client_ids))
    clients = {
        c: make_client(config, client_id=c, session=session, identity=identities[c], directory=directory, policy=policy) for c in client_ids
    }
    return LocalSession(server, clients, LocalRunner(server, clients, drop=drop, intercept=intercept, record=record))
