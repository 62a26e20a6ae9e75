"""Fault injection: the step at which a party crashes, so tests can kill a real client or server
process at a chosen step of a chosen round and replay the same schedule in one process.

One mechanism for both parties and both transports:
- ``secure-fedgraph client --crash-at STAGE[@ROUND][:N]`` kills its own process with SIGKILL (no
  cleanup, as a crash) on receiving the request a :class:`CrashPoint` names, before answering it
  (clients/runtime.py); the in-process runner (``LocalRunner(drop={CrashPoint(...): ids})``,
  ``simulate(plan, secure, drop=...)``) makes the listed clients silent from that same request
  on. A run across processes with a killed client and its in-process replay therefore lose the
  same clients at the same step. (A process hosting several clients dies with all of them at the
  first one's request; the runner drops each listed client at its own. They agree when the step
  asks every listed client, as every step does in tests/integration/test_faults.py.)
- ``secure-fedgraph server --crash-at ...`` kills the server process on entering the step it
  names, before the step's requests leave (:func:`crashing` around the server's steps, restart
  tests); ``simulate(..., restart_at=CrashPoint(...))`` raises :class:`Crashed` there instead and
  resumes the run in a new session, as ``server --resume`` does.

Light on purpose (no torch): the command line parses ``--crash-at`` before its heavy imports.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.core.stages import Stage

if TYPE_CHECKING:
    from secure_fedgraph.protocol.core.steps import StepGen

__all__ = ["CrashPoint", "Crashed", "crash_by_raising", "crash_by_sigkill", "crashing"]

T = TypeVar("T")


@dataclass(frozen=True)
class CrashPoint:
    """The ``nth`` request of ``stage`` in round ``round`` (None: in whichever round first has
    it), as the crashing party counts them (a client: the requests it receives; the server: the
    steps it starts).

    Rounds count from 0, as in every header, log line and metrics.json; requests before the
    first round (the Welcome) carry round -1.
    """

    stage: Stage
    round: int | None = None
    nth: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.stage, Stage):
            raise ConfigError(f"a crash point's stage must be a Stage, got {self.stage!r}")
        if self.round is not None and (isinstance(self.round, bool) or not isinstance(self.round, int) or self.round < 0):
            raise ConfigError(f"a crash point's round must be a non-negative int or None, got {self.round!r}")
        if isinstance(self.nth, bool) or not isinstance(self.nth, int) or self.nth < 1:
            raise ConfigError(f"a crash point's nth must be an int >= 1, got {self.nth!r}")

    @classmethod
    def parse(cls, text: str, *, option: str = "--crash-at") -> CrashPoint:
        """``STAGE``, ``STAGE@ROUND`` (``consistency@1``) or ``STAGE@ROUND:N`` (the N-th such
        request: ``input@0:2``), STAGE a wire name of :class:`Stage`.

        Raises:
            ConfigError: naming ``option``, the accepted stages and what arrived.
        """
        rest, colon, nth_text = text.strip().partition(":")
        name, at, round_text = rest.partition("@")
        stages = {s.value: s for s in Stage}
        if name not in stages:
            raise ConfigError(f"{option} must be STAGE[@ROUND][:N] with STAGE one of {', '.join(stages)}, got {text!r}")
        if at and not round_text.isdigit():
            raise ConfigError(f"{option} {text!r}: ROUND must be a round number from 0 (e.g. {name}@1)")
        if colon and (not nth_text.isdigit() or int(nth_text) < 1):
            raise ConfigError(f"{option} {text!r}: N must be a count from 1 (e.g. {rest}:2, the second such request)")
        return cls(stages[name], int(round_text) if at else None, int(nth_text) if colon else 1)

    @classmethod
    def of(cls, point: Stage | CrashPoint) -> CrashPoint:
        """A crash point, from a bare stage (its first request, in any round) or itself."""
        return point if isinstance(point, CrashPoint) else cls(point)

    def hits(self, header: Any) -> bool:
        """Whether a request with this header is of the crash point's stage and round (the
        caller counts to ``nth``)."""
        return header.stage is self.stage and (self.round is None or header.round == self.round)

    def __str__(self) -> str:
        text = self.stage.value if self.round is None else f"{self.stage.value}@{self.round}"
        return text if self.nth == 1 else f"{text}:{self.nth}"


class Crashed(Exception):
    """The in-process stand-in for a killed server (raised by :func:`crash_by_raising`)."""


def crash_by_sigkill() -> None:
    """Die as a crash does: SIGKILL, so nothing is cleaned up and no stream says goodbye."""
    os.kill(os.getpid(), signal.SIGKILL)


def crash_by_raising() -> None:
    raise Crashed("the server crashed (fault injection)")


def crashing(steps: StepGen[T], point: CrashPoint, *, crash: Callable[[], None] = crash_by_sigkill) -> StepGen[T]:
    """``steps`` as they are, until the step ``point`` names: there ``crash()`` runs before that
    step's requests leave (any driver, any transport)."""
    seen = 0
    try:
        step = next(steps)
        while True:
            header = next((getattr(r, "header", None) for r in step.requests.values()), None)
            if header is not None and point.hits(header):
                seen += 1
                if seen == point.nth:
                    crash()
            step = steps.send((yield step))
    except StopIteration as stop:
        return stop.value
