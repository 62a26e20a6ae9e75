"""The plain backend: the baseline every secure backend is compared with.

The server receives every client's tensor in the clear (threat_model.md claim P-CLEAR): use
it only to measure what security costs, or where the inputs are not sensitive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from secure_fedgraph.errors import ProtocolError, SumAbandoned
from secure_fedgraph.protocol.sum_backends.config import Backend
from secure_fedgraph.protocol.sum_backends.messages import DeliverRequest, DeliverResponse, InputRequest, InputResponse
from secure_fedgraph.protocol.sum_backends.roles import ClientRole, ServerRole, StepGen
from secure_fedgraph.protocol.core.spec import SumResult, SumSpec
from secure_fedgraph.protocol.core.stages import Stage


class PlainServer(ServerRole):
    backend = Backend.PLAIN

    def setup(self, round_index: int, participants=None) -> StepGen[None]:
        self.live = set(self._begin_round(round_index, participants))
        self._needed = self.config.survivors_needed(len(self.clients))
        self._sum_index = 0
        return
        yield  # a generator with no steps: plain needs no key set-up

    def aggregate(self, spec: SumSpec) -> StepGen[SumResult]:
        index, self._sum_index = self._sum_index, self._sum_index + 1
        received: dict[int, np.ndarray] = {}  # plain sees every input anyway; summed in client order below

        def accept(client: int, response: InputResponse) -> None:
            x = response.payload
            if x is None or x.shape != (spec.size,) or x.dtype.kind != "f":
                raise ProtocolError(f"plain input of client {client}: expected a float vector of {spec.size}, got {None if x is None else (x.dtype, x.shape)}")
            if not np.isfinite(x).all():
                raise ProtocolError(f"plain input of client {client} contains NaN or infinity")
            received[client] = x

        self._require(len(self.live), self._needed, "remain live for a new sum")
        live = tuple(sorted(self.live))
        outcome = yield self._step(Stage.INPUT, lambda h: self._per_client(h, live, InputRequest, lambda c: (index, spec, None, live)), accept)
        self._note(Stage.INPUT, outcome)
        abandoned_streaming(self, spec, set(live), set(outcome.accepted))
        self.live = set(outcome.accepted)
        self._require(len(outcome.accepted), self._needed, "sent inputs")
        contributors = tuple(sorted(outcome.accepted))
        total = np.zeros(spec.size, dtype=np.float64)
        for client in contributors:  # a fixed order: float addition is not associative, and
            np.add(total, received.pop(client), out=total)  # arrival order differs between transports
        outcome = yield self._step(
            Stage.DELIVER,
            lambda h: self._per_client(h, contributors, DeliverRequest, lambda c: (index, contributors, None if spec.server_only else total, (), 0)),
            lambda c, r: None,
        )
        self.live &= set(outcome.accepted)
        return SumResult(spec, spec.unflatten(total), frozenset(contributors), 0, 0.0)


class OnePartyServer(PlainServer):
    """The server side of a one-party run: a plan's centralised baseline (one client holding
    all the data) through the same plan and in-process runner, each "sum" being that client's
    own value. Only runs/simulate.py's ``simulate_one_party`` builds it, never a configuration,
    so no run with other parties can end up with it."""

    min_clients = 1


def abandoned_streaming(role: ServerRole, spec: SumSpec, live: set[int], answered: set[int]) -> None:
    """A streaming sum is all-or-nothing on every backend (threat_model.md M-STREAM): a dropout
    abandons it, so a plan's numbers do not depend on the backend."""
    if spec.streaming and live - answered:
        role.live = answered
        role.log.append(f"round {role.round}: clients {sorted(live - answered)} dropped during streaming sum {spec.name!r}; abandoned")
        raise SumAbandoned(f"streaming sum {spec.name!r}: clients {sorted(live - answered)} dropped; abandoned")


class PlainClient(ClientRole):
    backend = Backend.PLAIN
    round_entry = frozenset({Stage.INPUT})
    continuing = frozenset({Stage.DELIVER})

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._pending: tuple[int, SumSpec] | None = None

    def _handler(self, stage: Stage) -> Callable[[Any], Any]:
        return {
            Stage.INPUT: self._on_input,
            Stage.DELIVER: self._on_deliver,
        }[stage]

    def _on_input(self, request: InputRequest) -> InputResponse:
        x = self._fresh(request.spec)
        all_f32 = all(a.dtype == np.float32 for a in self._contributions[request.spec.name].values()) and request.spec.noise is None
        # distributed DP: the same noise as mask's, on mask's grid; but here the server sees each input with its own share only
        precision = 0 if request.spec.noise is None else self.config.mask.encoding_of(request.spec, len(request.live)).precision_bits
        x = self._with_noise(request.spec, x, live=len(request.live), least=len(request.live), precision_bits=precision)
        self._pending = (request.sum_index, request.spec)
        self._expose(request.spec)  # in the clear: the server holds it from now on
        return InputResponse(self._header(request), x.astype(np.float32 if all_f32 else np.float64), ())

    def _on_deliver(self, request: DeliverRequest) -> DeliverResponse:
        if self._pending is None:
            raise ProtocolError(f"client {self.client_id}: an aggregate was delivered for a sum this client has not contributed to")
        index, spec = self._pending
        if request.sum_index == index and request.aggregate is None and spec.server_only:
            self._finish(SumResult(spec, None, frozenset(request.contributors), request.clipped, 0.0))
            return DeliverResponse(self._header(request), True)
        if request.sum_index != index or request.aggregate is None or request.aggregate.shape != (spec.size,):
            raise ProtocolError(f"client {self.client_id}: the delivered aggregate does not match sum {index} ({spec.name})")
        self._finish(SumResult(spec, spec.unflatten(np.asarray(request.aggregate, np.float64)), frozenset(request.contributors), request.clipped, 0.0))
        return DeliverResponse(self._header(request), True)
