"""The server process: mutual TLS, waiting for the clients, running a plan, writing the run.

Steps: load the run's certificates; listen; wait (up to ``join_timeout_s``) for the plan's
clients, each authenticated by its certificate or its host's (protocol/transports/grpc_server.py);
send each a Welcome (the run's configuration and the participants' CA-signed certificates: one
body, sent once per stream) and open the session with the nonces the clients answer with (the
session id is theirs as much as the server's: protocol/core/session.py); run the plan's server side over the gRPC
transport, writing ``checkpoint.json`` at each round boundary of a plan that can resume; tell
the clients the run is over; write ``metrics.json`` (and, with ``transcript``,
``transcript.bin``: every message the server received and sent) under the run directory.

With ``resume`` the run goes on from the checkpoint in the run directory: the server waits for
the clients that were still in the run there, and starts a new session (a new Welcome that
names the round, new secure-sum keys) in which every plan restarts from its saved state.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from secure_fedgraph import __version__
from secure_fedgraph.crypto.pki import KeyDirectory, client_of
from secure_fedgraph.errors import ConfigError, DropoutError
from secure_fedgraph.papers.base import Plan
from secure_fedgraph.protocol.engine.progress import RoundLog, traffic_summary
from secure_fedgraph.resources import EXTRA_STREAMS, ensure_server_files, usage
from secure_fedgraph.protocol.engine.contexts import Resumed, ServerContext
from secure_fedgraph.protocol.core.crash_point import CrashPoint, crashing
from secure_fedgraph.protocol.core.messages import Welcome
from secure_fedgraph.protocol.sum_backends.adversary import majority
from secure_fedgraph.protocol.sum_backends.config import SecureSumConfig, config_to_dict
from secure_fedgraph.protocol.sum_backends.factory import make_server
from secure_fedgraph.protocol.core.session import Sequencer, new_proposal
from secure_fedgraph.protocol.core.steps import StepProgress, drive
from secure_fedgraph.protocol.transports.transcript import TranscriptWriter
from secure_fedgraph.protocol.transports.grpc_server import GrpcServerTransport
from secure_fedgraph.server import checkpoint
from secure_fedgraph.server.checkpoint import Checkpoint


@dataclass(frozen=True)
class ServerOptions:
    """Options of ``secure-fedgraph server`` (see its --help)."""

    bind: str
    plan: Plan
    secure: SecureSumConfig
    keys: Path
    out: Path
    transcript: bool = False
    join_timeout_s: float = 120.0
    step_timeout_s: float = 120.0
    max_message_bytes: int = 256 * 2**20
    hello_timeout_s: float = 10.0  # a stream that sends no Hello within it is refused
    queue_depth: int = 1  # messages a connection may have waiting; its sender is held back by flow control beyond it
    port_file: Path | None = None
    data_dir: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    resume: bool = False  # go on with the run in ``out`` from its checkpoint (server --resume)
    crash_at: CrashPoint | None = None  # fault injection: SIGKILL this process on entering that step (restart tests)


def run_config(plan: Plan, secure: SecureSumConfig) -> dict[str, Any]:
    """The run's configuration as the Welcome announces it and a checkpoint records it."""
    return {"plan": json.loads(plan.config_json()), "secure_sum": config_to_dict(secure), "version": __version__}


def run_server(options: ServerOptions, *, say: Callable[[str], None] = print, progress: StepProgress | None = None) -> dict[str, Any]:
    """Run one plan to completion (or, with ``resume``, from its checkpoint); return (and write) its metrics.
    ``progress`` hears each step and each answer received (protocol/engine/progress.py).

    Raises:
        ConfigError: missing keys, a busy address, or (resume) no checkpoint of this run.
        DropoutError: too few clients joined.
    """
    keys = KeyDirectory(options.keys)
    keys.require(keys.ca, keys.server_cert, keys.server_key)
    run = run_config(options.plan, options.secure)
    saved = checkpoint.load(options.out, run=run) if options.resume else None
    if saved is None:
        checkpoint.clear(options.out)  # a new run in this folder: an earlier run's checkpoint must not be resumed into it
    everyone = saved.run_clients if saved is not None else options.plan.client_ids()
    expected = saved.context["live"] if saved is not None else everyone  # a resumed run waits for who was still in it
    keys.require(*(keys.client_cert(c) for c in everyone))
    ca = keys.ca.read_bytes()
    certificates = {c: keys.client_cert(c).read_bytes() for c in everyone}
    directory = {}
    for client, pem in certificates.items():
        cert_client, identity = client_of(pem, ca)
        if cert_client != client:
            raise ConfigError(f"{keys.client_cert(client)} is the certificate of client {cert_client}")
        directory[client] = identity
    ensure_server_files(len(expected))  # past about 950 clients, more than the usual soft limit of 1,024 open files
    options.out.mkdir(parents=True, exist_ok=True)
    transcript = TranscriptWriter(options.out / "transcript.bin") if options.transcript else None
    events: list[str] = []
    transport = GrpcServerTransport(expected, step_timeout_s=options.step_timeout_s, max_message_bytes=options.max_message_bytes,
                                    hello_timeout_s=options.hello_timeout_s, queue_depth=options.queue_depth, transcript=transcript, log=events.append,
                                    progress=progress)
    # at most one stream per client (a host's stream speaks for several), so n + 8 at once (R-STREAMS)
    port = transport.listen(options.bind, ca=ca, cert=keys.server_cert.read_bytes(), key=keys.server_key.read_bytes(),
                            max_streams=len(expected) + EXTRA_STREAMS)
    host = options.bind.rsplit(":", 1)[0]
    if options.port_file is not None:
        options.port_file.write_text(str(port))
    resuming = f" to resume the run at round {saved.round}" if saved is not None else ""
    say(f"server: {options.plan.name} with the {options.secure.backend.value} backend, listening on {host}:{port} (mutual TLS); "
        f"waiting for {len(expected)} clients{resuming}")
    started = time.monotonic()
    closing = "done"
    process = {"listening": usage().as_dict()}  # open files, threads and memory: a leak shows as "after" above "listening"
    try:
        joined = transport.wait_for_clients(options.join_timeout_s)
        say(f"server: {len(joined)} of {len(expected)} clients joined in {time.monotonic() - started:.1f} s")
        process["joined"] = usage().as_dict()
        if len(joined) < max(2, majority(len(expected))):
            raise DropoutError(f"only {len(joined)} of {len(expected)} clients joined within {options.join_timeout_s:g} s")
        metrics = _run_plan(options, transport, joined, directory, certificates, say, events, run=run, saved=saved)
    except Exception as exc:
        closing = f"the run failed ({type(exc).__name__}: {exc})"  # clients stop; an interrupted or killed server leaves them waiting to resume
        raise
    finally:
        transport.stop(closing)
        if transcript is not None:
            transcript.close()
    metrics["seconds"] = time.monotonic() - started
    metrics["process"] = {**process, "after": _settled_usage(process["listening"]["open_files"]).as_dict()}
    (options.out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True, default=str))
    checkpoint.finish(options.out)
    return metrics


def _settled_usage(listening_files: int | None, *, wait_s: float = 5.0):
    """This process's usage once its open files are back to ``listening_files``, or after
    ``wait_s``: gRPC closes its connections asynchronously after ``stop``, and on a loaded
    machine the last may still be open when the server returns."""
    now, deadline = usage(), time.monotonic() + wait_s
    while listening_files is not None and now.open_files is not None and now.open_files > listening_files and time.monotonic() < deadline:
        time.sleep(0.1)
        now = usage()
    return now


def _run_plan(options, transport, joined, directory, certificates, say, events, *, run, saved: Checkpoint | None) -> dict[str, Any]:
    seq = Sequencer(new_proposal())  # the session id is agreed with the clients when the session opens (protocol/core/session.py)
    everyone = saved.run_clients if saved is not None else joined  # the clients the run started with: every floor counts them
    rounds = RoundLog(transport.traffic, say)
    resumptions = [*saved.resumptions, {"round": saved.round, "clients": len(joined)}] if saved is not None else []
    config_json = json.dumps({**run, "resume": {"round": saved.round}} if saved is not None else run)
    participants = tuple(joined)
    certs = tuple(certificates[c] for c in joined)
    made: dict[str, Any] = {}

    def write_checkpoint(round_index: int, state: Any) -> None:
        ctx = made["ctx"]
        checkpoint.save(options.out, Checkpoint(run=run, round=round_index, state=state, context=ctx.snapshot(), run_clients=list(everyone),
                                                plan_clients=len(options.plan.client_ids()), round_log=rounds.rows, resumptions=resumptions))

    def whole():
        # one Welcome for all: the transport encodes it once (n certificates each, n times over, is O(n^2) bytes)
        opened, left = yield from seq.open(list(joined), lambda h: Welcome(h, config_json, participants, certs))
        role = made["role"] = make_server(options.secure, session=seq.session, directory={c: directory[c] for c in everyone}, clients=everyone,
                                          sequencer=seq)
        ctx = made["ctx"] = ServerContext(sequencer=seq, role=role, clients=opened, report=rounds,
                                          data=options.plan.load_server_data(options.data_dir),
                                          resumed=Resumed(saved.round, saved.state) if saved is not None else None, on_checkpoint=write_checkpoint)
        ctx.dropped.update(left)
        if saved is not None:
            ctx.restore(saved.context)
            rounds.rows.extend(saved.round_log)
        metrics = yield from options.plan.server(ctx)
        yield from ctx.end()
        return metrics

    metrics = drive(whole() if options.crash_at is None else crashing(whole(), options.crash_at), transport)
    role, ctx = made["role"], made["ctx"]
    traffic = transport.traffic
    metrics.update(
        backend=options.secure.backend.value,
        secure_sum=config_to_dict(options.secure),
        clients_joined=len(joined),
        clients_finished=len(ctx.live),
        dropped={str(c): reason for c, reason in sorted(ctx.dropped.items())},
        excluded={str(c): reason for c, reason in sorted(role.excluded.items())},
        key_setup=role.describe(),
        abandoned_sums=dict(ctx.abandoned),
        **traffic_summary(traffic, ctx),
        round_log=rounds.rows,
        events=events + role.log,
        streams=transport.stream_count(),  # one per client process with a host certificate
        inbox_peak_bytes={str(c): held for c, held in transport.peak_inbox_bytes().items()},  # R-FLOOD: at most queue_depth messages each
        ignored_frames=transport.ignored_frames(),  # per stream: frames that answered nothing, counted, only the first logged (R-FLOOD)
        **({"resumed": resumptions} if resumptions else {}),
        **options.extra,
    )
    for client, reason in sorted(ctx.dropped.items()):
        say(f"server: client {client} dropped: {reason}")
    return metrics
