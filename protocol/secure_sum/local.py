"""Run a secure sum with every party in one process: for tests, benchmarks and the demo.

Every message is serialised with the real wire codec and parsed again per recipient, so no
party ever shares an object with another (Flower's in-memory harness once let the first
client mutate a message all others then read) and byte counts are the real wire sizes.
Dropouts are scripted per stage; an ``intercept`` hook lets tests tamper with, replay or
swallow messages in flight, as an active network attacker or a malicious server would.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.secure_sum import codec
from secure_fedgraph.protocol.secure_sum.config import SecureSumConfig
from secure_fedgraph.protocol.secure_sum.factory import make_client, make_server
from secure_fedgraph.protocol.secure_sum.roles import ClientRole, ServerRole, Step, StepGen, StepOutcome, new_session_id
from secure_fedgraph.protocol.secure_sum.spec import SumResult, SumSpec
from secure_fedgraph.protocol.secure_sum.stages import Stage

T = TypeVar("T")
# intercept(direction "down"/"up", stage, client, wire bytes) -> bytes to deliver, or None to drop
Intercept = Callable[[str, Stage, int, bytes], bytes | None]


@dataclass
class Traffic:
    """Wire bytes and CPU seconds per party, per stage."""

    up: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    down: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    up_by_stage: dict[Stage, int] = field(default_factory=lambda: defaultdict(int))
    down_by_stage: dict[Stage, int] = field(default_factory=lambda: defaultdict(int))
    client_seconds: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    server_seconds: float = 0.0


class LocalRunner:
    """Executes a server role's steps against client roles in this process.

    Args:
        server: the server role.
        clients: client id -> client role.
        drop: stage -> clients that vanish when they receive their first request of that
            stage (they never answer again, in any round).
        intercept: see ``Intercept``.
        record: keep every message the server received, as (stage, client, wire bytes).
    """

    def __init__(
        self,
        server: ServerRole,
        clients: Mapping[int, ClientRole],
        *,
        drop: Mapping[Stage, Collection[int]] | None = None,
        intercept: Intercept | None = None,
        record: bool = False,
    ) -> None:
        self.server = server
        self.clients = dict(clients)
        self.drop = {stage: set(ids) for stage, ids in (drop or {}).items()}
        self.intercept = intercept
        self.dead: set[int] = set()
        self.traffic = Traffic()
        self.received: list[tuple[Stage, int, bytes]] | None = [] if record else None

    def run(self, steps: StepGen[T]) -> T:
        """Drive ``steps`` to completion and return its result."""
        started = time.perf_counter()
        try:
            step = next(steps)
        except StopIteration as stop:
            self.traffic.server_seconds += time.perf_counter() - started
            return stop.value
        self.traffic.server_seconds += time.perf_counter() - started
        while True:
            outcome = self._execute(step)
            started = time.perf_counter()
            try:
                step = steps.send(outcome)
            except StopIteration as stop:
                return stop.value
            finally:
                self.traffic.server_seconds += time.perf_counter() - started

    def _execute(self, step: Step) -> StepOutcome:
        accepted, rejected, silent = set(), {}, set()
        encoded: dict[int, bytes] = {}  # a request object sent to many clients is encoded once
        for client, request in step.requests.items():
            started = time.perf_counter()
            down = encoded.get(id(request))
            if down is None:
                down = encoded[id(request)] = codec.encode(request)
            self.traffic.server_seconds += time.perf_counter() - started
            if client in self.drop.get(step.stage, ()):
                self.dead.add(client)
            if client in self.dead or client not in self.clients:
                silent.add(client)
                continue
            if self.intercept is not None:
                down = self.intercept("down", step.stage, client, down)
                if down is None:
                    silent.add(client)
                    continue
            self.traffic.down[client] += len(down)
            self.traffic.down_by_stage[step.stage] += len(down)
            started = time.perf_counter()
            up = codec.encode(self.clients[client].handle(codec.decode(down)))
            self.traffic.client_seconds[client] += time.perf_counter() - started
            if self.intercept is not None:
                up = self.intercept("up", step.stage, client, up)
                if up is None:
                    silent.add(client)
                    continue
            self.traffic.up[client] += len(up)
            self.traffic.up_by_stage[step.stage] += len(up)
            if self.received is not None:
                self.received.append((step.stage, client, up))
            started = time.perf_counter()
            try:
                step.accept(client, codec.decode(up))
                accepted.add(client)
            except ProtocolError as exc:
                rejected[client] = str(exc)
            finally:
                self.traffic.server_seconds += time.perf_counter() - started
        return StepOutcome(frozenset(accepted), rejected, frozenset(silent))


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

    def secure_sum(self, name: str, inputs: Mapping[int, Mapping[str, Any]]) -> SumResult:
        """Every client in ``inputs`` contributes; returns the server's view of the result."""
        for client, tensors in inputs.items():
            self.clients[client].contribute(name, tensors)
        spec = SumSpec.of(name, next(iter(inputs.values())))
        return self.runner.run(self.server.aggregate(spec))


def local_session(
    config: SecureSumConfig,
    client_ids: Collection[int],
    *,
    drop: Mapping[Stage, Collection[int]] | None = None,
    intercept: Intercept | None = None,
    record: bool = False,
) -> LocalSession:
    """Fresh identity keys, a fresh session id, one server and one client role per id."""
    identities = {c: IdentityKey.generate() for c in client_ids}
    directory = {c: k.public_bytes for c, k in identities.items()}
    session = new_session_id()
    server = make_server(config, session=session, directory=directory, clients=sorted(client_ids))
    clients = {
        c: make_client(config, client_id=c, session=session, identity=identities[c], directory=directory) for c in client_ids
    }
    return LocalSession(server, clients, LocalRunner(server, clients, drop=drop, intercept=intercept, record=record))
