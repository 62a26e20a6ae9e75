"""What every transport does the same way: counting traffic and handing answers to a step."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import BuiltOnRead, Step


@dataclass
class Traffic:
    """Wire bytes and CPU seconds per party, per stage."""

    up: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    down: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    up_by_stage: dict[Stage, int] = field(default_factory=lambda: defaultdict(int))
    down_by_stage: dict[Stage, int] = field(default_factory=lambda: defaultdict(int))
    up_by_phase: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    down_by_phase: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    client_seconds: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    server_seconds: float = 0.0
    wall_by_stage: dict[Stage, float] = field(default_factory=lambda: defaultdict(float))  # time each stage's steps took
    slowest_by_stage: dict[Stage, float] = field(default_factory=lambda: defaultdict(float))  # its slowest step: against the step deadline
    # bytes of the gRPC streams' batches (0 in one process): below the per-client totals where
    # one body went to many clients of a host (a Welcome, a broadcast)
    wire_up: int = 0
    wire_down: int = 0

    def timed(self, step: Step, seconds: float) -> None:
        """Count the wall time one step took, from its requests to its last answer."""
        self.wall_by_stage[step.stage] += seconds
        self.slowest_by_stage[step.stage] = max(self.slowest_by_stage[step.stage], seconds)

    def sent(self, step: Step, client: int, data: bytes) -> None:
        self.down[client] += len(data)
        self.down_by_stage[step.stage] += len(data)
        self.down_by_phase[step.phase] += len(data)

    def answer(self, step: Step, client: int, data: bytes) -> str | None:
        """Count an answer, decode it and pass it to the step's ``accept``; return the reason
        it was rejected (a malformed, out-of-step or invalid message), or None if accepted."""
        self.up[client] += len(data)
        self.up_by_stage[step.stage] += len(data)
        self.up_by_phase[step.phase] += len(data)
        started = time.perf_counter()
        try:
            step.accept(client, codec.decode(data))
            return None
        except ProtocolError as exc:
            return str(exc)
        except Exception as exc:  # noqa: BLE001 whatever one message triggers drops its sender, never the server (R-CRASH)
            return f"could not handle the message ({type(exc).__name__}: {exc})"
        finally:
            self.server_seconds += time.perf_counter() - started


class RequestEncoder:
    """A step's requests encoded, each request object once (one broadcast to every client is
    encoded once). The cache holds each object it encoded, so no other object can take its id
    while the cache lives; a ``BuiltOnRead`` step's requests are new objects on every read, so
    nothing of theirs is cached (holding them all would undo why they are built on read)."""

    def __init__(self, step: Step) -> None:
        self._cache: dict[int, tuple[object, bytes]] | None = None if isinstance(step.requests, BuiltOnRead) else {}

    def __call__(self, request: object) -> bytes:
        if self._cache is None:
            return codec.encode(request)
        hit = self._cache.get(id(request))
        if hit is None:
            hit = self._cache[id(request)] = (request, codec.encode(request))
        return hit[1]
