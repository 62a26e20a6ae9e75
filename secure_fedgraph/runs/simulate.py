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
from secure_fedgraph.protocol.crash_point import CrashPoint
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.secure_sum.config import Backend, SecureSumConfig
from secure_fedgraph.protocol.secure_sum.factory import make_client, make_server
from secure_fedgraph.protocol.secure_sum.policy import ClientPolicy
from secure_fedgraph.protocol.secure_sum.plain import OnePartyServer
from secure_fedgraph.protocol.secure_sum.roles import ServerRole, new_session_id
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
    drop: Mapping[Stage | CrashPoint, Collection[int]] | None = None,
    intercept: Intercept | None = None,
    record: bool = False,
    say: Callable[[str], None] | None = None,
    policy: ClientPolicy | None = None,
) -> SimulationResult:
    """Run ``plan`` end to end in one process over the in-process transport. With ``say``,
    print one progress line per round (and keep the rows in the metrics' ``round_log``).
    ``drop``: crash point -> clients silent from that request on (protocol/crash_point.py), the
    schedule a run across processes gets from ``client --crash-at``. ``policy``: every
    client's own minimums (default: they accept ``secure``, as one user running every party
    would)."""
    return _simulate(plan, secure, make_server, data_dir=data_dir, drop=drop, intercept=intercept, record=record, say=say, policy=policy)


ONE_PARTY = SecureSumConfig(backend=Backend.PLAIN, min_survivors=1)


def simulate_one_party(plan: Plan, *, data_dir: str | os.PathLike | None = None, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """A plan's centralised baseline: its one client holds all the data and runs the same plan
    through the same runner, every sum being its own value (no protocol protects anything here,
    and none is needed). Returns the metrics a federated run reports, named ``<plan>-centralised``.

    Raises:
        ConfigError: the plan has no one-party run, or more than one client.
    """
    if not plan.one_party:
        raise ConfigError(f"plan {plan.name} has no one-party run: it needs at least 2 clients")
    if len(plan.client_ids()) != 1:
        raise ConfigError(f"a one-party run has one client, got {len(plan.client_ids())}")
    metrics = _simulate(plan, ONE_PARTY, _one_party_server, data_dir=data_dir, say=say).metrics
    return {**metrics, "plan": f"{plan.name}-centralised"}


def _one_party_server(config: SecureSumConfig, **kwargs: Any) -> OnePartyServer:
    return OnePartyServer(config, **kwargs)


def _simulate(plan: Plan, secure: SecureSumConfig, server_role: Callable[..., ServerRole], *, data_dir, drop=None, intercept=None,
              record=False, say=None, policy=None) -> SimulationResult:
    started = time.perf_counter()
    ids = plan.client_ids()
    identities = {c: IdentityKey.generate() for c in ids}
    directory = {c: k.public_bytes for c, k in identities.items()}
    session = new_session_id()
    seq = Sequencer(session)
    role = server_role(secure, session=session, directory=directory, clients=ids, sequencer=seq)
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
