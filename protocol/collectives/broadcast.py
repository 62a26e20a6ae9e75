"""broadcast: the server sends the same tensors to every listed client (one encoding, many sends)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from secure_fedgraph.protocol.core.messages import Ack, BroadcastRequest, named
from secure_fedgraph.protocol.core.session import Sequencer
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import StepGen, StepOutcome


@dataclass(frozen=True)
class Receive:
    """Client need: wait for the broadcast or scatter called ``name``; resumes with its tensors."""

    name: str


def broadcast(seq: Sequencer, clients: Sequence[int], name: str, tensors: Mapping[str, Any]) -> StepGen[StepOutcome]:
    """Send ``tensors`` to every client in ``clients``; returns who acknowledged."""
    payload = named(tensors)

    def build(header):
        request = BroadcastRequest(header, name, payload)  # one object: the transport encodes it once
        return {c: request for c in clients}

    return (yield seq.step(Stage.BROADCAST, build, lambda client, response: None, Ack))
