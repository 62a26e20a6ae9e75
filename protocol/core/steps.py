"""Steps: how a server-side protocol talks to clients, independent of the transport.

A server role or plan is a generator of :class:`Step`: each step sends one request per listed
client and resumes with a :class:`StepOutcome` once every answer has been passed to the
step's ``accept`` callback (which validates it and folds it into the server's state, so large
uploads are summed as they arrive and never kept). A transport executes steps: in one process
(:mod:`.transports.inprocess`) or over gRPC (:mod:`.transports.grpc_server`, :mod:`.transports.grpc_client`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from secure_fedgraph.training.device import single_thread

T = TypeVar("T")


class BuiltOnRead(Mapping[int, Any]):
    """Requests built when a transport reads them, one client at a time, and not kept.

    Why: requests that each carry much of their own (a holder's 490 share envelopes at n = 10,000)
    would hold gigabytes if all were built before the first is sent. Each read builds the
    request again, so a transport must not key anything on the object's identity beyond the time
    it holds a reference to it."""

    def __init__(self, clients: tuple[int, ...], build: Callable[[int], Any]) -> None:
        self._clients, self._build, self._members = clients, build, frozenset(clients)

    def __getitem__(self, client: int) -> Any:
        if client not in self._members:
            raise KeyError(client)
        return self._build(client)

    def __iter__(self) -> Iterator[int]:
        return iter(self._clients)

    def __len__(self) -> int:
        return len(self._clients)


@dataclass(frozen=True)
class Step:
    """One request per listed client; ``accept(client, response)`` absorbs each answer."""

    stage: Any  # protocol.stages.Stage
    requests: Mapping[int, Any]
    accept: Callable[[int, Any], None]
    phase: str = ""  # the plan's phase (e.g. "fedavg", "split learning"), for traffic by phase


@dataclass(frozen=True)
class StepOutcome:
    """Who answered a step: accepted answers, rejected ones (with the reason), and silence."""

    accepted: frozenset[int]
    rejected: Mapping[int, str] = field(default_factory=dict)
    silent: frozenset[int] = frozenset()


StepGen = Generator[Step, StepOutcome, T]


class Transport(Protocol):
    """Delivers a step's requests and collects the answers."""

    def execute(self, step: Step) -> StepOutcome: ...


class StepProgress(Protocol):
    """Hears how far a transport is with each step (a live bar or periodic lines: protocol/engine/progress.py),
    so a long step is not silent. Defined here, below the transports, so they take one without
    importing the engine. It learns the step (its stage, phase, round and how many clients were
    asked) and a count of answers, never their content."""

    def started(self, step: Step) -> None: ...

    def answered(self) -> None: ...

    def finished(self) -> None: ...


def _nothing() -> None:
    return None


@contextmanager
def reporting(progress: StepProgress | None, step: Step) -> Iterator[Callable[[], None]]:
    """A transport's step under ``progress`` (None: unreported): yields the callable to call once
    per client that answered; the step is reported finished however it ends."""
    if progress is None:
        yield _nothing
        return
    progress.started(step)
    try:
        yield progress.answered
    finally:
        progress.finished()


def drive(steps: StepGen[T], transport: Transport, *, timer: Callable[[float], None] | None = None) -> T:
    """Run a generator of steps to completion over ``transport`` and return its result.

    ``timer`` receives the seconds spent in the generator itself (server-side computation).
    """
    outcome: StepOutcome | None = None
    while True:
        started = time.perf_counter()
        try:
            with single_thread():  # the server's plan code runs on one torch thread, as the clients' (training/device.py)
                step = next(steps) if outcome is None else steps.send(outcome)
        except StopIteration as stop:
            return stop.value
        finally:
            if timer is not None:
                timer(time.perf_counter() - started)
        outcome = transport.execute(step)
