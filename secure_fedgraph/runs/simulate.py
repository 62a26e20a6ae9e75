"""Run a plan with every party in this process (the in-process transport): for tests,
simulation, and as the reference the gRPC runtime must agree with."""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.papers import check_resumable, is_resumable
from secure_fedgraph.papers.base import Plan
from secure_fedgraph.protocol.engine.progress import RoundLog, traffic_summary
from secure_fedgraph.protocol.engine.contexts import ClientHost, Resumed, ServerContext
from secure_fedgraph.protocol.core.crash_point import CrashPoint, Crashed, crash_by_raising, crashing
from secure_fedgraph.protocol.engine.resume import RunMemory
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.sum_backends.config import Backend, SecureSumConfig
from secure_fedgraph.protocol.sum_backends.factory import make_client, make_server
from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy
from secure_fedgraph.protocol.sum_backends.plain import OnePartyServer
from secure_fedgraph.protocol.sum_backends.roles import ServerRole, check_directory
from secure_fedgraph.protocol.core.session import OpeningClient, Sequencer, new_proposal
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import StepProgress
from secure_fedgraph.protocol.transports.transcript import RunTranscripts
from secure_fedgraph.protocol.transports.inprocess import Intercept, LocalRunner, Traffic
from secure_fedgraph.protocol.core.messages import Welcome
from secure_fedgraph.server.runtime import run_config


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
    restart_at: CrashPoint | None = None,
    reproducible_noise: bool = False,
    transcripts: str | os.PathLike | None = None,
    progress: StepProgress | None = None,
) -> SimulationResult:
    """Run ``plan`` end to end in one process over the in-process transport. With ``say``,
    print one progress line per round (and keep the rows in the metrics' ``round_log``).
    ``drop``: crash point -> clients silent from that request on (protocol/core/crash_point.py), the
    schedule a run across processes gets from ``client --crash-at``. ``policy``: every
    client's own minimums (default: they accept ``secure``, as one user running every party
    would). ``restart_at``: the server dies on entering that step and the
    run goes on in a new session from its last checkpoint, every client from the state it kept
    (what ``server --resume`` does across processes); the result is the resumed session's.
    ``reproducible_noise``: every client's DP noise derived from the run seed, as with ``client
    --reproducible-dp-noise`` (to compare a DP run across transports; the server could remove
    such noise); off: fresh OS randomness. ``transcripts``: a folder for every party's transcript
    (``transcript.bin``, the server's; ``clients/client-<id>.bin`` with each client's audit
    records), which ``secure-fedgraph audit`` reads as it reads a run across processes.
    ``progress``: hears each step and each client's answer (protocol/engine/progress.py), so a
    long step shows how far it is."""
    return _simulate(plan, secure, make_server, data_dir=data_dir, drop=drop, intercept=intercept, record=record, say=say, policy=policy,
                     restart_at=restart_at, reproducible_noise=reproducible_noise, transcripts=transcripts, progress=progress)


ONE_PARTY = SecureSumConfig(backend=Backend.PLAIN, min_survivors=1)


def simulate_one_party(plan: Plan, *, data_dir: str | os.PathLike | None = None, say: Callable[[str], None] | None = None,
                       progress: StepProgress | None = None) -> dict[str, Any]:
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
    metrics = _simulate(plan, ONE_PARTY, _one_party_server, data_dir=data_dir, say=say, progress=progress).metrics
    return {**metrics, "plan": f"{plan.name}-centralised"}


def _one_party_server(config: SecureSumConfig, **kwargs: Any) -> OnePartyServer:
    return OnePartyServer(config, **kwargs)


class _Host:
    """A client host as the gRPC client runtime drives it: after each answer, its memory of the
    run learns which round the server reached (protocol/engine/resume.py)."""

    def __init__(self, host: ClientHost, memory: RunMemory) -> None:
        self.host, self.memory = host, memory

    def handle(self, request: Any) -> Any:
        response = self.host.handle(request)
        self.memory.server_at(request.header.round)
        return response


def _simulate(plan: Plan, secure: SecureSumConfig, server_role: Callable[..., ServerRole], *, data_dir, drop=None, intercept=None,
              record=False, say=None, policy=None, restart_at: CrashPoint | None = None, reproducible_noise: bool = False,
              transcripts=None, progress: StepProgress | None = None) -> SimulationResult:
    started = time.perf_counter()
    writers = RunTranscripts(transcripts) if transcripts is not None else None
    try:
        return _simulate_with(plan, secure, server_role, data_dir=data_dir, drop=drop, intercept=intercept, record=record, say=say, policy=policy,
                              restart_at=restart_at, reproducible_noise=reproducible_noise, writers=writers, started=started,
                              progress=progress)
    finally:
        if writers is not None:
            writers.close()


def _simulate_with(plan, secure, server_role, *, data_dir, drop, intercept, record, say, policy, restart_at, reproducible_noise, writers,
                   started, progress) -> SimulationResult:
    if restart_at is not None:
        check_resumable(plan.name)
    ids = plan.client_ids()
    identities = {c: IdentityKey.generate() for c in ids}
    directory = check_directory({c: k.public_bytes for c, k in identities.items()})  # validated once, shared: not n x n
    memories = {c: RunMemory(client_id=c, run={}, directory=directory, data=plan.load_client_data(c, data_dir), resumable=is_resumable(plan.name),
                                 reproducible_noise=reproducible_noise)
                for c in ids}
    server_data = plan.load_server_data(data_dir)
    checkpoints: list[tuple[int, Any, dict[str, Any], list[dict[str, Any]]]] = []  # (round, state, context, round log)
    session = partial(_session, plan, secure, server_role, identities, memories, server_data, checkpoints, drop=drop, intercept=intercept,
                      record=record, say=say, policy=policy, writers=writers, progress=progress)
    saved = None
    if restart_at is not None:
        try:
            session(saved=None, crash_at=restart_at)
        except Crashed:
            pass
        else:
            raise ConfigError(f"restart_at: the run never reached its crash point {restart_at}")
        saved = checkpoints[-1]
    metrics, runner, ctx, role, hosts = session(saved=saved, crash_at=None)
    metrics.update(traffic_summary(runner.traffic, ctx), dropped={str(c): r for c, r in sorted(ctx.dropped.items())},
                   excluded={str(c): r for c, r in sorted(role.excluded.items())}, abandoned_sums=dict(ctx.abandoned),
                   key_setup=role.describe())
    if saved is not None:
        metrics["resumed"] = [{"round": saved[0], "clients": len(hosts)}]
    return SimulationResult(metrics, runner.traffic, dict(ctx.dropped), list(role.log), time.perf_counter() - started, hosts, runner.received)


def _session(plan, secure, server_role, identities, memories, server_data, checkpoints, *, saved, crash_at, drop, intercept, record, say,
             policy, writers: RunTranscripts | None, progress: StepProgress | None):
    """One session of the run: a new session id (the server's proposal and the clients' nonces)
    and keys, the server resumed from ``saved`` (a checkpoint: round, state, context snapshot,
    round log) and each client from its memory."""
    directory = check_directory({c: k.public_bytes for c, k in identities.items()})  # validated once, shared: not n x n
    ids = sorted(identities)
    live = ids if saved is None else saved[2]["live"]
    resume_round = None if saved is None else saved[0]
    seq = Sequencer(new_proposal())
    made: dict[str, Any] = {}

    def build(c: int, session: bytes) -> _Host:  # once client c agreed on the session id
        context = memories[c].context(seed=plan.seed, resume_round=resume_round)
        host = made.setdefault("hosts", {})[c] = ClientHost(
            role=make_client(secure, client_id=c, session=session, identity=identities[c], directory=directory, policy=policy,
                             signed=memories[c].signed), plan=plan.client, context=context)
        if writers is not None:  # each client records its own contributions, as ``client --audit`` does
            host.on_contribute = partial(writers.client(c).contributed, c)
        return _Host(host, memories[c])

    runner = LocalRunner(None, {c: OpeningClient(c, partial(build, c)) for c in live}, drop=drop, intercept=intercept, record=record,
                         transcripts=writers, progress=progress)
    rounds = RoundLog(runner.traffic, say) if say is not None else None

    def keep(round_index: int, state: Any) -> None:
        checkpoints.append((round_index, copy.deepcopy(state), made["ctx"].snapshot(), copy.deepcopy(rounds.rows if rounds else [])))

    config_json = json.dumps(run_config(plan, secure))

    def whole():
        opened, left = yield from seq.open(live, lambda h: Welcome(h, config_json, tuple(live), ()))  # in process: no certificates
        role = made["role"] = runner.server = server_role(secure, session=seq.session, directory=directory, clients=ids, sequencer=seq)
        ctx = made["ctx"] = ServerContext(sequencer=seq, role=role, clients=opened, report=rounds, data=server_data,
                                          resumed=None if saved is None else Resumed(saved[0], copy.deepcopy(saved[1])), on_checkpoint=keep)
        ctx.dropped.update(left)
        if saved is not None:
            ctx.restore(saved[2])
            if rounds is not None:
                rounds.rows.extend(saved[3])
        metrics = yield from plan.server(ctx)
        yield from ctx.end()
        return metrics

    metrics = runner.run(whole() if crash_at is None else crashing(whole(), crash_at, crash=crash_by_raising))
    if rounds is not None:
        metrics["round_log"] = rounds.rows
    return metrics, runner, made["ctx"], made["role"], made.get("hosts", {})
