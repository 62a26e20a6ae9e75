"""upload: each client sends its own tensors to the server, which sees them individually.

This is split learning's channel (CNFGNN's h_c,i, nFedGNN's user latents). A privacy hook
runs on the client before anything leaves it; the DP mechanisms plug in here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.core.messages import UploadRequest, UploadResponse, tensors_of
from secure_fedgraph.protocol.core.spec import SumSpec
from secure_fedgraph.protocol.core.session import Sequencer
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import StepGen


class PrivacyHook(Protocol):
    """Applied by the client to an upload before it leaves (e.g. clip + Gaussian noise)."""

    def __call__(self, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class Upload:
    """Client need: answer the upload called ``name`` with ``tensors`` (after ``privacy``)."""

    name: str
    tensors: Mapping[str, Any]
    privacy: PrivacyHook | None = None


def upload(seq: Sequencer, clients: Sequence[int], name: str, spec: SumSpec) -> StepGen[dict[int, dict[str, np.ndarray]]]:
    """Ask every client in ``clients`` for its tensors of ``spec``; returns client -> tensors.

    Answers with missing, extra or wrongly shaped tensors are rejected (the client counts as
    dropped); the step goes on with the others.
    """
    received: dict[int, dict[str, np.ndarray]] = {}
    shapes = {t.name: t.shape for t in spec.tensors}

    def accept(client: int, response: UploadResponse) -> None:
        tensors = tensors_of(response.tensors)
        if response.name != name or {k: v.shape for k, v in tensors.items()} != shapes:
            raise ProtocolError(f"upload {name!r}: client {client} sent {response.name!r} with shapes "
                                f"{ {k: v.shape for k, v in tensors.items()} }, expected {shapes}")
        if any(v.dtype.kind != "f" or not np.isfinite(v).all() for v in tensors.values()):
            raise ProtocolError(f"upload {name!r}: client {client} sent non-float or non-finite values")
        received[client] = {k: np.array(v) for k, v in tensors.items()}

    def build(header):
        request = UploadRequest(header, name, spec)
        return {c: request for c in clients}

    yield seq.step(Stage.UPLOAD, build, accept, UploadResponse)
    return received
