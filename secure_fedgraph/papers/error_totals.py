"""The error totals every plan reports, as a secure sum released to the server: each client's
squared and absolute errors and counts (FedSTGD adds absolute percentage errors), of which only
the totals, hence RMSE and MAE (or accuracy counts), leave the clients. Shared by the traffic
plans, FedSTGD and FedRel."""

from __future__ import annotations

from secure_fedgraph.errors import SumAbandoned
from secure_fedgraph.protocol.core.spec import SumSpec, TensorSpec
from secure_fedgraph.protocol.core.steps import StepGen
from secure_fedgraph.protocol.engine.contexts import ClientContext, ServerContext


def errors_spec(name: str, fields: tuple[str, ...] = ("sse", "sae", "count"), clip_range: float = 1e8) -> SumSpec:
    """The secure sum of error statistics called ``name`` ("validation", "test"): one scalar per
    field (FedSTGD adds "sape" and needs a wider range for passenger counts)."""
    return SumSpec(name, tuple(TensorSpec(f, (1,)) for f in fields), clip_range=clip_range)


def released_errors(ctx: ServerContext, spec: SumSpec) -> StepGen[dict | None]:
    """Server: a secure sum of error statistics, released to the server (with ckks, by the
    clients, which marked it releasable); None when the sum was abandoned (those metrics are
    then missing for that round, never made up)."""
    try:
        return (yield from ctx.release((yield from ctx.secure_sum(spec))))
    except SumAbandoned:
        return None


def report_errors(ctx: ClientContext, name: str, sums, *, private: bool = False):
    """Client side of :func:`released_errors`: the only sums a client lets the server see
    (``private``: they carry the client's data, so its distributed DP floor applies)."""
    try:
        yield ctx.secure_sum(name, sums, releasable=True, private=private)
    except SumAbandoned:
        pass
