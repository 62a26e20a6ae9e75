"""Fault injection for restart tests: ``server --die-at ROUND:STAGE`` makes the server kill itself
with SIGKILL (no clean-up and no last checkpoint, as a crash or the kernel's OOM killer would) on
entering the first step of STAGE in ROUND, before that step's requests leave."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.session import Sequencer
from secure_fedgraph.protocol.stages import Stage
from secure_fedgraph.protocol.steps import Step, StepOutcome, Transport


@dataclass(frozen=True)
class DieAt:
    round: int
    stage: Stage

    @classmethod
    def parse(cls, text: str) -> DieAt:
        """``ROUND:STAGE``, e.g. ``1:unmask``."""
        round_text, _, stage = text.partition(":")
        stages = [s.value for s in Stage]
        if not round_text.isdigit() or stage not in stages:
            raise ConfigError(f"--die-at must be ROUND:STAGE with STAGE one of {', '.join(stages)}, got {text!r}")
        return cls(int(round_text), Stage(stage))


class DyingTransport:
    """Delivers steps through ``transport`` until the one ``die_at`` names."""

    def __init__(self, transport: Transport, die_at: DieAt, sequencer: Sequencer) -> None:
        self.transport, self.die_at, self.sequencer = transport, die_at, sequencer

    def execute(self, step: Step) -> StepOutcome:
        if step.stage is self.die_at.stage and self.sequencer.round == self.die_at.round:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.transport.execute(step)
