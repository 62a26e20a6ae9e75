"""Fault injection: the request at which a client crashes, so tests can kill a real client at a
chosen step of a chosen round and replay the same schedule in one process.

One mechanism for both transports. ``secure-fedgraph client --crash-at STAGE[@ROUND]`` kills
its own process with SIGKILL (no cleanup, as a crash) on receiving the first request that
:meth:`CrashPoint.hits`, before answering it (clients/runtime.py); the in-process runner
(``LocalRunner(drop={CrashPoint(...): ids})``, ``simulate(plan, secure, drop=...)``) makes the
listed clients silent from that same request on. A run across processes with a killed client
and its in-process replay therefore lose the same clients at the same step. (A process hosting
several clients dies with all of them at the first one's request; the runner drops each listed
client at its own. They agree when the step that hits asks every listed client, as every step
does in tests/integration/test_faults.py.)

Light on purpose (no torch): the command line parses ``--crash-at`` before its heavy imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.stages import Stage

__all__ = ["CrashPoint"]


@dataclass(frozen=True)
class CrashPoint:
    """The first request of ``stage`` in round ``round`` (None: in whichever round first has it).

    Rounds count from 0, as in every header, log line and metrics.json; requests before the
    first round (the Welcome) carry round -1.
    """

    stage: Stage
    round: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.stage, Stage):
            raise ConfigError(f"a crash point's stage must be a Stage, got {self.stage!r}")
        if self.round is not None and (isinstance(self.round, bool) or not isinstance(self.round, int) or self.round < 0):
            raise ConfigError(f"a crash point's round must be a non-negative int or None, got {self.round!r}")

    @classmethod
    def parse(cls, text: str, *, option: str = "--crash-at") -> CrashPoint:
        """``STAGE`` or ``STAGE@ROUND`` (``consistency@1``), STAGE a wire name of :class:`Stage`.

        Raises:
            ConfigError: naming ``option``, the accepted stages and what arrived.
        """
        name, sep, round_text = text.strip().partition("@")
        stages = {s.value: s for s in Stage}
        if name not in stages:
            raise ConfigError(f"{option} must be STAGE or STAGE@ROUND with STAGE one of {', '.join(stages)}, got {text!r}")
        if not sep:
            return cls(stages[name])
        if not round_text.isdigit():
            raise ConfigError(f"{option} {text!r}: ROUND must be a round number from 0 (e.g. {name}@1)")
        return cls(stages[name], int(round_text))

    @classmethod
    def of(cls, point: Stage | CrashPoint) -> CrashPoint:
        """A crash point, from a bare stage (its first request, in any round) or itself."""
        return point if isinstance(point, CrashPoint) else cls(point)

    def hits(self, header: Any) -> bool:
        """Whether a request with this header is the crash point (its stage, in its round)."""
        return header.stage is self.stage and (self.round is None or header.round == self.round)

    def __str__(self) -> str:
        return self.stage.value if self.round is None else f"{self.stage.value}@{self.round}"
