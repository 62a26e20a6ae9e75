"""Run a plan with every party in this process (the in-process transport): for tests,
simulation, and as the reference the gRPC runtime must agree with."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.papers.base import Plan
from secure_fedgraph.runs.progress import RoundLog, traffic_summary
from secure_fedgraph.protocol.engine import ClientContext, ClientHost, ServerContext
from secure_fedgraph.protocol.secure_sum.config import SecureSumConfig
from secure_fedgraph.protocol.secure_sum.factory import make_client, make_server
from secure_fedgraph.protocol.secure_sum.policy import ClientPolicy
from secure_fedgraph.protocol.secure_sum.roles import new_session_id
from secure_fedgraph.protocol.session import Sequencer
from secure_fedgraph.protocol.stages import Stage
from secure_fedgraph.protocol.transports.inprocess import Intercept, LocalRunner, Traffic


@dataclass
class SimulationResult:
    metrics: dict[str, Any]
    traffic: Traffic
    dropped: dict[int, str]
    server_log: list[str]
    seconds: float
    hosts: dict[int, ClientHost] = field(repr=False, default_factory=dict)
    received: list | None = field(repr=False, default=None)


def simulate(
    plan: Plan,
    secure: SecureSumConfig,
    *,
    data_dir: str | os.PathLike | None = None,
    drop: Mapping[Stage, Collection[int]] | None = None,
    intercept: Intercept | None = None,
    record: bool = False,
    say: Callable[[str], None] | None = None,
    policy: ClientPolicy | None = None,
) -> SimulationResult:
    """Run ``plan`` end to end in one process over the in-process transport. With ``say``,
    print one progress line per round (and keep the rows in the metrics' ``round_log``).
    ``policy``: every client's own minimums (default: they accept ``secure``, as one user
    running every party would)."""
    started = time.perf_counter()
    ids = plan.client_ids()
    identities = {c: IdentityKey.generate() for c in ids}
    directory = {c: k.public_bytes for c, k in identities.items()}
    session = new_session_id()
    seq = Sequencer(session)
    role = make_server(secure, session=session, directory=directory, clients=ids, sequencer=seq)
    hosts = {
        c: ClientHost(
            role=make_client(secure, client_id=c, session=session, identity=identities[c], directory=directory, policy=policy),
            plan=plan.client,
            context=ClientContext(c, plan.seed, plan.load_client_data(c, data_dir)),
        )
        for c in ids
    }
    runner = LocalRunner(role, hosts, drop=drop, intercept=intercept, record=record)
    rounds = RoundLog(runner.traffic, say) if say is not None else None
    ctx = ServerContext(sequencer=seq, secure_sum=role, clients=ids, report=rounds, data=plan.load_server_data(data_dir))

    def whole():
        metrics = yield from plan.server(ctx)
        yield from ctx.end()
        return metrics

    metrics = runner.run(whole())
    metrics.update(traffic_summary(runner.traffic, ctx), dropped={str(c): r for c, r in sorted(ctx.dropped.items())},
                   excluded={str(c): r for c, r in sorted(role.excluded.items())}, abandoned_sums=dict(ctx.abandoned),
                   key_setup=role.describe())
    if rounds is not None:
        metrics["round_log"] = rounds.rows
    return SimulationResult(metrics, runner.traffic, dict(ctx.dropped), list(role.log), time.perf_counter() - started, hosts, runner.received)
