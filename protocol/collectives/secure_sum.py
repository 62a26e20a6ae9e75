"""secure_sum: every client contributes; the sum is all anyone learns (backend-dependent:
see threat_model.md). The mechanics live in the backends of
:mod:`secure_fedgraph.protocol.secure_sum`; this is the collective's face for plans."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from secure_fedgraph.protocol.secure_sum.roles import ServerRole
from secure_fedgraph.protocol.core.spec import SumResult, SumSpec
from secure_fedgraph.protocol.core.steps import StepGen


@dataclass(frozen=True)
class SecureSum:
    """Client need: contribute ``tensors`` to the sum called ``name``; resumes with the
    :class:`SumResult` every contributor receives, or raises
    :class:`~secure_fedgraph.errors.SumAbandoned` into the plan when the server gave the sum up
    (the plan skips the step or yields fresh tensors; the same ones are refused).

    ``releasable``: the plan allows this client to hand the decrypted sum to the server when
    asked (ckks; error statistics, never model weights). Nothing else is ever released.
    ``private``: these tensors are the client's model (FedAvg's weights or update): a client
    whose policy sets a distributed DP floor (``--min-ddp-noise``) refuses to send them into a
    sum with less noise (threat_model.md DDP-FLOOR).
    """

    name: str
    tensors: Mapping[str, Any]
    releasable: bool = False
    private: bool = False


def secure_sum(role: ServerRole, spec: SumSpec) -> StepGen[SumResult]:
    """One secure sum of ``spec`` within the current round of ``role``."""
    return (yield from role.aggregate(spec))
