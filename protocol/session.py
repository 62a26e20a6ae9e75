"""One session's bookkeeping on the server: id, round, and the step number of every request.

Step numbers strictly increase over the whole session, across every collective and every
secure-sum stage, so a client can refuse any request that is not newer than the last one it
answered (a replay or a reordering), and the server accepts only answers to its current step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from secure_fedgraph.errors import ConfigError, ProtocolError
from secure_fedgraph.protocol.messages import SERVER, Header
from secure_fedgraph.protocol.steps import Step
from secure_fedgraph.protocol.stages import Stage

SESSION_BYTES = 16


class Sequencer:
    """Hands out headers and checks that answers belong to the step in progress."""

    def __init__(self, session: bytes) -> None:
        if len(session) != SESSION_BYTES:
            raise ConfigError(f"session id must be {SESSION_BYTES} bytes, got {len(session)}")
        self.session = session
        self.round = -1
        self._last = 0
        self.current = -1
        self.phase = ""  # set by the plan (ServerContext.phase); stamped on every step

    def step(self, stage: Stage, build: Callable[[Header], Mapping[int, Any]], accept: Callable[[int, Any], None], expected: type) -> Step:
        """A step with a fresh step number; ``accept`` runs only for well-formed, current answers."""
        self._last += 1
        self.current = self._last
        header = Header(self.session, self.round, self._last, stage, SERVER)
        step_no, round_no = self._last, self.round

        def checked(client: int, response: Any) -> None:
            if type(response) is not expected:
                raise ProtocolError(f"{stage.value}: expected {expected.__name__}, got {type(response).__name__}")
            h = response.header
            if h.session != self.session:
                raise ProtocolError(f"{stage.value}: response from client {client} belongs to another session")
            if (h.round, h.step, h.stage) != (round_no, step_no, stage):
                raise ProtocolError(
                    f"{stage.value}: response from client {client} is for round {h.round} step {h.step} "
                    f"({h.stage.value}), expected round {round_no} step {step_no} (a replay or a late answer)"
                )
            if h.sender != client:
                raise ProtocolError(f"{stage.value}: client {client} sent a message claiming to be from {h.sender}")
            accept(client, response)

        return Step(stage, build(header), checked, self.phase)
