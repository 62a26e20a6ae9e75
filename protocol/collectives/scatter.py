"""scatter: the server sends each client its own tensors (e.g. CNFGNN's h_G,c,i)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from secure_fedgraph.protocol.core.messages import Ack, ScatterRequest, named
from secure_fedgraph.protocol.core.session import Sequencer
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import StepGen, StepOutcome


def scatter(seq: Sequencer, per_client: Mapping[int, Mapping[str, Any]], name: str) -> StepGen[StepOutcome]:
    """Send ``per_client[c]`` to client c; returns who acknowledged. Clients receive with
    :class:`~secure_fedgraph.protocol.collectives.broadcast.Receive`."""
    payloads = {c: named(t) for c, t in per_client.items()}
    return (yield seq.step(Stage.SCATTER, lambda h: {c: ScatterRequest(h, name, p) for c, p in payloads.items()}, lambda c, r: None, Ack))
