"""Secure sums of named float tensors from n clients, with plain, mask and ckks backends.

Client side: a :class:`ClientRole` (``make_client``) answers the server's requests; stage a
contribution with ``contribute(name, tensors)``. Server side: a :class:`ServerRole`
(``make_server``) runs ``setup(round)`` once per round, then ``aggregate(spec)`` per sum;
both are generators of :class:`Step` that a driver executes (the in-process transport's
``LocalRunner``, wired up by :func:`secure_fedgraph.protocol.engine.local.local_session`; the gRPC
runtime across processes). This package imports no transport: the drivers sit above it.

    >>> import numpy as np
    >>> from secure_fedgraph.protocol.engine.local import local_session
    >>> from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
    >>> session = local_session(SecureSumConfig(backend=Backend.MASK), range(3))
    >>> session.start_round()
    >>> result = session.secure_sum("demo", {c: {"w": np.full(4, c, dtype=np.float32)} for c in range(3)})
    >>> result.values["w"].tolist()
    [3.0, 3.0, 3.0, 3.0]
"""

from secure_fedgraph.protocol.sum_backends.adversary import Adversary, Threat
from secure_fedgraph.protocol.sum_backends.config import Backend, CkksConfig, GraphKind, MaskConfig, SecureSumConfig
from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy
from secure_fedgraph.protocol.sum_backends.factory import make_client, make_server
from secure_fedgraph.protocol.sum_backends.roles import ClientRole, ServerRole, new_session_id
from secure_fedgraph.protocol.core.steps import Step, StepOutcome
from secure_fedgraph.protocol.core.spec import SumResult, SumSpec, TensorSpec
from secure_fedgraph.protocol.core.stages import Stage

__all__ = [
    "Adversary",
    "Threat",
    "ClientPolicy",
    "Backend",
    "CkksConfig",
    "GraphKind",
    "MaskConfig",
    "SecureSumConfig",
    "make_client",
    "make_server",
    "ClientRole",
    "ServerRole",
    "Step",
    "StepOutcome",
    "new_session_id",
    "SumResult",
    "SumSpec",
    "TensorSpec",
    "Stage",
]
