"""The in-process transport: every party in one process, for tests, benchmarks and simulation.

Every message is serialised with the real wire codec and parsed again per recipient, so no
party ever shares an object with another (Flower's in-memory harness once let the first
client mutate a message all others then read) and byte counts are the real wire sizes.
A request object sent to many clients is encoded once per step. Dropouts are scripted by
crash point (a stage, optionally of one round; protocol/core/crash_point.py), the points at which
``client --crash-at`` kills a real client process; an ``intercept`` hook lets tests tamper
with, replay or swallow messages in flight, as an active network attacker or a malicious
server would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol, TypeVar

from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core.crash_point import CrashPoint
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import Step, StepGen, StepOutcome, StepProgress, drive, reporting
from secure_fedgraph.protocol.transports.transcript import RunTranscripts
from secure_fedgraph.protocol.transports.common import RequestEncoder, Traffic

__all__ = ["Intercept", "LocalRunner", "Traffic"]

T = TypeVar("T")
# intercept(direction "down"/"up", stage, client, wire bytes) -> bytes to deliver, or None to drop
Intercept = Callable[[str, Stage, int, bytes], bytes | None]


class Endpoint(Protocol):
    """A client-side party: a secure-sum role or a client host."""

    def handle(self, request: Any) -> Any: ...


class LocalRunner:
    """Executes steps against client endpoints in this process (a :class:`Transport`).

    Args:
        server: kept for callers' convenience (``runner.server``); not used to deliver.
        clients: client id -> endpoint.
        drop: crash point (or a bare stage: its first request in any round) -> clients that
            vanish when they receive the request it names (they never answer again), as a
            client process started with ``--crash-at`` does.
        intercept: see ``Intercept``.
        record: keep every message the server received, as (stage, client, wire bytes).
        transcripts: write every party's transcript (what each sent and received, as the gRPC
            runtimes do with ``--transcript``).
        progress: hears each step start, each client's answer (the clients answer one after
            another here) and the step's end (protocol/engine/progress.py); None: nothing.
    """

    def __init__(
        self,
        server: Any,
        clients: Mapping[int, Endpoint],
        *,
        drop: Mapping[Stage | CrashPoint, Collection[int]] | None = None,
        intercept: Intercept | None = None,
        record: bool = False,
        transcripts: RunTranscripts | None = None,
        progress: StepProgress | None = None,
    ) -> None:
        self.server = server
        self.clients = dict(clients)
        self.drop = {point: set(ids) for point, ids in (drop or {}).items()}
        self.intercept = intercept
        self.dead: set[int] = set()
        self._hits: dict[tuple[CrashPoint, int], int] = {}  # requests seen at each crash point, per client
        self.traffic = Traffic()
        self.received: list[tuple[Stage, int, bytes]] | None = [] if record else None
        self.transcripts = transcripts
        self.progress = progress

    def run(self, steps: StepGen[T]) -> T:
        """Drive ``steps`` to completion and return its result."""
        return drive(steps, self, timer=self._server_time)

    def _server_time(self, seconds: float) -> None:
        self.traffic.server_seconds += seconds

    def execute(self, step: Step) -> StepOutcome:
        with reporting(self.progress, step) as answered:
            return self._execute(step, answered)

    def _execute(self, step: Step, answered: Callable[[], None]) -> StepOutcome:
        accepted, rejected, silent = set(), {}, set()
        encode = RequestEncoder(step)  # a request object sent to many clients is encoded once
        for client, request in step.requests.items():
            started = time.perf_counter()
            down = encode(request)
            self.traffic.server_seconds += time.perf_counter() - started
            if client not in self.dead and self._crashes(client, request.header):
                self.dead.add(client)
            if client in self.dead or client not in self.clients:
                if self.transcripts is not None:
                    self.transcripts.down(client, down, None)  # sent; never answered
                silent.add(client)
                continue
            sent = down
            if self.intercept is not None:
                down = self.intercept("down", step.stage, client, down)
            if self.transcripts is not None:
                self.transcripts.down(client, sent, down)
            if down is None:
                silent.add(client)
                continue
            self.traffic.sent(step, client, down)
            started = time.perf_counter()
            up = answer = codec.encode(self.clients[client].handle(codec.decode(down)))
            self.traffic.client_seconds[client] += time.perf_counter() - started
            if self.intercept is not None:
                up = self.intercept("up", step.stage, client, up)
            if self.transcripts is not None:
                self.transcripts.up(client, answer, up)
            if up is None:
                silent.add(client)
                continue
            if self.received is not None:
                self.received.append((step.stage, client, up))
            answered()
            reason = self.traffic.answer(step, client, up)
            if reason is None:
                accepted.add(client)
            else:
                rejected[client] = reason
        return StepOutcome(frozenset(accepted), rejected, frozenset(silent))

    def _crashes(self, client: int, header: Any) -> bool:
        """Whether ``client`` is scripted to crash on receiving a request with ``header``: the
        ``nth`` request at its crash point, counted per client as a client process counts them."""
        crashes = False
        for point, ids in self.drop.items():
            point = CrashPoint.of(point)
            if client in ids and point.hits(header):
                self._hits[(point, client)] = self._hits.get((point, client), 0) + 1
                crashes |= self._hits[(point, client)] == point.nth
        return crashes
