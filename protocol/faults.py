"""Fault injection: a server that dies on entering a chosen step, for restart tests.

``server --die-at ROUND:STAGE`` kills the server process with SIGKILL there (no clean-up and no
last checkpoint, as a crash or the kernel's OOM killer would); ``runs.simulate.simulate(...,
restart_at=...)`` raises :class:`Died` there instead and resumes the run in a new session.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.stages import Stage

if TYPE_CHECKING:  # the command line parses --die-at before it imports torch
    from secure_fedgraph.protocol.session import Sequencer
    from secure_fedgraph.protocol.steps import StepGen

T = TypeVar("T")


class Died(Exception):
    """The in-process stand-in for a killed server (raised by :func:`die_by_raising`)."""


@dataclass(frozen=True)
class DieAt:
    """The ``nth`` step of ``stage`` in round ``round`` (the round of the requests' headers: the
    latest key set-up's)."""

    round: int
    stage: Stage
    nth: int = 1

    @classmethod
    def parse(cls, text: str) -> DieAt:
        """``ROUND:STAGE[:N]``, e.g. ``1:unmask`` or ``0:broadcast:2``."""
        parts = text.split(":")
        stages = [s.value for s in Stage]
        if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts[::2]) or parts[1] not in stages or parts[2:] == ["0"]:
            raise ConfigError(f"--die-at must be ROUND:STAGE[:N] with STAGE one of {', '.join(stages)} and N >= 1, got {text!r}")
        return cls(int(parts[0]), Stage(parts[1]), int(parts[2]) if len(parts) == 3 else 1)


def die_by_sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def die_by_raising() -> None:
    raise Died("the server died (fault injection)")


def dying(steps: StepGen[T], die_at: DieAt, sequencer: Sequencer, *, die: Callable[[], None] = die_by_sigkill) -> StepGen[T]:
    """``steps`` as they are, until the step ``die_at`` names: there ``die()`` runs before that
    step's requests leave (any driver, any transport)."""
    seen = 0
    try:
        step = next(steps)
        while True:
            if step.stage is die_at.stage and sequencer.round == die_at.round:
                seen += 1
                if seen == die_at.nth:
                    die()
            step = steps.send((yield step))
    except StopIteration as stop:
        return stop.value
