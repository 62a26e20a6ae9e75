"""Run a secure sum with every party in one process (for tests, benchmarks and the demo).

``local_session`` wires a server role and its client roles through the in-process transport
(:class:`~secure_fedgraph.protocol.transports.inprocess.LocalRunner`). It sits above both the
secure-sum backends and the transports, so neither of those imports the other.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.protocol.sum_backends.config import SecureSumConfig
from secure_fedgraph.protocol.sum_backends.factory import make_client, make_server
from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy
from secure_fedgraph.protocol.core.messages import Welcome
from secure_fedgraph.protocol.sum_backends.config import config_to_dict
from secure_fedgraph.protocol.sum_backends.roles import ClientRole, ServerRole, check_directory
from secure_fedgraph.protocol.sum_backends.signed import SignedContributions
from secure_fedgraph.protocol.core.session import OpeningClient, Sequencer, new_proposal
from secure_fedgraph.protocol.core.crash_point import CrashPoint
from secure_fedgraph.protocol.core.spec import NoiseUnit, SumNoise, SumResult, SumSpec
from secure_fedgraph.protocol.core.stages import Stage
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
        template = next(iter(inputs.values()))
        if noise is not None and noise.unit is NoiseUnit.SUMMED_ROWS:  # the clients stage rows: the sum has one row's shape
            template = {k: np.asarray(v)[0] for k, v in template.items()}
        spec = SumSpec.of(name, template, streaming=streaming, clip_range=clip_range, resolution=resolution, noise=noise)
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
    identities: Mapping[int, IdentityKey] | None = None,
    signed: Mapping[int, SignedContributions] | None = None,
) -> LocalSession:
    """One server and one client role per id, in a session opened as a run opens one: the server
    proposes an id (``session``, default fresh), every client adds a fresh nonce, and each
    client's role takes the session id it agreed on (protocol/core/session.py). ``identities``:
    the clients' identity keys (default fresh); ``policy``: every client's minimums (default:
    it accepts ``config``); ``signed``: what each client kept of earlier sessions of its run
    (protocol/sum_backends/signed.py)."""
    ids = sorted(client_ids)
    identities = {c: IdentityKey.generate() for c in ids} if identities is None else identities
    directory = check_directory({c: identities[c].public_bytes for c in ids})  # validated once, shared: not n x n
    seq = Sequencer(new_proposal() if session is None else session)
    clients: dict[int, ClientRole] = {}

    def build(c: int, agreed: bytes) -> ClientRole:
        clients[c] = make_client(config, client_id=c, session=agreed, identity=identities[c], directory=directory, policy=policy,
                                 signed=None if signed is None else signed[c])
        return clients[c]

    config_json = json.dumps(config_to_dict(config))
    opened, _ = LocalRunner(None, {c: OpeningClient(c, partial(build, c)) for c in ids}).run(seq.open(ids, lambda h: Welcome(h, config_json, tuple(ids), ())))
    server = make_server(config, session=seq.session, directory=directory, clients=ids, sequencer=seq)
    clients = {c: clients[c] for c in opened}
    return LocalSession(server, clients, LocalRunner(server, clients, drop=drop, intercept=intercept, record=record))
