"""contribute: every client contributes to a secure sum; the sum is all anyone learns
(backend-dependent: see threat_model.md). This is the client's need; the server side is the
sum backend's own :meth:`~secure_fedgraph.protocol.sum_backends.roles.ServerRole.aggregate`
(:mod:`secure_fedgraph.protocol.sum_backends`), which a plan reaches through ``ctx.secure_sum``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Contribute:
    """Client need: contribute ``tensors`` to the sum called ``name``; resumes with the
    :class:`SumResult` every contributor receives, or raises
    :class:`~secure_fedgraph.errors.SumAbandoned` into the plan when the server gave the sum up
    (the plan skips the step or yields fresh tensors; the same ones are refused).

    ``releasable``: the plan allows this client to hand the decrypted sum to the server when
    asked (ckks; error statistics, never model weights). Nothing else is ever released.
    ``private``: these tensors are the client's model (FedAvg's weights or update) or its data
    (FedSTGD's sums of its windows): a client whose policy sets a distributed DP floor
    (``--min-ddp-noise``) refuses to send them into a sum with less noise (threat_model.md
    DDP-FLOOR, ST-DDP-FLOOR).
    """

    name: str
    tensors: Mapping[str, Any]
    releasable: bool = False
    private: bool = False

